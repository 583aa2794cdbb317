"""pipeline.fallback over any input and any breaks: one report per row, in input order, none lost or doubled.

A stand-in evaluator (no model) whose stream breaks outside any one row at chosen points, and whose rows fail alone
at chosen rows: the honesty rule both engines rely on (a batch that broke is scored row by row; a row that fails
alone is that row's ERROR; the others are scored as usual).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from groundjudge.errors import BudgetExceededError
from groundjudge.io.rows import batches
from groundjudge.models import AnswerReport, Scores
from groundjudge.pipeline.fallback import evaluate_guarded, evaluate_rows


class Breaking:
    """Evaluator stand-in: reports rows in order; its n-th stream breaks after ``breaks[n]`` reports (None: never);
    a row in ``bad`` fails when scored alone; a row in ``stop`` stops the run."""

    mode = "nli"

    def __init__(self, breaks: list[int | None], bad: set[int], stop: set[int]) -> None:
        self.breaks = list(breaks)
        self.bad = bad
        self.stop = stop
        self.streams = 0

    def report(self, n: int, row: Any) -> AnswerReport:
        if n in self.stop:
            raise BudgetExceededError("budget reached", spent_usd=0.0, calls=0)
        return AnswerReport(id=row["id"], verdict="PASS", mode=self.mode, scores=Scores(), row=n)

    def evaluate_batches(self, cuts: Iterable[list[Any]], *, window: int | None = None) -> Iterator[AnswerReport]:
        after = self.breaks[self.streams] if self.streams < len(self.breaks) else None
        self.streams += 1
        done = 0
        for cut in cuts:
            for n, row, _ in cut:
                if after is not None and done >= after:
                    raise RuntimeError("the batch broke outside any one row")
                yield self.report(n, row)
                done += 1

    def evaluate_numbered(self, rows: Iterable[tuple[int, Any]], batch_size: int = 32) -> Iterator[AnswerReport]:
        if not isinstance(rows, list):  # a stream of rows (evaluate_rows): cut, as the Evaluator does
            yield from self.evaluate_batches(batches(rows, batch_size))
            return
        for n, row in rows:  # one row alone (evaluate_alone)
            if n in self.bad and n not in self.stop:  # a stop comes first
                raise ValueError(f"row {n} fails alone")
            yield self.report(n, row)


@settings(max_examples=200, deadline=None)
@given(
    n_rows=st.integers(0, 12),
    batch_size=st.integers(1, 4),
    breaks=st.lists(st.one_of(st.none(), st.integers(0, 6)), max_size=4),
    bad=st.sets(st.integers(1, 12), max_size=4),
    stop=st.sets(st.integers(1, 12), max_size=1),
    cut=st.booleans(),
)
def test_every_row_gets_one_report_in_order_whatever_breaks(
    n_rows: int, batch_size: int, breaks: list[int | None], bad: set[int], stop: set[int], cut: bool
) -> None:
    rows = [(n, {"id": f"r{n}"}) for n in range(1, n_rows + 1)]
    evaluator = Breaking(breaks, bad, stop)
    got: list[AnswerReport] = []
    stopped = False
    try:
        if cut:  # rows already cut (the Ray engine's actors)
            reports = evaluate_guarded(evaluator, batches(rows, batch_size))  # type: ignore[arg-type]
        else:  # rows as they stream in (the local engine)
            reports = evaluate_rows(evaluator, rows, batch_size=batch_size)  # type: ignore[arg-type]
        for report in reports:
            got.append(report)
    except BudgetExceededError:
        stopped = True
    first_stop = min((n for n in stop if n <= n_rows), default=None)
    assert stopped == (first_stop is not None)
    expect = [n for n, _ in rows if first_stop is None or n < first_stop]
    assert [r.row for r in got] == expect  # one each, in input order, up to the stop
    for r in got:
        # a row fails only when it was scored alone (its batch broke) and fails alone; it is then its own ERROR
        assert r.verdict in ("PASS", "ERROR") and (r.verdict == "PASS" or r.row in bad)
        assert r.id == f"r{r.row}"
