"""Provider batch mode (``Config.batch_api``): the flow's :class:`~groundjudge.pipeline.flow.Parking` that sends
the parked answers' calls as one provider batch.

Every run goes through :func:`groundjudge.pipeline.flow.stream`. In provider batch mode the judges' clients defer
every call the cache cannot answer (:meth:`LLMClient.deferring`), so a step that calls the LLM parks its answer;
when every admitted answer is parked or done, :meth:`ProviderBatches.settle` sends the calls of the earliest
step's parked answers as one provider batch (half price; the results land in the cache) and the flow runs their
step again: it reads the cache, and a call that failed in the batch is made directly (with re-asks). The batch ids
are written beside the cache (or ``Config.batch_state``) before polling, so a run that stops while a batch is still
running (:class:`~groundjudge.errors.BatchPendingError`, exit 4) is collected by the next run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from groundjudge.config import Config
from groundjudge.llm import LLMClient
from groundjudge.llm.batch import BatchOutcome, BatchRunner
from groundjudge.llm.client import DeferredCall
from groundjudge.llm.packing import share_packed
from groundjudge.models import Usage
from groundjudge.pipeline.packing import charge_answer, charge_calls, packs
from groundjudge.pipeline.work import RUN_STOPS, Work, describe

log = logging.getLogger(__name__)


def _failed(w: Work, why: str) -> None:
    """A provider batch of the answer's own calls failed as a whole: the answer fails (its report is ERROR)."""
    w.failed = why


def _second_failed(w: Work, why: str) -> None:
    """A provider batch of second-judge calls failed as a whole: the second judge's error, not the answer's."""
    if w.second is not None:
        w.second.error = why


def _second_charged(w: Work, usage: Usage) -> None:
    """What a second-judge call answered in a provider batch cost: the answer's, and the second judge's apart."""
    w.usage = w.usage + usage
    if w.second is not None:
        w.second.usage = w.second.usage + usage


@dataclass(eq=False)
class ProviderBatches:
    """The parked answers' calls through the provider's batch API, one provider batch per settling.

    Args:
        client: the first judge's client (the claims and sources-side calls).
        second_client: the second judge's client, if any (its calls).
        config: the batch settings.
        progress: called with (answered, total) while a provider batch is waited for.
        outcomes: what each provider batch did is appended here.
    """

    client: LLMClient
    second_client: LLMClient | None
    config: Config
    progress: Callable[[int, int], None] | None
    outcomes: list[BatchOutcome]
    _deferred: list[list[DeferredCall]] = field(default_factory=list, init=False)
    _calls: dict[str, DeferredCall] = field(default_factory=dict, init=False)
    _seen: int = field(default=0, init=False)

    def _clients(self) -> list[LLMClient]:
        return [c for c in (self.client, self.second_client) if c is not None]

    @contextmanager
    def deferring(self) -> Iterator[None]:
        """Inside, the judges' clients defer every call the cache cannot answer."""
        with ExitStack() as stack:
            self._deferred = [stack.enter_context(c.deferring()) for c in self._clients()]
            yield

    def _call(self, key: str) -> DeferredCall:
        if key not in self._calls:
            for calls in self._deferred:
                self._calls.update((call.key, call) for call in calls)
        return self._calls[key]

    def settle(self, step: str, works: list[Work]) -> list[Work]:
        """Send the calls of ``works`` (parked at ``step``) as one provider batch; the answers that run ``step``
        again (all of them, unless the batch failed as a whole or the run stopped)."""
        second = step == "second"
        client = self.second_client if second else self.client
        assert client is not None
        fail, charge = (_second_failed, _second_charged) if second else (_failed, charge_answer)
        calls: dict[str, DeferredCall] = {}
        for w in works:
            for key in w.deferred:
                calls.setdefault(key, self._call(key))
        sent = list(calls.values())
        if self.config.pack_answers > 1 and not second:  # several answers per request (pipeline.packing)
            sent = [client.packed_call(p) if len(p) > 1 else p[0] for p in packs(sent, self.config.pack_answers)]
        try:
            outcome = batch_runner(client, self.config, self.progress).run(sent)
        except RUN_STOPS as exc:
            for w in works:
                w.stop = exc
            return []
        except Exception as exc:  # the batch failed as a whole: these answers fail, the run goes on
            log.warning("the provider batch failed: %s", describe(exc), exc_info=True)
            for w in works:
                fail(w, f"provider batch: {describe(exc)}")
            return []
        self.outcomes.append(outcome)
        for call in sent:  # a packed request's cost, shared out to its answers by the length of their blocks
            if call.members and call.key in outcome.usage_by_key:
                shares = share_packed(outcome.usage_by_key.pop(call.key), [m.request for m in call.members])
                for member, share in zip(call.members, shares, strict=True):
                    outcome.usage_by_key[member.key] = outcome.usage_by_key.get(member.key, Usage()) + share
        charge_calls(works, outcome.usage_by_key, charge)  # to the answers it answered (a shared request once)
        if outcome.failures:
            log.info("%d batch request(s) failed; calling them directly", len(outcome.failures))
        for w in works:
            w.deferred = []
        return works

    def again(self, step: Callable[[Work], None]) -> Callable[[Work], None]:
        """``step`` with its calls sent: it reads the batch's answers from the cache and makes a call that failed
        there directly."""

        def run(w: Work) -> None:
            with ExitStack() as stack:
                for c in self._clients():
                    stack.enter_context(c.sending())
                step(w)

        return run


def batch_runner(client: LLMClient, config: Config, progress: Callable[[int, int], None] | None) -> BatchRunner:
    """The batch runner for ``client``: its state file, poll interval and longest wait from ``config``.

    The state file is ``config.batch_state``, else ``batches.json`` in the cache folder, shared by every job on that
    cache: jobs may share it (:mod:`groundjudge.llm.batch_state`), and a request two of them need is paid once.
    """
    from groundjudge.cache import default_cache_dir

    c = config
    state = c.batch_state or str(Path(c.cache_dir or default_cache_dir()) / "batches.json")
    return BatchRunner(
        client,
        state,
        poll_seconds=c.batch_poll_seconds,
        progress=progress,
        max_wait_seconds=c.batch_max_wait_hours * 3600,
    )
