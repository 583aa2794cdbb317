"""The run engine: answers stream through the stages, every LLM call slot kept busy, reports in input order.

A batch-at-a-time engine waits stage by stage for each batch's slowest call, and no call is in flight while the NLI
model runs. Here each answer moves on as soon as its own step is done:

- a bounded window of answers is in flight (``window`` rows, counting those finished but not yet handed out), so
  memory stays flat however long the input;
- one pool of ``concurrency`` threads makes every LLM call of every stage (the claims call of new answers, the
  sources-side call of answers past the NLI stage), claims calls first (they feed the NLI stage), the older answer
  first within a kind; the client's limiter (``--rpm``/``--tpm``, adaptive concurrency) decides how many of them
  send at once;
- with a second judge (README "Second judge"), an answer it looks at makes one more call after its sources-side
  call (:meth:`Steps.needs_second`, :meth:`Steps.second`), last in the pool's order;
- the NLI stage runs on its own thread, one batch at a time, while calls are in flight; so does the QA check's
  comparison of the answers' replies (the local model, after their sources-side calls), so no call slot waits for
  the CPU. Its batches are the cut batches (:func:`groundjudge.io.rows.batches`), run in input order as soon as every
  claim of the batch is known; the comparison of a cut batch's answers is one batch too, run as soon as none of the
  batch's sources-side calls is still out: the NLI model's probabilities move in the 7th digit with the other pairs
  of a forward pass on some CPUs, so only batches that do not depend on timing give the same reports as a
  stage-by-stage run (and as the Ray engine). When both wait, the thread runs the NLI stage first (its claims'
  sources-side calls can then start) and the comparisons while those calls are out;
- reports come out in input order.

Per-answer honesty is the batch engine's: a step's failure lands in that answer (:func:`~groundjudge.pipeline.work.
run_local`, :func:`~groundjudge.pipeline.work.run_call`). A run stop (budget, cache-only miss) admits no new
answer; the answers in flight finish, every finished report is handed out in order, then the first stop is raised.

A step whose call is deferred (:class:`~groundjudge.errors.DeferredCallError`: provider batch mode, the dry run)
parks its answer. When every admitted answer is parked or done, the :class:`Parking` settles the parked answers of
the earliest step (provider batch mode: one provider batch for their calls; the dry run: counted, never sent) and
says which of them run that step again; the others' step is over (an answer still holding deferred calls goes no
further). So provider batch mode and the dry run go through this one description of the stage order.

The engine knows nothing of models or prompts: the steps come from a :class:`Steps` (the
:class:`~groundjudge.pipeline.steps.Steps` the Evaluator builds).
"""

from __future__ import annotations

import functools
import heapq
import itertools
import logging
import queue
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol

from groundjudge.errors import GroundjudgeError
from groundjudge.models import AnswerReport
from groundjudge.pipeline.work import RUN_STOPS, Work, describe, run_call, run_local

log = logging.getLogger(__name__)

# priorities in the call pool: claims calls before sources-side calls (so the NLI stage, the CPU's share of the
# work, gets its batches as early as possible and the run ends on independent calls, not on a chain of claims, NLI,
# judge), then the older answer first. Chosen on two folds of faithbench-dev rows 1-160 (benchmarks/throughput.py):
# span utilisation at concurrency 8 0.886 / 0.714 against 0.833 / 0.725 the other way round, at 32 0.345 / 0.195
# against 0.314 / 0.195.
_CLAIMS, _VERIFY = 0, 1
_SECOND = 2  # the second judge's call (README "Second judge"), after the answer's own calls
# the NLI thread's order: a cut batch's NLI stage before any QA comparison waiting, then the older batch first. An NLI
# stage starts a chain (the sources-side calls of the claims it escalates, then that batch's comparison) that waits
# on replies, not on the CPU; a comparison ends one. Run first, the last batch's NLI stage no longer waits behind the
# comparisons of the batches before it, which run while its sources-side calls are out (the run's tail). The
# batches are the same either way, so the reports are too.
_NLI_STAGE, _COMPARE = 0, 1


class Steps(Protocol):
    """The steps of one answer (and one batch's NLI stage) that the engine drives."""

    def claims_local(self, w: Work) -> bool: ...  # claims set without the LLM: True; the claims call is needed: False

    def claims_call(self, w: Work) -> None: ...

    def nli_stage(self, batch: list[Work]) -> None: ...  # NLI scores and routes for a batch's live answers

    def needs_verify(self, w: Work) -> bool: ...

    def verify(self, w: Work) -> None: ...

    def needs_compare(self, w: Work) -> bool: ...  # after verify: the QA replies wait for the local comparison

    def compare(self, works: list[Work]) -> None: ...  # a cut batch's waiting answers together: on the NLI thread

    def needs_second(self, w: Work) -> bool: ...  # after verify: whether the second judge looks at the answer

    def second(self, w: Work) -> None: ...

    def report(self, w: Work) -> AnswerReport: ...


class Parking(Protocol):
    """What becomes of answers whose step's calls were deferred (see the module docstring)."""

    def settle(self, step: str, works: list[Work]) -> list[Work]: ...  # those that run ``step`` again

    def again(self, step: Callable[[Work], None]) -> Callable[[Work], None]: ...  # a step run again: calls sent


_PARKED = ("claims", "verify", "second")  # the steps that call the LLM, in the stage order (settled in this order)


def default_window(concurrency: int, batch_size: int) -> int:
    """Rows in flight when none is asked for: enough that every call slot has work while the oldest rows and each
    batch's slowest claims call hold their place in the window, and while a cut batch waits for its NLI and its QA
    comparison (each one batch on the NLI thread, in order) with the batches behind it already calling. Four cut
    batches, not two: chosen on two folds of faithbench-dev long answers (rows 1-160 and 161-320, cascade + QA,
    concurrency 8, batches of 32, ``benchmarks/throughput.py --window``): span utilisation 0.72 / 0.75 at 64 rows,
    0.90 / 0.95 at 128, 0.95 / 0.95 with every row in flight; each fold's smallest window at the 0.85 target is 128.
    At concurrency 32 the 8 x concurrency term already holds more."""
    return max(8 * concurrency, 4 * batch_size, 1)


@dataclass(eq=False)
class _Batch:
    """One cut batch in flight: its answers and how many of them still wait for their claims."""

    works: list[Work]
    order: int = 0  # its place among the cut batches (the NLI thread's tie-break)
    waiting: int = 0
    scored: list[Work] = field(default_factory=list)  # the answers its NLI stage was given (those not done)
    verifying: int = 0  # its answers whose sources-side call is not over yet
    comparing: list[Work] = field(default_factory=list)  # its answers whose QA replies wait for the comparison


@dataclass(eq=False)
class _Row:
    """Where one answer is: its batch, its order (the call pool's tie-break), whether it is finished."""

    batch: _Batch
    seq: int
    done: bool = False


class _CallPool:
    """``workers`` threads taking the most urgent task first (lowest ``(priority, order)``): the LLM calls, and with
    one worker the NLI thread's local steps."""

    def __init__(self, workers: int, name: str = "groundjudge-call") -> None:
        self.name = name
        self._heap: list[tuple[tuple[int, int], int, Callable[[], None]]] = []
        self._lock = threading.Lock()
        self._tie = itertools.count()
        self._pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix=name)

    def submit(self, priority: tuple[int, int], fn: Callable[[], None]) -> None:
        with self._lock:
            heapq.heappush(self._heap, (priority, next(self._tie), fn))
        self._pool.submit(self._run_next)  # one runner per task: each takes the most urgent task left

    def _run_next(self) -> None:
        with self._lock:
            _, _, fn = heapq.heappop(self._heap)
        fn()

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


@dataclass
class _Flow:
    steps: Steps
    concurrency: int
    parking: Parking | None = None
    events: queue.SimpleQueue[tuple[str, object]] = field(default_factory=queue.SimpleQueue)
    rows: dict[int, _Row] = field(default_factory=dict)  # id(work) -> its place
    nli_queue: deque[_Batch] = field(default_factory=deque)  # batches whose NLI stage is not yet submitted
    stopping: bool = False
    seq: itertools.count[int] = field(default_factory=itertools.count)
    batch_seq: itertools.count[int] = field(default_factory=itertools.count)
    in_flight: int = 0  # tasks submitted whose event is not handled yet
    parked: dict[str, list[Work]] = field(default_factory=dict)  # step -> its answers with deferred calls

    def __post_init__(self) -> None:
        self.calls = _CallPool(self.concurrency)
        self.nli = _CallPool(1, "groundjudge-nli")

    def close(self) -> None:
        self.calls.close()
        self.nli.close()

    # -- tasks (worker threads): run a step, then tell the coordinator ----------------------------------------

    def _task(self, kind: str, w: Work, step: Callable[[Work], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                run_call(w, step)
            except BaseException as exc:  # never leave the coordinator waiting for this answer
                w.failed = w.failed or describe(exc)
            finally:
                self.events.put((kind, w))

        return run

    def _nli_task(self, batch: _Batch) -> None:
        try:
            self.steps.nli_stage(batch.scored)
        except RUN_STOPS as exc:
            for w in batch.scored:
                if w.live:
                    w.stop = exc
        except BaseException as exc:  # the stage guards each answer: a bug, fail them all
            log.exception("the NLI stage failed")
            for w in batch.scored:
                if w.live:
                    w.failed = describe(exc)
        finally:
            self.events.put(("nli", batch))

    def _compare_task(self, works: list[Work]) -> None:
        try:
            self.steps.compare(works)
        except RUN_STOPS as exc:
            for w in works:
                if w.live:
                    w.stop = exc
        except BaseException as exc:  # the step guards each answer: a bug, fail them all
            log.exception("the QA comparison failed")
            for w in works:
                if w.live:
                    w.failed = describe(exc)
        finally:
            self.events.put(("compared", works))

    # -- the coordinator (the caller's thread) -----------------------------------------------------------------

    def _call(self, kind: str, w: Work, step: Callable[[Work], None]) -> None:
        priority = {"claims": _CLAIMS, "verify": _VERIFY, "second": _SECOND}[kind]
        self.in_flight += 1
        self.calls.submit((priority, self.rows[id(w)].seq), self._task(kind, w, step))

    def admit(self, items: list[Work | AnswerReport]) -> None:
        batch = _Batch([w for w in items if isinstance(w, Work)], next(self.batch_seq))
        for w in batch.works:
            row = _Row(batch, next(self.seq))
            self.rows[id(w)] = row
            if self._needs_claims_call(w):
                batch.waiting += 1
                self._call("claims", w, self.steps.claims_call)
            self.stopping = self.stopping or w.stop is not None
        self.nli_queue.append(batch)
        self._submit_nli()

    def _needs_claims_call(self, w: Work) -> bool:
        """Set the claims that need no LLM; True when the claims call must run (a failure here fails the answer)."""
        needed: list[bool] = []
        run_local(w, lambda w: needed.append(not self.steps.claims_local(w)))
        return w.live and needed == [True]

    def _submit_nli(self) -> None:
        while self.nli_queue and self.nli_queue[0].waiting == 0:  # in input order (see the module docstring)
            batch = self.nli_queue.popleft()
            batch.scored = [w for w in batch.works if not self.rows[id(w)].done]
            self.in_flight += 1
            self.nli.submit((_NLI_STAGE, batch.order), functools.partial(self._nli_task, batch))

    def handle(self, kind: str, obj: object) -> None:
        """A task's event: its step is over."""
        self.in_flight -= 1
        self._step_ended(kind, obj)

    def _step_ended(self, kind: str, obj: object) -> None:
        if self.parking is not None and kind in _PARKED:
            assert isinstance(obj, Work)
            if obj.live and obj.deferred:  # its call waits for a provider batch (or the dry run's count)
                self.parked.setdefault(kind, []).append(obj)
                return
        if kind == "claims":
            assert isinstance(obj, Work)
            self.rows[id(obj)].batch.waiting -= 1
            self.stopping = self.stopping or obj.stop is not None
            self._submit_nli()
        elif kind == "nli":
            assert isinstance(obj, _Batch)
            for w in obj.scored:
                if self._asks(w, self.steps.needs_verify):
                    obj.verifying += 1
                    self._call("verify", w, self.steps.verify)
                else:
                    self._after_verify(w)
                self.stopping = self.stopping or w.stop is not None
        elif kind == "verify":
            assert isinstance(obj, Work)
            batch = self.rows[id(obj)].batch
            batch.verifying -= 1
            if self._asks(obj, self.steps.needs_compare):  # on the NLI thread: the call slot is free at once
                batch.comparing.append(obj)
            else:
                self._after_verify(obj)
            self.stopping = self.stopping or obj.stop is not None
            self._compare(batch)
        elif kind == "compared":
            assert isinstance(obj, list)
            for w in obj:
                self._after_verify(w)
                self.stopping = self.stopping or w.stop is not None
        else:
            assert isinstance(obj, Work)
            self.rows[id(obj)].done = True
            self.stopping = self.stopping or obj.stop is not None

    def _compare(self, batch: _Batch) -> None:
        """The QA comparison of a cut batch's waiting answers, together and in input order, once none of its
        sources-side calls is out (so which answers share the model's batch never depends on timing)."""
        if batch.verifying or not batch.comparing:
            return
        works = sorted(batch.comparing, key=lambda w: self.rows[id(w)].seq)
        batch.comparing = []
        self.in_flight += 1
        self.nli.submit((_COMPARE, batch.order), functools.partial(self._compare_task, works))

    @staticmethod
    def _asks(w: Work, needs: Callable[[Work], bool]) -> bool:
        """Whether a live answer needs the next step (``needs``: a ``Steps.needs_*``); a failure here is a bug for
        this answer alone: it fails."""
        if not w.live:
            return False
        try:
            return needs(w)
        except Exception as exc:
            w.failed = describe(exc)
            return False

    def _after_verify(self, w: Work) -> None:
        """The second judge's call if it looks at the answer, else the answer is done."""
        second = False
        if w.live:
            try:
                second = self.steps.needs_second(w)
            except Exception:  # a bug in the second judge's choice never harms the answer
                log.exception("row %s: choosing the second judge's claims failed", w.row)
        if second:
            self._call("second", w, self.steps.second)
        else:
            self.rows[id(w)].done = True

    def settle(self) -> bool:
        """When every admitted answer is parked or done: settle the parked answers of the earliest step (see the
        module docstring). False when there is nothing to settle."""
        if self.in_flight or self.parking is None:
            return False
        kind = next((k for k in _PARKED if self.parked.get(k)), None)
        if kind is None:
            return False
        works = sorted(self.parked.pop(kind), key=lambda w: self.rows[id(w)].seq)
        again = {id(w) for w in self.parking.settle(kind, works)}
        step = {"claims": self.steps.claims_call, "verify": self.steps.verify, "second": self.steps.second}[kind]
        for w in works:
            self.stopping = self.stopping or w.stop is not None
            if id(w) in again and w.live:
                self._call(kind, w, self.parking.again(step))
            elif w.deferred:  # its calls stay unanswered: it goes no further
                self.rows[id(w)].done = True
                if kind == "claims":
                    self.rows[id(w)].batch.waiting -= 1
                elif kind == "verify":
                    self.rows[id(w)].batch.verifying -= 1
                    self._compare(self.rows[id(w)].batch)
            else:  # its step is over (it failed or stopped there)
                self._step_ended(kind, w)
        self._submit_nli()
        return True

    def finished(self, item: Work | AnswerReport) -> bool:
        return isinstance(item, AnswerReport) or self.rows[id(item)].done


def stream(
    batches: Iterable[list[Work | AnswerReport]],
    steps: Steps,
    *,
    concurrency: int,
    window: int | None = None,
    parking: Parking | None = None,
) -> Iterator[AnswerReport]:
    """Reports of ``batches`` (each a cut batch: work for valid rows, ERROR reports for bad ones), in input order.

    Args:
        batches: the cut batches, read lazily (never more than ``window`` rows ahead of the last report out).
        steps: the steps of an answer (:class:`groundjudge.pipeline.steps.Steps`).
        concurrency: LLM calls in flight at most (the client's limiter may allow fewer).
        window: rows in flight at most (admitted a whole batch at a time); default :func:`default_window`.
        parking: what becomes of answers whose calls are deferred (provider batch mode, the dry run); without
            one, no call is deferred.

    Raises:
        BudgetExceededError, CacheMissError, BatchPendingError: the first stop, in input order, after every
            finished report is yielded.
    """
    flow = _Flow(steps, concurrency, parking)
    source = iter(batches)
    order: deque[Work | AnswerReport] = deque()
    exhausted = False
    stop: GroundjudgeError | None = None
    try:
        while True:
            while not exhausted and not flow.stopping and (window is None or len(order) < window):
                items = next(source, None)
                if items is None:
                    exhausted = True
                    break
                if window is None:  # sized on the first batch
                    window = default_window(concurrency, sum(isinstance(x, Work) for x in items))
                order.extend(items)
                flow.admit(items)
            while order and flow.finished(order[0]):
                item = order.popleft()
                if isinstance(item, AnswerReport):
                    yield item
                    continue
                del flow.rows[id(item)]
                if item.stop is not None:
                    stop = stop or item.stop
                else:
                    yield steps.report(item)
            if not order and (exhausted or flow.stopping):
                break
            if not exhausted and not flow.stopping and (window is None or len(order) < window):
                continue  # room in the window again: admit before waiting
            if flow.settle():
                continue
            flow.handle(*flow.events.get())
    finally:
        flow.close()
    if stop is not None:
        raise stop
