"""Anthropic messages API; JSON through one forced tool whose input schema is the answer's schema.

No sampling parameters are sent: Anthropic deprecated ``temperature`` (newer models answer it with a 400 and
current SDKs no longer take it), and the API has no seed. Repeatability comes from the cache instead.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic

from groundjudge import errors
from groundjudge.llm.base import LLMRequest, LLMResponse, map_sdk_error


class AnthropicProvider:
    """Adapter for ``anthropic/<model>``."""

    def __init__(self, model: str, *, api_key: str, base_url: str | None = None, timeout: float = 60.0) -> None:
        self.name = "anthropic"
        self.model = model
        self.base_url = base_url
        # max_retries=0: LLMClient owns the one retry policy.
        self._client = anthropic.Anthropic(api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0)

    def identity(self) -> dict[str, Any]:
        return {"provider": self.name, "model": self.model, "base_url": self.base_url}

    def send(self, request: LLMRequest) -> LLMResponse:
        system = "\n\n".join(m.content for m in request.messages if m.role == "system")
        messages = [{"role": m.role, "content": m.content} for m in request.messages if m.role != "system"]
        tool = {
            "name": request.schema_name,
            "description": "Record the answer. Its input is the complete answer.",
            "input_schema": request.schema,
        }
        try:
            params: dict[str, Any] = {
                "model": self.model,
                "max_tokens": request.max_tokens,
                "system": system,
                "messages": messages,
                "tools": [tool],
                "tool_choice": {"type": "tool", "name": request.schema_name},
            }
            message = self._client.messages.create(**params)
        except (anthropic.AnthropicError, json.JSONDecodeError) as exc:
            mapped = map_sdk_error(exc, anthropic, self.name)
            if mapped is None:
                raise errors.LLMError(f"{self.name}: {exc}") from exc
            raise mapped from exc
        refusal = None
        if message.stop_reason == "refusal":
            said = "".join(getattr(b, "text", "") for b in message.content)
            refusal = said or "stop_reason refusal"
        tool_inputs = [b.input for b in message.content if b.type == "tool_use"]
        if tool_inputs:
            text = json.dumps(tool_inputs[0], ensure_ascii=False)
        else:
            text = "".join(getattr(b, "text", "") for b in message.content if b.type == "text")
        return LLMResponse(
            text=text,
            input_tokens=int(message.usage.input_tokens or 0),
            output_tokens=int(message.usage.output_tokens or 0),
            truncated=message.stop_reason == "max_tokens",
            refusal=refusal,
        )
