"""Several answers per call (``Config.pack_answers``): the flow's :class:`~groundjudge.pipeline.flow.Parking` that
sends the parked answers' calls of one prompt k at a time in one request.

Every run goes through :func:`groundjudge.pipeline.flow.stream`. With packing on, the first judge's client defers
every call the cache cannot answer (:meth:`LLMClient.deferring`), so the claims and sources-side steps park their
answers; when every admitted answer is parked or done, :meth:`PackedCalls.settle` groups the parked calls of the
earliest step by prompt (:func:`~groundjudge.llm.packing.pack_key`), sends each group of two or more as packed
requests (:meth:`LLMClient.complete_packed`: each answer's part validated, checked and cached under that answer's
own key) and the flow runs the step again: it reads the cache, and a call whose part was missing or invalid (or
that had no companion) is made alone, with the usual re-asks. The second judge's calls are never packed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field

from groundjudge.errors import GroundjudgeError
from groundjudge.llm import LLMClient
from groundjudge.llm.client import DeferredCall
from groundjudge.llm.packing import pack_key
from groundjudge.models import Usage
from groundjudge.pipeline.work import RUN_STOPS, Work, describe

log = logging.getLogger(__name__)


def packs(calls: list[DeferredCall], size: int) -> list[list[DeferredCall]]:
    """``calls`` in packs of at most ``size`` calls of one prompt, in their order; a call that cannot be packed, or
    is left alone, is a pack of one (sent as the single call)."""
    groups: dict[str | None, list[DeferredCall]] = {}
    singles: list[list[DeferredCall]] = []
    for call in calls:
        key = pack_key(call.request)
        if key is None:
            singles.append([call])
        else:
            groups.setdefault(key, []).append(call)
    out = [group[i : i + size] for group in groups.values() for i in range(0, len(group), size)]
    return out + singles


def charge_answer(w: Work, usage: Usage) -> None:
    """What one of its calls cost, to the answer."""
    w.usage = w.usage + usage


def charge_calls(
    works: Sequence[Work], usage_by_key: Mapping[str, Usage], charge: Callable[[Work, Usage], None] = charge_answer
) -> None:
    """What the settled calls cost (``usage_by_key``: a packed call's share, a provider batch's request), each call
    charged once, to the first of ``works`` that holds it deferred: a call two answers share (the same request) is
    paid once. :class:`PackedCalls` and provider batch mode (:class:`~groundjudge.pipeline.batching.ProviderBatches`,
    whose second judge's ``charge`` counts it for the second judge too) both charge through here."""
    charged: set[str] = set()
    for w in works:
        for key in w.deferred:
            if key in usage_by_key and key not in charged:
                charged.add(key)
                charge(w, usage_by_key[key])


@dataclass(eq=False)
class PackedCalls:
    """The parked answers' calls, k at a time per request (see the module docstring).

    Args:
        client: the first judge's client (the claims and sources-side calls).
        size: answers per request at most (``Config.pack_answers``).
        concurrency: packed requests in flight at once.
    """

    client: LLMClient
    size: int
    concurrency: int = 1
    _deferred: list[DeferredCall] = field(default_factory=list, init=False)

    @contextmanager
    def deferring(self) -> Iterator[None]:
        """Inside, the first judge's client defers every call the cache cannot answer."""
        with self.client.deferring() as deferred:
            self._deferred = deferred
            yield

    def settle(self, step: str, works: list[Work]) -> list[Work]:
        """Send the calls of ``works`` (parked at ``step``) in packs; the answers that run ``step`` again (all of
        them, unless the run stopped)."""
        by_key = {c.key: c for c in self._deferred}
        calls: dict[str, DeferredCall] = {}
        for w in works:
            for key in w.deferred:
                calls.setdefault(key, by_key[key])
        grouped = [p for p in packs(list(calls.values()), self.size) if len(p) > 1]
        results: dict[str, tuple[Usage, str | None]] = {}
        stop: GroundjudgeError | None = None
        with ThreadPoolExecutor(max(1, min(self.concurrency, len(grouped) or 1))) as pool:
            for done in [pool.submit(self.client.complete_packed, p) for p in grouped]:
                try:
                    results.update(done.result())
                except RUN_STOPS as exc:
                    stop = stop or exc
                except Exception as exc:  # its answers are asked alone when their step runs again
                    log.warning("a packed call failed: %s; its answers are asked alone", describe(exc), exc_info=True)
        charge_calls(works, {key: usage for key, (usage, _) in results.items()})  # each answer's share
        for _, problem in results.values():
            if problem is not None:
                log.info("packed reply not taken (%s); asking alone", problem)
        if stop is not None:
            for w in works:
                w.stop = stop
            return []
        for w in works:
            w.deferred = []
        return works

    def again(self, step: Callable[[Work], None]) -> Callable[[Work], None]:
        """``step`` with its calls sent: it reads the packed answers from the cache and makes alone a call whose
        part was not taken."""

        def run(w: Work) -> None:
            with self.client.sending():
                step(w)

        return run
