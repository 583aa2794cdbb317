"""The pytest baseline gate (``assert_file_grounded`` with a baseline) holds "no failure passes a gate" over
generated runs, on the strategies compare's gate is held to it with (``tests/review/generated_runs.py``): turning
any answer of a run into a failure (ERROR, a stage named in ``errors``, a score that is no number, a failed part)
never turns the gate from fail to pass, fails it whatever it said before, and raises no score."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groundjudge.io.reports import dumps
from groundjudge.models import AnswerReport, Usage
from groundjudge.review.compare import compare_runs
from groundjudge.review.notebook import Run
from groundjudge.tally import failed_row
from groundjudge.testing import GroundingAssertionError, assert_file_grounded
from tests.review.generated_runs import FAILURES, LABEL_SETS, fates, made_to_fail
from tests.review.test_quantities import _report

RANK = {"PASS": 3, "WARN": 2, "FAIL": 1, "ERROR": 0, "NO_CLAIMS": 0}


class Fixed:
    """An evaluator whose run hands out the reports it was given."""

    def __init__(self, reports: list[AnswerReport]) -> None:
        self.reports = reports

    def run(self, rows: object, columns: object = None) -> Run:
        return Run(self.reports, Usage(), 0, 0)


def gate(run: list[AnswerReport], baseline: Path, min_score: float) -> str | None:
    """The baseline gate's failure message, or None when it passes."""
    try:
        assert_file_grounded([], min_score, evaluator=Fixed(run), baseline=baseline, show=1000)
    except GroundingAssertionError as exc:
        return str(exc)
    return None


def no_higher(failed: float | None, honest: float | None) -> bool:
    """``failed`` is no score above ``honest``: missing or not a number counts as the lowest."""
    if failed is None or failed != failed:
        return True
    return honest is not None and honest == honest and failed <= honest


@settings(deadline=None, max_examples=60, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(claims=st.lists(LABEL_SETS, min_size=1, max_size=20), data=st.data())
def test_no_failure_passes_the_baseline_gate(tmp_path: Path, claims: list[list[str]], data: st.DataObject) -> None:
    before = [_report(f"r{i}", labels) for i, labels in enumerate(claims)]
    # the run: each answer as the baseline judged it, or judged anew (other claims: better or worse)
    run = [_report(r.id, data.draw(LABEL_SETS)) if data.draw(st.booleans()) else r for r in before]
    baseline = tmp_path / "baseline.jsonl"
    baseline.write_text("".join(dumps(r) + "\n" for r in before), encoding="utf-8")
    min_score = data.draw(st.sampled_from([0.0, 0.5, 0.8]))
    kinds = data.draw(fates(len(run)))
    failed = [r if k == "same" else made_to_fail(r, k) for r, k in zip(run, kinds, strict=True)]
    for honest, r, kind in zip(run, failed, kinds, strict=True):
        if kind == "same":
            continue
        assert failed_row(r), kind  # the summary counts it failed
        # a failure raises no score and no verdict
        assert RANK[r.verdict] <= RANK[honest.verdict], kind
        for key in ("combined", "claims", "nli", "qa"):
            assert no_higher(getattr(r.scores, key), getattr(honest.scores, key)), (kind, key)
    said_before, said = gate(run, baseline, min_score), gate(failed, baseline, min_score)
    # whatever the gate said of the honest run, it fails the failed one, and names each failed answer
    assert said is not None, (kinds, said_before)
    for r, kind in zip(failed, kinds, strict=True):
        if kind != "same":
            assert f"\n{r.id}: " in f"\n{said}", (kind, said)
    # and compare's gate, on the same runs, says the same
    assert compare_runs(before, failed)["b_worse"]
    if said_before is not None:  # from fail: still fail (the stronger claim above holds it; said for the record)
        assert said is not None


@pytest.mark.parametrize("kind", FAILURES)
def test_each_failure_alone_fails_a_gate_the_run_passes(tmp_path: Path, kind: str) -> None:
    # the run matches its baseline answer for answer (the gate passes it); one answer fails: the gate fails
    before = [_report(f"r{i}", ["SUPPORTED"] * 4) for i in range(6)]
    baseline = tmp_path / "baseline.jsonl"
    baseline.write_text("".join(dumps(r) + "\n" for r in before), encoding="utf-8")
    assert gate(before, baseline, 0.8) is None
    said = gate([made_to_fail(before[0], kind), *before[1:]], baseline, 0.8)
    assert said is not None and "\nr0: " in f"\n{said}", said
