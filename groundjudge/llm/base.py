"""The one protocol every provider adapter implements, and the error mapping they share.

An adapter maps a :class:`LLMRequest` to its SDK's call, the SDK's response to a :class:`LLMResponse`, and the
SDK's exceptions to groundjudge's typed errors (whose ``retryable`` says whether to try again). It never
retries, caches or counts: :class:`groundjudge.llm.client.LLMClient` runs that loop, once, for all providers.
"""

from __future__ import annotations

import email.utils
import hashlib
import json
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar
from urllib.parse import urlsplit

from groundjudge import errors
from groundjudge.models import Message

if TYPE_CHECKING:
    from pydantic import BaseModel

T = TypeVar("T")


def json_instruction(schema: dict[str, Any]) -> str:
    """The JSON instruction with the schema as text: for a server that takes no structured-output format (an
    adapter adds it only there; everywhere else the schema goes once, as the format itself)."""
    return (
        "Reply with one JSON object and nothing else: no prose, no code fence. "
        "It must validate against this JSON Schema:\n" + json.dumps(schema, ensure_ascii=False)
    )


def model_schema(schema: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema of a reply model, made once per model (pydantic builds it anew on every call, and every LLM
    call asks for it): a fresh dict each time, so no caller can change another's."""
    return json.loads(_model_schema_text(schema))


@lru_cache(maxsize=256)
def _model_schema_text(schema: type[BaseModel]) -> str:
    return json.dumps(schema.model_json_schema())


def wire_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` as sent to a provider: ``$ref`` inlined (a recursive one is kept), no ``title`` or ``description``
    (the prompt states every rule once; the schema only gives the shape). Validation stays with the pydantic model.
    Made once per schema (a request's schema is read several times a call: the body, the pace, the budget's hold);
    a fresh dict each time."""
    return json.loads(_wire_schema_text(json.dumps(schema)))


@lru_cache(maxsize=256)
def _wire_schema_text(text: str) -> str:
    schema = json.loads(text)
    defs = schema.get("$defs", {})
    recursive = False

    def walk(node: Any, seen: tuple[str, ...]) -> Any:
        nonlocal recursive
        if isinstance(node, list):
            return [walk(item, seen) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/") and len(node) == 1:
            name = ref.removeprefix("#/$defs/")
            if name in seen or name not in defs:
                recursive = True
                return dict(node)
            return walk(defs[name], (*seen, name))
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in ("title", "description", "$defs"):
                continue
            if key == "properties" and isinstance(value, dict):
                out[key] = {name: walk(sub, seen) for name, sub in value.items()}
            else:
                out[key] = walk(value, seen)
        return out

    lean = walk(schema, ())
    if (recursive or "$ref" in lean) and defs:
        lean["$defs"] = {name: walk(sub, (name,)) for name, sub in defs.items()}
    return json.dumps(lean)


def billed_text(provider: object, request: LLMRequest) -> str:
    """The text of ``request`` a provider bills as input: the messages as the adapter sends them and the
    structured-output format (the schema as ``response_format`` or the forced tool), from the adapter's
    ``billed_input`` where it has one; else the messages and the lean schema once. What dry runs and the
    tokens-per-minute pace count (issue 34: the schema is billed too)."""
    billed = getattr(provider, "billed_input", None)
    if callable(billed):
        return str(billed(request))
    text = "\n".join(m.content for m in request.messages)
    return text + "\n" + json.dumps(wire_schema(request.schema), ensure_ascii=False)


def params_text(messages: list[dict[str, Any]], *extra: Any) -> str:
    """A request body's messages (plain text or text blocks) and ``extra`` objects (the format, the tools) as JSON,
    joined: what :func:`billed_text` counts for a body an adapter built."""
    parts = []
    for m in messages:
        content = m.get("content", "")
        if not isinstance(content, str):
            content = "".join(b.get("text", "") for b in content if isinstance(b, dict))
        parts.append(content)
    parts += [json.dumps(x, ensure_ascii=False) for x in extra if x is not None]
    return "\n".join(parts)


# OpenAI's reasoning models: o1, o3, o4-mini, the gpt-5 family but its chat models. They take only their default
# temperature (any other value, 0 included, is answered HTTP 400), refuse ``max_tokens`` (``max_completion_tokens``
# only), take ``reasoning_effort``, and count the tokens they reason with, unseen but billed as output, against
# ``max_completion_tokens``: a cap sized for the visible reply alone cuts a long call off before it answers.
_REASONING_MODEL = re.compile(r"^(o\d|gpt-5(?!-chat))")

DEFAULT_MAX_TOKENS = 4096
"""The output cap of a call: the reply's own tokens."""

REASONING_MAX_TOKENS = 25_000
"""The output cap of a call to a reasoning model (:func:`reasoning_model`): its reply and the reasoning before it,
which OpenAI's reasoning guide suggests reserving at least 25,000 tokens for. What the budget holds for a call in
flight is priced on it."""


def reasoning_model(provider: str, model: str) -> bool:
    """Whether ``model`` of provider ``provider`` is one of OpenAI's reasoning models."""
    return provider == "openai" and bool(_REASONING_MODEL.match(model))


def default_max_tokens(provider: str, model: str) -> int:
    """The output cap a call to ``provider/model`` is sent with: :data:`REASONING_MAX_TOKENS` for a reasoning
    model (its reasoning counts against the cap), else :data:`DEFAULT_MAX_TOKENS`."""
    return REASONING_MAX_TOKENS if reasoning_model(provider, model) else DEFAULT_MAX_TOKENS


def checked_reasoning_effort(
    provider: str, model: str, effort: str | None, setting: str = "reasoning_effort"
) -> str | None:
    """``effort`` for requests to ``provider/model``, where they may carry ``reasoning_effort``: an OpenAI reasoning
    model, or an OpenAI-compatible server (which takes it or answers 400 for itself: vLLM and Ollama serve reasoning
    models). Any other model is refused here, before a call: OpenAI answers HTTP 400 to every such request.
    ``setting``: the Config field the effort came from, named in the error."""
    if effort is None or reasoning_model(provider, model) or provider == "openai-compatible":
        return effort
    raise errors.ConfigError(
        f"{setting} {effort!r}: {provider}/{model} is not a reasoning model, and OpenAI answers a request that "
        "carries reasoning_effort with HTTP 400; it goes to OpenAI's reasoning models (o1, o3, o4-mini, the gpt-5 "
        f"family) and OpenAI-compatible servers. Drop --{setting.replace('_', '-')} ({setting}=None), or name a "
        "reasoning model"
    )


DEFAULT_SERVER = "the provider's own"
"""What :func:`shown_server` says for an adapter with no base URL: the SDK's own address for the provider."""


def shown_server(base_url: str | None) -> str:
    """The server a judge's requests go to, as reports may name it (``versions.llm_server``): the base URL without
    what may be a secret (a user and password before ``@``, a query, a fragment), scheme and host in lower case,
    without a trailing ``/``; :data:`DEFAULT_SERVER` without one, or for the SDKs' own address. An address that is
    no http(s) URL with a host, or whose path, query or fragment holds ``@`` (a password with a ``/``, ``?`` or
    ``#`` reads as a port and a path, query or fragment), is named by a digest of itself alone."""
    if not base_url:
        return DEFAULT_SERVER
    try:
        parts = urlsplit(base_url.strip())
        scheme, host, port, path = parts.scheme.lower(), parts.hostname, parts.port, parts.path
        after = parts.path + parts.query + parts.fragment  # (what follows the host: "@" there ends a password)
    except ValueError:  # a port that is no number, a host in brackets that is no IPv6 address
        scheme, host, port, path, after = "", None, None, "", ""
    if scheme not in ("http", "https") or not host or "@" in after:  # a password holding "/", "?" or "#"
        return "unreadable address #" + hashlib.sha256(base_url.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    host = f"[{host}]" if ":" in host else host
    shown = f"{scheme}://{host}{f':{port}' if port is not None else ''}{path.rstrip('/')}"
    return DEFAULT_SERVER if shown in _SDK_SERVERS else shown


_SDK_SERVERS = frozenset({"https://api.openai.com/v1", "https://api.anthropic.com"})
"""The addresses the openai and anthropic SDKs use when given none: the same server as :data:`DEFAULT_SERVER` (an
``OPENAI_BASE_URL`` set to it in one run and not in another is no other server)."""


@dataclass(frozen=True)
class LLMRequest:
    """One JSON-mode completion request, provider-neutral: the prompt's messages as rendered, and the schema the
    adapter sends once (as the provider's structured-output format, else as text: :func:`json_instruction`).
    ``max_tokens`` is the output cap sent (a reasoning model's reasoning included); ``reasoning_effort`` is sent
    only when set."""

    messages: tuple[Message, ...]
    schema: dict[str, Any]
    schema_name: str
    temperature: float = 0.0
    seed: int | None = None
    max_tokens: int = DEFAULT_MAX_TOKENS
    reasoning_effort: str | None = None


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

    def takes(self, setting: str) -> bool:
        """Whether this adapter sends the sampling ``setting`` (``temperature``, ``seed``) to its model: one it never
        sends changes no reply, so the cache key holds its default instead (``LLMClient``)."""
        ...


@dataclass(frozen=True)
class BatchStatus:
    """A provider batch as one status read found it: whether it ended, how many requests are answered, the
    provider's word for its state, and the SDK's object (handed back to :meth:`BatchApi.results`)."""

    ended: bool
    done: int
    label: str
    raw: Any


BatchResult = tuple[str, str, Any]
"""``(custom_id, kind, payload)``: kind "succeeded" with the response body, else the kind of failure ("errored",
"expired", ...) with the reason."""


class BatchApi(Protocol):
    """One provider's batch API, as :class:`groundjudge.llm.batch.BatchRunner` drives it (it keeps the planning,
    the state file, the polling and the taking of results). Every SDK error comes out as a groundjudge error
    (``retryable`` as for direct calls), its message naming what failed ("batch create: ...").

    ``name`` is written in the state file ("openai", "anthropic"); ``max_requests`` and ``max_bytes`` bound one
    batch.
    """

    name: str
    max_requests: int
    max_bytes: int

    def params(self, request: LLMRequest) -> dict[str, Any]:
        """The request body the direct path sends for ``request``."""
        ...

    def parse(self, body: Any) -> LLMResponse:
        """A result's response body as an :class:`LLMResponse`, parsed as a direct response is."""
        ...

    def custom_id(self, key: str) -> str:
        """The batch's id for the request of cache key ``key``."""
        ...

    def creator(self, requests: list[tuple[str, dict[str, Any]]], tag: str) -> Callable[[], str]:
        """The call that creates one batch of ``(custom_id, body)`` requests tagged ``tag`` and returns its id;
        what needs doing once before (an upload) is done here, so the call can be tried again."""
        ...

    def find_lost(self, entry: dict[str, Any], known: set[Any], since: float) -> str | None:
        """The id of a batch created for the state ``entry`` since ``since`` whose create reply was lost (none of
        ``known``), or None when the provider has none."""
        ...

    def status(self, batch_id: str) -> BatchStatus:
        """One status read of a batch."""
        ...

    def results(self, entry: dict[str, Any], status: BatchStatus) -> Iterator[BatchResult]:
        """The results of the ended batch of state ``entry``, one per request the provider answered."""
        ...


class BatchCapable(Provider, Protocol):
    """An adapter whose request building and response parsing are apart from sending, for the batch APIs; ``sdk``
    is the SDK client (retries off) that its :class:`BatchApi` drives."""

    sdk: Any

    def build_params(self, request: LLMRequest) -> dict[str, Any]:
        """The request body :meth:`send` would send for ``request``."""
        ...

    def parse_response(self, response: Any) -> LLMResponse:
        """A response (the SDK's object, or a JSON body from a batch result) as an :class:`LLMResponse`."""
        ...

    def batch_api(self) -> BatchApi | None:
        """The provider's batch API, or None when it has none (an OpenAI-compatible server)."""
        ...


def call_sdk(what: str, fn: Callable[[], T], sdk: ModuleType, base: type[Exception], provider: str, model_id: str) -> T:
    """Call the SDK (``sdk``, whose errors derive from ``base``) for a batch, mapping its errors to groundjudge's
    typed errors (``retryable`` as for direct calls), the message saying what failed (``batch {what}: ...``)."""
    try:
        return fn()
    except (base, json.JSONDecodeError) as exc:
        mapped = map_sdk_error(exc, sdk, provider)
        if mapped is None:
            raise errors.LLMError(f"{model_id}: batch {what}: {exc}") from exc
        mapped.args = (f"batch {what}: {mapped.args[0] if mapped.args else exc}",)
        raise mapped from exc


class SdkBatch:
    """What each provider's batch API (:class:`BatchApi`) takes from its chat adapter: the SDK client, the request
    bodies and the response parsing, and SDK calls with their errors mapped (:func:`call_sdk`). A provider's batch
    class names its SDK in ``sdk_module`` and the SDK's base error in ``sdk_error``."""

    sdk_module: ModuleType
    sdk_error: type[Exception]

    def __init__(self, provider: BatchCapable) -> None:
        self.provider = provider
        self.sdk: Any = provider.sdk

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        model_id = f"{self.provider.name}/{self.provider.model}"
        return call_sdk(what, fn, self.sdk_module, self.sdk_error, self.provider.name, model_id)

    def params(self, request: LLMRequest) -> dict[str, Any]:
        return self.provider.build_params(request)

    def parse(self, body: Any) -> LLMResponse:
        return self.provider.parse_response(body)


def parsed_or_server_fault(provider: str, parse: Callable[[Any], T], response: Any) -> T:
    """``parse(response)``, or a retryable :class:`~groundjudge.errors.ServerError` when the body is not the API's
    format: a proxy or gateway that answers HTTP 200 with its own JSON or an HTML page (the SDKs hand such a body
    over as a bare object, a string or None, and reading it raised AttributeError or TypeError, never retried)."""
    try:
        return parse(response)
    except errors.GroundjudgeError:
        raise
    except (AttributeError, TypeError, KeyError, IndexError, ValueError) as exc:  # a pydantic error is a ValueError
        raise errors.ServerError(
            f"{provider}: the response is not in the API's format ({type(exc).__name__}: {str(exc)[:200]})",
            retryable=True,
        ) from exc


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


# The HTTP client's errors (httpx, or httpx2 in newer SDKs) that leave before the request is sent: no connection was
# made (refused, unreachable, TLS or proxy failure, connect or pool timeout), so the provider never saw it.
_NEVER_SENT = frozenset({"ConnectError", "ConnectTimeout", "PoolTimeout", "ProxyError", "UnsupportedProtocol"})


def never_sent(exc: BaseException) -> bool:
    """Whether an SDK's timeout or connection error (``APITimeoutError``, ``APIConnectionError``) certainly failed
    before its request was sent: its cause, the HTTP client's error, is one of connecting. Any other (a read timeout,
    a read error, a server that closed the connection without a reply, an error the SDK wrapped that is not the
    HTTP client's) may have reached the provider, which may bill it."""
    seen: set[int] = set()
    cause = exc.__cause__ or exc.__context__
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if any(k.__module__.split(".")[0] in ("httpx", "httpx2") for k in type(cause).__mro__):
            return any(k.__name__ in _NEVER_SENT for k in type(cause).__mro__)
        cause = cause.__cause__ or cause.__context__
    return False


def map_sdk_error(exc: Exception, sdk: ModuleType, provider: str) -> errors.GroundjudgeError | None:
    """Turn an openai/anthropic SDK exception into a typed groundjudge error (both SDKs share these names)."""
    if isinstance(exc, json.JSONDecodeError):
        return errors.ServerError(f"{provider}: response body is not JSON: {exc}", retryable=True)
    if isinstance(exc, sdk.APIConnectionError):  # APITimeoutError is one too
        timed_out = isinstance(exc, sdk.APITimeoutError)
        lost: errors.LLMError = (
            errors.LLMTimeoutError(f"{provider}: request timed out")
            if timed_out
            else errors.LLMConnectionError(f"{provider}: connection failed: {exc}")
        )
        lost.maybe_billed = not never_sent(exc)
        return lost
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


def sdk_error(exc: Exception, sdk: ModuleType, provider: str) -> errors.GroundjudgeError:
    """:func:`map_sdk_error`, or a plain :class:`~groundjudge.errors.LLMError` for an SDK error it has no type for."""
    return map_sdk_error(exc, sdk, provider) or errors.LLMError(f"{provider}: {exc}")
