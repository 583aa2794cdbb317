"""--resume, --retry-errors, --overwrite and --dry-run: nothing already written is lost, a dry run writes nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from groundjudge.cli import app
from groundjudge.testing import ScriptedLLMServer, route
from tests.pipeline.test_pipeline import HANDLERS

runner = CliRunner()


@pytest.fixture(scope="module")
def tiny_model(tiny_nli: Path) -> Path:
    return tiny_nli


@pytest.fixture(autouse=True)
def _tiny_env(monkeypatch: pytest.MonkeyPatch, tiny_model: Path) -> None:
    monkeypatch.setenv("GROUNDJUDGE_NLI_MODEL", str(tiny_model))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


ROWS = [
    {"id": f"r{i}", "contexts": [f"Item {i} costs {i * 3} dollars."], "answer": f"Item {i} costs {i * 3} dollars."}
    for i in range(6)
]


def write_rows(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def score(tmp_path: Path, data: Path, out: Path, *extra: str) -> Any:
    return runner.invoke(
        app, ["score", str(data), "--out", str(out), "--cache-dir", str(tmp_path / "c"), "--no-progress", *extra]
    )


def reports(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def flat(output: str) -> str:
    """The summary table, unwrapped."""
    return " ".join(output.replace("│", " ").split()) + " "


def mark(line: str) -> str:
    """A report line tagged as written by an earlier run, so a test can tell kept lines from new ones."""
    data = json.loads(line)
    data["metadata"] = {"earlier": True}
    return json.dumps(data)


@pytest.fixture
def scored(tmp_path: Path) -> tuple[Path, Path]:
    data = write_rows(tmp_path / "in.jsonl", ROWS)
    out = tmp_path / "out.jsonl"
    result = score(tmp_path, data, out)
    assert result.exit_code == 0, result.output
    out.write_text("".join(mark(x) + "\n" for x in out.read_text().splitlines()))
    return data, out


def test_a_damaged_line_in_the_middle_loses_nothing_else(tmp_path: Path, scored: tuple[Path, Path]) -> None:
    # Issue 13: a blank or unparsable line in the middle of OUT truncated everything after it.
    data, out = scored
    lines = out.read_text().splitlines()
    damaged = '{"id": "r2", "verdict": "PA'  # r2's report, cut short and followed by the rest of the file
    out.write_text("\n".join([lines[0], "", lines[1], damaged, *lines[3:]]) + "\n")
    result = score(tmp_path, data, out, "--resume")
    assert result.exit_code == 0, result.output
    assert "out.jsonl, line 4: damaged" in flat(result.output)  # said on stderr, with where
    after = reports(out)
    assert sorted(r["id"] for r in after) == [f"r{i}" for i in range(6)]  # each once
    kept = [r["id"] for r in after if r["metadata"].get("earlier")]
    assert kept == ["r0", "r1", "r3", "r4", "r5"]  # the earlier run's reports, untouched and in order
    assert after[-1]["id"] == "r2" and not after[-1]["metadata"]  # only the damaged row was scored again
    assert (tmp_path / "out.jsonl.damaged").read_text() == damaged + "\n"  # moved aside, not lost


def test_a_torn_last_line_is_cut_and_a_complete_one_kept(tmp_path: Path, scored: tuple[Path, Path]) -> None:
    data, out = scored
    lines = out.read_text().splitlines()
    out.write_text("\n".join(lines))  # the last report lost only its newline: it is complete, so kept
    result = score(tmp_path, data, out, "--resume")
    assert result.exit_code == 0 and "answers 0 " in flat(result.output)  # nothing scored again
    assert [r["id"] for r in reports(out)] == [f"r{i}" for i in range(6)]
    out.write_text("\n".join(lines[:5]) + "\n" + lines[5][:40])  # a kill in mid-write: cut, row scored again
    result = score(tmp_path, data, out, "--resume")
    assert result.exit_code == 0, result.output
    after = reports(out)
    assert [r["id"] for r in after] == [f"r{i}" for i in range(6)] and not after[-1]["metadata"]


def test_dry_run_writes_nothing(tmp_path: Path, scored: tuple[Path, Path]) -> None:
    # Issue 13: --dry-run --resume truncated OUT.
    data, out = scored
    lines = out.read_text().splitlines()
    out.write_text("\n".join([lines[0], "{oops", *lines[1:5]]) + "\n" + lines[5][:30])
    before = out.read_bytes()
    for flags in (["--resume"], ["--resume", "--retry-errors"], ["--overwrite"], []):
        result = score(tmp_path, data, out, "--dry-run", *flags)
        assert result.exit_code == 0, (flags, result.output)
        assert out.read_bytes() == before, flags
    assert not (tmp_path / "out.jsonl.damaged").exists()
    estimate = json.loads(score(tmp_path, data, out, "--dry-run", "--resume").stdout)
    assert estimate["rows"] == 1  # r5, whose line is torn


def test_a_duplicate_id_is_an_input_error_of_the_second_row(tmp_path: Path) -> None:
    # Issue 13: two input rows with one id lost the second.
    rows = [ROWS[0], ROWS[1], {**ROWS[2], "id": "r0"}, ROWS[3]]
    data = write_rows(tmp_path / "in.jsonl", rows)
    out = tmp_path / "out.jsonl"
    result = score(tmp_path, data, out)
    assert result.exit_code == 1, result.output
    got = reports(out)
    assert [r["id"] for r in got] == ["r0", "r1", "row-3", "r3"]
    assert got[0]["verdict"] != "ERROR" and got[2]["verdict"] == "ERROR"
    assert got[2]["errors"] == ["row 3, field 'id': duplicate id 'r0': row 1 has it already"]
    assert got[2]["row"] == 3
    # resume recognises it: nothing is scored or written again, and OUT still holds that failure (exit 1)
    again = score(tmp_path, data, out, "--resume")
    assert again.exit_code == 1 and "still holds 1 failed report of an earlier run" in flat(again.output)
    assert [r["id"] for r in reports(out)] == ["r0", "r1", "row-3", "r3"]


def test_retry_errors_scores_failed_rows_again_and_replaces_them(tmp_path: Path, scored: tuple[Path, Path]) -> None:
    data, out = scored
    lines = out.read_text().splitlines()
    failed = json.loads(lines[1])
    failed.update(verdict="ERROR", errors=["judge: ServerError 503 after 6 attempts"])
    warned = json.loads(lines[4])
    warned["errors"] = ["qa: RateLimitError 429"]  # a verdict with errors counts as failed too
    lines[1], lines[4] = json.dumps(failed), json.dumps(warned)
    out.write_text("\n".join(lines) + "\n")
    assert score(tmp_path, data, out, "--retry-errors").exit_code == 2  # needs --resume
    plain = score(tmp_path, data, out, "--resume")
    assert reports(out)[1]["verdict"] == "ERROR"  # plain resume leaves them, and says so: OUT is not all scored
    assert plain.exit_code == 1, plain.output
    assert "still holds 2 failed reports of an earlier run (first: 'r1'): --resume --retry-errors" in flat(plain.output)
    result = score(tmp_path, data, out, "--resume", "--retry-errors")
    assert result.exit_code == 0, result.output
    after = reports(out)
    assert [r["id"] for r in after] == ["r0", "r2", "r3", "r5", "r1", "r4"]
    assert all(r["metadata"].get("earlier") for r in after[:4])
    assert all(not r["metadata"] and r["verdict"] != "ERROR" and not r["errors"] for r in after[4:])
    assert not list(tmp_path.glob("out.jsonl*.tmp"))  # the repair left no temporary file


def test_overwrite_keeps_the_old_output_until_the_new_run_has_a_row(tmp_path: Path) -> None:
    # Issue 13: --overwrite truncated OUT before anything had succeeded.
    data = write_rows(tmp_path / "in.jsonl", [{"id": "a", "contexts": ["It opens at 9."], "claim": "It opens at 9."}])
    out = tmp_path / "out.jsonl"
    out.write_text('{"id": "old", "verdict": "PASS"}\n')
    before = out.read_bytes()
    with ScriptedLLMServer(route(HANDLERS)) as server:
        llm = ["--llm", "openai/gpt-4o-mini", "--base-url", server.openai_base_url, "--mode", "llm", "--no-qa"]
        replay = score(tmp_path, data, out, "--overwrite", *llm, "--cache-mode", "only")  # a miss on row 1
        assert replay.exit_code == 1 and "cache-only run stopped" in replay.output
        assert out.read_bytes() == before
        broke = score(tmp_path, data, out, "--overwrite", *llm, "--max-calls", "0")
        assert broke.exit_code == 3 and "No row finished" in broke.output
        assert out.read_bytes() == before and server.requests == []
        done = score(tmp_path, data, out, "--overwrite", *llm)
        assert done.exit_code == 0, done.output
    assert [r["id"] for r in reports(out)] == ["a"]


def _fail(line: str) -> str:
    data = json.loads(line)
    data.update(verdict="ERROR", errors=["judge: ServerError 503 after 6 attempts"])
    return json.dumps(data)


def test_retry_errors_stopped_early_keeps_the_old_reports_of_the_rows_it_did_not_reach(tmp_path: Path) -> None:
    # --retry-errors dropped every old ERROR report at its first write: a budget stop left those rows with none,
    # and a failed id no longer in the input vanished.
    data, out = write_rows(tmp_path / "in.jsonl", ROWS), tmp_path / "out.jsonl"
    with ScriptedLLMServer(route(HANDLERS)) as server:
        llm = ["--llm", "openai/gpt-4o-mini", "--base-url", server.openai_base_url, "--mode", "llm", "--no-qa"]
        assert score(tmp_path, data, out, *llm).exit_code == 0  # the earlier run, with the settings resumed below
        lines = [mark(x) for x in out.read_text().splitlines()]
        gone = json.loads(_fail(lines[0]))
        gone["id"] = "gone"  # failed in an earlier run, no longer in the input
        for i in (1, 3, 4):
            lines[i] = _fail(lines[i])
        out.write_text("\n".join([*lines, json.dumps(gone)]) + "\n")
        server.requests.clear()
        fresh = ["--cache-dir", str(tmp_path / "c2")]  # the earlier run's replies are not in it: every call is paid
        result = score(
            tmp_path, data, out, "--resume", "--retry-errors", *llm, *fresh, "--batch-size", "1", "--max-calls", "1"
        )
        calls = len(server.requests)
    assert result.exit_code == 3, result.output  # the budget stops it after the first row scored again
    assert calls == 1  # one call a row here (the extraction)
    after = reports(out)
    assert sorted(r["id"] for r in after) == sorted([f"r{i}" for i in range(6)] + ["gone"])  # each once
    by_id = {r["id"]: r for r in after}
    # the three rows to retry are in flight together: whichever took the one call allowed is scored again and
    # replaces its old report (timing decides which); the others were not reached and keep theirs
    again = [rid for rid in ("r1", "r3", "r4") if by_id[rid]["verdict"] != "ERROR" and not by_id[rid]["metadata"]]
    assert len(again) == 1, again
    for rid in {"r1", "r3", "r4", "gone"} - set(again):  # not reached, or not in the input: the old report stays
        assert by_id[rid]["verdict"] == "ERROR" and by_id[rid]["metadata"] == {"earlier": True}
    assert [r["id"] for r in after][-1] == again[0] and not list(tmp_path.glob("out.jsonl*.tmp"))


def test_a_killed_retry_leaves_two_reports_of_an_id_and_the_last_one_counts(
    tmp_path: Path, scored: tuple[Path, Path]
) -> None:
    # A --retry-errors run killed after a new report, before close() cut the old one: OUT holds both.
    data, out = scored
    lines = out.read_text().splitlines()
    old = _fail(lines[2])
    out.write_text("\n".join([*lines[:2], old, *lines[3:], lines[2]]) + "\n")  # r2: old ERROR, then a new PASS
    result = score(tmp_path, data, out, "--resume", "--retry-errors")
    assert result.exit_code == 0 and "answers 0 " in flat(result.output)  # r2's last report is fine: not redone
    after = reports(out)
    assert [r["id"] for r in after] == ["r0", "r1", "r3", "r4", "r5", "r2"]  # each once, the last kept
    assert after[-1]["verdict"] != "ERROR"


def test_the_python_run_writes_what_the_command_writes_and_raises_its_stop(tmp_path: Path) -> None:
    """Issue 17: the local engine existed only inside a Typer command. groundjudge.runs.score_file is the same run
    from Python: the same OUT line for line, --resume and --retry-errors with the same meaning, and a stop raised
    after the finished rows are written (issue 28: one RunResult, one RunStopped, for both engines)."""
    from groundjudge.config import Config
    from groundjudge.errors import BudgetExceededError
    from groundjudge.runs import RunStopped, score_file

    data = write_rows(tmp_path / "in.jsonl", [*ROWS, {"id": "bad", "contexts": [], "answer": "x"}])
    assert score(tmp_path, data, tmp_path / "cli.jsonl").exit_code == 1  # the bad row fails
    result = score_file(data, tmp_path / "py.jsonl", Config.make(cache_dir=str(tmp_path / "c")))
    assert (tmp_path / "py.jsonl").read_text() == (tmp_path / "cli.jsonl").read_text()
    assert result.summary.n == 7 and result.summary.rows_failed == 1 and result.stopped is None
    again = score_file(data, tmp_path / "py.jsonl", Config.make(cache_dir=str(tmp_path / "c")), resume=True)
    assert again.summary.n == 0 and (tmp_path / "py.jsonl").read_text() == (tmp_path / "cli.jsonl").read_text()
    assert again.failures_kept == ["bad"]  # what the command exits 1 for: OUT still holds the bad row's report
    with ScriptedLLMServer(route(HANDLERS)) as server:
        cfg = Config.make(
            llm="openai/gpt-4o-mini", base_url=server.openai_base_url, cache_dir=str(tmp_path / "c2"), max_calls=1
        )
        with pytest.raises(RunStopped) as stop:
            score_file(data, tmp_path / "llm.jsonl", cfg, batch_size=1)
    assert isinstance(stop.value, BudgetExceededError) and isinstance(stop.value.cause, BudgetExceededError)
    assert stop.value.summary is stop.value.result.summary and stop.value.calls == stop.value.cause.calls
    assert stop.value.summary.n == len(reports(tmp_path / "llm.jsonl"))


def test_a_retried_failure_that_is_no_longer_in_the_input_still_fails_the_resume(tmp_path: Path) -> None:
    # --retry-errors counted every earlier failure as scored again; a failed row the input no longer holds (its
    # line deleted, or given another id) kept its ERROR report in OUT and the resume exited 0
    from groundjudge.config import Config
    from groundjudge.runs import score_file

    data = write_rows(tmp_path / "in.jsonl", [*ROWS, {"id": "bad", "contexts": [], "answer": "x"}])
    out = tmp_path / "out.jsonl"
    assert score(tmp_path, data, out).exit_code == 1
    fixed = write_rows(tmp_path / "fixed.jsonl", ROWS)
    result = score(tmp_path, fixed, out, "--resume", "--retry-errors")
    assert result.exit_code == 1 and "bad" in flat(result.output)
    assert [r["verdict"] for r in reports(out) if r["id"] == "bad"] == ["ERROR"]
    again = score_file(fixed, out, Config.make(cache_dir=str(tmp_path / "c")), resume=True, retry_errors=True)
    assert again.failures_kept == ["bad"]


def test_a_csv_out_is_refused_before_any_work(tmp_path: Path) -> None:
    """'score rows.jsonl -o scored.csv' wrote JSON lines under a CSV name (exit 0): a spreadsheet showed one cell a
    line, and 'calibrate scored.csv' read the reports as CSV input rows and failed. OUT is JSONL or Parquet."""
    from groundjudge.config import Config
    from groundjudge.errors import ConfigError
    from groundjudge.runs import score_file

    data = write_rows(tmp_path / "in.jsonl", ROWS[:1])
    for name in ("scored.csv", "scored.CSV"):
        result = score(tmp_path, data, tmp_path / name)
        assert result.exit_code == 2, result.output
        assert "not CSV" in result.output and f"--out {tmp_path / name}" in " ".join(result.output.split())
        assert not (tmp_path / name).exists()
    with pytest.raises(ConfigError, match="not CSV"):
        score_file(data, tmp_path / "py.csv", Config.make(cache_dir=str(tmp_path / "c")))
    assert not (tmp_path / "py.csv").exists()


def test_a_resume_over_ids_read_by_the_earlier_id_rule_is_refused(tmp_path: Path) -> None:
    # Since the one id rule (io.ids.id_text), 1.0 is "1" and " r1" is "r1": an OUT written before it keeps "1.0" and
    # " r1", which matched no row, so --resume scored those rows again and appended a second report under the new id
    rows = [{**row, "id": rid} for row, rid in zip(ROWS[:4], [1.0, " r1", "r2", 3], strict=True)]
    data = write_rows(tmp_path / "in.jsonl", rows)
    out = tmp_path / "out.jsonl"
    assert score(tmp_path, data, out).exit_code == 0
    earlier = {"1": "1.0", "r1": " r1"}  # what groundjudge wrote for these rows before the rule
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    out.write_text("".join(json.dumps({**r, "id": earlier.get(r["id"], r["id"])}) + "\n" for r in lines))
    before = out.read_bytes()
    for flags in (["--resume"], ["--resume", "--retry-errors"], ["--resume", "--dry-run"]):
        result = score(tmp_path, data, out, *flags)
        assert result.exit_code == 2, result.output
        said = flat(result.output)
        assert "2 of its reports carry an id that this groundjudge reads otherwise" in said, said
        assert 'row 1: "1.0" in OUT, "1" now' in said and 'row 2: " r1" in OUT, "r1" now' in said, said
        assert out.read_bytes() == before  # nothing scored, nothing appended
    # the ids renamed in OUT as the message says: the resume has nothing left to score
    out.write_text("".join(json.dumps(r) + "\n" for r in lines))
    result = score(tmp_path, data, out, "--resume")
    assert result.exit_code == 0 and "answers 0 " in flat(result.output), result.output
    assert sorted(r["id"] for r in reports(out)) == ["1", "3", "r1", "r2"]
