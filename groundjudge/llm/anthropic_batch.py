"""The Anthropic Message Batches API (:class:`~groundjudge.llm.base.BatchApi`): one Message Batch per batch, its
results read from the batch's results. Imports only ``llm.base`` and ``errors``.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import anthropic

from groundjudge.llm.base import BatchResult, BatchStatus, SdkBatch

log = logging.getLogger(__name__)

T = TypeVar("T")


class AnthropicBatch(SdkBatch):
    """The Message Batches API of ``provider`` (its SDK client, request bodies and response parsing)."""

    name = "anthropic"
    max_requests = 100_000  # per batch: 100,000 requests and 256 MB
    max_bytes = 240 * 2**20
    sdk_module = anthropic
    sdk_error = anthropic.AnthropicError

    def custom_id(self, key: str) -> str:
        # custom ids are at most 64 of [a-zA-Z0-9_-]: the key's hash without the "llm:" namespace
        return key.rpartition(":")[2][:64]

    def creator(self, requests: list[tuple[str, dict[str, Any]]], tag: str) -> Callable[[], str]:
        body = [{"custom_id": custom_id, "params": params} for custom_id, params in requests]

        def make() -> str:
            return str(self._call("create", lambda: self.sdk.messages.batches.create(requests=body)).id)

        return make

    def find_lost(self, entry: dict[str, Any], known: set[Any], since: float) -> str | None:
        """Batches have no metadata: an ended batch since ``since`` whose results hold exactly the entry's custom
        ids; else, of the batches still running since then with as many requests (none of ``known``), the one
        created nearest the time the entry was written. A wrong guess costs direct calls for the keys its results
        lack (they fail when it ends), never a wrong answer: results are matched by custom id."""
        sdk = self.sdk

        def newer(b: Any) -> bool:
            return bool(b.created_at.timestamp() >= since)

        recent = self._call("list", lambda: list(itertools.takewhile(newer, sdk.messages.batches.list(limit=100))))
        wanted = set(entry["custom_ids"])
        running: list[tuple[float, str]] = []
        for batch in recent:
            c = batch.request_counts
            total = c.processing + c.succeeded + c.errored + c.canceled + c.expired
            if batch.id in known or total != len(wanted) or batch.cancel_initiated_at is not None:
                continue
            if batch.processing_status == "in_progress":
                running.append((abs(batch.created_at.timestamp() - entry.get("submitted_at", 0.0)), str(batch.id)))
            elif batch.processing_status == "ended":
                results = self._call("results", _results_of(sdk, str(batch.id)))
                if {r.custom_id for r in results} == wanted:
                    return str(batch.id)
        if len(running) > 1:
            log.warning(
                "batch tagged %s: %d running batches could be it; taking the nearest", entry["tag"], len(running)
            )
        return min(running)[1] if running else None

    def status(self, batch_id: str) -> BatchStatus:
        batch = self._call("status", lambda: self.sdk.messages.batches.retrieve(batch_id))
        c = batch.request_counts
        return BatchStatus(
            ended=batch.processing_status == "ended",
            done=c.succeeded + c.errored + c.canceled + c.expired,
            label=str(batch.processing_status or ""),
            raw=batch,
        )

    def results(self, entry: dict[str, Any], status: BatchStatus) -> Iterator[BatchResult]:
        for r in self._call("results", _results_of(self.sdk, entry["id"])):
            result = r.result
            if result.type == "succeeded":
                yield r.custom_id, "succeeded", result.message
            elif result.type == "errored":
                err = result.error.error
                yield r.custom_id, "errored", f"errored: {err.type}: {getattr(err, 'message', '')}"
            else:
                yield r.custom_id, str(result.type), f"{result.type}: the batch did not answer it"


def _results_of(sdk: Any, batch_id: str) -> Callable[[], list[Any]]:
    """A call that reads a Message Batch's results."""
    return lambda: list(sdk.messages.batches.results(batch_id))
