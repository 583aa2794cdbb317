"""The providers' batch APIs for offline runs: half price, results within a day, answered into the same cache.

Collect the calls a stage would make with :meth:`LLMClient.deferring`, then::

    outcome = BatchRunner(client, "out.jsonl.batches.json", progress=bar).run(deferred)

The runner writes the requests in the provider's batch format, with the same body the direct path sends
(OpenAI: a JSONL file uploaded with ``purpose="batch"``, then a batch on ``/v1/chat/completions`` with a 24 h
window; Anthropic: one Message Batch), and writes the batch ids and the cache keys they cover to ``state_path``
(atomically) before it polls. A rerun with the same calls finds them there and collects those batches instead of
submitting (and paying for) the same requests again. Each result is parsed like a direct response, validated with
the call's schema and check, and cached under the call's key exactly as the direct path would; its usage is
counted in the client's ledger at the batch price. Failures (errored, expired, canceled, refused, invalid JSON,
failed check) are not cached; they are in :attr:`BatchOutcome.failures` for the caller to call directly.

A resumed batch may hold results for keys this run did not defer (an earlier run deferred more). Their schema and
check are unknown here, so they are not cached: their raw response bodies are kept in a side file beside the state
file (``<state>.results.jsonl``, rewritten atomically), and the state entry lists them under ``kept``. A later run
that defers one of those keys takes its result from there (validated, cached, counted in the ledger) instead of
asking (and paying) again.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from groundjudge import errors
from groundjudge.llm.base import LLMResponse, map_sdk_error
from groundjudge.llm.client import DeferredCall, LLMClient
from groundjudge.models import Usage

log = logging.getLogger(__name__)

STATE_VERSION = 1
# Per batch: OpenAI takes 50,000 requests and a 200 MB file, Anthropic 100,000 requests and 256 MB.
_LIMITS = {"openai": (50_000, 190 * 2**20), "anthropic": (100_000, 240 * 2**20)}


@dataclass
class BatchOutcome:
    """What a :meth:`BatchRunner.run` did, in requests (distinct cache keys).

    ``submitted``: sent in new batches by this run; ``resumed``: covered by batches an earlier run submitted;
    ``already_cached``: in the cache before the run, not sent. Of the rest, ``succeeded`` were cached, ``failed``
    errored, were canceled, refused or invalid, and ``expired`` were not answered before the batch expired; every
    key not cached is in ``failures`` with the reason. ``usage`` is what the results cost, at the batch price;
    ``usage_by_key`` is the same split by cache key (each accepted or failed result that was billed), so that a
    caller can charge each answer its share.
    """

    submitted: int = 0
    succeeded: int = 0
    failed: int = 0
    expired: int = 0
    resumed: int = 0
    already_cached: int = 0
    usage: Usage = field(default_factory=Usage)
    usage_by_key: dict[str, Usage] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    batch_ids: list[str] = field(default_factory=list)


@dataclass
class _Status:
    ended: bool
    done: int
    raw: Any


class BatchRunner:
    """Send deferred calls through the provider's batch API, resumably; see the module docstring.

    ``poll_seconds`` between status reads, through ``sleep``; ``progress(done, total)`` after each round of reads;
    after ``max_wait_seconds`` of waiting, :class:`~groundjudge.errors.BatchPendingError` (the batch keeps
    running and a rerun collects it).
    """

    def __init__(
        self,
        client: LLMClient,
        state_path: str | Path,
        *,
        poll_seconds: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
        progress: Callable[[int, int], None] | None = None,
        max_wait_seconds: float = 24 * 3600,
    ) -> None:
        self.client = client
        self.state_path = Path(state_path)
        self.results_path = self.state_path.with_suffix(".results.jsonl")
        self._kept: dict[str, dict[str, Any]] = {}
        self.poll_seconds = poll_seconds
        self.sleep = sleep
        self.progress = progress
        self.max_wait_seconds = max_wait_seconds
        provider = client.provider
        self.api = str(getattr(provider, "batch_api", "") or "")
        if self.api not in ("openai", "anthropic"):
            raise errors.ConfigError(f"{client.model_id} has no batch API (only openai/ and anthropic/ models do)")
        if client.cache is None or not client.cache.writes:
            raise errors.ConfigError("batch results are read into the cache: the client needs a writable cache")

    # -- state ----------------------------------------------------------------------------------------------

    def _load(self) -> dict[str, Any]:
        if not self.state_path.exists():
            return {"version": STATE_VERSION, "batches": []}
        try:
            state = json.loads(self.state_path.read_text())
            if not isinstance(state, dict) or not isinstance(state.get("batches"), list):
                raise ValueError("no batches list")
        except (OSError, ValueError) as exc:
            raise errors.ConfigError(
                f"batch state file {self.state_path} is unreadable ({exc}); it lists batches already paid for: "
                "fix or move it before running again"
            ) from exc
        return state

    def _save(self, state: dict[str, Any]) -> None:
        """Write the state atomically: a temporary file beside it, flushed, then renamed over it."""
        state = {**state, "batches": [{k: v for k, v in e.items() if k != "fresh"} for e in state["batches"]]}
        _write_atomically(self.state_path, json.dumps(state, indent=1))

    def _load_kept(self) -> dict[str, dict[str, Any]]:
        """The kept results by cache key: ``{"batch", "custom_id", "key", "body"}`` per line of the side file."""
        if not self.results_path.exists():
            return {}
        try:
            text = self.results_path.read_text()
        except OSError as exc:
            raise errors.ConfigError(
                f"batch results file {self.results_path} is unreadable ({exc}); it holds results already paid for: "
                "fix or move it before running again"
            ) from exc
        kept: dict[str, dict[str, Any]] = {}
        for raw in text.splitlines():
            try:
                line = json.loads(raw)
                kept[str(line["key"])] = line
            except (ValueError, KeyError, TypeError):
                log.warning("%s: a kept result line is unreadable, skipped: %.200s", self.results_path, raw)
        return kept

    def _save_kept(self) -> None:
        """Rewrite the side file atomically with the results still kept (removed when none are)."""
        if not self._kept:
            self.results_path.unlink(missing_ok=True)
            return
        lines = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in self._kept.values())
        _write_atomically(self.results_path, lines)

    # -- the run --------------------------------------------------------------------------------------------

    def run(self, calls: Sequence[DeferredCall]) -> BatchOutcome:
        """Answer ``calls`` into the cache through batches; see :class:`BatchOutcome` for what is reported."""
        client, cache = self.client, self.client.cache
        assert cache is not None
        outcome = BatchOutcome()
        pending: dict[str, DeferredCall] = {}
        for call in calls:
            if call.key in pending:
                continue
            if cache.peek(call.key):
                outcome.already_cached += 1
                continue
            pending[call.key] = call
        state = self._load()
        self._kept = self._load_kept()
        identity = client.provider.identity()
        live: list[dict[str, Any]] = []
        covered: set[str] = set()
        kept_taken = False
        for entry in state["batches"]:
            if entry.get("identity") != identity:
                continue
            keys = set(entry["custom_ids"].values()) & (set(pending) - covered)
            if not keys:
                continue
            covered |= keys
            outcome.resumed += len(keys)
            outcome.batch_ids.append(entry["id"])
            if entry.get("collected"):
                for key in sorted(keys):
                    line = self._kept.get(key)
                    if key in entry.get("kept", ()) and line is not None and line.get("batch") == entry["id"]:
                        # answered for an earlier run that did not ask for it: take it now, already paid for
                        usage = self._take(entry, key, pending[key], line.get("body"), outcome)
                        self.client.ledger.record(usage)
                        outcome.usage = outcome.usage + usage
                        del self._kept[key]
                        entry["kept"] = [k for k in entry["kept"] if k != key]
                        kept_taken = True
                        continue
                    # answered or failed in an earlier run; not cached now, so failed then
                    why = entry.get("failures", {}).get(key, f"batch {entry['id']} answered it, but it is not cached")
                    if key in entry.get("kept", ()):
                        why = f"batch {entry['id']} answered it, but its kept result is not in {self.results_path}"
                    self._fail(outcome, key, why)
            else:
                live.append(entry)
        if kept_taken:
            self._save(state)  # cached first, then the state, then the side file: a crash never loses a result
            self._save_kept()
        new = [call for key, call in pending.items() if key not in covered]
        reserved = sum(client.worst_case_cost(call.request, batch=True) for call in new)
        if new:
            client.ledger.reserve(reserved, calls=len(new))  # the whole batch's worst case, before submitting
        fresh_usage = Usage()
        try:
            for chunk in self._chunks(new):
                entry = self._submit(chunk, identity)
                state["batches"].append(entry)
                self._save(state)  # before polling: a crash from here on resumes this batch
                entry["fresh"] = True
                live.append(entry)
                outcome.submitted += len(chunk)
                outcome.batch_ids.append(entry["id"])
            fresh_usage = self._wait_and_collect(live, pending, outcome, state)
        finally:
            if new:
                client.ledger.settle(reserved, fresh_usage, calls=len(new))
        return outcome

    def _fail(self, outcome: BatchOutcome, key: str, why: str, *, expired: bool = False) -> None:
        outcome.failures[key] = why
        if expired:
            outcome.expired += 1
        else:
            outcome.failed += 1

    def _chunks(self, calls: list[DeferredCall]) -> Iterator[list[DeferredCall]]:
        max_n, max_bytes = _LIMITS[self.api]
        chunk: list[DeferredCall] = []
        size = 0
        for call in calls:
            n = len(json.dumps(self._params(call)).encode()) + 200
            if chunk and (len(chunk) >= max_n or size + n > max_bytes):
                yield chunk
                chunk, size = [], 0
            chunk.append(call)
            size += n
        if chunk:
            yield chunk

    def _params(self, call: DeferredCall) -> dict[str, Any]:
        build: Callable[..., dict[str, Any]] = self.client.provider.build_params  # type: ignore[attr-defined]
        return build(call.request)

    def _custom_id(self, key: str) -> str:
        # Anthropic custom ids are at most 64 of [a-zA-Z0-9_-]: the key's hash without the "llm:" namespace.
        return key.rpartition(":")[2][:64] if self.api == "anthropic" else key

    def _sdk_call(self, what: str, fn: Callable[[], Any]) -> Any:
        """Call the SDK, mapping its errors to groundjudge's typed errors (``retryable`` as for direct calls)."""
        sdk_module: Any
        if self.api == "openai":
            import openai as sdk_module

            base = sdk_module.OpenAIError
        else:
            import anthropic as sdk_module

            base = sdk_module.AnthropicError
        try:
            return fn()
        except (base, json.JSONDecodeError) as exc:
            mapped = map_sdk_error(exc, sdk_module, self.client.provider.name)
            if mapped is None:
                raise errors.LLMError(f"{self.client.model_id}: batch {what}: {exc}") from exc
            mapped.args = (f"batch {what}: {mapped.args[0] if mapped.args else exc}",)
            raise mapped from exc

    def _submit(self, chunk: list[DeferredCall], identity: dict[str, Any]) -> dict[str, Any]:
        sdk: Any = self.client.provider.sdk  # type: ignore[attr-defined]
        ids = {self._custom_id(call.key): call.key for call in chunk}
        if self.api == "openai":
            lines = "".join(
                json.dumps(
                    {
                        "custom_id": self._custom_id(call.key),
                        "method": "POST",
                        "url": "/v1/chat/completions",
                        "body": self._params(call),
                    },
                    ensure_ascii=False,
                )
                + "\n"
                for call in chunk
            ).encode()
            upload = self._sdk_call(
                "upload",
                lambda: sdk.files.create(file=("groundjudge-batch.jsonl", lines, "application/jsonl"), purpose="batch"),
            )
            batch = self._sdk_call(
                "create",
                lambda: sdk.batches.create(
                    input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h"
                ),
            )
        else:
            requests = [{"custom_id": self._custom_id(call.key), "params": self._params(call)} for call in chunk]
            batch = self._sdk_call("create", lambda: sdk.messages.batches.create(requests=requests))
        log.info("%s: submitted batch %s with %d requests", self.client.model_id, batch.id, len(chunk))
        return {
            "id": batch.id,
            "api": self.api,
            "identity": identity,
            "custom_ids": ids,
            "submitted_at": time.time(),
            "collected": False,
            "failures": {},
        }

    def _status(self, entry: dict[str, Any]) -> _Status:
        sdk: Any = self.client.provider.sdk  # type: ignore[attr-defined]
        if self.api == "openai":
            batch = self._sdk_call("status", lambda: sdk.batches.retrieve(entry["id"]))
            counts = batch.request_counts
            done = (counts.completed + counts.failed) if counts is not None else 0
            ended = batch.status in ("completed", "expired", "cancelled", "failed")
            return _Status(ended=ended, done=done, raw=batch)
        batch = self._sdk_call("status", lambda: sdk.messages.batches.retrieve(entry["id"]))
        c = batch.request_counts
        return _Status(
            ended=batch.processing_status == "ended",
            done=c.succeeded + c.errored + c.canceled + c.expired,
            raw=batch,
        )

    def _wait_and_collect(
        self,
        live: list[dict[str, Any]],
        pending: dict[str, DeferredCall],
        outcome: BatchOutcome,
        state: dict[str, Any],
    ) -> Usage:
        """Poll every live batch until all ended, collecting each as it ends; returns the fresh batches' usage."""
        fresh_usage = Usage()
        total = sum(len(entry["custom_ids"]) for entry in live)
        waited = 0.0
        while True:
            done, running = 0, []
            for entry in live:
                if entry.get("collected"):
                    done += len(entry["custom_ids"])
                    continue
                try:
                    status = self._status(entry)
                except errors.GroundjudgeError as exc:
                    if not exc.retryable:
                        raise
                    log.warning("batch %s: status unknown (%s); polling again", entry["id"], exc)
                    running.append(entry)
                    continue
                if not status.ended:
                    done += status.done
                    running.append(entry)
                    continue
                usage = self._collect(entry, status.raw, pending, outcome)
                if entry.get("fresh"):
                    fresh_usage = fresh_usage + usage
                else:
                    self.client.ledger.record(usage)  # paid when an earlier run submitted it
                outcome.usage = outcome.usage + usage
                entry["collected"] = True
                self._save(state)
                done += len(entry["custom_ids"])
            if self.progress is not None:
                self.progress(done, total)
            if not running:
                return fresh_usage
            if waited >= self.max_wait_seconds:
                ids = [e["id"] for e in running]
                raise errors.BatchPendingError(
                    f"{self.client.model_id}: batch {', '.join(ids)} still running after {waited:g} s; it keeps "
                    f"running and the next run with the same state file ({self.state_path}) collects it",
                    batch_ids=ids,
                    state_path=str(self.state_path),
                )
            self.sleep(self.poll_seconds)
            waited += self.poll_seconds

    def _collect(
        self, entry: dict[str, Any], batch: Any, pending: dict[str, DeferredCall], outcome: BatchOutcome
    ) -> Usage:
        """Read an ended batch's results into the cache; record failures in the outcome and in ``entry``."""
        usage = Usage()
        seen: set[str] = set()
        entry.setdefault("failures", {})
        kept: list[str] = []

        def fail(key: str, why: str, expired: bool = False) -> None:
            entry["failures"][key] = why
            if key in pending:  # a key not asked for is only noted, for the run that asks for it
                self._fail(outcome, key, why, expired=expired)

        for custom_id, kind, payload in self._results(entry, batch):
            key = entry["custom_ids"].get(custom_id)
            if key is None or key in seen:
                continue
            seen.add(key)
            if kind != "succeeded":
                fail(key, str(payload), expired=kind == "expired")
            elif key in pending:
                usage = usage + self._take(entry, key, pending[key], payload, outcome)
            else:  # covered by this batch but not asked for in this run: keep the body for the run that asks
                body = payload.model_dump(mode="json") if hasattr(payload, "model_dump") else payload
                self._kept[key] = {"batch": entry["id"], "custom_id": custom_id, "key": key, "body": body}
                kept.append(key)
        status = getattr(batch, "status", None) or getattr(batch, "processing_status", "")
        for key in set(entry["custom_ids"].values()) - seen:
            fail(key, f"batch {entry['id']} ended ({status}) without a result for it", expired=status == "expired")
        if kept:
            entry["kept"] = sorted(kept)
            self._save_kept()  # before the state marks the batch collected
        return usage

    def _take(self, entry: dict[str, Any], key: str, call: DeferredCall, body: Any, outcome: BatchOutcome) -> Usage:
        """Parse, validate, check and cache one result for ``call``; what it cost (also in ``usage_by_key``)."""
        try:
            parsed: LLMResponse = self.client.provider.parse_response(body)  # type: ignore[attr-defined]
        except (errors.GroundjudgeError, ValidationError) as exc:
            why = f"the result is not a valid response: {exc}"
            entry.setdefault("failures", {})[key] = why
            self._fail(outcome, key, why)
            return Usage()
        usage, problem = self.client.accept_batch_result(call, parsed)
        outcome.usage_by_key[key] = outcome.usage_by_key.get(key, Usage()) + usage
        if problem is None:
            outcome.succeeded += 1
        else:
            entry.setdefault("failures", {})[key] = problem
            self._fail(outcome, key, problem)
        return usage

    def _results(self, entry: dict[str, Any], batch: Any) -> Iterator[tuple[str, str, Any]]:
        """``(custom_id, kind, payload)`` per result: kind "succeeded" with the response body, else the reason."""
        sdk: Any = self.client.provider.sdk  # type: ignore[attr-defined]
        if self.api == "anthropic":
            results = self._sdk_call("results", lambda: list(sdk.messages.batches.results(entry["id"])))
            for r in results:
                result = r.result
                if result.type == "succeeded":
                    yield r.custom_id, "succeeded", result.message
                elif result.type == "errored":
                    err = result.error.error
                    yield r.custom_id, "errored", f"errored: {err.type}: {getattr(err, 'message', '')}"
                else:
                    yield r.custom_id, str(result.type), f"{result.type}: the batch did not answer it"
            return
        if batch.status == "failed":
            why = "; ".join(e.message or e.code or "" for e in (batch.errors.data or [])) if batch.errors else ""
            for custom_id in entry["custom_ids"]:
                yield custom_id, "errored", f"batch {entry['id']} failed: {why or 'no reason given'}"
            return
        for file_id in (batch.output_file_id, batch.error_file_id):
            if not file_id:
                continue
            text = str(self._sdk_call("results", _file_text(sdk, file_id)))
            for raw in text.splitlines():
                if not raw.strip():
                    continue
                try:
                    line = json.loads(raw)
                except ValueError:
                    log.warning("batch %s: a result line is not JSON: %.200s", entry["id"], raw)
                    continue
                custom_id = str(line.get("custom_id", ""))
                error, response = line.get("error"), line.get("response") or {}
                if error:
                    code = error.get("code") or "error"
                    kind = "expired" if code == "batch_expired" else "errored"
                    yield custom_id, kind, f"{code}: {error.get('message', '')}"
                elif response.get("status_code") != 200:
                    body = response.get("body") or {}
                    message = (body.get("error") or {}).get("message", "") if isinstance(body, dict) else ""
                    yield custom_id, "errored", f"HTTP {response.get('status_code')}: {message}"
                else:
                    yield custom_id, "succeeded", response.get("body")


def _write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically: a temporary file beside it, flushed, then renamed over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _file_text(sdk: Any, file_id: str) -> Callable[[], str]:
    """A call that reads an OpenAI file's content as text."""
    return lambda: str(sdk.files.content(file_id).text)
