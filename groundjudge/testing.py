"""A scripted LLM server on 127.0.0.1 for offline tests, speaking the OpenAI and Anthropic wire formats.

The real ``openai.OpenAI`` and ``anthropic.Anthropic`` clients talk real HTTP to it. Each request is recorded and
answered by the next queued :class:`Reply`, or else by the script function; replies can inject faults::

    with ScriptedLLMServer(lambda req: Reply.json({"verdict": "SUPPORTED"})) as server:
        server.push(Reply.error(429, retry_after=0.1), Reply.malformed_body())
        client = OpenAI(base_url=server.openai_base_url, api_key="test")

Routes: ``POST /v1/chat/completions`` (OpenAI) and ``POST /v1/messages`` (Anthropic). With
``refuse_json_schema=True`` the server behaves like an OpenAI-compatible server without structured outputs: every
OpenAI request with ``response_format`` json_schema gets HTTP 400 (after ``refusal_delay`` seconds) and uses up no
scripted reply. Refusals report their tokens, as real providers bill them.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal

Api = Literal["openai", "anthropic"]


@dataclass
class RecordedRequest:
    """One request as the server saw it."""

    api: Api
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

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
    def last_user(self) -> str:
        users = [m["content"] for m in self.messages if m["role"] == "user"]
        return users[-1] if users else ""


@dataclass
class Reply:
    """What the server does with one request."""

    kind: Literal["content", "refusal", "error", "malformed_body"] = "content"
    content: str = ""
    obj: Any = None
    finish: Literal["stop", "length", "content_filter"] = "stop"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    input_tokens: int | None = None
    output_tokens: int | None = None

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
    def error(cls, status: int, *, retry_after: float | None = None, message: str = "scripted error") -> Reply:
        headers = {"retry-after": f"{retry_after:g}"} if retry_after is not None else {}
        return cls(kind="error", status=status, headers=headers, content=message)

    @classmethod
    def malformed_body(cls) -> Reply:
        """HTTP 200 whose body is not JSON at all."""
        return cls(kind="malformed_body", content='{"id": "x", "choices": [')

    @classmethod
    def slow(cls, seconds: float, then: Reply | None = None) -> Reply:
        """Answer only after ``seconds`` (past the client's timeout, the client sees a timeout)."""
        base = then or cls.json({})
        base.delay = seconds
        return base


Script = Callable[[RecordedRequest], Reply]


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


def _openai_body(req: RecordedRequest, reply: Reply) -> dict[str, Any]:
    refusal = reply.content if reply.kind == "refusal" else None
    content = None if refusal else reply.content
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 0,
        "model": req.model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": refusal},
                "finish_reason": reply.finish,
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": _in_tokens(req, reply),
            "completion_tokens": _out_tokens(reply),
            "total_tokens": _in_tokens(req, reply) + _out_tokens(reply),
        },
    }


def _anthropic_body(req: RecordedRequest, reply: Reply) -> dict[str, Any]:
    tool_choice = req.body.get("tool_choice") or {}
    if reply.kind == "refusal" or reply.finish == "content_filter":
        content: list[dict[str, Any]] = [{"type": "text", "text": reply.content}] if reply.content else []
        stop = "refusal"
    elif reply.obj is not None and isinstance(reply.obj, dict) and tool_choice.get("type") == "tool":
        content = [{"type": "tool_use", "id": "toolu_scripted", "name": tool_choice["name"], "input": reply.obj}]
        stop = "tool_use"
    else:
        content = [{"type": "text", "text": reply.content}]
        stop = "max_tokens" if reply.finish == "length" else "end_turn"
    return {
        "id": "msg_scripted",
        "type": "message",
        "role": "assistant",
        "model": req.model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {
            "input_tokens": _in_tokens(req, reply),
            "output_tokens": _out_tokens(reply),
        },
    }


class ScriptedLLMServer:
    """A threaded HTTP server on a random port of 127.0.0.1; use as a context manager."""

    def __init__(
        self, script: Script | None = None, *, refuse_json_schema: bool = False, refusal_delay: float = 0.0
    ) -> None:
        self.script = script
        self.refuse_json_schema = refuse_json_schema
        self.refusal_delay = refusal_delay
        self.requests: list[RecordedRequest] = []
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
        with self._lock:
            self.requests.append(req)
            queued = self._queue.popleft() if self._queue else None
        if queued is not None:
            return queued
        if self.script is None:
            return Reply.error(500, message="the scripted server has no reply for this request")
        return self.script(req)

    def requests_for(self, api: Api) -> list[RecordedRequest]:
        return [r for r in self.requests if r.api == api]

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

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    self._send(400, {"error": {"message": "request body is not JSON"}})
                    return
                path = self.path.split("?", 1)[0]
                api: Api
                if path.endswith("/chat/completions"):
                    api = "openai"
                elif path.endswith("/messages"):
                    api = "anthropic"
                else:
                    self._send(404, {"error": {"message": f"no route {path}"}})
                    return
                req = RecordedRequest(api=api, path=path, headers=dict(self.headers.items()), body=body)
                reply = server._next_reply(req)
                if reply.delay and server._stopping.wait(reply.delay):
                    return
                if reply.kind == "error":
                    message = reply.content
                    payload: dict[str, Any]
                    if api == "anthropic":
                        payload = {"type": "error", "error": {"type": _error_type(reply.status), "message": message}}
                    else:
                        payload = {"error": {"message": message, "type": _error_type(reply.status), "code": None}}
                    self._send(reply.status, payload, reply.headers)
                elif reply.kind == "malformed_body":
                    self._send_raw(200, reply.content.encode(), "application/json")
                else:
                    body_out = _openai_body(req, reply) if api == "openai" else _anthropic_body(req, reply)
                    self._send(200, body_out, reply.headers)

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

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
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
    """The text of a fenced block (e.g. "CLAIMS", "SOURCE 1") in the latest user message that has one (a re-ask
    adds a correction after the message with the data)."""
    import re

    pattern = re.compile(rf"^(#\w+#) BEGIN {re.escape(title)}\n(.*?)\n\1 END {re.escape(title)}$", re.S | re.M)
    for m in reversed(req.messages):
        if m["role"] == "user" and (found := pattern.search(m["content"])):
            return found.group(2)
    return ""


def claims_in(req: RecordedRequest) -> dict[str, str]:
    """``{claim id: claim text}`` of a judge request."""
    import re

    return dict(re.findall(r"^\[(\w+)\] (.*)$", fenced_block(req, "CLAIMS"), re.M))


def route(handlers: dict[str, Callable[[RecordedRequest], Reply]]) -> Script:
    """A script that dispatches on the prompt name (claims, claims_qa, judge, verify)."""

    def script(req: RecordedRequest) -> Reply:
        name = prompt_name(req)
        if name is None or name not in handlers:
            return Reply.error(500, message=f"no scripted handler for prompt {name!r}")
        return handlers[name](req)

    return script


def tiny_nli_model(
    directory: str | Path,
    tokenizer_from: str | Path,
    id2label: dict[int, str] | None = None,
    seed: int = 0,
    permute: list[int] | None = None,
) -> Path:
    """Save a randomly initialised 2-layer BERT NLI model (with a real tokenizer) for fast offline tests.

    ``permute`` reorders the classifier's output rows (to test that label order is read from the config).
    Its outputs are meaningless but deterministic and far from uniform.
    """
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    labels = id2label or {0: "entailment", 1: "neutral", 2: "contradiction"}
    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_from), local_files_only=True)
    torch.manual_seed(seed)
    config = BertConfig(  # type: ignore[call-arg]  # num_labels etc. go through **kwargs to PretrainedConfig
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        initializer_range=0.5,  # far from uniform outputs, so that a padding or ordering bug shows
        num_labels=len(labels),
        id2label=labels,
        label2id={v: k for k, v in labels.items()},
    )
    model = BertForSequenceClassification(config).eval()
    if permute is not None:  # output row i of the new head = row permute[i] of the seed's head
        with torch.no_grad():
            model.classifier.weight.copy_(model.classifier.weight[permute].clone())
            model.classifier.bias.copy_(model.classifier.bias[permute].clone())
    model.save_pretrained(str(directory))
    tokenizer.save_pretrained(str(directory))
    return Path(directory)
