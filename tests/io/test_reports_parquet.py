"""``io.reports.write_parquet`` replaces its Parquet file atomically (``groundjudge.atomic``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from groundjudge.errors import GroundjudgeError
from groundjudge.io.reports import dumps, write_parquet
from groundjudge.models import AnswerReport, Scores


def _report(rid: str) -> str:
    return dumps(AnswerReport(id=rid, verdict="PASS", mode="nli", scores=Scores(combined=1.0)))


def test_a_bad_report_midway_leaves_the_old_parquet_file_whole_and_no_temp_file(tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    jsonl, out = tmp_path / "reports.jsonl", tmp_path / "reports.parquet"
    jsonl.write_text("".join(_report(f"r{i}") + "\n" for i in range(1500)), encoding="utf-8")
    assert write_parquet(jsonl, out) == 1500
    before = out.read_bytes()
    assert pq.read_table(out).column("id").to_pylist()[-1] == "r1499"
    # 1,500 good reports (a batch of 1,024 already written into the new file), then one that is not a report
    jsonl.write_text(jsonl.read_text(encoding="utf-8") + '{"id": "x", "verdict": 3}\n', encoding="utf-8")
    with pytest.raises(GroundjudgeError, match="line 1501"):
        write_parquet(jsonl, out)
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["reports.jsonl", "reports.parquet"]


def test_failure_flags_and_counts_are_false_and_zero_not_null_where_nothing_failed(tmp_path: Path) -> None:
    """The report line leaves ``claims_failed``, ``qa_failed``, ``n_nli_errors`` and the citation counts out while
    they are 0 / False, and the Parquet columns were filled from that line: a clean answer's flags were null, so
    ``claims_failed == 0`` selected none of the clean answers, and a filter on a failed flag saw nulls, not False.
    The flags are booleans (they were float 0.0 / 1.0), as the notebook frame has them."""
    pq = pytest.importorskip("pyarrow.parquet")
    failed = Scores(n_claims=1, claims_failed=True, qa_failed=True, n_nli_errors=1)
    lines = [_report("ok"), dumps(AnswerReport(id="bad", verdict="ERROR", mode="cascade", scores=failed))]
    jsonl, out = tmp_path / "reports.jsonl", tmp_path / "reports.parquet"
    jsonl.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    write_parquet(jsonl, out)
    table = pq.read_table(out)
    flags = ("claims_failed", "qa_failed", "n_nli_errors", "n_citations", "n_citations_unchecked")
    assert {name: table.column(name).to_pylist() for name in flags} == {
        "claims_failed": [False, True],  # booleans, as in the notebook frame: ~frame.claims_failed works on both
        "qa_failed": [False, True],
        "n_nli_errors": [0, 1],
        "n_citations": [0, 0],
        "n_citations_unchecked": [0, 0],
    }
    kinds = {name: str(table.schema.field(name).type) for name in flags}  # 0.0 == False: the type says which
    assert kinds == {name: "bool" if name.endswith("_failed") else "int64" for name in flags}


def test_the_parquet_out_is_read_back_by_every_command_not_taken_for_a_torn_jsonl_line(tmp_path: Path) -> None:
    """``score --out run.parquet`` writes a Parquet OUT; ``report run.parquet`` read it as JSON lines: a file with no
    newline was one torn last line, skipped, so the report said 0 answers and exited 0 (a failed run's gate passed);
    one with a newline byte was a pydantic error on ``PAR1``. It reads the ``report`` column, as the JSONL beside."""
    pytest.importorskip("pyarrow.parquet")
    from typer.testing import CliRunner

    from groundjudge.cli import app
    from groundjudge.io.reports import read_reports

    failed = AnswerReport(id="bad\n", verdict="ERROR", mode="nli", scores=Scores(), errors=["boom"])
    jsonl, out = tmp_path / "run.parquet.jsonl", tmp_path / "run.parquet"
    jsonl.write_text(_report("ok") + "\n" + dumps(failed) + "\n", encoding="utf-8")
    write_parquet(jsonl, out)
    assert [r.model_dump() for r in read_reports(out)] == [r.model_dump() for r in read_reports(jsonl)]
    shown = CliRunner().invoke(app, ["report", str(out), "--json"])
    assert shown.exit_code == 1, shown.output  # its failed row, read: exit 1, as score's
    summary = json.loads(shown.stdout)
    assert (summary["n"], summary["rows_failed"]) == (2, 1), summary
    renamed = tmp_path / "run.out"  # told by its magic bytes, not its name
    renamed.write_bytes(out.read_bytes())
    assert [r.id for r in read_reports(renamed)] == ["ok", "bad\n"]
    # a Parquet table that is no OUT (an input table) is named as such, not read as no reports
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = tmp_path / "rows.parquet"
    pq.write_table(pa.table({"id": ["a"], "answer": ["x"]}), rows)
    with pytest.raises(GroundjudgeError, match="no 'report' column"):
        list(read_reports(rows))
    # its rows are held to the JSONL reader's rules: a score no run writes, or a cell that is no report, is refused
    # by its row number
    wild = AnswerReport(id="w", verdict="PASS", mode="nli", scores=Scores(combined=1.5))
    for cell, message in ((dumps(wild), r"row 2 \(id 'w'\).*outside \[0, 1\]"), ('{"id": 3}', "row 2: .*no report")):
        table = tmp_path / "hand.parquet"
        pq.write_table(pa.table({"report": [_report("ok"), cell]}), table)
        with pytest.raises(GroundjudgeError, match=message):
            list(read_reports(table))


def test_calibrate_and_tune_take_a_parquet_out_as_the_report_readers_do(tmp_path: Path) -> None:
    """The report reader read a Parquet OUT, but the rule calibrate tells a score output by (``is_report_file``)
    said "only JSONL files can", so ``calibrate run.parquet`` took the OUT for input rows, and tune read it as JSON
    lines. Both now go through the one reader; a Parquet input table is still input rows."""
    pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa
    import pyarrow.parquet as pq

    from groundjudge.io.reports import is_report_file, read_reports
    from groundjudge.learn.tune import TuneSettings, load_examples

    jsonl, out = tmp_path / "run.parquet.jsonl", tmp_path / "run.parquet"
    jsonl.write_text(_report("ok") + "\n", encoding="utf-8")
    write_parquet(jsonl, out)
    rows = tmp_path / "rows.parquet"
    pq.write_table(pa.table({"id": ["a"], "claim": ["x"], "contexts": [["x"]]}), rows)
    assert is_report_file(out) and is_report_file(jsonl) and not is_report_file(rows)
    (tmp_path / "cut.parquet").write_bytes(out.read_bytes()[:20])  # PAR1, then nothing readable
    assert not is_report_file(tmp_path / "cut.parquet")
    # tune reads the Parquet OUT's reports as it reads the JSONL's (the same examples from either file)
    from groundjudge.checker.nli import NLIModel
    from tests.conftest import SHARED_MODEL

    tokenizer = NLIModel.shared(str(SHARED_MODEL)).tokenizer
    settings = TuneSettings()
    from_jsonl = load_examples([jsonl], tokenizer, settings, lambda _: None)
    from_parquet = load_examples([out], tokenizer, settings, lambda _: None)
    assert [(e.id, e.claim, e.label) for e in from_parquet] == [(e.id, e.claim, e.label) for e in from_jsonl]
    assert [r.id for r in read_reports(out)] == ["ok"]


def test_a_cost_that_is_a_worst_case_is_said_so_in_the_table(tmp_path: Path) -> None:
    """A call sent with no reply is counted at its worst case (``usage.unsettled_cost_usd``, a part of ``cost_usd``).
    The Parquet table and the notebook frame had ``cost_usd`` alone: a sum of the column read as a bill."""
    from groundjudge.models import Usage
    from groundjudge.review.notebook import to_dataframe

    pq = pytest.importorskip("pyarrow.parquet")
    pytest.importorskip("pandas")
    lost = Usage(calls=2, cost_usd=0.08, unsettled_calls=1, unsettled_cost_usd=0.07)
    reports = [
        AnswerReport(id="lost", verdict="PASS", mode="llm", scores=Scores(combined=1.0), usage=lost),
        AnswerReport(id="ok", verdict="PASS", mode="llm", scores=Scores(combined=1.0), usage=Usage(calls=1)),
    ]
    jsonl, out = tmp_path / "reports.jsonl", tmp_path / "reports.parquet"
    jsonl.write_text("".join(dumps(r) + "\n" for r in reports), encoding="utf-8")
    write_parquet(jsonl, out)
    assert pq.read_table(out).column("unsettled_cost_usd").to_pylist() == [0.07, 0.0]
    assert to_dataframe(reports)["unsettled_cost_usd"].tolist() == [0.07, 0.0]
    assert list(to_dataframe([]).columns) == list(to_dataframe(reports).columns)
