"""Issue 28 (one engine contract) and issue 29 defect 3 (a stopped run's summary leaves out calls it paid for).

The local engine only: the Ray engine's half of the contract is held to the same OUT by tests/runs/test_ray.py and
tests/test_engines_property.py.
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from groundjudge.cli import app
from groundjudge.config import Config
from groundjudge.errors import BudgetExceededError, ConfigError, InputError
from groundjudge.pipeline import Evaluator
from groundjudge.runs import RunResult, RunStopped, pending_rows, score_file, score_rows
from groundjudge.runs.out import spent_path
from groundjudge.testing import Latency, ScriptedLLMServer, route, tiny_nli_model
from tests.conftest import SHARED_MODEL
from tests.pipeline.test_pipeline import CONTEXT, GOOD_ANSWER, HANDLERS

runner = CliRunner()

ROWS = [
    {"id": f"r{i}", "contexts": [f"Item {i} costs {i * 3} dollars."], "answer": f"Item {i} costs {i * 3} dollars."}
    for i in range(6)
]

# rows the scripted judge finds two claims in (each row its own requests: nothing shared through the cache)
CLAIMED = [
    {"id": f"c{i}", "contexts": [f"{CONTEXT} Note {i}."], "answer": f"{GOOD_ANSWER} Visit number {i}."}
    for i in range(6)
]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_nli_model(tmp_path_factory.mktemp("tiny-nli"), SHARED_MODEL)


@pytest.fixture(autouse=True)
def _tiny_env(monkeypatch: pytest.MonkeyPatch, tiny_model: Path) -> None:
    monkeypatch.setenv("GROUNDJUDGE_NLI_MODEL", str(tiny_model))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def write_rows(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def last_json(output: str) -> dict[str, Any]:
    """The --json object (the one line of stdout that is a JSON object)."""
    found = [json.loads(x) for x in output.splitlines() if x.startswith("{")]
    assert found, output
    return found[-1]


def test_a_stopped_runs_summary_counts_every_call_it_paid_for_and_its_resume_the_earlier_ones(tmp_path: Path) -> None:
    """Issue 29, defect 3: after a budget stop the summary counted only the finished rows' calls while the provider
    billed more (calls of rows that did not finish, some in flight at the stop); on --resume those replies were
    cache hits shown as free, so their cost was in no summary. The ledger's account is reported now: what the run
    billed, what of it is in no row, what was billed after the stop, and on resume the bill of every run."""
    data = write_rows(tmp_path / "in.jsonl", CLAIMED)
    out = tmp_path / "out.jsonl"
    # each row takes two calls (claims, then judge); four in flight at a time and five allowed: rows stop half done
    with ScriptedLLMServer(route(HANDLERS), latency=Latency(0.05)) as server:
        common = ["--llm", "openai/gpt-4o-mini", "--base-url", server.openai_base_url, "--mode", "llm", "--no-qa"]
        common += ["--cache-dir", str(tmp_path / "c"), "--no-progress", "--json", "--batch-size", "1"]
        stopped = runner.invoke(
            app, ["score", str(data), "--out", str(out), *common, "--concurrency", "4", "--max-calls", "5"]
        )
        first_billed = server.billed
        assert stopped.exit_code == 3, stopped.output
        first = last_json(stopped.output)
        in_rows = first["usage"]["calls"]
        assert in_rows < first_billed  # five calls, two a row: at least one paid call is in no finished row
        spent = first["spent"]
        assert spent["run"]["calls"] == first_billed and spent["in_rows"]["calls"] == in_rows
        assert spent["not_in_rows"]["calls"] == first_billed - in_rows
        assert spent["after_stop_calls"] is not None and 0 <= spent["after_stop_calls"] <= first_billed
        text = " ".join(stopped.output.split())
        assert f"billed by this run: {first_billed} calls" in text, text
        assert f"{first_billed - in_rows} call" in text and "did not finish" in text
        assert json.loads(spent_path(out).read_text())["billed"]["calls"] == first_billed

        resumed = runner.invoke(app, ["score", str(data), "--out", str(out), *common, "--resume"])
        assert resumed.exit_code == 0, resumed.output
        second = last_json(resumed.output)
        # the replies the stopped run paid for and no row showed come back from the cache: free here, paid there
        assert second["usage"]["cached_calls"] == first_billed - in_rows
        assert second["spent"]["earlier"]["calls"] == first_billed
        assert second["spent"]["all_runs"]["calls"] == server.billed  # every call the provider billed, both runs
        assert second["spent"]["run"]["calls"] == server.billed - first_billed
        assert "billed by the runs that wrote this OUT" in " ".join(resumed.output.split())
        assert len(out.read_text().splitlines()) == len(CLAIMED)

        again = runner.invoke(app, ["score", str(data), "--out", str(out), *common, "--overwrite"])
        assert again.exit_code == 0, again.output
        assert "spent" not in last_json(again.output)  # every row finished, nothing resumed: the rows say it all
        assert not spent_path(out).exists()  # a fresh run that finished: no old bill for a later resume


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_ctrl_c_keeps_the_bill_for_the_resume(tmp_path: Path, provider: str) -> None:
    """Ctrl-C while a provider batch of judge calls was pending lost the claims batch the run had already collected
    (billed, cached): no OUT.spent.json was written, and the --resume read those replies free, so no run's account
    held them (the resumed run said $0.000152 where the provider billed $0.000242). An interrupted run keeps its
    bill as a stopped one does."""
    data = write_rows(tmp_path / "in.jsonl", CLAIMED[:4])
    out = tmp_path / "out.jsonl"
    model = {"openai": "openai/gpt-4o-mini", "anthropic": "anthropic/claude-haiku-4-5"}[provider]
    with ScriptedLLMServer(route(HANDLERS)) as server:
        url = server.openai_base_url if provider == "openai" else server.anthropic_base_url
        cfg = Config.make(
            llm=model, base_url=url, mode="llm", qa=False, batch_api=True, batch_poll_seconds=0, cache_dir=str(tmp_path)
        )
        ev = Evaluator(cfg)

        def ctrl_c(done: int, total: int) -> None:  # the judge calls' batch is pending: the user presses Ctrl-C
            if len(server.batches) == 2:
                raise KeyboardInterrupt

        ev.batch_progress = ctrl_c
        with pytest.raises(KeyboardInterrupt):
            score_file(data, out, ev)
        first_billed = server.billed
        assert first_billed == 4 and len(server.batches) == 2  # the claims batch answered, the judge batch sent
        # and the judge batch, billed at the provider whoever collects it: counted at its worst case
        bill = json.loads(spent_path(out).read_text())["billed"]
        assert bill["calls"] == first_billed + 4 and bill["unsettled_calls"] == 4
        result = score_file(data, out, Evaluator(cfg), resume=True)
    assert len(server.batches) == 2  # the pending batch collected, not sent again
    spent = result.spent()
    assert spent is not None and spent["earlier"]["calls"] == first_billed + 4
    assert spent["all_runs"]["calls"] == server.billed == 8  # each request once
    assert result.summary.usage.calls == 0  # the judge calls and the claims were paid (and counted) by the first run
    assert spent["all_runs"]["cost_usd"] == pytest.approx(spent["earlier"]["cost_usd"] + result.summary.usage.cost_usd)


def test_a_finished_run_says_nothing_more_than_its_rows(tmp_path: Path) -> None:
    """The ledger's account appears only when the rows do not tell it all: a run that finishes keeps its --json."""
    data = write_rows(tmp_path / "in.jsonl", ROWS[:3])
    with ScriptedLLMServer(route(HANDLERS)) as server:
        cfg = Config.make(llm="openai/gpt-4o-mini", base_url=server.openai_base_url, cache_dir=str(tmp_path / "c"))
        result = score_file(data, tmp_path / "out.jsonl", cfg, batch_size=2)
    assert result.stopped is None and result.billed.calls == server.billed == result.summary.usage.calls
    assert result.spent() is None and result.spent_lines() == []
    assert not spent_path(tmp_path / "out.jsonl").exists()


def test_one_contract_one_result_one_stop(tmp_path: Path) -> None:
    """runs.score_file returns a RunResult on either engine and raises RunStopped, which declares summary, cause and
    result, and is also its cause's class (older code catching BudgetExceededError still catches it)."""
    data = write_rows(tmp_path / "in.jsonl", ROWS[:4])
    with ScriptedLLMServer(route(HANDLERS)) as server:
        cfg = Config.make(
            llm="openai/gpt-4o-mini", base_url=server.openai_base_url, cache_dir=str(tmp_path / "c"), max_calls=3
        )
        with pytest.raises(RunStopped) as stop:
            score_file(data, tmp_path / "out.jsonl", cfg, engine="local", batch_size=1)
    exc = stop.value
    assert isinstance(exc, BudgetExceededError) and isinstance(exc.cause, BudgetExceededError)
    assert isinstance(exc.result, RunResult) and exc.summary is exc.result.summary
    assert exc.result.billed.calls == server.billed and str(exc) == str(exc.cause)
    assert exc.summary.n == len((tmp_path / "out.jsonl").read_text().splitlines())
    with pytest.raises(ConfigError, match="engine 'spark'"):
        score_file(data, tmp_path / "o2.jsonl", Config.make(), engine="spark")


def test_a_remote_input_that_holds_no_rows_is_refused_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A remote input (a URI pyarrow reads: s3://, gs://) that held no rows passed as "every row scored" with exit 0:
    the empty-input check read local files only. It reads up to the first row of a remote one too. Here a file://
    URI takes the remote way (pyarrow's file system, streamed), as an s3:// one would."""
    import groundjudge.io.tables as tables
    import groundjudge.runs.out as out_module

    def local(uri: Any) -> bool:
        return "://" not in str(uri)  # file:// read through pyarrow, as s3:// and gs:// are

    monkeypatch.setattr(tables, "is_local", local)
    monkeypatch.setattr(out_module, "is_local", local)
    (tmp_path / "empty.jsonl").write_text("\n \n")
    (tmp_path / "header.csv").write_text("id,answer,contexts\n")
    write_rows(tmp_path / "one.jsonl", ROWS[:1])
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    pq.write_table(
        pa.table({"id": pa.array([], pa.string()), "answer": pa.array([], pa.string())}), tmp_path / "e.parquet"
    )
    for name in ("empty.jsonl", "header.csv", "e.parquet"):
        with pytest.raises(InputError, match="holds no rows"):
            pending_rows((tmp_path / name).as_uri(), tmp_path / "out.jsonl")
    for missing in ("missing.jsonl", "missing.parquet"):  # the reader's traceback or Parquet error, before
        with pytest.raises(ConfigError, match="no input file file://"):
            pending_rows((tmp_path / missing).as_uri(), tmp_path / "out.jsonl")
    todo = pending_rows((tmp_path / "one.jsonl").as_uri(), tmp_path / "out.jsonl")
    assert len(list(todo.rows)) == 1
    assert todo.total() is None  # the progress bar's total: a remote file is not read twice to count its rows


def test_a_file_uri_with_escapes_names_the_local_file(tmp_path: Path) -> None:
    """``file:///data/a%20b/rows.jsonl`` (what ``Path.as_uri()`` and other tools write) was read as the literal path
    ``/data/a%20b/rows.jsonl``: "no input file" for a file that is there."""
    (tmp_path / "a b #1").mkdir()
    data = write_rows(tmp_path / "a b #1" / "rows.jsonl", ROWS[:1])
    uri = data.as_uri()
    assert "%20" in uri and "%23" in uri
    todo = pending_rows(uri, tmp_path / "out.jsonl")
    assert todo.total() == 1 and len(list(todo.rows)) == 1


def test_the_input_checks_live_in_the_run_library(tmp_path: Path) -> None:
    """One place checks a run's input for the CLI, Python and both engines (cli/score.py did it itself)."""
    data = write_rows(tmp_path / "in.jsonl", ROWS[:1])
    with pytest.raises(ConfigError, match="no input file"):
        pending_rows(tmp_path / "missing.jsonl", tmp_path / "out.jsonl")
    with pytest.raises(ConfigError, match="--out is the input file"):
        pending_rows(data, data)
    hard = tmp_path / "hard-link.jsonl"  # the same file by another name: resolve() told them apart
    hard.hardlink_to(data)
    with pytest.raises(ConfigError, match="--out is the input file"):
        pending_rows(data, hard)
    with pytest.raises(ConfigError, match="--retry-errors goes with --resume"):
        pending_rows(data, tmp_path / "out.jsonl", retry_errors=True)
    (tmp_path / "rows.txt").write_text("{}\n")
    with pytest.raises(ConfigError, match="cannot tell the format"):
        pending_rows(tmp_path / "rows.txt", tmp_path / "out.jsonl")
    todo = pending_rows(data, tmp_path / "out.jsonl")
    assert todo.total() == 1 and todo.format == "jsonl"
    # an empty file, blank lines, or a CSV header alone: a wrong or unfinished input passed as "every row scored"
    (tmp_path / "empty.jsonl").write_text("\n \n")
    (tmp_path / "header.csv").write_text("id,answer,contexts\n")
    for empty in (tmp_path / "empty.jsonl", tmp_path / "header.csv"):
        with pytest.raises(InputError, match=f"the input {re.escape(str(empty))} holds no rows"):
            pending_rows(empty, tmp_path / "out.jsonl")
        result = runner.invoke(app, ["score", str(empty), "--out", str(tmp_path / "o.jsonl"), "--no-progress"])
        assert result.exit_code == 2 and "holds no rows" in result.output, result.output
        assert not (tmp_path / "o.jsonl").exists()
    # a byte order mark alone (or before blank lines) is no row: it passed as "every row scored" with exit 0
    (tmp_path / "bom.jsonl").write_bytes(b"\xef\xbb\xbf")
    (tmp_path / "bom-blank.jsonl").write_bytes(b"\xef\xbb\xbf\xef\xbb\xbf\n \n")
    (tmp_path / "bom-header.csv").write_bytes(b"\xef\xbb\xbfid,answer,contexts\r\n\r\n")
    for empty in (tmp_path / "bom.jsonl", tmp_path / "bom-blank.jsonl", tmp_path / "bom-header.csv"):
        with pytest.raises(InputError, match="holds no rows"):
            pending_rows(empty, tmp_path / "out.jsonl")
    # a CSV whose lines end in a lone carriage return (which the reader reads) has rows: it was refused as empty
    old_mac = tmp_path / "old-mac.csv"
    old_mac.write_bytes(b'id,answer,contexts\r1,Paris is in France.,"[""Paris is in France.""]"\r')
    assert pending_rows(old_mac, tmp_path / "out.jsonl").total() == 1
    old_mac_jsonl = tmp_path / "old-mac.jsonl"
    old_mac_jsonl.write_bytes(
        b'{"id": 1, "answer": "a", "contexts": ["a"]}\r{"id": 2, "answer": "b", "contexts": ["b"]}\r'
    )
    assert pending_rows(old_mac_jsonl, tmp_path / "out.jsonl").total() == 2
    for args in (["--retry-errors"], []):  # the command says the same, as a usage error
        missing = ["score", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "o.jsonl"), *args]
        result = runner.invoke(app, missing)
        assert result.exit_code == 2 and "no input file" in result.output, result.output
    result = runner.invoke(app, ["score", str(data), "--out", str(tmp_path / "o.jsonl"), "--retry-errors"])
    assert result.exit_code == 2 and "--retry-errors goes with --resume" in result.output, result.output


def test_the_old_names_still_work_and_say_where_the_new_ones_are(tmp_path: Path) -> None:
    """groundjudge.runs.local.score_file returned the summary and raised the stop itself: it still does, warning."""
    from groundjudge.runs import local

    data = write_rows(tmp_path / "in.jsonl", ROWS[:2])
    with pytest.warns(DeprecationWarning, match="groundjudge.runs.score_file"):
        summary = local.score_file(data, tmp_path / "out.jsonl", Config.make(cache_dir=str(tmp_path / "c")))
    assert summary.n == 2
    result = score_file(data, tmp_path / "out2.jsonl", Config.make(cache_dir=str(tmp_path / "c")))
    with pytest.warns(DeprecationWarning, match=r"\.summary\.n"):
        assert result.n == 2  # type: ignore[attr-defined]  # code written when score_file returned the summary
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert result.summary.n == 2


def test_a_batch_that_breaks_outside_any_row_is_scored_row_by_row_on_the_local_engine(tmp_path: Path) -> None:
    """The fallback existed only in the Ray engine: locally an exception outside any one row ended the run with a
    traceback. Both engines use pipeline.fallback now: the rows of the broken batch are scored alone."""
    data = write_rows(tmp_path / "in.jsonl", ROWS)
    cfg = Config.make(cache_dir=str(tmp_path / "c"))
    plain = score_file(data, tmp_path / "plain.jsonl", cfg, batch_size=2)
    evaluator = Evaluator(cfg)
    real = evaluator.evaluate_batches
    broken = [0]

    def once_broken(cuts: Any, **kw: Any) -> Any:
        if broken[0]:
            return real(cuts, **kw)
        broken[0] += 1

        def stream() -> Any:
            next(iter(cuts))  # the flow took a batch, then broke outside any one row
            raise RuntimeError("a whole batch failed")
            yield

        return stream()

    evaluator.evaluate_batches = once_broken  # type: ignore[method-assign]
    todo = pending_rows(data, tmp_path / "out.jsonl")
    result = score_rows(todo, tmp_path / "out.jsonl", evaluator, fresh=True, batch_size=2)
    assert result.stopped is None and broken[0] == 1
    got = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    want = [json.loads(x) for x in (tmp_path / "plain.jsonl").read_text().splitlines()]
    assert [(r["id"], r["verdict"]) for r in got] == [(r["id"], r["verdict"]) for r in want]
    assert plain.summary.n == result.summary.n == len(ROWS)


def test_ctrl_c_counts_the_call_left_in_flight_in_the_background(tmp_path: Path) -> None:
    """Ctrl-C reaches the main thread; the calls in flight on the flow's threads are left to finish in the
    background. a1's judge call is read and not answered while the run lasts; a0's judge reply waits until it is
    read, so when a0's report is written and the user presses Ctrl-C, a1's call is in flight: the provider may bill
    it, so the run's bill (OUT.spent.json) counts it at its worst case, unsettled (it held only the settled calls),
    as the Ray engine counts a call its killed actor had in flight."""
    import threading

    from groundjudge.testing import RecordedRequest, Reply
    from tests.pipeline.test_pipeline import judge_handler

    a1_judge_read = threading.Event()

    def judge(req: RecordedRequest) -> Reply:
        reply = judge_handler(req)
        if "Row 1." in req.text:
            a1_judge_read.set()
            reply.delay = 30.0  # past the run: the server's stop ends it
        else:
            a1_judge_read.wait(60)
        return reply

    def ctrl_c(done: int) -> None:
        raise KeyboardInterrupt

    rows = [{"id": f"a{i}", "contexts": [f"{CONTEXT} Row {i}."], "answer": f"{GOOD_ANSWER} Row {i}."} for i in range(2)]
    data, out = write_rows(tmp_path / "in.jsonl", rows), tmp_path / "out.jsonl"
    with ScriptedLLMServer(route({**HANDLERS, "judge": judge})) as server:
        cfg = Config.make(llm="openai/gpt-4o-mini", base_url=server.openai_base_url, qa=False, cache_dir=str(tmp_path))
        cfg = cfg.model_copy(update={"nli_model": str(SHARED_MODEL)})
        with pytest.raises(KeyboardInterrupt):
            score_file(data, out, Evaluator(cfg), batch_size=2, progress=ctrl_c)
        sent = len(server.requests)  # both claims calls, both judge calls
    bill = json.loads(spent_path(out).read_text())["billed"]
    assert sent == 4 and (bill["calls"], bill.get("unsettled_calls")) == (4, 1)
    assert bill["unsettled_cost_usd"] > 0 and bill["cost_usd"] > bill["unsettled_cost_usd"]


def test_ctrl_c_before_a_fresh_run_replaced_out_keeps_the_bill_of_the_run_that_wrote_it(tmp_path: Path) -> None:
    """A run stopped by the budget keeps its bill in OUT.spent.json for the --resume. The same command run again
    without --resume and interrupted with Ctrl-C before its first report (OUT still the stopped run's) wrote its own
    bill over it (no call billed yet: zeros), so the resume said the earlier runs billed nothing."""
    data = write_rows(tmp_path / "in.jsonl", CLAIMED)
    out = tmp_path / "out.jsonl"
    with ScriptedLLMServer(route(HANDLERS)) as server:
        common: dict[str, Any] = {"llm": "openai/gpt-4o-mini", "base_url": server.openai_base_url, "mode": "llm"}
        common.update(qa=False, cache_dir=str(tmp_path / "c"), batch_poll_seconds=0)
        with pytest.raises(RunStopped):
            score_file(data, out, Config.make(**common, max_calls=5))
        first_billed = server.billed
        assert json.loads(spent_path(out).read_text())["billed"]["calls"] == first_billed == 5
        fresh = Evaluator(Config.make(**common, batch_api=True))

        def ctrl_c(done: int, total: int) -> None:  # the fresh run's first batch is out: the user presses Ctrl-C
            raise KeyboardInterrupt

        fresh.batch_progress = ctrl_c
        with pytest.raises(KeyboardInterrupt):
            score_file(data, out, fresh)
        assert len(server.batches) == 1 and not out.exists()  # no report written: OUT is the stopped run's still
        # its bill kept, plus what the interrupted run was billed (its batch, still running, nothing yet)
        assert json.loads(spent_path(out).read_text())["billed"]["calls"] == first_billed + fresh.usage.calls
        # the batch it left running is billed at the provider: counted by that run, at its worst case
        assert fresh.usage.calls == fresh.usage.unsettled_calls >= 1
        resumed = score_file(data, out, Evaluator(Config.make(**common, batch_api=True)), resume=True)
    spent = resumed.spent()
    assert spent is not None and spent["earlier"]["calls"] == first_billed + fresh.usage.calls
    assert spent["all_runs"]["calls"] == server.billed


def test_a_stop_before_a_fresh_run_replaced_out_keeps_the_bill_of_the_run_that_wrote_it(tmp_path: Path) -> None:
    """As Ctrl-C above, for a run the budget stops: the same command run again with --overwrite and stopped before
    its first report (OUT still the first run's) wrote its own bill over the first run's, so the resume said the
    earlier runs billed less than they did."""
    data = write_rows(tmp_path / "in.jsonl", CLAIMED)
    out = tmp_path / "out.jsonl"
    with ScriptedLLMServer(route(HANDLERS)) as server:
        common: dict[str, Any] = {"llm": "openai/gpt-4o-mini", "base_url": server.openai_base_url, "mode": "llm"}
        common.update(qa=False, cache_dir=str(tmp_path / "c"))
        with pytest.raises(RunStopped):
            score_file(data, out, Config.make(**common, max_calls=5))
        first_billed = server.billed
        with pytest.raises(RunStopped):  # a fresh run (no resume), stopped before any report of its own
            score_file(data, out, Config.make(**common, max_calls=1, cache_mode="off"))
        assert json.loads(spent_path(out).read_text())["billed"]["calls"] == server.billed > first_billed
        resumed = score_file(data, out, Config.make(**common), resume=True)
        spent = resumed.spent()
        assert spent is not None and spent["all_runs"]["calls"] == server.billed
        # a fresh run stopped after its first report replaced OUT: OUT's bill is its own, the old runs' gone with OUT
        before = server.billed
        with pytest.raises(RunStopped) as stopped:
            score_file(data, out, Config.make(**common, max_calls=9, cache_mode="off", concurrency=1), batch_size=1)
        assert stopped.value.result.summary.n > 0  # it wrote reports of its own (two calls a row)
        assert json.loads(spent_path(out).read_text())["billed"]["calls"] == server.billed - before
