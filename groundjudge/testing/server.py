"""A scripted LLM server on 127.0.0.1 for offline tests, speaking the OpenAI and Anthropic wire formats.

The real ``openai.OpenAI`` and ``anthropic.Anthropic`` clients talk real HTTP to it. Each request is recorded and
answered by the next queued :class:`Reply`, or else by the script function; replies can inject faults::

    with ScriptedLLMServer(lambda req: Reply.json({"verdict": "SUPPORTED"})) as server:
        server.push(Reply.error(429, retry_after=0.1), Reply.malformed_body())
        client = OpenAI(base_url=server.openai_base_url, api_key="test")

Routes: ``POST /v1/chat/completions`` (OpenAI) and ``POST /v1/messages`` (Anthropic), and the batch APIs of both
(OpenAI: ``POST /v1/files``, ``GET /v1/files/{id}/content``, ``POST /v1/batches``, ``GET /v1/batches/{id}``;
Anthropic: ``POST /v1/messages/batches``, ``GET /v1/messages/batches/{id}`` and its ``results_url``), whose
requests are answered by the same queue and script when the batch ends (see :class:`ScriptedLLMServer`; the batch
routes are in :mod:`groundjudge.testing.batches`). With ``refuse_json_schema=True`` the server behaves like an
OpenAI-compatible server without structured outputs: every OpenAI request with ``response_format`` json_schema gets
HTTP 400 (after ``refusal_delay`` seconds) and uses up no scripted reply. Refusals report their tokens, as real
providers bill them.

Prompt caching is emulated deterministically (~4 characters a token): OpenAI reports
``usage.prompt_tokens_details.cached_tokens``, the longest prefix of the prompt an earlier request sent, from
``min_cached_prefix_tokens`` on in 128-token steps; Anthropic reports ``cache_read_input_tokens`` for the longest
``cache_control`` prefix sent before and ``cache_creation_input_tokens`` for the rest up to the last breakpoint
(prefixes shorter than ``anthropic_min_cache_tokens`` are not cached), with ``input_tokens`` the remainder.

Load: ``latency=Latency(median=1.0, sigma=0.5, seed=0)`` answers each chat request after a lognormal time drawn
from the seed and the request's body (the same request waits the same time in every run, whatever the order of
arrival); ``rate_limit=RateLimit(requests_per_second=20)`` answers HTTP 429 (the provider's error body, with
``retry-after`` and ``retry-after-ms``) to a request that finds that many requests already accepted in the last
second. ``ScriptedLLMServer.billed`` counts the replies a provider would bill, ``rate_limited`` the 429s of the
rate limit: a client that never pays twice makes ``billed`` equal its own count of billed calls.

OpenAI's reasoning models (o1, o3, o4-mini, the gpt-5 family but its chat models: ``llm.base.reasoning_model``) are
held to what the API takes: a temperature other than their default, and ``max_tokens`` (``max_completion_tokens``
only), are answered HTTP 400 with the API's error; a non-reasoning GPT model is answered 400 for
``reasoning_effort``. A reply's ``reasoning_tokens`` are reported as the API does (in ``completion_tokens``, and
in ``completion_tokens_details.reasoning_tokens``) and count against the request's cap.

Every reply is held to the request's output cap (OpenAI ``max_completion_tokens``, else ``max_tokens``; Anthropic
``max_tokens``), as both APIs hold it: a reply whose tokens (its ``output_tokens``, else ~4 characters a token of
its text, plus an OpenAI reply's reasoning) do not fit is cut off, billed exactly the cap, with the share of its
text that fits (after the reasoning, which may leave none): OpenAI ``finish_reason`` length, Anthropic
``stop_reason`` max_tokens, a forced tool call's ``input`` what of the cut JSON parses (the Anthropic SDK's partial
reading: {} when nothing does). A reply that fits is handed over as scripted; :meth:`Reply.truncated` (or
``finish="length"``) scripts a cut-off reply whatever the cap.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import random
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

from groundjudge.errors import ArgumentError
from groundjudge.llm.base import reasoning_model
from groundjudge.testing.batches import BatchRoutes, ScriptedBatch

Api = Literal["openai", "anthropic"]


@dataclass
class RecordedRequest:
    """One request as the server saw it."""

    api: Api
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    batch_id: str | None = None  # set when the request came in a batch
    reply_usage: dict[str, Any] | None = None  # the usage block the server answered with (tokens, cached tokens)
    received_at: float = 0.0  # time.monotonic() when the request arrived (0.0 in a batch)
    rate_limited: bool = False  # answered 429 by the server's rate limit (no scripted reply was used)

    @property
    def model(self) -> str:
        return str(self.body.get("model", ""))

    @property
    def messages(self) -> list[dict[str, str]]:
        """Messages as role/content text, Anthropic's ``system`` first as a system message."""
        out = []
        system = self.body.get("system")
        if system:
            text = system if isinstance(system, str) else "".join(b.get("text", "") for b in system)
            out.append({"role": "system", "content": text})
        for m in self.body.get("messages", []):
            content = m.get("content", "")
            if not isinstance(content, str):
                content = "".join(b.get("text", "") for b in content if isinstance(b, dict))
            out.append({"role": m.get("role", ""), "content": content})
        return out

    @property
    def text(self) -> str:
        """All message text joined: handy for scripts that answer by what the prompt contains."""
        return "\n".join(m["content"] for m in self.messages)

    @property
    def format_text(self) -> str:
        """The structured-output format the request carries, as JSON (OpenAI ``response_format``'s json_schema,
        Anthropic's tools), "" when none: providers bill it as input beside the messages' :attr:`text`."""
        form = self.body.get("response_format")
        if isinstance(form, dict) and form.get("type") == "json_schema":
            return json.dumps(form.get("json_schema"), ensure_ascii=False)
        tools = self.body.get("tools")
        return json.dumps(tools, ensure_ascii=False) if tools else ""

    @property
    def last_user(self) -> str:
        users = [m["content"] for m in self.messages if m["role"] == "user"]
        return users[-1] if users else ""


@dataclass
class Reply:
    """What the server does with one request."""

    kind: Literal["content", "refusal", "error", "malformed_body", "dropped"] = "content"
    content: str = ""
    obj: Any = None
    finish: Literal["stop", "length", "content_filter"] = "stop"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    input_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_tokens: int = 0  # OpenAI: the tokens a reasoning model reasoned with, billed as output, unseen
    param: str | None = None  # an error's ``param`` and ``code`` (OpenAI's error body)
    code: str | None = None

    @classmethod
    def json(cls, obj: Any, **kw: Any) -> Reply:
        """A well-formed JSON answer (a tool call for Anthropic)."""
        return cls(content=json.dumps(obj), obj=obj, **kw)

    @classmethod
    def text(cls, content: str, **kw: Any) -> Reply:
        """Raw text as the model's answer: use it for malformed JSON."""
        return cls(content=content, **kw)

    @classmethod
    def truncated(cls, content: str, **kw: Any) -> Reply:
        """Text cut off at the token limit (finish_reason length / stop_reason max_tokens)."""
        return cls(content=content, finish="length", **kw)

    @classmethod
    def refusal(cls, message: str = "I can't help with that.", **kw: Any) -> Reply:
        """The model declines: OpenAI ``message.refusal``, Anthropic ``stop_reason: refusal`` (tokens billed)."""
        return cls(kind="refusal", content=message, **kw)

    @classmethod
    def content_filtered(cls, content: str = "", **kw: Any) -> Reply:
        """OpenAI ``finish_reason: content_filter`` (Anthropic: ``stop_reason: refusal``), tokens billed."""
        return cls(content=content, finish="content_filter", **kw)

    @classmethod
    def error(
        cls,
        status: int,
        *,
        retry_after: float | None = None,
        message: str = "scripted error",
        param: str | None = None,
        code: str | None = None,
    ) -> Reply:
        headers = {"retry-after": f"{retry_after:g}"} if retry_after is not None else {}
        return cls(kind="error", status=status, headers=headers, content=message, param=param, code=code)

    @classmethod
    def malformed_body(cls, body: str = '{"id": "x", "choices": [', content_type: str = "application/json") -> Reply:
        """HTTP 200 whose body is not the API's: by default not JSON at all; ``body`` may be JSON of another shape
        (a proxy's or a gateway's) or an HTML page (``content_type="text/html"``)."""
        return cls(kind="malformed_body", content=body, headers={"content-type": content_type})

    @classmethod
    def dropped(cls, after: float = 0.0) -> Reply:
        """Read the request, then (after ``after`` seconds) close the connection with no reply: a connection lost
        after sending (the SDKs raise ``APIConnectionError``); a provider may have billed it. Not counted in
        :attr:`ScriptedLLMServer.billed`; in a batch, an HTTP 500 for the request."""
        return cls(kind="dropped", delay=after)

    @classmethod
    def slow(cls, seconds: float, then: Reply | None = None) -> Reply:
        """Answer only after ``seconds`` (past the client's timeout, the client sees a timeout)."""
        base = then or cls.json({})
        base.delay = seconds
        return base


Script = Callable[[RecordedRequest], Reply]


@dataclass(frozen=True)
class Latency:
    """How long the server takes to answer a chat request: lognormal, ``median`` seconds, ``sigma`` the standard
    deviation of its logarithm (0: always the median). Each request's time is drawn from ``seed`` and a hash of its
    body, so runs are reproducible under any concurrency."""

    median: float
    sigma: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        if not (self.median >= 0 and math.isfinite(self.median)) or not (self.sigma >= 0 and math.isfinite(self.sigma)):
            raise ArgumentError(f"Latency needs a median and a sigma >= 0, not {self.median}, {self.sigma}")

    def seconds(self, body: bytes) -> float:
        """The answer time of a request with this body."""
        rng = random.Random(hashlib.sha256(b"%d:" % self.seed + body).digest())
        return self.median * math.exp(self.sigma * rng.gauss(0.0, 1.0))


@dataclass(frozen=True)
class RateLimit:
    """HTTP 429 for a chat request that finds ``requests_per_second`` requests already accepted in the last
    ``window`` seconds (a sliding window; refused requests do not count). ``retry_after``: the seconds the 429 asks
    to wait; None: exactly until the window has room (``retry-after-ms``; ``retry-after`` rounded up to whole
    seconds). A refused request is recorded in ``requests`` with ``rate_limited`` set and uses up no scripted
    reply."""

    requests_per_second: float
    retry_after: float | None = None
    window: float = 1.0

    def __post_init__(self) -> None:
        if not self.requests_per_second > 0 or not self.window > 0:
            raise ArgumentError("RateLimit needs requests_per_second > 0 and window > 0")


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


def _in_tokens(req: RecordedRequest, reply: Reply) -> int:
    return reply.input_tokens if reply.input_tokens is not None else _tokens(req.text)


def _out_tokens(reply: Reply) -> int:
    return reply.output_tokens if reply.output_tokens is not None else _tokens(reply.content)


def _error_type(status: int) -> str:
    return {
        400: "invalid_request_error",
        401: "authentication_error",
        403: "permission_error",
        404: "not_found_error",
        429: "rate_limit_error",
        529: "overloaded_error",
    }.get(status, "api_error")


@dataclass(frozen=True)
class _CacheUsage:
    read: int = 0
    written: int = 0


def _error_body(api: Api, status: int, message: str, reply: Reply | None = None) -> dict[str, Any]:
    """An error response body in the wire format of ``api`` (OpenAI's with the reply's ``param`` and ``code``)."""
    if api == "anthropic":
        return {"type": "error", "error": {"type": _error_type(status), "message": message}}
    error: dict[str, Any] = {"message": message, "type": _error_type(status), "code": None}
    if reply is not None and (reply.param or reply.code):
        error.update(param=reply.param, code=reply.code)
    return {"error": error}


def _refused_by_model(req: RecordedRequest) -> Reply | None:
    """HTTP 400 as OpenAI answers a parameter the request's model does not take, or None."""
    body, model = req.body, req.model
    if reasoning_model("openai", model):
        if body.get("temperature", 1) != 1:
            t = body["temperature"]
            message = f"Unsupported value: 'temperature' does not support {t} with this model."
            return Reply.error(400, message=message, param="temperature", code="unsupported_value")
        if "max_tokens" in body:
            message = (
                "Unsupported parameter: 'max_tokens' is not supported with this model. "
                "Use 'max_completion_tokens' instead."
            )
            return Reply.error(400, message=message, param="max_tokens", code="unsupported_parameter")
    elif "reasoning_effort" in body and re.match(r"gpt-(3\.5|4|5-chat)", model):
        message = "Unrecognized request argument supplied: reasoning_effort"
        return Reply.error(400, message=message, param="reasoning_effort", code="unsupported_parameter")
    return None


@dataclass(frozen=True)
class _Output:
    """A reply's output as the provider hands it over: the text, the output tokens billed (reasoning included) and
    whether the request's cap cut it off."""

    text: str
    tokens: int
    cut: bool


def _output_cap(req: RecordedRequest) -> int | None:
    """The request's cap on output tokens: OpenAI's ``max_completion_tokens`` (else ``max_tokens``), Anthropic's
    ``max_tokens``; None when it sends none."""
    cap = req.body.get("max_completion_tokens", req.body.get("max_tokens"))
    return cap if isinstance(cap, int) and not isinstance(cap, bool) and cap >= 0 else None


def _held_output(req: RecordedRequest, reply: Reply) -> _Output:
    """The reply held to the request's output cap, as both APIs hold every reply: one whose tokens (an OpenAI
    reasoning model's reasoning first, then the text) do not fit is cut off, billed exactly the cap, with what of
    its text fits after the reasoning (the text's share of its tokens that fits, which may be none); one that fits
    is handed over whole."""
    reasoning = reply.reasoning_tokens if req.api == "openai" else 0
    visible = _out_tokens(reply)
    cap = _output_cap(req)
    if cap is None or visible + reasoning <= cap:
        return _Output(reply.content, visible + reasoning, cut=False)
    room = max(0, cap - reasoning)
    keep = len(reply.content) * room // visible if visible else 0
    return _Output(reply.content[:keep], cap, cut=True)


def _openai_body(req: RecordedRequest, reply: Reply, cache: _CacheUsage = _CacheUsage()) -> dict[str, Any]:
    output = _held_output(req, reply)
    completion = output.tokens
    finish = "length" if output.cut and reply.finish == "stop" else reply.finish
    refusal = output.text if reply.kind == "refusal" else None
    content = None if reply.kind == "refusal" else output.text
    details = (
        {"completion_tokens_details": {"reasoning_tokens": reply.reasoning_tokens}} if reply.reasoning_tokens else {}
    )
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 0,
        "model": req.model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": refusal},
                "finish_reason": finish,
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": _in_tokens(req, reply),
            "completion_tokens": completion,
            "total_tokens": _in_tokens(req, reply) + completion,
            "prompt_tokens_details": {"cached_tokens": min(cache.read, _in_tokens(req, reply))},
            **details,
        },
    }


def _anthropic_body(req: RecordedRequest, reply: Reply, cache: _CacheUsage = _CacheUsage()) -> dict[str, Any]:
    tool_choice = req.body.get("tool_choice") or {}
    output = _held_output(req, reply)
    cut = output.cut or reply.finish == "length"
    if reply.kind == "refusal" or reply.finish == "content_filter":
        content: list[dict[str, Any]] = [{"type": "text", "text": output.text}] if output.text else []
        stop = "refusal"
    elif reply.obj is not None and isinstance(reply.obj, dict) and tool_choice.get("type") == "tool":
        # a tool call cut off hands over what of its input parsed: the script's (a cut scripted as such), or what of
        # the JSON fits the cap, read as the SDK reads a streamed tool call's partial input
        tool_input = _partial_json(output.text) if output.cut else reply.obj
        content = [{"type": "tool_use", "id": "toolu_scripted", "name": tool_choice["name"], "input": tool_input}]
        stop = "max_tokens" if cut else "tool_use"
    else:
        content = [{"type": "text", "text": output.text}]
        stop = "max_tokens" if cut else "end_turn"
    return {
        "id": "msg_scripted",
        "type": "message",
        "role": "assistant",
        "model": req.model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        # Anthropic reports the uncached input apart from the cache reads and writes.
        "usage": {
            "input_tokens": max(0, _in_tokens(req, reply) - cache.read - cache.written),
            "cache_read_input_tokens": cache.read,
            "cache_creation_input_tokens": cache.written,
            "output_tokens": output.tokens,
        },
    }


def _partial_json(text: str) -> dict[str, Any]:
    """What of a cut-off JSON object parses ({} for none of it), as the Anthropic SDK reads a tool call's input
    while it streams (jiter, the SDKs' own JSON parser, in partial mode: a string cut off is left out)."""
    from jiter import from_json

    try:
        value = from_json(text.encode(), partial_mode=True)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _anthropic_breakpoints(body: dict[str, Any]) -> list[str]:
    """The prompt text (as :attr:`RecordedRequest.text` joins it) up to the end of each ``cache_control`` block."""
    parts: list[list[tuple[str, bool]]] = []
    system = body.get("system")
    if system:
        if isinstance(system, str):
            parts.append([(system, False)])
        else:
            parts.append([(b.get("text", ""), bool(b.get("cache_control"))) for b in system])
    for m in body.get("messages", []):
        content = m.get("content", "")
        if isinstance(content, str):
            parts.append([(content, False)])
        else:
            parts.append([(b.get("text", ""), bool(b.get("cache_control"))) for b in content if isinstance(b, dict)])
    text, out = "", []
    for i, blocks in enumerate(parts):
        if i:
            text += "\n"
        for piece, breakpoint in blocks:
            text += piece
            if breakpoint:
                out.append(text)
    return out


class _Server(ThreadingHTTPServer):
    """The HTTP server, its listen backlog a provider's: socketserver's default of 5 drops the connections of a
    run's first burst past it, and the client's TCP stack sends them again only a second later, so at a
    concurrency above the backlog a run's first calls reached the server up to a second late (no real API does
    that)."""

    request_queue_size = 1024


class ScriptedLLMServer(BatchRoutes):
    """A threaded HTTP server on a random port of 127.0.0.1; use as a context manager.

    Prompt-cache emulation: ``min_cached_prefix_tokens`` (OpenAI, default 1024) and ``anthropic_min_cache_tokens``
    (default 1024) are settable. Batch controls: ``batch_polls`` status reads answer "in progress" before a batch
    ends (default 1); ``batch_expire_after`` = N makes the next batches expire with only their first N requests
    answered; ``batch_status_errors`` = N makes the next N status reads answer 503; ``batch_create_lost`` = N makes
    the next N batch creates make the batch and drop the connection unanswered; per-request errors come from the
    queue or script (:meth:`Reply.error`) like direct ones. Batches are
    in :attr:`batches`, their requests in :attr:`requests` with ``batch_id`` set.
    """

    def __init__(
        self,
        script: Script | None = None,
        *,
        refuse_json_schema: bool = False,
        refusal_delay: float = 0.0,
        latency: Latency | None = None,
        rate_limit: RateLimit | None = None,
    ) -> None:
        self.script = script
        self.latency = latency
        self.rate_limit = rate_limit
        self.billed = 0  # replies a provider would bill (HTTP 200 with usage), direct and batched
        self.rate_limited = 0  # 429s answered by ``rate_limit``
        self._accepted: deque[float] = deque()  # arrival times of the requests the rate limit let through
        self.refuse_json_schema = refuse_json_schema
        self.refusal_delay = refusal_delay
        self.requests: list[RecordedRequest] = []
        self.min_cached_prefix_tokens = 1024
        self.anthropic_min_cache_tokens = 1024
        self.batch_polls = 1
        self.batch_expire_after: int | None = None
        self.batch_status_errors = 0  # the next status reads answer 503 (a transient fault while polling)
        self.batches: dict[str, ScriptedBatch] = {}
        self.files: dict[str, bytes] = {}
        self._ids = itertools.count(1)
        self._prefixes: set[str] = set()
        self._batch_lock = threading.RLock()  # batch state: one batch route at a time
        self._queue: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- scripting ---------------------------------------------------------------------------------------

    def push(self, *replies: Reply) -> None:
        """Queue replies to be used, in order, before the script function."""
        with self._lock:
            self._queue.extend(replies)

    def _next_reply(self, req: RecordedRequest) -> Reply:
        fmt = req.body.get("response_format")
        wants_schema = isinstance(fmt, dict) and fmt.get("type") == "json_schema"
        if self.refuse_json_schema and req.api == "openai" and wants_schema:
            with self._lock:
                self.requests.append(req)
            refused = Reply.error(400, message="response_format json_schema is not supported by this server")
            refused.delay = self.refusal_delay
            return refused
        unfit = _refused_by_model(req) if req.api == "openai" else None
        if unfit is not None:  # a parameter the model does not take: what OpenAI answers, no scripted reply used
            with self._lock:
                self.requests.append(req)
            return unfit
        with self._lock:
            self.requests.append(req)
            queued = self._queue.popleft() if self._queue else None
        if queued is not None:
            return queued
        if self.script is None:
            return Reply.error(500, message="the scripted server has no reply for this request")
        return self.script(req)

    def _admit(self, req: RecordedRequest) -> float | None:
        """None when the rate limit lets ``req`` through, else the seconds until it would (recorded, counted)."""
        limit = self.rate_limit
        if limit is None:
            return None
        with self._lock:
            now = req.received_at
            while self._accepted and self._accepted[0] <= now - limit.window:
                self._accepted.popleft()
            if len(self._accepted) < limit.requests_per_second:
                self._accepted.append(now)
                return None
            req.rate_limited = True
            self.requests.append(req)
            self.rate_limited += 1
            return max(0.0, self._accepted[0] + limit.window - now)

    def requests_for(self, api: Api) -> list[RecordedRequest]:
        return [r for r in self.requests if r.api == api]

    # -- prompt-cache emulation --------------------------------------------------------------------------

    def _cache_usage(self, req: RecordedRequest, reply: Reply) -> _CacheUsage:
        """What the provider's prompt cache would report for this request; remembers its prefixes."""
        total = _in_tokens(req, reply)
        if req.api == "openai":
            text = req.text
            namespace = json.dumps(["openai", req.model, req.body.get("response_format"), req.body.get("tools")])
            h = hashlib.sha256(namespace.encode())
            steps, done = [], 0
            tokens = self.min_cached_prefix_tokens
            while tokens * 4 <= len(text) and tokens > 0:
                h.update(text[done : tokens * 4].encode())
                done = tokens * 4
                steps.append((tokens, h.copy().hexdigest()))
                tokens += 128
            read = 0
            with self._lock:
                for tokens, digest in steps:
                    if digest not in self._prefixes:
                        break
                    read = tokens
                self._prefixes.update(d for _, d in steps)
            return _CacheUsage(read=min(read, total))
        namespace = json.dumps(["anthropic", req.model, req.body.get("tools")])
        prefixes = [
            (_tokens(p), hashlib.sha256((namespace + p).encode()).hexdigest())
            for p in _anthropic_breakpoints(req.body)
            if len(p) // 4 >= self.anthropic_min_cache_tokens
        ]
        if not prefixes:
            return _CacheUsage()
        with self._lock:
            read = max((t for t, d in prefixes if d in self._prefixes), default=0)
            self._prefixes.update(d for _, d in prefixes)
        last = max(t for t, _ in prefixes)
        read = min(read, total)
        return _CacheUsage(read=read, written=min(max(0, last - read), total - read))

    def _answer(self, req: RecordedRequest, reply: Reply) -> dict[str, Any]:
        cache = self._cache_usage(req, reply)
        body = _openai_body(req, reply, cache) if req.api == "openai" else _anthropic_body(req, reply, cache)
        req.reply_usage = body.get("usage")
        with self._lock:
            self.billed += 1
        return body

    def _answer_batched(self, batch: ScriptedBatch, body: dict[str, Any]) -> tuple[int | None, dict[str, Any]]:
        """One request of ``batch`` answered as a direct one would be: ``(None, response body)``, or
        ``(error status, error body)``."""
        path = "/v1/chat/completions" if batch.api == "openai" else "/v1/messages"
        req = RecordedRequest(api=batch.api, path=path, headers={}, body=body, batch_id=batch.id)
        reply = self._next_reply(req)
        if reply.kind in ("error", "malformed_body", "dropped"):
            status = reply.status if reply.kind == "error" else 500
            return status, _error_body(batch.api, status, reply.content, reply)
        return None, self._answer(req, reply)

    # -- lifecycle ---------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        assert self._httpd is not None, "server not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def openai_base_url(self) -> str:
        return self.url + "/v1"

    @property
    def anthropic_base_url(self) -> str:
        return self.url

    def start(self) -> ScriptedLLMServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms wait for a delayed ACK

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                with server._batch_lock:
                    status, payload, ctype = server._batch_get(self.path)
                if isinstance(payload, bytes):
                    self._send_raw(status, payload, ctype)
                else:
                    self._send(status, payload)

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                path = self.path.split("?", 1)[0]
                if path.endswith(("/v1/files", "/v1/batches", "/v1/messages/batches")):
                    headers = {k.lower(): v for k, v in self.headers.items()}
                    with server._batch_lock:
                        batch_status, batch_payload = server._batch_post(path, headers, raw)
                    if batch_status is None:  # a scripted fault: the reply is lost on the wire
                        self.close_connection = True
                        return
                    self._send(batch_status, batch_payload)
                    return
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    self._send(400, {"error": {"message": "request body is not JSON"}})
                    return
                api: Api
                if path.endswith("/chat/completions"):
                    api = "openai"
                elif path.endswith("/messages"):
                    api = "anthropic"
                else:
                    self._send(404, {"error": {"message": f"no route {path}"}})
                    return
                req = RecordedRequest(
                    api=api, path=path, headers=dict(self.headers.items()), body=body, received_at=time.monotonic()
                )
                wait = server._admit(req)
                if wait is not None:
                    limit = server.rate_limit
                    assert limit is not None
                    wait = limit.retry_after if limit.retry_after is not None else wait
                    message = f"rate limit reached: {limit.requests_per_second:g} requests per {limit.window:g} s"
                    retry = {"retry-after": str(math.ceil(wait)), "retry-after-ms": f"{wait * 1000:.0f}"}
                    self._send(429, _error_body(api, 429, message), retry)
                    return
                reply = server._next_reply(req)
                delay = reply.delay + (server.latency.seconds(raw) if server.latency is not None else 0.0)
                if delay and server._stopping.wait(delay):
                    return
                if reply.kind == "dropped":  # the request was read: the connection goes with no reply
                    self.close_connection = True
                elif reply.kind == "error":
                    self._send(reply.status, _error_body(api, reply.status, reply.content, reply), reply.headers)
                elif reply.kind == "malformed_body":
                    self._send_raw(200, reply.content.encode(), reply.headers.get("content-type", "application/json"))
                else:
                    self._send(200, server._answer(req, reply), reply.headers)

            def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
                self._send_raw(status, json.dumps(payload).encode(), "application/json", headers)

            def _send_raw(
                self, status: int, data: bytes, ctype: str, headers: Iterable[Any] | dict[str, str] | None = None
            ) -> None:
                try:
                    self.send_response(status)
                    self.send_header("content-type", ctype)
                    self.send_header("content-length", str(len(data)))
                    for k, v in dict(headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

        self._httpd = _Server(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="scripted-llm", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> ScriptedLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def prompt_name(req: RecordedRequest) -> str | None:
    """Which of groundjudge's prompts a request was rendered from (by its system text), if any."""
    from groundjudge.prompts import load_prompt

    system = req.messages[0]["content"] if req.messages and req.messages[0]["role"] == "system" else ""
    for name in ("claims", "claims_qa", "judge", "verify"):
        first_line = load_prompt(name).system.strip().splitlines()[0]
        if system.startswith(first_line):
            return name
    return None


def fenced_block(req: RecordedRequest, title: str) -> str:
    """The text of a fenced block ("ANSWER", "QUESTION", "CLAIMS", "QUESTIONS", "SOURCE 1", ...) in the latest user
    message that has one (a re-ask adds a correction after the message with the data), or "".

    The fence is the marker of the message's first ``BEGIN`` line, always the prompt's own (data only comes after
    one). The data never contains that marker, so blocks found by it are the prompt's: a fence the data imitates
    (``#GJDATA# END ANSWER`` in an answer fenced by another marker) stays part of the data."""
    import re

    for m in reversed(req.messages):
        if m["role"] != "user" or not (first := re.search(r"^(#\w+#) BEGIN ", m["content"], re.M)):
            continue
        fence, name = re.escape(first.group(1)), re.escape(title)
        if found := re.search(rf"^{fence} BEGIN {name}\n(.*?)\n{fence} END {name}$", m["content"], re.S | re.M):
            return found.group(1)
    return ""


def claims_in(req: RecordedRequest) -> dict[str, str]:
    """``{claim id: claim text}`` of a judge request."""
    import re

    return dict(re.findall(r"^\[(\w+)\] (.*)$", fenced_block(req, "CLAIMS"), re.M))


def sources_in(req: RecordedRequest) -> list[str]:
    """The source texts a judge or verify request shows, in order: its fenced SOURCE 1, SOURCE 2, ... blocks."""
    out: list[str] = []
    while block := fenced_block(req, f"SOURCE {len(out) + 1}"):  # "" once there is no such block
        out.append(block)
    return out


def questions_in(req: RecordedRequest) -> dict[str, str]:
    """``{question id: question}`` of a verify request (its fenced QUESTIONS block)."""
    listing = json.loads(fenced_block(req, "QUESTIONS") or "[]")
    return {str(q["id"]): str(q["question"]) for q in listing}


def questions_wanted(req: RecordedRequest) -> int:
    """How many verification questions a claims_qa request asks for (0 for any other request): read after the
    fenced ANSWER block with the prompt's own user template, so that a prompt edit never breaks the scripts and no
    text of the data is read."""
    import re

    from groundjudge.prompts import load_prompt

    if prompt_name(req) != "claims_qa":
        return 0
    before, _, after = load_prompt("claims_qa").user.split("{{answer}}", 1)[-1].partition("{{n}}")
    pattern = re.escape(before.strip()) + r"\s*(\d+)\s*" + re.escape(after.strip())
    for m in reversed(req.messages):
        if m["role"] != "user" or not (first := re.search(r"^(#\w+#) BEGIN ", m["content"], re.M)):
            continue
        tail = m["content"].rsplit(f"\n{first.group(1)} END ANSWER", 1)[-1]
        if found := re.search(pattern, tail):
            return int(found.group(1))
    return 0


def packed_requests(req: RecordedRequest) -> dict[str, RecordedRequest]:
    """The single-answer requests inside a packed request (``Config.pack_answers``), by the pack's id ("a1", ...),
    each as its own request (the system message and that block's text); {} for a request that is not packed. Blocks
    are found by the pack's own fence (the marker of the user message's first ``BEGIN REQUEST`` line, which no
    block's text contains), so a block that imitates another's fence or id stays part of its own text."""
    import re

    users = [m["content"] for m in req.messages if m["role"] == "user"]
    if not users or not (first := re.match(r"(#\w+#) BEGIN REQUEST a1\n", users[0])):
        return {}
    fence = re.escape(first.group(1))
    system = req.messages[0]["content"] if req.messages[0]["role"] == "system" else ""
    out: dict[str, RecordedRequest] = {}
    for m in re.finditer(rf"^{fence} BEGIN REQUEST (a\d+)\n(.*?)\n{fence} END REQUEST \1$", users[0], re.S | re.M):
        body = {k: v for k, v in req.body.items() if k != "system"}
        body["messages"] = [{"role": "system", "content": system}, {"role": "user", "content": m.group(2)}]
        out[m.group(1)] = RecordedRequest(api=req.api, path=req.path, headers=req.headers, body=body)
    return out


def answer_packed(req: RecordedRequest, script: Script) -> Reply | None:
    """A packed request answered block by block with ``script`` (None when ``req`` is not packed): the replies of
    the blocks whose reply is JSON, under their ids; an error reply for a block is the whole request's."""
    parts = packed_requests(req)
    if not parts:
        return None
    replies = []
    for pid, sub in parts.items():
        reply = script(sub)
        if reply.kind == "error":
            return reply
        if reply.obj is not None:
            replies.append({"id": pid, "reply": reply.obj})
    return Reply.json({"replies": replies})


def route(handlers: dict[str, Callable[[RecordedRequest], Reply]]) -> Script:
    """A script that dispatches on the prompt name (claims, claims_qa, judge, verify); a packed request
    (:func:`packed_requests`) is answered block by block."""

    def script(req: RecordedRequest) -> Reply:
        packed = answer_packed(req, script)
        if packed is not None:
            return packed
        name = prompt_name(req)
        if name is None or name not in handlers:
            return Reply.error(500, message=f"no scripted handler for prompt {name!r}")
        return handlers[name](req)

    return script
