"""The command line: score on fixtures, bad rows, resume after a kill, budget stop, dry run, cache commands."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from groundjudge.cli import app
from groundjudge.testing import RecordedRequest, Reply, ScriptedLLMServer, claims_in, fenced_block, route
from tests.conftest import FIXTURES, ROOT, SHARED_MODEL
from tests.pipeline.test_pipeline import HANDLERS

runner = CliRunner()


def whole_answer_is_one_claim(req: RecordedRequest) -> Reply:
    answer = fenced_block(req, "ANSWER")
    return Reply.json({"claims": [{"text": answer, "source": answer}]})


def judge_quotes_the_claim(req: RecordedRequest) -> Reply:
    verdicts = [
        {"claim_id": cid, "verdict": "SUPPORTED", "reason": "verbatim", "quotes": [{"source": 1, "text": text}]}
        for cid, text in claims_in(req).items()
    ]
    return Reply.json({"verdicts": verdicts})


ONE_CLAIM = route({**HANDLERS, "claims": whole_answer_is_one_claim, "judge": judge_quotes_the_claim})


@pytest.fixture(autouse=True)
def _nli_env(monkeypatch: pytest.MonkeyPatch, shared_nli: Any) -> None:
    monkeypatch.setenv("GROUNDJUDGE_NLI_MODEL", str(SHARED_MODEL))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def strict_json(text: str) -> Any:
    """json.loads that refuses NaN and Infinity (which json.loads accepts by default)."""

    def refuse(name: str) -> Any:
        raise AssertionError(f"{name} in strict JSON: {text[:200]}")

    return json.loads(text, parse_constant=refuse)


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def test_help_lists_the_commands() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("score", "cache", "version"):
        assert command in result.output
    module = subprocess.run([sys.executable, "-m", "groundjudge", "--help"], capture_output=True, text=True, check=True)
    assert "score" in module.stdout


def test_score_help_shows_the_defaults() -> None:
    # Issue 13: rich markup swallowed the "[default: ...]" written in help strings.
    result = runner.invoke(app, ["score", "--help"], env={"COLUMNS": "250"}, terminal_width=250)
    assert result.exit_code == 0
    flat = " ".join(result.output.replace("│", " ").split())
    for shown in (
        "[default: cascade with an llm, else nli]",
        "[default: $GROUNDJUDGE_NLI_MODEL or the hub default]",
        "[default: $GROUNDJUDGE_CACHE_DIR or ~/.cache/groundjudge]",
        "[default: use]",
        "[default: 4]",
        "[default: 32]",
        "[default: qa]",
        "[default: default]",
        "--retry-errors",
    ):
        assert shown in flat, shown


def test_a_config_file_is_overridden_only_by_options_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Issue 13: the CLI's own defaults (qa, concurrency, cache_mode) overwrote the file: cache_mode only spent calls.
    import groundjudge.pipeline as pipeline
    from tests.pipeline.test_pipeline import CONTEXT, GOOD_ANSWER

    configs: list[Any] = []

    init = pipeline.Evaluator.__init__

    def recording(self: Any, config: Any = None, **kw: Any) -> None:
        configs.append(config)
        init(self, config, **kw)

    # the class's __init__, not the module's name: a module imported while a stand-in class sat there would keep it
    monkeypatch.setattr(pipeline.Evaluator, "__init__", recording)
    data = tmp_path / "in.jsonl"
    data.write_text(json.dumps({"id": "a", "contexts": [CONTEXT], "answer": GOOD_ANSWER}) + "\n")
    config = tmp_path / "cfg.json"
    config.write_text(json.dumps({"cache_mode": "only", "qa": False, "concurrency": 2}))
    with ScriptedLLMServer(route(HANDLERS)) as server:
        base = ["score", str(data), "--config", str(config), "--cache-dir", str(tmp_path / "c"), "--no-progress"]
        base += ["--llm", "openai/gpt-4o-mini", "--base-url", server.openai_base_url]
        replay = runner.invoke(app, [*base, "--out", str(tmp_path / "a.jsonl")])
        assert replay.exit_code == 1 and "cache-only run stopped" in replay.output, replay.output
        said = " ".join(replay.output.split())  # issue 18: it showed a key hash; now the row, the call, the fix
        assert "row 1 (id 'a'): no cached reply for the claims call to openai/gpt-4o-mini" in said, said
        assert "run once with --cache-mode use" in said
        assert server.requests == []  # the file's cache_mode only: nothing spent
        cfg = configs[-1]
        assert (cfg.cache_mode, cfg.qa, cfg.concurrency, cfg.llm) == ("only", False, 2, "openai/gpt-4o-mini")
        given = runner.invoke(
            app, [*base, "--out", str(tmp_path / "b.jsonl"), "--cache-mode", "use", "--qa", "--concurrency", "3"]
        )
        assert given.exit_code == 0, given.output
        cfg = configs[-1]
        assert (cfg.cache_mode, cfg.qa, cfg.concurrency) == ("use", True, 3)
        assert lines(tmp_path / "b.jsonl")[0]["qa"] is not None and server.requests


def test_a_non_finite_number_makes_its_row_an_error_never_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 13: an NLI NaN was written as the literal NaN and then the run summary died.
    from groundjudge.pipeline import evaluator as pipeline

    original = pipeline.Evaluator.evaluate_numbered

    def poisoned(self: Any, rows: Any, batch_size: int = 32) -> Any:
        for report in original(self, rows, batch_size=batch_size):
            if report.id == "nan":
                report.scores.combined = float("nan")
                report.scores.nli = float("inf")
                report.claims[0].nli.entailment = float("nan")  # type: ignore[union-attr]
            yield report

    monkeypatch.setattr(pipeline.Evaluator, "evaluate_numbered", poisoned)
    data = tmp_path / "in.jsonl"
    data.write_text(
        "".join(
            json.dumps({"id": rid, "contexts": ["Paris is the capital of France."], "claim": "Paris is in France."})
            + "\n"
            for rid in ("ok", "nan", "ok2")
        )
    )
    out = tmp_path / "out.jsonl"
    result = runner.invoke(app, ["score", str(data), "--out", str(out), "--cache-dir", str(tmp_path / "c")])
    assert result.exit_code == 1, result.output
    reports = [strict_json(x) for x in out.read_text().splitlines()]
    assert [r["id"] for r in reports] == ["ok", "nan", "ok2"]
    bad = reports[1]
    assert bad["verdict"] == "ERROR" and bad["scores"]["combined"] is None and bad["claims"][0]["label"] == "ERROR"
    assert "non-finite number" in bad["errors"][0] and "scores.combined" in bad["errors"][0]
    assert reports[0]["verdict"] != "ERROR" and reports[2]["verdict"] != "ERROR"
    flat = " ".join(result.output.replace("│", " ").split())
    assert "rows failed 1" in flat and "failed nan: non-finite number" in flat


def test_score_fixtures_in_nli_mode(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    result = runner.invoke(
        app,
        [
            "score",
            str(FIXTURES / "samples.jsonl"),
            "--out",
            str(out),
            "--cache-dir",
            str(tmp_path / "c"),
            "--no-progress",
        ],
    )
    assert result.exit_code == 0, result.output
    reports = lines(out)
    inputs = lines(FIXTURES / "samples.jsonl")
    assert [r["id"] for r in reports] == [r["id"] for r in inputs]
    assert all(r["mode"] == "nli" and r["usage"]["calls"] == 0 for r in reports)
    assert all(r["label"] == i["label"] for r, i in zip(reports, inputs, strict=True))
    # What the shared model decides (nli mode: SUPPORTED at entailment >= 0.55, CONTRADICTED only at >= 0.9).
    # refund-policy is a miss of the small model: its paraphrase "no longer get a full refund" reaches an entailment
    # of only 0.35, so a consistent answer FAILs (its second claim, a near restatement of one sentence, is found at
    # 0.56 against that sentence's window; 0.10 against the whole passage); the claim rows cannot be CONTRADICTED.
    verdicts = {r["id"]: (r["verdict"], [c["label"] for c in r["claims"]]) for r in reports}
    assert verdicts == {
        "eiffel-good": ("PASS", ["SUPPORTED", "SUPPORTED"]),
        "eiffel-bad": ("FAIL", ["UNSUPPORTED", "UNSUPPORTED"]),
        "refund-policy": ("FAIL", ["UNSUPPORTED", "SUPPORTED"]),
        "refund-invented": ("FAIL", ["UNSUPPORTED", "UNSUPPORTED"]),
        "aspirin-dose": ("PASS", ["SUPPORTED", "SUPPORTED"]),
        "claim-supported": ("PASS", ["SUPPORTED"]),
        "claim-contradicted": ("FAIL", ["UNSUPPORTED"]),
        "claim-unsupported": ("FAIL", ["UNSUPPORTED"]),
    }
    assert all(not r["errors"] and r["scores"]["coverage"] == 1.0 for r in reports)
    assert "groundjudge summary" in result.output and "answers scoring below 0.8" in result.output
    # OUT exists now: a second run must say what to do rather than append or clobber
    again = runner.invoke(app, ["score", str(FIXTURES / "samples.jsonl"), "--out", str(out), "--no-progress"])
    assert again.exit_code == 2 and "--resume" in again.output


def test_bad_rows_are_reported_with_line_and_reason(tmp_path: Path) -> None:
    data = tmp_path / "in.jsonl"
    good = {"id": "ok", "contexts": ["Paris is the capital of France."], "claim": "Paris is in France."}
    data.write_text(
        "\n".join(
            [
                json.dumps(good),
                "{not json",
                json.dumps({"id": "empty", "contexts": [], "claim": "x y z"}),
                "",
                json.dumps({"id": "nofield", "contexts": ["a"]}),
            ]
        )
        + "\n"
    )
    out = tmp_path / "out.jsonl"
    result = runner.invoke(
        app, ["score", str(data), "--out", str(out), "--cache-dir", str(tmp_path / "c"), "--no-progress"]
    )
    assert result.exit_code == 1
    reports = lines(out)
    assert [r["id"] for r in reports] == ["ok", "row-2", "empty", "nofield"]
    assert reports[0]["verdict"] != "ERROR"
    assert reports[1]["errors"] == [
        "row 2: invalid JSON: Expecting property name enclosed in double quotes at column 2"
    ]
    assert "row 3, field 'contexts'" in reports[2]["errors"][0]
    assert "row 5, field 'answer'" in reports[3]["errors"][0]
    assert "rows failed" in result.output
    flat = " ".join(result.output.replace("│", " ").split())  # the summary table, unwrapped
    assert "failed row-2: row 2: invalid JSON" in flat and "empty: row 3, field 'contexts'" in flat
    # --resume recognises the bad rows too: nothing is written twice
    again = runner.invoke(
        app, ["score", str(data), "--out", str(out), "--cache-dir", str(tmp_path / "c"), "--no-progress", "--resume"]
    )
    assert [r["id"] for r in lines(out)] == ["ok", "row-2", "empty", "nofield"]
    assert again.exit_code == 1 and "still holds 3 failed reports of an earlier run" in again.output  # not all scored


def test_resume_after_a_kill_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    rows = [
        {
            "id": f"r{i}",
            "contexts": [f"Item {i} costs {i * 3} dollars and ships in {i} days."],
            "answer": f"Item {i} costs {i * 3} dollars. It ships in {i} days.",
        }
        for i in range(40)
    ]
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.jsonl"
    cmd = [
        sys.executable,
        "-m",
        "groundjudge",
        "score",
        str(data),
        "--out",
        str(out),
        "--cache-dir",
        str(tmp_path / "c"),
        "--batch-size",
        "1",
        "--no-progress",
    ]
    env = {**os.environ, "GROUNDJUDGE_NLI_MODEL": str(SHARED_MODEL), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and (not out.exists() or len(out.read_text().splitlines()) < 3):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done_before = len(lines(out))
    assert 3 <= done_before < len(rows)
    with out.open("a") as fh:
        fh.write('{"id": "r39", "verdict": "PA')  # a torn line, as a kill in mid-write leaves
    # the resume in this process (typer's runner): the kill needed a process of its own, the resume does not
    resumed = runner.invoke(app, [*cmd[3:], "--resume"], env={"GROUNDJUDGE_NLI_MODEL": str(SHARED_MODEL)})
    assert resumed.exit_code == 0, resumed.output
    ids = [r["id"] for r in lines(out)]
    assert sorted(ids) == sorted(str(r["id"]) for r in rows) and len(ids) == len(set(ids))


def test_budget_stop_exits_3_with_a_valid_partial_output(tmp_path: Path) -> None:
    rows = [
        {"id": f"r{i}", "contexts": [f"The shop opens at {i} am."], "answer": f"The shop opens at {i} am."}
        for i in range(5)
    ]
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.jsonl"
    with ScriptedLLMServer(ONE_CLAIM) as server:
        args = [
            "score",
            str(data),
            "--out",
            str(out),
            "--cache-dir",
            str(tmp_path / "c"),
            "--no-progress",
            "--llm",
            "openai/gpt-4o-mini",
            "--base-url",
            server.openai_base_url,
            "--no-qa",
            "--mode",
            "llm",
            "--batch-size",
            "1",
            "--concurrency",
            "1",
        ]
        result = runner.invoke(app, [*args, "--max-calls", "5"])
        assert result.exit_code == 3, result.output
        said = " ".join(result.output.split())
        assert "stopped: budget reached: 5 of 5 calls made" in said or "stopped: call budget reached" in said, said
        assert said.count("budget reached") == 1, said  # issue 18: it said "budget reached: budget reached: ..."
        # which answers finished first depends on timing (claims calls of answers in flight may come before an
        # earlier answer's judge call; none may have finished, and then OUT is not made): every answer written is
        # whole (2 calls, PASS), in input order
        partial = lines(out) if out.exists() else []
        ids = [r["id"] for r in partial]
        assert ids == sorted(ids) and len(ids) <= 2, ids
        assert all(r["verdict"] == "PASS" and r["usage"]["calls"] == 2 for r in partial)
        assert len(server.requests) == 5
        # a larger budget and --resume finish the rest; no call made before the stop is paid twice (5 rows x 2)
        result = runner.invoke(app, [*args, "--max-calls", "100", "--resume"])
        assert result.exit_code == 0, result.output
        assert sorted(r["id"] for r in lines(out)) == [r["id"] for r in rows]
        assert len(server.requests) == 10


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_cache_only_replay_needs_no_api_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, provider: str) -> None:
    """The manual's CI gate ('score ... --cache-mode only': a CI job that restores the cache "needs no API key")
    stopped at once with "openai needs an API key: set the environment variable OPENAI_API_KEY", exit 2: a replay
    sends nothing, so it needs no key; a call the cache lacks still stops the run, and nothing is sent."""
    data = tmp_path / "in.jsonl"
    row = {"id": "r1", "contexts": ["The shop opens at 9 am."], "answer": "It opens at 9."}
    data.write_text(json.dumps(row) + "\n")
    model = {"openai": "openai/gpt-4o-mini", "anthropic": "anthropic/claude-haiku-4-5"}[provider]
    with ScriptedLLMServer(ONE_CLAIM) as server:
        url = server.anthropic_base_url if provider == "anthropic" else server.openai_base_url
        args = ["score", str(data), "--cache-dir", str(tmp_path / "c"), "--no-progress", "--llm", model]
        args += ["--base-url", url, "--no-qa", "--mode", "llm"]
        first = runner.invoke(app, [*args, "--out", str(tmp_path / "a.jsonl")])
        assert first.exit_code == 0, first.output
        sent = len(server.requests)
        monkeypatch.delenv(f"{provider.upper()}_API_KEY")
        replay = runner.invoke(app, [*args, "--out", str(tmp_path / "b.jsonl"), "--cache-mode", "only"])
        assert replay.exit_code == 0, replay.output
        verdicts = [[r["verdict"] for r in lines(tmp_path / name)] for name in ("a.jsonl", "b.jsonl")]
        assert verdicts[0] == verdicts[1], verdicts
        data.write_text(json.dumps({"id": "r2", "contexts": ["It is red."], "answer": "It is blue."}) + "\n")
        miss = runner.invoke(app, [*args, "--out", str(tmp_path / "m.jsonl"), "--cache-mode", "only"])
        assert miss.exit_code != 0 and "no cached reply" in " ".join(miss.output.split()), miss.output
        assert len(server.requests) == sent  # the replay and the miss sent nothing
        without = runner.invoke(app, [*args, "--out", str(tmp_path / "n.jsonl")])  # a run that sends still needs one
        assert without.exit_code == 2 and f"{provider.upper()}_API_KEY" in without.output, without.output


def test_a_budget_stop_leaves_a_parquet_out_as_it_was(tmp_path: Path) -> None:
    """A budget stop on 'score -o run.parquet --overwrite' wrote the rows done so far over the earlier run's table
    (a part of a run under the name of a finished one); a --resume that finishes writes the whole table."""
    import pyarrow.parquet as pq

    rows = [{"id": f"r{i}", "contexts": [f"It opens at {i} am."], "answer": f"It opens at {i} am."} for i in range(4)]
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "run.parquet"
    with ScriptedLLMServer(ONE_CLAIM) as server:
        args = ["score", str(data), "--out", str(out), "--cache-dir", str(tmp_path / "c"), "--no-progress"]
        args += ["--llm", "openai/gpt-4o-mini", "--base-url", server.openai_base_url, "--no-qa", "--mode", "llm"]
        args += ["--batch-size", "1", "--concurrency", "1"]
        earlier = runner.invoke(app, [*args, "--cache-mode", "off"])
        assert earlier.exit_code == 0, earlier.output
        saved = out.read_bytes()
        result = runner.invoke(app, [*args, "--overwrite", "--max-calls", "5"])
        assert result.exit_code == 3, result.output
        said = " ".join(result.output.split())
        assert f"Finished rows are in {out}.jsonl;" in said, said
        assert f"{out} not written: it is written once a run reaches its last row" in said, said
        assert out.read_bytes() == saved
        resumed = runner.invoke(app, [*args, "--resume"])
        assert resumed.exit_code == 0, resumed.output
        assert sorted(pq.read_table(out).column("id").to_pylist()) == [r["id"] for r in rows]


def test_dry_run_counts_the_cache(tmp_path: Path) -> None:
    data = tmp_path / "in.jsonl"
    data.write_text(json.dumps({"id": "a", "contexts": ["The shop opens at 9 am."], "claim": "It opens at 9."}) + "\n")
    with ScriptedLLMServer(route(HANDLERS)) as server:
        base = [
            "score",
            str(data),
            "--cache-dir",
            str(tmp_path / "c"),
            "--no-progress",
            "--llm",
            "openai/gpt-4o-mini",
            "--base-url",
            server.openai_base_url,
            "--mode",
            "llm",
        ]
        first = runner.invoke(app, [*base, "--out", str(tmp_path / "dry.jsonl"), "--dry-run"])
        assert first.exit_code == 0, first.output
        estimate = json.loads(first.stdout)
        assert estimate["llm_calls_upper_bound"] == 1 and estimate["cached_calls"] == 0
        assert estimate["estimated_cost_usd"] > 0 and server.requests == []
        assert runner.invoke(app, [*base, "--out", str(tmp_path / "out.jsonl")]).exit_code == 0
        again = json.loads(runner.invoke(app, [*base, "--out", str(tmp_path / "dry.jsonl"), "--dry-run"]).stdout)
        assert again["llm_calls_upper_bound"] == 0 and again["cached_calls"] == 1


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    assert runner.invoke(app, ["score", str(tmp_path / "missing.jsonl"), "--out", "x"]).exit_code == 2
    data = FIXTURES / "samples.jsonl"
    bad_mode = runner.invoke(app, ["score", str(data), "--out", str(tmp_path / "o"), "--mode", "cascade"])
    assert bad_mode.exit_code == 2 and "needs an LLM" in bad_mode.output
    bad_model = runner.invoke(
        app, ["score", str(data), "--out", str(tmp_path / "o"), "--nli-model", str(tmp_path / "no-such-model")]
    )
    assert bad_model.exit_code == 2 and "could not load NLI model" in bad_model.output
    no_key = runner.invoke(
        app,
        ["score", str(data), "--out", str(tmp_path / "o"), "--llm", "anthropic/claude-x"],
        env={"ANTHROPIC_API_KEY": ""},
    )
    assert no_key.exit_code == 2 and "ANTHROPIC_API_KEY" in no_key.output


def test_cache_commands(tmp_path: Path) -> None:
    runner.invoke(
        app,
        [
            "score",
            str(FIXTURES / "samples.jsonl"),
            "--out",
            str(tmp_path / "o.jsonl"),
            "--cache-dir",
            str(tmp_path / "c"),
            "--no-progress",
        ],
    )
    stats = json.loads(runner.invoke(app, ["cache", "stats", "--cache-dir", str(tmp_path / "c")]).output)
    assert stats["entries"]["nli"] > 0
    # a kind that is not one (a typo, the wrong case) removed nothing and said "removed 0 entries", exit 0
    for typo in ("NLI", "nli-scores"):
        refused = runner.invoke(app, ["cache", "clear", "--cache-dir", str(tmp_path / "c"), "--kind", typo])
        assert refused.exit_code == 2 and f"--kind {typo}: one of llm, nli" in refused.output, refused.output
    cleared = runner.invoke(app, ["cache", "clear", "--cache-dir", str(tmp_path / "c"), "--kind", "nli"])
    assert f"removed {stats['entries']['nli']} entries" in cleared.output


def test_engine_ray_writes_a_parquet_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # --engine ray --out X.parquet exited before the Parquet conversion the local engine does: no X.parquet.
    import types

    from groundjudge.models import AnswerReport, Usage

    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"id": "a", "contexts": ["It opens at 9."], "claim": "It opens at 9."}) + "\n")
    local = tmp_path / "local.jsonl"
    done = runner.invoke(app, ["score", str(src), "--out", str(local), "--no-progress"])
    assert done.exit_code == 0, done.output
    calls: list[Path] = []

    def score_rows(pending: Any, output: Any, cfg: Any, **kw: Any) -> Any:  # stands in for the cluster run
        calls.append(output.out)
        for line in local.read_text().splitlines():
            output.write(AnswerReport.model_validate_json(line), line)
        output.close(True)
        return output.result(None, Usage(), None)

    monkeypatch.setitem(sys.modules, "groundjudge.runs.ray", types.SimpleNamespace(score_rows=score_rows))
    target = tmp_path / "out.parquet"
    result = runner.invoke(app, ["score", str(src), "--out", str(target), "--engine", "ray", "--no-progress"])
    assert result.exit_code == 0, result.output
    assert calls == [tmp_path / "out.parquet.jsonl"]  # the resumable JSONL beside it, as with the local engine
    import pyarrow.parquet as pq

    assert pq.read_table(target).column("id").to_pylist() == ["a"]


def test_batch_api_sends_one_provider_batch_per_stage_for_the_whole_input(tmp_path: Path) -> None:
    # --batch-api went --batch-size (32) rows at a time: one provider batch per 32 rows and stage, awaited in turn.
    rows = [
        {"id": f"r{i}", "contexts": [f"Item {i} costs {i * 3} dollars."], "answer": f"Item {i} costs {i * 3} dollars."}
        for i in range(33)
    ]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = tmp_path / "config.json"
    config.write_text('{"batch_poll_seconds": 0}')

    def batches(server: ScriptedLLMServer, name: str, *extra: str) -> int:
        server.requests.clear()
        out = tmp_path / f"{name}.jsonl"
        cmd = ["score", str(src), "--out", str(out), "--llm", "openai/gpt-4o-mini", "--base-url"]
        cmd += [server.openai_base_url, "--mode", "llm", "--no-qa", "--batch-api", "--config", str(config)]
        result = runner.invoke(app, [*cmd, "--cache-dir", str(tmp_path / name), "--no-progress", *extra])
        assert result.exit_code == 0, result.output
        assert len(lines(out)) == 33 and all(r.batch_id for r in server.requests)
        return len({r.batch_id for r in server.requests})

    with ScriptedLLMServer(ONE_CLAIM) as server:
        assert batches(server, "whole") == 2  # the extractions, then the judge calls: one batch each
        assert batches(server, "given", "--batch-size", "32") == 4  # an explicit --batch-size is kept
    help_text = " ".join(
        runner.invoke(app, ["score", "--help"], env={"COLUMNS": "200"}).output.replace("│", " ").split()
    )
    assert "5000 at a time unless --batch-size is given" in help_text


def test_a_batch_left_running_is_in_the_stopped_runs_bill_and_counted_once_over_the_resume(tmp_path: Path) -> None:
    # exit 4 while the batch runs: the provider bills it whoever collects it, so OUT.spent.json holds it (at most
    # its worst case); the --resume that collects it adds only what it sends itself
    rows = [
        {"id": f"r{i}", "contexts": [f"Item {i} costs {i} dollars."], "answer": f"Item {i} costs {i}."}
        for i in range(3)
    ]
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    stop, wait = tmp_path / "stop.json", tmp_path / "wait.json"
    stop.write_text('{"batch_poll_seconds": 0.01, "batch_max_wait_hours": 1e-9}')
    wait.write_text('{"batch_poll_seconds": 0}')
    with ScriptedLLMServer(ONE_CLAIM) as server:
        cmd = [
            "score",
            str(src),
            "--out",
            str(out),
            "--llm",
            "openai/gpt-4o-mini",
            "--base-url",
            server.openai_base_url,
        ]
        cmd += ["--mode", "llm", "--no-qa", "--batch-api", "--cache-dir", str(tmp_path / "c"), "--no-progress"]
        server.batch_polls = 5
        first = runner.invoke(app, [*cmd, "--config", str(stop)])
        assert first.exit_code == 4, first.output
        sent_first = sum(len(batch.requests) for batch in server.batches.values())  # none answered yet
        spent = json.loads((tmp_path / "out.jsonl.spent.json").read_text())["billed"]
        assert spent["calls"] == spent["unsettled_calls"] == sent_first == 3 and spent["cost_usd"] > 0
        again = runner.invoke(app, [*cmd, "--config", str(wait), "--resume"])
        assert again.exit_code == 0, again.output
        every = json.loads((tmp_path / "out.jsonl.spent.json").read_text())["billed"]
        assert every["calls"] == len(server.requests) == 6  # each request once: none of the first batch's twice
        assert every["unsettled_calls"] == 3 and every["unsettled_cost_usd"] == spent["unsettled_cost_usd"]


def test_an_error_message_is_never_hard_wrapped(tmp_path: Path) -> None:
    """Issue 18: rich hard-wrapped messages at 80 columns when stderr is not a terminal, so a path or a phrase was
    cut in two in a CI log (and a test asserting on it passed only with COLUMNS=200)."""
    deep = tmp_path / ("a-rather-long-folder-name-" * 4) / "reliability-diagram-of-the-run.png"
    result = runner.invoke(app, ["calibrate", str(tmp_path / "x.jsonl")], env={"COLUMNS": "40"})
    assert result.exit_code == 2
    (tmp_path / "x.jsonl").write_text("{}\n")
    result = runner.invoke(
        app, ["calibrate", str(tmp_path / "x.jsonl"), "--reliability", str(deep)], env={"COLUMNS": "40"}
    )
    assert result.exit_code == 2
    assert f"error: --reliability {deep}: there is no folder {deep.parent} (create it first)" in result.output
    deep.parent.mkdir()
    result = runner.invoke(
        app, ["calibrate", str(tmp_path / "x.jsonl"), "--reliability", str(deep)], env={"COLUMNS": "40"}
    )
    assert result.exit_code == 2
    assert f"error: --reliability {deep}: write .html or .svg" in result.output, result.output


def test_an_input_whose_format_cannot_be_told_is_a_usage_error(tmp_path: Path) -> None:
    """Issue 17/18: 'score' on a .txt file or a file without a suffix crashed with a traceback after the model
    loaded; the one reader's rule (.jsonl, .csv, .parquet or a Parquet folder) is checked up front."""
    for name in ("rows.txt", "rows"):
        data = tmp_path / name
        data.write_text(json.dumps({"id": "a", "contexts": ["c"], "answer": "a"}) + "\n")
        result = runner.invoke(app, ["score", str(data), "--out", str(tmp_path / "o.jsonl"), "--no-progress"])
        assert result.exit_code == 2, result.output
        assert "cannot tell the format" in result.output and not (tmp_path / "o.jsonl").exists()


def test_help_keeps_bracketed_text(tmp_path: Path) -> None:
    """Issue 18: rich read '[ray]' and '[default: ...]' in help texts as markup and dropped them."""
    score_help = " ".join(runner.invoke(app, ["score", "--help"], env={"COLUMNS": "250"}).output.split())
    assert "pip install 'groundjudge[ray]'" in score_help
    tune_help = " ".join(runner.invoke(app, ["tune", "--help"], env={"COLUMNS": "250"}).output.split())
    assert "[default: best available]" in tune_help and "[default: 16 on CPU, 32 on a GPU]" in tune_help


@pytest.mark.parametrize(
    "stop,code,said",
    [
        ("budget", 3, "stopped: budget reached: $0.0100 spent of $0.0100"),
        ("cache", 1, "cache-only run stopped: no cached reply"),
        ("other", 1, "run stopped: Ray returned 1 reports of 2 rows"),
    ],
)
def test_a_ray_run_stop_says_and_exits_as_a_local_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stop: str, code: int, said: str
) -> None:
    """The Ray path mapped its stops to messages and exit codes by a copy of the local engine's rules, and a stop it
    did not list (a row Ray lost) exited 2, a usage error, where the local engine exits 1. One mapping now."""
    import types

    from groundjudge.errors import BudgetExceededError, CacheMissError, GroundjudgeError
    from groundjudge.review.summary import Summarizer
    from groundjudge.runs import RunResult

    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"id": "a", "contexts": ["It opens at 9."], "claim": "It opens at 9."}) + "\n")
    errors = {
        "budget": BudgetExceededError("budget reached: $0.0100 spent of $0.0100", spent_usd=0.01, calls=3),
        "cache": CacheMissError("no cached reply for the judge call"),
        "other": GroundjudgeError("Ray returned 1 reports of 2 rows"),
    }

    def score_rows(pending: Any, output: Any, cfg: Any, **kw: Any) -> Any:  # stands in for the cluster run
        return RunResult(Summarizer().summary(), errors[stop], 0)

    monkeypatch.setitem(sys.modules, "groundjudge.runs.ray", types.SimpleNamespace(score_rows=score_rows))
    result = runner.invoke(app, ["score", str(src), "--out", str(tmp_path / "o.jsonl"), "--engine", "ray"])
    text = " ".join(result.output.split())
    assert result.exit_code == code and said in text and text.count("budget reached") <= 1, result.output
