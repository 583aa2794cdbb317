"""``groundjudge report OUT`` exits as ``score`` does for its OUT (docs/how-to/ci.md "Exit codes"): 1 when OUT holds a
failed row (ERROR, a stage named in ``errors``, a score that is no number), 0 otherwise. It exited 0 on a file of
nothing but ERROR rows, which a script read as success."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from groundjudge.cli import app
from groundjudge.io.reports import dumps
from groundjudge.models import AnswerReport, Scores

runner = CliRunner()
ERROR = AnswerReport(id="e", verdict="ERROR", mode="cascade", scores=Scores(), errors=["judge: HTTP 500"])
PASSED = AnswerReport(
    id="p", verdict="PASS", mode="nli", scores=Scores(combined=0.9, n_claims=1, n_judged=1, n_supported=1)
)


def write(path: Path, reports: list[AnswerReport]) -> Path:
    path.write_text("".join(dumps(r) + "\n" for r in reports), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("reports", "failed"),
    [
        pytest.param([ERROR.model_copy(update={"id": f"e{i}"}) for i in range(3)], 3, id="all-error"),
        pytest.param([ERROR, PASSED], 1, id="some-error"),
        pytest.param([PASSED.model_copy(update={"verdict": "WARN", "errors": ["QA: HTTP 500"]})], 1, id="errors"),
        pytest.param([PASSED], 0, id="none"),
    ],
)
def test_report_exits_1_when_the_file_holds_a_failed_row(
    tmp_path: Path, reports: list[AnswerReport], failed: int
) -> None:
    out = write(tmp_path / "out.jsonl", reports)
    result = runner.invoke(app, ["report", str(out), "--json"])
    assert result.exit_code == (1 if failed else 0), result.output
    assert json.loads(result.stdout)["rows_failed"] == failed  # the summary is written all the same
    if failed:
        assert f"{failed} of {len(reports)} rows failed" in result.stderr
    # the page too, and --only-flagged counts the whole file's failures
    page = tmp_path / "page.html"
    shown = runner.invoke(app, ["report", str(out), "--html", str(page), "--only-flagged"])
    assert shown.exit_code == (1 if failed else 0) and page.is_file(), shown.output


@pytest.mark.parametrize("text", ["", "\n\n"], ids=["empty", "blank-lines"])
def test_report_of_a_file_with_no_report_is_no_success(tmp_path: Path, text: str) -> None:
    # a run killed before it wrote a row leaves an empty OUT: "answers 0, rows failed 0" and exit 0 read as a pass
    out = tmp_path / "out.jsonl"
    out.write_text(text, encoding="utf-8")
    for extra in ([], ["--json"], ["--html", str(tmp_path / "page.html")]):
        result = runner.invoke(app, ["report", str(out), *extra])
        assert result.exit_code == 2, result.output
        assert "holds no reports" in result.stderr
