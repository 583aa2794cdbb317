"""Anthropic messages API; JSON through one forced tool whose input schema is the answer's schema.

No sampling parameters are sent: Anthropic deprecated ``temperature`` (newer models answer it with a 400 and
current SDKs no longer take it), and the API has no seed. Repeatability comes from the cache instead.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic

from groundjudge.llm.anthropic_batch import AnthropicBatch
from groundjudge.llm.base import (
    BatchApi,
    LLMRequest,
    LLMResponse,
    params_text,
    parsed_or_server_fault,
    sdk_error,
    wire_schema,
)
from groundjudge.models import Message

# Anthropic takes at most 4 cache_control breakpoints per request.
_MAX_BREAKPOINTS = 4
_EPHEMERAL = {"type": "ephemeral"}


def _content(message: Message, breakpoints_left: int) -> tuple[str | list[dict[str, Any]], bool]:
    """A message's content: plain text, or two text blocks split at ``cache_upto``, the first marked for caching.

    Returns the content and whether it used a breakpoint. Anthropic rejects empty or whitespace-only text blocks, so
    a split that would make one falls back to caching the whole text or not caching.
    """
    text, upto = message.content, message.cache_upto
    if not upto or upto <= 0 or breakpoints_left <= 0 or not text[:upto].strip():
        return text, False
    head, tail = text[:upto], text[upto:]
    if not tail.strip():
        return [{"type": "text", "text": text, "cache_control": dict(_EPHEMERAL)}], True
    return [{"type": "text", "text": head, "cache_control": dict(_EPHEMERAL)}, {"type": "text", "text": tail}], True


class AnthropicProvider:
    """Adapter for ``anthropic/<model>``.

    The schema is sent once, as the forced tool's input schema (lean: :func:`~groundjudge.llm.base.wire_schema`),
    never as text. Prompt caching: the tool and the system prompt (the same for every call of a stage) end with one
    text block with ``cache_control``, and a message with ``cache_upto`` is sent as two text blocks, the first (its
    stable prefix) with ``cache_control``; at most 4 breakpoints, the first ones kept. A marked prefix under the
    model's minimum (1,024 to 4,096 tokens) is simply not cached, at no extra cost; one above it is written at 125%
    of the input price and read at 10%.
    """

    def __init__(self, model: str, *, api_key: str, base_url: str | None = None, timeout: float = 60.0) -> None:
        self.name = "anthropic"
        self.model = model
        self.base_url = base_url
        # max_retries=0: LLMClient owns the one retry policy.
        self.sdk = anthropic.Anthropic(api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0)

    def identity(self) -> dict[str, Any]:
        return {"provider": self.name, "model": self.model, "base_url": self.base_url}

    def takes(self, setting: str) -> bool:
        """No sampling setting: neither a temperature nor a seed is sent (the module's docstring says why)."""
        return False

    def batch_api(self) -> BatchApi:
        """The Message Batches API."""
        return AnthropicBatch(self)

    def build_params(self, request: LLMRequest) -> dict[str, Any]:
        system = "\n\n".join(m.content for m in request.messages if m.role == "system")
        left = _MAX_BREAKPOINTS - (1 if system.strip() else 0)
        messages: list[dict[str, Any]] = []
        for m in request.messages:
            if m.role == "system":
                continue
            content, used = _content(m, left)
            left -= used
            messages.append({"role": m.role, "content": content})
        tool = {
            "name": request.schema_name,
            "description": "Record the answer. Its input is the complete answer.",
            "input_schema": wire_schema(request.schema),  # the schema's one copy: never in the text
        }
        params: dict[str, Any] = {
            "model": self.model,
            "max_tokens": request.max_tokens,
            "messages": messages,
            "tools": [tool],
            "tool_choice": {"type": "tool", "name": request.schema_name},
        }
        if system.strip():
            # The tools and the system prompt are the cached prefix (Anthropic orders tools, system, messages).
            params["system"] = [{"type": "text", "text": system, "cache_control": dict(_EPHEMERAL)}]
        return params

    def billed_input(self, request: LLMRequest) -> str:
        """The text this adapter sends for ``request`` that the provider bills as input: the system prompt, the
        messages and the forced tool (its name, description and input schema)."""
        params = self.build_params(request)
        system = [{"content": params["system"]}] if "system" in params else []
        return params_text([*system, *params["messages"]], params["tools"])

    def send(self, request: LLMRequest) -> LLMResponse:
        try:
            message = self.sdk.messages.create(**self.build_params(request))
        except (anthropic.AnthropicError, json.JSONDecodeError) as exc:
            raise sdk_error(exc, anthropic, self.name) from exc
        return self.parse_response(message)

    def parse_response(self, response: Any) -> LLMResponse:
        """A response (the SDK's object, or a batch result's dict) as an :class:`LLMResponse`; a body that is not the
        API's format is a retryable :class:`~groundjudge.errors.ServerError`."""
        return parsed_or_server_fault(self.name, self._parse, response)

    def _parse(self, response: Any) -> LLMResponse:
        # a batch result line hands over the response's dict
        message: Any = anthropic.types.Message.model_validate(response) if isinstance(response, dict) else response
        refusal = None
        if message.stop_reason == "refusal":
            said = "".join(getattr(b, "text", "") for b in message.content)
            refusal = said or "stop_reason refusal"
        tool_inputs = [b.input for b in message.content if b.type == "tool_use"]
        if tool_inputs:
            text = json.dumps(tool_inputs[0], ensure_ascii=False)
        else:
            text = "".join(getattr(b, "text", "") for b in message.content if b.type == "text")
        usage = message.usage
        read = int(getattr(usage, "cache_read_input_tokens", 0) or 0)
        written = int(getattr(usage, "cache_creation_input_tokens", 0) or 0)
        return LLMResponse(
            text=text,
            # Anthropic reports the uncached input, the cache reads and the cache writes apart; input_tokens is
            # their sum, so that it means all the input on every provider.
            input_tokens=int(usage.input_tokens or 0) + read + written,
            output_tokens=int(usage.output_tokens or 0),
            truncated=message.stop_reason in ("max_tokens", "model_context_window_exceeded"),
            refusal=refusal,
            cached_input_tokens=read,
            cache_write_tokens=written,
        )
