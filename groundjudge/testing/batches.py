"""The batch APIs of both providers, emulated for :class:`~groundjudge.testing.server.ScriptedLLMServer`.

OpenAI: ``POST /v1/files``, ``GET /v1/files/{id}/content``, ``POST /v1/batches`` (with ``metadata``),
``GET /v1/batches/{id}``, ``GET /v1/batches`` (newest first, ``limit`` and the ``after`` cursor); Anthropic:
``POST /v1/messages/batches``, ``GET /v1/messages/batches/{id}`` and its ``results_url``, ``GET
/v1/messages/batches`` (newest first, ``limit``, ``after_id`` / ``before_id``). A batch ends after ``batch_polls``
status reads (a listing is not a status read); its requests are then answered one by one as the server answers
direct ones (the queue, then the script), which the server provides as :meth:`BatchRoutes._answer_batched`.
``created_at`` is the real creation time. Faults: ``batch_create_lost`` = N makes the next N creates make the batch
(the provider has it and bills it) and then close the connection without a reply, as a reply lost on the wire;
``batch_results_errors`` = N makes the next N reads of an ended batch's results (OpenAI: its output or error file)
answer 503; ``batch_list_hides`` = N makes the next N listings of batches answer an empty page (a listing that lags
behind the creates).
"""

from __future__ import annotations

import email.parser
import itertools
import json
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import parse_qs

_ANTHROPIC_CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


@dataclass
class ScriptedBatch:
    """One batch the server holds: its requests ``(custom_id, body)``, polls so far, and results once ended."""

    id: str
    api: Literal["openai", "anthropic"]
    requests: list[tuple[str, dict[str, Any]]]
    input_file_id: str | None = None
    polls: int = 0
    ended: bool = False
    expired: bool = False
    # OpenAI: output and error file lines; Anthropic: result lines.
    output_lines: list[dict[str, Any]] = field(default_factory=list)
    error_lines: list[dict[str, Any]] = field(default_factory=list)
    output_file_id: str | None = None
    error_file_id: str | None = None
    created_at: float = field(default_factory=time.time)
    metadata: dict[str, str] | None = None


class BatchRoutes:
    """The batch routes of :class:`~groundjudge.testing.server.ScriptedLLMServer` (a mixin).

    The server sets the state below in its ``__init__`` and routes batch requests to :meth:`_batch_post` and
    :meth:`_batch_get`, one at a time.
    """

    batch_polls: int
    batch_expire_after: int | None
    batch_status_errors: int
    batch_create_lost: int = 0  # the next N creates make the batch and lose the reply (class default)
    batch_results_errors: int = 0  # the next N reads of an ended batch's results (or output file) answer 503
    batch_list_hides: int = 0  # the next N listings of batches answer an empty page (a listing lagging behind)
    batches: dict[str, ScriptedBatch]
    files: dict[str, bytes]
    _ids: itertools.count[int]
    _lock: threading.Lock

    @property
    def url(self) -> str:
        raise NotImplementedError

    def _answer_batched(self, batch: ScriptedBatch, body: dict[str, Any]) -> tuple[int | None, dict[str, Any]]:
        """One request of ``batch`` answered as a direct one would be: ``(None, response body)``, or
        ``(error status, error body)``."""
        raise NotImplementedError

    def _new_id(self, prefix: str) -> str:
        with self._lock:
            return f"{prefix}{next(self._ids):06d}"

    def _end_batch(self, batch: ScriptedBatch) -> None:
        """Answer a batch's requests with the queue and script, as direct requests are answered."""
        expire_after = self.batch_expire_after
        for i, (custom_id, body) in enumerate(batch.requests):
            line_id = f"batch_req_{batch.id}_{i}"
            if expire_after is not None and i >= expire_after:
                batch.expired = True
                if batch.api == "openai":
                    error = {
                        "code": "batch_expired",
                        "message": "This request could not be executed before the completion window expired.",
                    }
                    batch.error_lines.append({"id": line_id, "custom_id": custom_id, "response": None, "error": error})
                else:
                    batch.output_lines.append({"custom_id": custom_id, "result": {"type": "expired"}})
                continue
            status, answer = self._answer_batched(batch, body)
            if status is not None:
                if batch.api == "openai":
                    response = {"status_code": status, "request_id": line_id, "body": answer}
                    batch.error_lines.append(
                        {"id": line_id, "custom_id": custom_id, "response": response, "error": None}
                    )
                else:
                    batch.output_lines.append({"custom_id": custom_id, "result": {"type": "errored", "error": answer}})
                continue
            if batch.api == "openai":
                response = {"status_code": 200, "request_id": line_id, "body": answer}
                batch.output_lines.append({"id": line_id, "custom_id": custom_id, "response": response, "error": None})
            else:
                batch.output_lines.append({"custom_id": custom_id, "result": {"type": "succeeded", "message": answer}})
        if batch.api == "openai":
            for lines, attr in ((batch.output_lines, "output_file_id"), (batch.error_lines, "error_file_id")):
                if lines:
                    file_id = self._new_id("file-out")
                    self.files[file_id] = "".join(json.dumps(x) + "\n" for x in lines).encode()
                    setattr(batch, attr, file_id)
        batch.ended = True

    def _poll(self, batch: ScriptedBatch) -> None:
        batch.polls += 1
        if not batch.ended and batch.polls > self.batch_polls:
            self._end_batch(batch)

    def _openai_batch_object(self, batch: ScriptedBatch) -> dict[str, Any]:
        done = len(batch.output_lines) if batch.ended else 0
        failed = len(batch.error_lines) if batch.ended else 0
        status = "in_progress" if not batch.ended else ("expired" if batch.expired else "completed")
        return {
            "id": batch.id,
            "object": "batch",
            "endpoint": "/v1/chat/completions",
            "errors": None,
            "input_file_id": batch.input_file_id,
            "completion_window": "24h",
            "status": status,
            "output_file_id": batch.output_file_id,
            "error_file_id": batch.error_file_id,
            "created_at": int(batch.created_at),
            "in_progress_at": int(batch.created_at) + 1,
            "expires_at": int(batch.created_at) + 86_400,
            "completed_at": int(batch.created_at) + 100 if batch.ended and not batch.expired else None,
            "expired_at": int(batch.created_at) + 86_400 if batch.expired else None,
            "request_counts": {"total": len(batch.requests), "completed": done, "failed": failed},
            "metadata": batch.metadata,
        }

    def _anthropic_batch_object(self, batch: ScriptedBatch) -> dict[str, Any]:
        counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        if batch.ended:
            for line in batch.output_lines:
                counts[line["result"]["type"]] += 1
        else:
            counts["processing"] = len(batch.requests)
        return {
            "id": batch.id,
            "type": "message_batch",
            "processing_status": "ended" if batch.ended else "in_progress",
            "request_counts": counts,
            "created_at": _iso(batch.created_at),
            "expires_at": _iso(batch.created_at + 86_400),
            "ended_at": _iso(batch.created_at + 3600) if batch.ended else None,
            "archived_at": None,
            "cancel_initiated_at": None,
            "results_url": f"{self.url}/v1/messages/batches/{batch.id}/results" if batch.ended else None,
        }

    def _batch_post(self, path: str, headers: dict[str, str], raw: bytes) -> tuple[int | None, Any]:
        """POST /v1/files, /v1/batches, /v1/messages/batches: (status, payload); status None: send no reply."""
        status, payload = self._batch_create(path, headers, raw)
        if status == 200 and payload.get("object") != "file" and self.batch_create_lost > 0:
            self.batch_create_lost -= 1
            return None, payload  # the batch exists; its id never reaches the client
        return status, payload

    def _batch_create(self, path: str, headers: dict[str, str], raw: bytes) -> tuple[int, Any]:
        if path.endswith("/v1/files"):
            message = email.parser.BytesParser().parsebytes(
                b"content-type: " + headers.get("content-type", "").encode() + b"\r\n\r\n" + raw
            )
            fields: dict[str, tuple[str | None, bytes]] = {}
            for part in message.walk() if message.is_multipart() else []:
                name = part.get_param("name", header="content-disposition")
                if name:
                    payload = part.get_payload(decode=True)
                    fields[str(name)] = (part.get_filename(), payload if isinstance(payload, bytes) else b"")
            if "file" not in fields:
                return 400, {"error": {"message": "no file in the upload", "type": "invalid_request_error"}}
            purpose = fields.get("purpose", (None, b""))[1].decode()
            file_id = self._new_id("file-")
            self.files[file_id] = fields["file"][1]
            return 200, {
                "id": file_id,
                "object": "file",
                "bytes": len(fields["file"][1]),
                "created_at": 1_700_000_000,
                "filename": fields["file"][0] or "upload.jsonl",
                "purpose": purpose,
                "status": "processed",
            }
        body = json.loads(raw or b"{}")
        if path.endswith("/v1/batches"):
            content = self.files.get(str(body.get("input_file_id")))
            if content is None:
                return 404, {"error": {"message": "no such file", "type": "invalid_request_error"}}
            lines = [json.loads(line) for line in content.decode().splitlines() if line.strip()]
            ids = [line["custom_id"] for line in lines]
            if len(set(ids)) != len(ids) or body.get("endpoint") != "/v1/chat/completions":
                return 400, {
                    "error": {"message": "duplicate custom_id or wrong endpoint", "type": "invalid_request_error"}
                }
            metadata = body.get("metadata")
            if metadata is not None and not _valid_metadata(metadata):
                why = "metadata: at most 16 pairs, string keys up to 64 and values up to 512 characters"
                return 400, {"error": {"message": why, "type": "invalid_request_error"}}
            batch = ScriptedBatch(
                id=self._new_id("batch_"),
                api="openai",
                requests=[(line["custom_id"], line["body"]) for line in lines],
                input_file_id=body["input_file_id"],
                metadata=metadata,
            )
            self.batches[batch.id] = batch
            return 200, self._openai_batch_object(batch)
        # Anthropic
        requests = body.get("requests") or []
        ids = [r.get("custom_id", "") for r in requests]
        if not requests or len(set(ids)) != len(ids) or not all(_ANTHROPIC_CUSTOM_ID.match(i) for i in ids):
            error = {
                "type": "invalid_request_error",
                "message": "custom_id must be unique and match ^[a-zA-Z0-9_-]{1,64}$",
            }
            return 400, {"type": "error", "error": error}
        batch = ScriptedBatch(
            id=self._new_id("msgbatch_"), api="anthropic", requests=[(r["custom_id"], r["params"]) for r in requests]
        )
        self.batches[batch.id] = batch
        return 200, self._anthropic_batch_object(batch)

    def _batch_list(self, api: str, query: dict[str, list[str]]) -> tuple[int, Any, str]:
        """A page of one API's batches, newest first, as the real list endpoints page them."""
        arg = {k: v[-1] for k, v in query.items()}
        limit = int(arg.get("limit", "20"))
        if not 1 <= limit <= (100 if api == "openai" else 1000):
            return (
                400,
                {"error": {"message": "limit out of range", "type": "invalid_request_error"}},
                "application/json",
            )
        ids = [b.id for b in sorted(self.batches.values(), key=lambda b: (-b.created_at, b.id)) if b.api == api]
        if self.batch_list_hides > 0:
            self.batch_list_hides -= 1
            ids = []
        if after := arg.get("after") or arg.get("after_id"):
            ids = ids[ids.index(after) + 1 :] if after in ids else []
        if before := arg.get("before_id"):
            ids = ids[: ids.index(before)] if before in ids else []
            page = ids[-limit:]
            more = len(ids) > limit
        else:
            page = ids[:limit]
            more = len(ids) > limit
        make = self._openai_batch_object if api == "openai" else self._anthropic_batch_object
        data = [make(self.batches[i]) for i in page]
        payload: dict[str, Any] = {"data": data, "has_more": more, "first_id": page[0] if page else None}
        payload["last_id"] = page[-1] if page else None
        if api == "openai":
            payload["object"] = "list"
        return 200, payload, "application/json"

    def _batch_status(self, api: str, batch_id: str) -> tuple[int, Any, str] | None:
        """A batch of ``api`` as its status route shows it, polled first; None: no such batch of that API."""
        batch = self.batches.get(batch_id)
        if batch is None or batch.api != api:
            return None
        self._poll(batch)
        make = self._openai_batch_object if api == "openai" else self._anthropic_batch_object
        return 200, make(batch), "application/json"

    def _batch_get(self, target: str) -> tuple[int, Any, str]:
        """GET routes of the batch APIs: (status, payload (bytes for files and results), content type)."""
        path, _, query = target.partition("?")
        if path.endswith("/v1/batches"):
            return self._batch_list("openai", parse_qs(query))
        if path.endswith("/v1/messages/batches"):
            return self._batch_list("anthropic", parse_qs(query))
        not_found = (404, {"error": {"message": f"no route {path}", "type": "not_found_error"}}, "application/json")
        fault = (503, {"error": {"message": "scripted results fault", "type": "api_error"}}, "application/json")
        if m := re.fullmatch(r"/v1/files/([^/]+)/content", path):
            if self.batch_results_errors > 0 and m.group(1).startswith("file-out"):
                self.batch_results_errors -= 1
                return fault
            data = self.files.get(m.group(1))
            return (200, data, "application/octet-stream") if data is not None else not_found
        if self.batch_status_errors > 0 and re.fullmatch(r"/v1/(messages/)?batches/[^/]+", path):
            self.batch_status_errors -= 1
            return 503, {"error": {"message": "scripted status fault", "type": "api_error"}}, "application/json"
        if m := re.fullmatch(r"/v1/batches/([^/]+)", path):
            return self._batch_status("openai", m.group(1)) or not_found
        if m := re.fullmatch(r"/v1/messages/batches/([^/]+)/results", path):
            batch = self.batches.get(m.group(1))
            if batch is None or not batch.ended:
                return not_found
            if self.batch_results_errors > 0:
                self.batch_results_errors -= 1
                return fault
            return 200, "".join(json.dumps(x) + "\n" for x in batch.output_lines).encode(), "application/binary"
        if m := re.fullmatch(r"/v1/messages/batches/([^/]+)", path):
            return self._batch_status("anthropic", m.group(1)) or not_found
        return not_found


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1e6):06d}Z"


def _valid_metadata(metadata: Any) -> bool:
    """OpenAI's rule: at most 16 pairs, string keys of at most 64 and string values of at most 512 characters."""
    return (
        isinstance(metadata, dict)
        and len(metadata) <= 16
        and all(
            isinstance(k, str) and len(k) <= 64 and isinstance(v, str) and len(v) <= 512 for k, v in metadata.items()
        )
    )
