"""``io.reports.write_parquet`` replaces its Parquet file atomically (``groundjudge.atomic``)."""

from __future__ import annotations

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
