"""The one protocol every provider adapter implements, and the error mapping they share.

An adapter maps a :class:`LLMRequest` to its SDK's call, the SDK's response to a :class:`LLMResponse`, and the
SDK's exceptions to groundjudge's typed errors (whose ``retryable`` says whether to try again). It never
retries, caches or counts: :class:`groundjudge.llm.client.LLMClient` runs that loop, once, for all providers.
"""

from __future__ import annotations

import email.utils
import json
import time
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol

from groundjudge import errors
from groundjudge.models import Message


@dataclass(frozen=True)
class LLMRequest:
    """One JSON-mode completion request, provider-neutral."""

    messages: tuple[Message, ...]
    schema: dict[str, Any]
    schema_name: str
    temperature: float = 0.0
    seed: int | None = None
    max_tokens: int = 4096


@dataclass(frozen=True)
class LLMResponse:
    """The model's text (expected to be JSON), token counts, and whether it stopped at the token limit.

    ``refusal`` is set (to the model's words, or what filtered it) when the model declined: the reply is billed
    like any other, so the adapter returns it and the client counts it before raising :class:`RefusalError`.
    ``input_tokens`` is all the input billed; ``cached_input_tokens`` of it were read from the provider's prompt
    cache and ``cache_write_tokens`` written to it.
    """

    text: str
    input_tokens: int
    output_tokens: int
    truncated: bool = False
    refusal: str | None = None
    cached_input_tokens: int = 0
    cache_write_tokens: int = 0


class Provider(Protocol):
    """What the client needs from an adapter."""

    name: str
    model: str
    base_url: str | None

    def send(self, request: LLMRequest) -> LLMResponse:
        """Make one HTTP call; raise a groundjudge error on failure."""
        ...

    def identity(self) -> dict[str, Any]:
        """Everything about this provider that changes outputs (goes into cache keys); never secrets."""
        ...


class BatchCapable(Provider, Protocol):
    """An adapter whose request building and response parsing are apart from sending, for the batch APIs.

    ``batch_api`` names the wire format of the provider's batch API ("openai" or "anthropic"); ``sdk`` is the
    SDK client (retries off) that :mod:`groundjudge.llm.batch` drives.
    """

    batch_api: str
    sdk: Any

    def build_params(self, request: LLMRequest) -> dict[str, Any]:
        """The request body :meth:`send` would send for ``request``."""
        ...

    def parse_response(self, response: Any) -> LLMResponse:
        """A response (the SDK's object, or a JSON body from a batch result) as an :class:`LLMResponse`."""
        ...


def parse_retry_after(headers: Any) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date), if given."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        if parsed is None:
            return None
        return max(0.0, parsed.timestamp() - time.time())


def map_sdk_error(exc: Exception, sdk: ModuleType, provider: str) -> errors.GroundjudgeError | None:
    """Turn an openai/anthropic SDK exception into a typed groundjudge error (both SDKs share these names)."""
    if isinstance(exc, json.JSONDecodeError):
        return errors.ServerError(f"{provider}: response body is not JSON: {exc}", retryable=True)
    if isinstance(exc, sdk.APITimeoutError):
        return errors.LLMTimeoutError(f"{provider}: request timed out")
    if isinstance(exc, sdk.APIConnectionError):
        return errors.LLMConnectionError(f"{provider}: connection failed: {exc}")
    if isinstance(exc, sdk.APIResponseValidationError):
        return errors.ServerError(
            f"{provider}: response body is not valid for the API: {exc}", status=exc.status_code, retryable=True
        )
    if isinstance(exc, sdk.APIStatusError):
        status = exc.status_code
        retry_after = parse_retry_after(exc.response.headers)
        message = f"{provider}: HTTP {status}: {getattr(exc, 'message', exc)}"
        if status == 429:
            return errors.RateLimitError(message, status=status, retryable=True, retry_after=retry_after)
        if status >= 500 or status in (408, 409):
            return errors.ServerError(message, status=status, retryable=True, retry_after=retry_after)
        if status in (401, 403):
            return errors.AuthenticationError(message, status=status)
        return errors.BadRequestError(message, status=status)
    return None
