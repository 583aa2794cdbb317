"""OpenAI chat completions, and any OpenAI-compatible server (vLLM, Ollama, llama.cpp) through base_url."""

from __future__ import annotations

import hashlib
import json
import threading
from functools import lru_cache
from typing import Any, Literal

import openai

from groundjudge import errors
from groundjudge.llm.base import (
    BatchApi,
    LLMRequest,
    LLMResponse,
    json_instruction,
    params_text,
    parsed_or_server_fault,
    reasoning_model,
    sdk_error,
    wire_schema,
)
from groundjudge.llm.openai_batch import OpenAIBatch

JsonMode = Literal["schema", "object", "auto"]


def strict_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of a JSON schema in the form OpenAI's strict structured outputs accept.

    Every object gets ``additionalProperties: false`` and lists all its properties as required; ``default``
    keywords are dropped. Validation still happens on our side with the pydantic model. Made once per schema, a
    fresh dict each time (as :func:`~groundjudge.llm.base.wire_schema`).
    """
    return json.loads(_strict_schema_text(json.dumps(schema)))


@lru_cache(maxsize=256)
def _strict_schema_text(text: str) -> str:
    out = json.loads(text)

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            node.pop("default", None)
            if node.get("type") == "object" and "properties" in node:
                node["additionalProperties"] = False
                node["required"] = list(node["properties"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(out)
    return json.dumps(out)


def takes_temperature(name: str, model: str) -> bool:
    """Whether ``model`` of provider ``name`` accepts a temperature other than its default: OpenAI's reasoning models
    (:func:`~groundjudge.llm.base.reasoning_model`) answer any other value, 0 included, with HTTP 400
    ("Unsupported value: 'temperature' does not support 0 with this model"), so they are sent none."""
    return not reasoning_model(name, model)


class OpenAIProvider:
    """Adapter for ``openai/<model>`` and ``openai-compatible/<model>``.

    json_mode: ``schema`` sends ``response_format=json_schema`` (strict), ``object`` sends ``json_object``,
    ``auto`` tries json_schema and falls back to json_object for good if the server rejects it with a 400.
    The fallback is race-free: every request that was sent with json_schema and got that 400 is re-sent with
    json_object, whichever thread switched the mode.
    """

    def __init__(
        self,
        model: str,
        *,
        api_key: str,
        base_url: str | None = None,
        timeout: float = 60.0,
        json_mode: JsonMode = "schema",
        name: str = "openai",
        send_seed: bool = True,
    ) -> None:
        self.name = name
        self.model = model
        self.base_url = base_url
        self.json_mode: JsonMode = json_mode
        self._schema_refused = False  # auto mode: the server refused json_schema once, so use json_object
        self.send_seed = send_seed
        self._lock = threading.Lock()
        # max_retries=0: LLMClient owns the one retry policy.
        self.sdk = openai.OpenAI(api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0)

    def identity(self) -> dict[str, Any]:
        return {"provider": self.name, "model": self.model, "base_url": self.base_url}

    def takes(self, setting: str) -> bool:
        """A temperature, except to a reasoning model (:func:`takes_temperature`); a seed unless ``send_seed`` is
        off (an OpenAI-compatible server that refuses one)."""
        if setting == "temperature":
            return takes_temperature(self.name, self.model)
        return setting != "seed" or self.send_seed

    def batch_api(self) -> BatchApi | None:
        """The OpenAI Batch API; OpenAI-compatible servers have none."""
        return OpenAIBatch(self) if self.name == "openai" else None

    def _response_format(self, request: LLMRequest, mode: str) -> dict[str, Any]:
        if mode == "object":
            return {"type": "json_object"}
        return {
            "type": "json_schema",
            "json_schema": {
                "name": request.schema_name,
                "schema": strict_schema(wire_schema(request.schema)),
                "strict": True,
            },
        }

    def build_params(self, request: LLMRequest, mode: str | None = None) -> dict[str, Any]:
        """The chat-completions body for ``request`` (``mode``: the JSON mode, by default the current one).

        The schema goes once: as ``response_format`` json_schema on OpenAI; on a compatible server and in
        json_object mode also as text at the end of the system message (:func:`json_instruction`). OpenAI caches
        prompt prefixes by itself (from 1,024 tokens): nothing marks the stable part. ``prompt_cache_key`` (OpenAI only,
        from the system prompt, which is the same for every call of a stage) routes calls that share that prefix
        to the same cache; it changes no output, so it is not part of the cache key.
        """
        mode = mode or self._mode()
        messages = [{"role": m.role, "content": m.content} for m in request.messages]
        if mode == "object" or self.name != "openai":
            # The schema as text only where the model may not see it otherwise: json_object mode, and compatible
            # servers (vLLM, Ollama, llama.cpp constrain the decoding to a json_schema without showing it).
            instruction = json_instruction(wire_schema(request.schema))
            if messages and messages[0]["role"] == "system":
                messages[0] = {"role": "system", "content": messages[0]["content"] + "\n\n" + instruction}
            else:
                messages.insert(0, {"role": "system", "content": instruction})
        params: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": request.temperature,
            "response_format": self._response_format(request, mode),
        }
        if not self.takes("temperature"):  # the cache key's rule (LLMClient keys what takes() says is sent)
            del params["temperature"]
        if self.name == "openai":
            params["max_completion_tokens"] = request.max_tokens
        else:
            params["max_tokens"] = request.max_tokens
        if request.reasoning_effort is not None:  # only when set: other requests' bodies stay as they were
            params["reasoning_effort"] = request.reasoning_effort
        if request.seed is not None and self.takes("seed"):
            params["seed"] = request.seed
        if self.name == "openai" and request.messages and request.messages[0].role == "system":
            digest = hashlib.sha256(request.messages[0].content.encode()).hexdigest()[:32]
            params["prompt_cache_key"] = f"gj-{digest}"
        return params

    def billed_input(self, request: LLMRequest) -> str:
        """The text this adapter sends for ``request`` that the provider bills as input: the messages as sent (the
        schema as text included where it goes there) and the ``json_schema`` format object."""
        params = self.build_params(request)
        form = params["response_format"]
        return params_text(params["messages"], form.get("json_schema") if form.get("type") == "json_schema" else None)

    def _create(self, request: LLMRequest, mode: str) -> Any:
        return self.sdk.chat.completions.create(**self.build_params(request, mode))

    def _mode(self) -> str:
        if self.json_mode == "auto":
            with self._lock:
                return "object" if self._schema_refused else "schema"
        return self.json_mode

    def send(self, request: LLMRequest) -> LLMResponse:
        mode = self._mode()
        try:
            try:
                completion = self._create(request, mode)
            except openai.BadRequestError as exc:
                # Decided by what this request sent, not by the shared mode another thread may have switched.
                refused = "response_format" in str(exc) or "json_schema" in str(exc)
                if not (self.json_mode == "auto" and mode == "schema" and refused):
                    raise
                with self._lock:
                    self._schema_refused = True
                completion = self._create(request, "object")
        except (openai.OpenAIError, json.JSONDecodeError) as exc:
            raise sdk_error(exc, openai, self.name) from exc
        return self.parse_response(completion)

    def parse_response(self, response: Any) -> LLMResponse:
        """A response (the SDK's object, or a batch result's dict) as an :class:`LLMResponse`; a body that is not the
        API's format is a retryable :class:`~groundjudge.errors.ServerError`."""
        return parsed_or_server_fault(self.name, self._parse, response)

    def _parse(self, response: Any) -> LLMResponse:
        # a batch result line hands over the response's dict
        completion = response
        if isinstance(response, dict):
            completion = openai.types.chat.ChatCompletion.model_validate(response)
        if not getattr(completion, "choices", None):
            why = "the response is not in the API's format (no choices)"
            raise errors.ServerError(f"{self.name}: {why}", retryable=True)
        choice = completion.choices[0]
        message = choice.message
        refusal = getattr(message, "refusal", None) or None
        if refusal is None and choice.finish_reason == "content_filter":
            refusal = "blocked by the content filter (finish_reason content_filter)"
        usage = completion.usage
        content = message.content
        if content is None:
            content = ""
        elif not isinstance(content, str):
            content = json.dumps(content)
        details = getattr(usage, "prompt_tokens_details", None)
        return LLMResponse(
            text=content,
            input_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),  # cached tokens included
            output_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            truncated=choice.finish_reason == "length",
            refusal=refusal,
            cached_input_tokens=int(getattr(details, "cached_tokens", 0) or 0),
        )
