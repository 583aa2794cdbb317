"""The OpenAI Batch API (:class:`~groundjudge.llm.base.BatchApi`): a JSONL file uploaded with ``purpose="batch"``,
then a batch on ``/v1/chat/completions`` with a 24 h window whose ``metadata`` carries the batch's tag; results in
an output file and an error file. Imports only ``llm.base`` and ``errors``.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import openai

from groundjudge.llm.base import BatchResult, BatchStatus, SdkBatch

log = logging.getLogger(__name__)

T = TypeVar("T")

TAG_KEY = "groundjudge_batch"  # the metadata key that carries a batch's tag
_DEAD = ("failed", "expired", "cancelling", "cancelled")  # batches not worth adopting


class OpenAIBatch(SdkBatch):
    """The OpenAI Batch API of ``provider`` (its SDK client, request bodies and response parsing)."""

    name = "openai"
    max_requests = 50_000  # per batch: 50,000 requests and a 200 MB file
    max_bytes = 190 * 2**20
    sdk_module = openai
    sdk_error = openai.OpenAIError

    def custom_id(self, key: str) -> str:
        return key

    def creator(self, requests: list[tuple[str, dict[str, Any]]], tag: str) -> Callable[[], str]:
        lines = "".join(
            json.dumps(
                {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body},
                ensure_ascii=False,
            )
            + "\n"
            for custom_id, body in requests
        ).encode()
        sdk = self.sdk
        upload = self._call(
            "upload",
            lambda: sdk.files.create(file=("groundjudge-batch.jsonl", lines, "application/jsonl"), purpose="batch"),
        )
        metadata = {TAG_KEY: tag}

        def make() -> str:
            batch = self._call(
                "create",
                lambda: sdk.batches.create(
                    input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h", metadata=metadata
                ),
            )
            return str(batch.id)

        return make

    def find_lost(self, entry: dict[str, Any], known: set[Any], since: float) -> str | None:
        """The newest batch since ``since`` whose metadata carries the entry's tag (not failed, expired or
        canceled)."""
        sdk = self.sdk
        recent = self._call(
            "list", lambda: list(itertools.takewhile(lambda b: b.created_at >= since, sdk.batches.list(limit=100)))
        )
        for batch in recent:
            tag = (batch.metadata or {}).get(TAG_KEY)
            if batch.id not in known and tag == entry["tag"] and batch.status not in _DEAD:
                return str(batch.id)
        return None

    def status(self, batch_id: str) -> BatchStatus:
        batch = self._call("status", lambda: self.sdk.batches.retrieve(batch_id))
        counts = batch.request_counts
        done = (counts.completed + counts.failed) if counts is not None else 0
        ended = batch.status in ("completed", "expired", "cancelled", "failed")
        return BatchStatus(ended=ended, done=done, label=str(batch.status or ""), raw=batch)

    def results(self, entry: dict[str, Any], status: BatchStatus) -> Iterator[BatchResult]:
        batch = status.raw
        if batch.status == "failed":
            why = "; ".join(e.message or e.code or "" for e in (batch.errors.data or [])) if batch.errors else ""
            for custom_id in entry["custom_ids"]:
                yield custom_id, "errored", f"batch {entry['id']} failed: {why or 'no reason given'}"
            return
        for file_id in (batch.output_file_id, batch.error_file_id):
            if not file_id:
                continue
            text = str(self._call("results", _file_text(self.sdk, file_id)))
            for raw in text.splitlines():
                if not raw.strip():
                    continue
                try:
                    line = json.loads(raw)
                except ValueError:
                    log.warning("batch %s: a result line is not JSON: %.200s", entry["id"], raw)
                    continue
                yield _result(line)


def _result(line: dict[str, Any]) -> BatchResult:
    """One line of an output or error file as a result."""
    custom_id = str(line.get("custom_id", ""))
    error, response = line.get("error"), line.get("response") or {}
    if error:
        code = error.get("code") or "error"
        kind = "expired" if code == "batch_expired" else "errored"
        return custom_id, kind, f"{code}: {error.get('message', '')}"
    if response.get("status_code") != 200:
        body = response.get("body") or {}
        message = (body.get("error") or {}).get("message", "") if isinstance(body, dict) else ""
        return custom_id, "errored", f"HTTP {response.get('status_code')}: {message}"
    return custom_id, "succeeded", response.get("body")


def _file_text(sdk: Any, file_id: str) -> Callable[[], str]:
    """A call that reads a file's content as text."""
    return lambda: str(sdk.files.content(file_id).text)
