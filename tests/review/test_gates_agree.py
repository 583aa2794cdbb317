"""The two gates, ``compare --fail-if-worse`` (run B against run A) and the pytest baseline gate
(``assert_file_grounded`` with A as the baseline), draw the rows they compare by one rule
(:func:`groundjudge.review.compare.gate_rows`): the same pair of report files never passes one and fails the other
for a failure. Before, the baseline gate asked ``vouches`` and compare its own tests (a failure only "in B, not in
A", a FAIL only where A had no combined score, no new id at all), and each passed a failure the other failed."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from groundjudge.cli import app
from groundjudge.models import AnswerReport, Scores, Usage
from groundjudge.review.compare import compare_runs, gate_rows
from groundjudge.review.notebook import Run
from groundjudge.testing import GroundingAssertionError, assert_file_grounded

runner = CliRunner()


def scored(rid: str, verdict: str, combined: float | None, errors: tuple[str, ...] = ()) -> AnswerReport:
    n = 0 if combined is None else 4
    supported = n if verdict == "PASS" else max(0, n - 2)
    scores = Scores(combined=combined, n_claims=n, n_judged=n, n_supported=supported)
    return AnswerReport(id=rid, verdict=verdict, mode="cascade", scores=scores, errors=list(errors))  # type: ignore[arg-type]


def nan_part(r: AnswerReport) -> AnswerReport:
    """``r`` with its NLI part no number (a file another tool wrote): a failed row, its combined score fine."""
    return r.model_copy(update={"scores": r.scores.model_copy(update={"nli": math.nan})})


class Fixed:
    """An evaluator whose run hands out the reports it was given."""

    def __init__(self, reports: list[AnswerReport]) -> None:
        self.reports = reports

    def run(self, rows: object, columns: object = None) -> Run:
        return Run(self.reports, Usage(), 0, 0)


def write(path: Path, reports: list[AnswerReport]) -> Path:
    path.write_text("".join(json.dumps(r.model_dump(mode="json")) + "\n" for r in reports), encoding="utf-8")
    return path


def both_gates(
    tmp_path: Path, a: list[AnswerReport], b: list[AnswerReport], min_score: float = 0.5
) -> tuple[int, bool]:
    """``compare A B --fail-if-worse``'s exit code, and whether the baseline gate (A the baseline) passes B."""
    pa, pb = write(tmp_path / "a.jsonl", a), write(tmp_path / "b.jsonl", b)
    code = runner.invoke(app, ["compare", str(pa), str(pb), "--fail-if-worse"]).exit_code
    try:
        assert_file_grounded([], evaluator=Fixed(b), baseline=pa, min_score=min_score)
    except GroundingAssertionError:
        return code, False
    return code, True


GOOD = [scored(f"g{i}", "PASS", 0.9) for i in range(9)]


@pytest.mark.parametrize(
    ("before", "now"),
    [
        # A's WARN carries errors (its QA check failed: a score at its worst value); B judges the answer FAIL. compare
        # took A's finite score as a judgement that vouched for B's FAIL and passed it
        pytest.param(
            scored("r", "WARN", 0.6, ("QA: HTTP 500",)), scored("r", "FAIL", 0.3), id="warn-with-errors-then-fail"
        ),
        # the same answer ERROR in both runs: compare counted a failure only "in B, not in A"
        pytest.param(
            scored("r", "ERROR", None, ("HTTP 500",)), scored("r", "ERROR", None, ("HTTP 500",)), id="error-in-both"
        ),
        pytest.param(
            scored("r", "WARN", 0.6, ("QA: HTTP 500",)),
            scored("r", "WARN", 0.6, ("QA: HTTP 500",)),
            id="errors-in-both",
        ),
        # a new id in B (A lacks it) that failed, or that is FAIL: compare never looked at new ids
        pytest.param(None, scored("r", "ERROR", None, ("HTTP 500",)), id="new-error"),
        pytest.param(None, scored("r", "FAIL", 0.1), id="new-fail"),
        # B's NLI part is no number (a failed row, its combined fine): the baseline gate asked only for the combined
        # score and passed it
        pytest.param(scored("r", "PASS", 0.9), nan_part(scored("r", "PASS", 0.9)), id="nan-part"),
        # an answer of A that B lacks
        pytest.param(scored("r", "PASS", 0.9), None, id="missing"),
        # an answer A judged that B checks no claim of (an extraction that stopped finding the claims of the answers A
        # found wrong): compare paired it, found no score on B's side and left it out of every test; it passed
        pytest.param(scored("r", "FAIL", 0.1), scored("r", "NO_CLAIMS", None), id="fail-then-no-claims"),
        pytest.param(scored("r", "PASS", 0.9), scored("r", "NO_CLAIMS", None), id="pass-then-no-claims"),
    ],
)
def test_a_failure_fails_both_gates(tmp_path: Path, before: AnswerReport | None, now: AnswerReport | None) -> None:
    a = [*GOOD, *([before] if before else [])]
    b = [*GOOD, *([now] if now else [])]
    code, passes = both_gates(tmp_path, a, b)
    assert (code, passes) == (1, False)


def test_a_failure_in_the_baseline_lets_no_regression_through_either_gate(tmp_path: Path) -> None:
    # A failed its QA check on ten answers (a score at its worst value, 0.0) that B scores 0.9; and B's other ten
    # answers fell from 0.95 to 0.7. Paired with A's failures, B's mean rose: neither gate saw the fall
    a = [scored(f"f{i}", "FAIL", 0.0, ("QA: HTTP 500",)) for i in range(10)]
    a += [scored(f"s{i}", "PASS", 0.95) for i in range(10)]
    b = [scored(f"f{i}", "PASS", 0.9) for i in range(10)]
    b += [scored(f"s{i}", "WARN", 0.7) for i in range(10)]
    rows = gate_rows(a, b)
    assert [x.id for x, _ in rows.paired] == [f"s{i}" for i in range(10)]  # only what both vouch for is paired
    assert [r.id for r in rows.alone] == [f"f{i}" for i in range(10)] and not rows.failed and not rows.missing
    assert compare_runs(a, b)["metrics"]["combined"]["b_worse"]
    assert both_gates(tmp_path, a, b) == (1, False)


def test_what_both_vouch_for_passes_both_gates(tmp_path: Path) -> None:
    # the other side: B no worse, nothing failed, nothing missing; and B repairing A's failures is no loss
    a = [*GOOD, scored("r", "ERROR", None, ("HTTP 500",)), scored("q", "WARN", 0.6, ("QA: HTTP 500",))]
    b = [*GOOD, scored("r", "PASS", 0.9), scored("q", "PASS", 0.85)]
    assert both_gates(tmp_path, a, b) == (0, True)
    assert both_gates(tmp_path, GOOD, GOOD) == (0, True)


def test_runs_scored_with_other_settings_pass_neither_gate(tmp_path: Path) -> None:
    # B scored with another preset than A: compare refuses to gate (exit 2), the baseline gate fails; both gate
    # when told to (allow other settings), each on the same rows
    a = [r.model_copy(update={"versions": {"verdict": "preset=default"}}) for r in GOOD]
    b = [r.model_copy(update={"versions": {"verdict": "preset=research"}}) for r in GOOD]
    assert both_gates(tmp_path, a, b) == (2, False)
    pa, pb = write(tmp_path / "a.jsonl", a), write(tmp_path / "b.jsonl", b)
    assert runner.invoke(app, ["compare", str(pa), str(pb), "--fail-if-worse", "--allow-other-settings"]).exit_code == 0
    assert_file_grounded([], evaluator=Fixed(b), baseline=pa, allow_other_settings=True)
