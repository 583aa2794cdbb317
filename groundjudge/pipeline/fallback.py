"""A batch that broke outside any one row: score each of its rows alone (both engines, one rule).

The flow records the failure of one answer in that answer (its ERROR report). An exception that escapes the flow
itself (a bug, a whole NLI batch failing) belongs to no row: :func:`evaluate_guarded` then scores the rows the flow
had taken and not yet reported one by one, so that a failure is that row's ERROR and the others are scored as usual,
and goes on with the rest of the input. A run stop (:data:`RUN_STOPS`: budget, cache-only miss, a pending provider
batch) is never caught here: it ends the run after the finished reports.

Calls only the Evaluator's public API (``evaluate_batches``, ``evaluate_numbered``, ``mode``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from groundjudge.io.rows import row_id
from groundjudge.models import AnswerReport
from groundjudge.pipeline.work import RUN_STOPS, describe, error_report

if TYPE_CHECKING:
    from groundjudge.pipeline.evaluator import Evaluator

log = logging.getLogger(__name__)

__all__ = ["RUN_STOPS", "describe", "evaluate_alone", "evaluate_guarded"]

Cut = list[tuple[int, Any, Any]]  # one NLI batch: (row number, input row, parsed sample or InputError)


def evaluate_alone(evaluator: Evaluator, rows: Iterable[tuple[int, Any]]) -> Iterator[AnswerReport]:
    """Each numbered row scored on its own, in the order given; an exception is that row's ERROR report.

    Raises:
        BudgetExceededError, CacheMissError, BatchPendingError: a run stop, at the row it stopped.
    """
    for n, row in rows:
        try:
            reports = list(evaluator.evaluate_numbered([(n, row)]))
        except RUN_STOPS:
            raise
        except Exception as exc:  # this row's failure alone
            reports = [error_report(describe(exc), n, row_id(row, n), evaluator.mode)]
        yield from reports


def evaluate_guarded(evaluator: Evaluator, cuts: Iterable[Cut], *, window: int | None = None) -> Iterator[AnswerReport]:
    """``evaluator.evaluate_batches(cuts)``, in input order; when the stream breaks outside any one row, the rows
    it had taken and not reported are scored alone (:func:`evaluate_alone`) and the stream goes on with the rest.

    Raises:
        BudgetExceededError, CacheMissError, BatchPendingError: a run stop, after the reports that finished.
    """
    source = iter(cuts)
    taken: dict[int, Any] = {}  # row number -> input row: handed to the flow, no report yet
    took = [0]  # cuts handed to the flow in this round

    def feed() -> Iterator[Cut]:
        for cut in source:
            took[0] += 1
            for n, row, _ in cut:
                taken[n] = row
            yield cut

    while True:
        took[0] = 0
        try:
            for report in evaluator.evaluate_batches(feed(), window=window):
                if report.row is not None:
                    taken.pop(report.row, None)
                yield report
            return
        except RUN_STOPS:
            raise
        except Exception:
            log.warning("a batch failed; scoring its rows one by one", exc_info=True)
            if not took[0]:  # it broke before taking a row: the next cut alone, so that every round moves on
                cut = next(source, None)
                if cut is None:
                    return
                taken.update((n, row) for n, row, _ in cut)
        yield from evaluate_alone(evaluator, sorted(taken.items()))
        taken.clear()
