"""A batch that broke outside any one row: score each of its rows alone (both engines, one rule).

The flow records the failure of one answer in that answer (its ERROR report). An exception that escapes the flow
itself (a bug, a whole NLI batch failing) belongs to no row: :func:`evaluate_guarded` (rows already cut, the Ray
engine's actors) and :func:`evaluate_rows` (rows not yet cut, the local engine) then score the rows the flow had
taken and not yet reported one by one, so that a failure is that row's ERROR and the others are scored as usual,
and go on with the rest of the input. A run stop (:data:`RUN_STOPS`: budget, cache-only miss, a pending provider
batch) is never caught here: it ends the run after the finished reports.

Calls only the Evaluator's public API (``evaluate_batches``, ``evaluate_numbered``, ``mode``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from groundjudge.io.rows import row_id
from groundjudge.models import AnswerReport
from groundjudge.pipeline.work import RUN_STOPS, describe, error_report

if TYPE_CHECKING:
    from groundjudge.pipeline.evaluator import Evaluator

log = logging.getLogger(__name__)

__all__ = ["RUN_STOPS", "describe", "evaluate_alone", "evaluate_guarded", "evaluate_rows"]

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
    return _guarded(
        evaluator, cuts, lambda feed: evaluator.evaluate_batches(feed, window=window), lambda cut: [x[:2] for x in cut]
    )


def evaluate_rows(
    evaluator: Evaluator, rows: Iterable[tuple[int, Any]], *, batch_size: int = 32
) -> Iterator[AnswerReport]:
    """:func:`evaluate_guarded` for numbered rows not yet cut: ``evaluator.evaluate_numbered(rows, batch_size)``,
    a batch that breaks outside any one row scored row by row (the local engine)."""
    return _guarded(
        evaluator, rows, lambda feed: evaluator.evaluate_numbered(feed, batch_size=batch_size), lambda x: [x]
    )


def _guarded(
    evaluator: Evaluator,
    items: Iterable[Any],
    stream: Callable[[Iterator[Any]], Iterable[AnswerReport]],
    rows_of: Callable[[Any], list[tuple[int, Any]]],
) -> Iterator[AnswerReport]:
    """``stream`` over ``items`` (cuts or rows; ``rows_of`` gives the numbered rows of one), guarded."""
    source = iter(items)
    taken: dict[int, Any] = {}  # row number -> input row: handed to the flow, no report yet
    took = [0]  # items handed to the flow in this round

    def feed() -> Iterator[Any]:
        for item in source:
            took[0] += 1
            taken.update(rows_of(item))
            yield item

    while True:
        took[0] = 0
        try:
            for report in stream(feed()):
                if report.row is not None:
                    taken.pop(report.row, None)
                yield report
            return
        except RUN_STOPS:
            raise
        except Exception:
            log.warning("a batch failed; scoring its rows one by one", exc_info=True)
            if not took[0]:  # it broke before taking a row: the next item alone, so that every round moves on
                item = next(source, None)
                if item is None:
                    return
                taken.update(rows_of(item))
        yield from evaluate_alone(evaluator, sorted(taken.items()))
        taken.clear()
