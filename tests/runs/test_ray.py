"""The Ray engine: the same reports as the local engine, resume, bad rows, the cluster budget and the shared cache.

The local Ray of tests/conftest.py (``local_ray``: ``num_cpus=2``), which test_engines_property.py used just before
(its kept actor serves this module's one-actor tests); LLM stages against the scripted server through the real OpenAI
SDK (the workers reach it over HTTP on 127.0.0.1).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from groundjudge.config import Config
from groundjudge.errors import BudgetExceededError, CacheMissError, ConfigError
from groundjudge.io.reports import dumps, finite_report
from groundjudge.models import AnswerReport
from groundjudge.pipeline.evaluator import Evaluator
from groundjudge.review.summary import RunSummary, Summarizer
from groundjudge.runs import RunStopped, score_file
from groundjudge.runs.out import spent_path
from groundjudge.testing import RecordedRequest, Reply, ScriptedLLMServer, packed_requests, route
from tests.conftest import FIXTURES, SHARED, SHARED_MODEL
from tests.pipeline.test_pipeline import BAD_ANSWER, CONTEXT, GOOD_ANSWER, HANDLERS, claims_handler, judge_handler

ray = pytest.importorskip("ray")
gj_ray = pytest.importorskip("groundjudge.runs.ray")

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module", autouse=True)
def _on_ray(local_ray: Any) -> None:
    """The local Ray of tests/conftest.py (``local_ray``), shared with the other modules that start Ray."""


def on_ray(input: str | Path, out: Path, config: Config, **kw: Any) -> RunSummary:
    """A run on the Ray engine through the one engine contract (``groundjudge.runs.score_file``): its summary."""
    return score_file(input, out, config, engine="ray", **kw).summary


@pytest.fixture
def llm_server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(route(HANDLERS)) as s:
        yield s


def nli_config(cache: Path, **kw: Any) -> Config:
    return Config(nli_model=str(SHARED_MODEL), cache_dir=str(cache), **kw)


def llm_config(server: ScriptedLLMServer, cache: Path, **kw: Any) -> Config:
    return Config(
        llm="openai/gpt-4o-mini",
        base_url=server.openai_base_url,
        nli_model=str(SHARED_MODEL),
        cache_dir=str(cache),
        max_attempts=2,
        **kw,
    )


def local_lines(path: Path, config: Config, batch_size: int) -> list[str]:
    """What the local engine writes for ``path`` (the CLI's reader, evaluate_numbered, finite_report, dumps).

    ``batch_size`` must be the Ray run's: the NLI model scores a batch's claims together, and on some CPUs a pair's
    probabilities move in the 7th digit with the other pairs of its forward pass (padding width, matrix shapes), so
    only the same batches give byte-identical reports on every machine.
    """
    from groundjudge.io.tables import input_rows

    ev = Evaluator(config)
    return [dumps(finite_report(r)) for r in ev.evaluate_numbered(input_rows(path, set()), batch_size=batch_size)]


def reports(lines: list[str]) -> list[AnswerReport]:
    return [AnswerReport.model_validate_json(x) for x in lines]


def without_usage(lines: list[str]) -> list[dict[str, Any]]:
    return [r.model_dump(exclude={"usage"}) for r in reports(lines)]


def write_rows(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


class Killed(Exception):
    """A driver interrupted (a progress callback that raises)."""


def answer_rows(n: int) -> list[dict[str, Any]]:
    # distinct answers, so that no call is answered by the cache
    return [{"id": f"a{i}", "contexts": [f"{CONTEXT} Row {i}."], "answer": f"{GOOD_ANSWER} Row {i}."} for i in range(n)]


# -- one actor first: test_engines_property.py, before this module on the same Ray, leaves its one actor kept ------


def test_an_actor_streams_several_batches_as_the_local_engine_does(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    """With an LLM each actor call takes a window of whole batches (here 6 batches of 2 in one call to one actor)
    and streams them through the local engine: the reports are the local engine's, row for row. With three answers
    a call (``pack_answers``: the answers' calls parked and sent in packs, each part cached under its answer's key)
    the packs are the local engine's too, so are the reports, usage included."""
    src = write_rows(tmp_path / "in.jsonl", answer_rows(12))
    out = tmp_path / "out.jsonl"
    packing = {"concurrency": 3, "pack_answers": 3}
    on_ray(str(src), out, llm_config(llm_server, tmp_path / "c1", **packing), actors=1, batch_size=2)
    sent_by_ray = list(llm_server.requests)
    local = local_lines(src, llm_config(llm_server, tmp_path / "c2", **packing), batch_size=2)
    got = out.read_text(encoding="utf-8").splitlines()
    assert got == local
    assert any(len(packed_requests(r)) == 3 for r in sent_by_ray)
    sent_locally = llm_server.requests[len(sent_by_ray) :]
    assert sum(r.usage.calls for r in reports(got)) == len(sent_by_ray) == len(sent_locally) < 2 * 12


def gone(actor: Any, wait_s: float = 60.0) -> bool:
    """Whether ``actor`` is gone within ``wait_s``: ``ray.kill`` is asynchronous, so a call made just after it may
    still be answered."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            ray.get(actor.ready.remote(), timeout=wait_s)
        except ray.exceptions.RayActorError:
            return True
        time.sleep(0.2)
    return False


def test_actors_are_kept_for_the_next_run_and_go_when_the_driver_is_interrupted(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    """score_rows' actors outlive a run that finished or stopped (the next run of the same shape does not load the
    model again) for KEEP_ACTORS_S, and go at once when the driver is interrupted (no call in flight goes on
    spending) or release_actors() is called."""
    src = FIXTURES / "samples.jsonl"
    first = tmp_path / "first.jsonl"
    on_ray(str(src), first, nli_config(tmp_path / "c1"), actors=1, batch_size=2)
    kept = gj_ray._kept
    assert kept is not None and len(kept.actors) == 1
    pid = ray.get(kept.actors[0].ready.remote())
    second = tmp_path / "second.jsonl"
    on_ray(str(src), second, nli_config(tmp_path / "c2"), actors=1, batch_size=2)  # another config, same shape
    assert gj_ray._kept is kept and ray.get(kept.actors[0].ready.remote()) == pid  # the same process
    assert second.read_text() == first.read_text()  # a kept actor builds each run's evaluator anew

    rows = write_rows(tmp_path / "in.jsonl", answer_rows(2))
    with pytest.raises(CacheMissError):  # a stop: the calls it leaves end by themselves, the actors stay
        on_ray(str(rows), tmp_path / "x.jsonl", llm_config(llm_server, tmp_path / "c3", cache_mode="only"), actors=1)
    assert gj_ray._kept is kept and ray.get(kept.actors[0].ready.remote()) == pid
    assert llm_server.requests == []
    timer = gj_ray._timer  # for KEEP_ACTORS_S, then they go
    assert timer is not None and timer.is_alive() and timer.interval == gj_ray.KEEP_ACTORS_S
    assert timer.function is gj_ray.release_actors

    gj_ray.release_actors()
    assert gj_ray._kept is None
    assert gone(kept.actors[0])

    def interrupt(done: int) -> None:
        raise Killed

    with pytest.raises(Killed):  # the driver interrupted: the actors go, and any call in flight with them
        on_ray(str(src), tmp_path / "y.jsonl", nli_config(tmp_path / "c4"), actors=1, batch_size=2, progress=interrupt)
    assert gj_ray._kept is None
    for _ in range(600):  # nothing held once Ray has taken the killed actor's CPU back
        if ray.available_resources().get("CPU") == ray.cluster_resources()["CPU"]:
            break
        time.sleep(0.1)
    assert ray.available_resources().get("CPU") == ray.cluster_resources()["CPU"]


def test_actors_the_cluster_cannot_hold_fail_the_run_and_hold_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A GPU per actor on a cluster without one: the run fails after Ray's wait for actors, naming what it asked
    for, instead of waiting forever; the actor asked for goes with it."""
    monkeypatch.setattr(ray.data.DataContext.get_current(), "wait_for_min_actors_s", 2)
    out = tmp_path / "out.jsonl"
    with pytest.raises(ConfigError, match=r"1 actor\(s\) of 1.0 CPU\(s\) and 1.0 GPU\(s\)"):
        on_ray(str(FIXTURES / "samples.jsonl"), out, nli_config(tmp_path / "c"), actors=1, num_gpus=1.0)
    assert not out.exists() or out.read_text() == ""
    assert gj_ray._kept is None
    for _ in range(600):
        if ray.available_resources().get("CPU") == ray.cluster_resources()["CPU"]:
            break
        time.sleep(0.1)
    assert ray.available_resources().get("CPU") == ray.cluster_resources()["CPU"]


# -- resume --------------------------------------------------------------------------------------------------------


def test_resume_after_a_killed_run_gives_the_file_of_one_run(tmp_path: Path) -> None:
    src = FIXTURES / "samples.jsonl"
    cfg = nli_config(tmp_path / "cache")
    whole = tmp_path / "whole.jsonl"
    # the file of one run, written by the local engine: the engines write the same file (the tests above), and
    # an actor pool's start-up is the cost of each Ray run
    score_file(str(src), whole, cfg, engine="local", batch_size=2)

    def kill_after(n: int) -> Any:
        def progress(done: int) -> None:
            if done == n:
                raise Killed

        return progress

    out = tmp_path / "out.jsonl"
    with pytest.raises(Killed):
        on_ray(str(src), out, cfg, batch_size=2, progress=kill_after(3))
    assert len(out.read_text().splitlines()) == 3
    with out.open("a") as fh:
        fh.write('{"id": "refund-invented", "verdict": "PA')  # killed in the middle of the 4th line
    summary = on_ray(str(src), out, cfg, batch_size=2, resume=True)
    assert summary.n == 5
    assert out.read_text() == whole.read_text()  # no duplicates, nothing lost, input order

    # a damaged line in the middle is moved aside; only its row is scored again, the rest is kept
    lines = out.read_text().splitlines(keepends=True)
    out.write_text("".join([*lines[:2], "garbage\n", *lines[3:]]))
    summary = on_ray(str(src), out, cfg, batch_size=2, resume=True)
    assert summary.n == 1
    ids = [json.loads(x)["id"] for x in out.read_text().splitlines()]
    assert sorted(ids) == sorted(json.loads(x)["id"] for x in lines) and len(set(ids)) == len(ids)
    assert (tmp_path / "out.jsonl.damaged").read_text() == "garbage\n"


def test_ctrl_c_keeps_the_bill_of_a_ray_run_for_the_resume(llm_server: ScriptedLLMServer, tmp_path: Path) -> None:
    """Ctrl-C in a Ray run's driver lost what the run had paid for: the local engine keeps an interrupted run's bill
    in OUT.spent.json (tests/runs/test_engines.py, test_ctrl_c_keeps_the_bill_for_the_resume), the Ray engine wrote
    none, so the --resume said the earlier runs billed nothing. One actor, one row a call (``window=1``): when the
    first report reaches the driver no other call is in flight, so the bill is every call the server answered."""
    src = write_rows(tmp_path / "in.jsonl", answer_rows(4))
    out = tmp_path / "out.jsonl"
    cfg = llm_config(llm_server, tmp_path / "cache", qa=False, window=1)

    def ctrl_c(done: int) -> None:  # the first report is written: the user presses Ctrl-C
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        on_ray(str(src), out, cfg, actors=1, batch_size=1, progress=ctrl_c)
    first_billed = llm_server.billed
    assert len(out.read_text().splitlines()) == 1 and first_billed >= 2  # the first row's claims and judge calls
    assert json.loads(spent_path(out).read_text())["billed"]["calls"] == first_billed
    result = score_file(str(src), out, cfg, engine="ray", actors=1, batch_size=1, resume=True)
    spent = result.spent()
    assert spent is not None and spent["earlier"]["calls"] == first_billed
    assert spent["all_runs"]["calls"] == llm_server.billed
    assert sorted(r.id for r in reports(out.read_text().splitlines())) == [f"a{i}" for i in range(4)]


def test_a_resume_under_other_settings_is_refused_before_any_row_and_the_same_settings_go_on(tmp_path: Path) -> None:
    # --resume compared nothing: a Ray run under another preset appended its reports to OUT. The driver asks the
    # first actor's Evaluator for the versions its reports will carry, before any row is shipped.
    src = FIXTURES / "samples.jsonl"
    cfg = nli_config(tmp_path / "cache")
    out = tmp_path / "out.jsonl"
    score_file(str(src), out, cfg, engine="local", batch_size=2)  # the earlier run, on the local engine
    whole = out.read_text()
    out.write_text("".join(whole.splitlines(keepends=True)[:2]))  # stopped after two rows
    before = out.read_bytes()
    with pytest.raises(ConfigError, match=r"(?s)2 of its reports.*verdict: .*=default .*in OUT, .*=research"):
        on_ray(str(src), out, nli_config(tmp_path / "cache", preset="research"), batch_size=2, resume=True)
    assert out.read_bytes() == before and [p.name for p in tmp_path.glob("out.jsonl*")] == ["out.jsonl"]
    # the same settings on the other engine: its reports are the local engine's, versions and all
    summary = on_ray(str(src), out, cfg, batch_size=2, resume=True)
    assert summary.n == len(whole.splitlines()) - 2 and out.read_text() == whole


def test_ray_carries_the_second_judge_into_its_actors_and_writes_the_local_file(tmp_path: Path) -> None:
    # The Ray engine refused every run with a second judge (its driver-side check of the verdict head built an
    # NLI-only evaluator that kept the second judge, which needs a first): one small case, local and Ray alike.
    from groundjudge.io.tables import input_rows
    from tests.pipeline import test_second_judge as sj

    src = write_rows(tmp_path / "in.jsonl", sj.ROWS)
    with (
        ScriptedLLMServer(route({"judge": sj.verdicts(sj.FIRST)})) as first,
        ScriptedLLMServer(route({"judge": sj.verdicts(sj.SECOND)})) as second,
    ):

        def config(cache: str) -> Config:
            judge = {"second_judge": "openai/gpt-4.1-mini", "second_judge_base_url": second.openai_base_url}
            base = sj.settings_for(None, **judge, second_judge_sample=0.5).model_dump(exclude_unset=True)
            extra = {"llm": "openai/gpt-4o-mini", "base_url": first.openai_base_url, "nli_model": str(SHARED_MODEL)}
            return Config(**{**base, **extra, "cache_dir": str(tmp_path / cache)})

        local = [
            dumps(finite_report(r))
            for r in Evaluator(config("local")).evaluate_numbered(input_rows(src, set()), batch_size=2)
        ]
        s0 = len(second.requests)
        out = tmp_path / "out.jsonl"
        on_ray(str(src), out, config("ray"), actors=1, batch_size=2)
        assert len(second.requests) - s0 == len(second.requests[:s0])  # the same second-judge calls
    skip: Any = {"usage": True, "second_judge": {"usage"}}
    got = [AnswerReport.model_validate_json(x).model_dump(exclude=skip) for x in out.read_text().splitlines()]
    assert got == [AnswerReport.model_validate_json(x).model_dump(exclude=skip) for x in local]
    assert any(r.get("second_judge") for r in got)


def test_parquet_input_gives_the_reports_of_the_same_rows_as_jsonl(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [json.loads(x) for x in (FIXTURES / "samples.jsonl").read_text().splitlines()]
    keys = list(dict.fromkeys(k for r in rows for k in r))  # every column (from_pylist reads the first row's)
    pq.write_table(pa.Table.from_pylist([{k: r.get(k) for k in keys} for r in rows]), tmp_path / "in.parquet")
    out = tmp_path / "out.jsonl"
    with pytest.warns(DeprecationWarning, match="engine='ray'"):  # the older name still runs, and says the new one
        gj_ray.score_file(str(tmp_path / "in.parquet"), out, nli_config(tmp_path / "c1"), batch_size=3)
    local = [dumps(finite_report(r)) for r in Evaluator(nli_config(tmp_path / "c2")).evaluate_many(rows, 3)]
    assert out.read_text(encoding="utf-8").splitlines() == local


def test_score_engine_ray_on_the_command_line_writes_the_local_file(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from groundjudge.cli import app

    out_ray, out_local = tmp_path / "ray.jsonl", tmp_path / "local.jsonl"
    common = ["--no-progress", "--nli-model", str(SHARED_MODEL), "--cache-mode", "off"]
    ray_run = CliRunner().invoke(
        app, ["score", str(FIXTURES / "samples.jsonl"), "--out", str(out_ray), "--engine", "ray", *common]
    )
    assert ray_run.exit_code == 0, ray_run.output
    local = CliRunner().invoke(app, ["score", str(FIXTURES / "samples.jsonl"), "--out", str(out_local), *common])
    assert local.exit_code == 0, local.output
    assert out_ray.read_text().splitlines() == out_local.read_text().splitlines()
    refused = CliRunner().invoke(
        app,
        [
            "score",
            str(FIXTURES / "samples.jsonl"),
            "--out",
            str(tmp_path / "x.jsonl"),
            "--engine",
            "ray",
            "--batch-api",
            "--llm",
            "openai/gpt-4o-mini",
            "--no-progress",
            "--nli-model",
            str(SHARED_MODEL),
        ],
    )
    assert refused.exit_code == 2 and "--batch-api" in refused.output  # --map, CSV, --retry-errors: both engines


def test_ray_reads_rows_with_the_local_engines_reader(tmp_path: Path) -> None:
    """Issue 17: the Ray driver read rows without the column mapping the local engine applies: a row in RAGAS
    column names was ERROR on Ray and PASS locally, a JSONL reference was dropped, and a Parquet timestamp column
    crashed the driver. Both engines read through io.tables now: the same reports, line for line, including a
    row the mapping finds bad (its id and its column-named error travel to the actor)."""
    import datetime

    import pyarrow as pa
    import pyarrow.parquet as pq

    from groundjudge.runs import score_file as score_locally

    rows = [
        {"sample_id": "a", "user_input": "Q?", "response": GOOD_ANSWER, "retrieved_contexts": [CONTEXT],
         "reference": "The reference.", "created_at": datetime.datetime(2026, 1, 2, 3, 4, 5)},
        {"sample_id": "b", "user_input": "Q?", "response": BAD_ANSWER, "retrieved_contexts": [CONTEXT],
         "reference": None, "created_at": datetime.datetime(2026, 1, 2, 3, 4, 6)},
        {"sample_id": "c", "user_input": "Q?", "response": GOOD_ANSWER, "retrieved_contexts": [],
         "reference": None, "created_at": None},
    ]  # fmt: skip
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "ragas.parquet")
    out_ray, out_local = tmp_path / "ray.jsonl", tmp_path / "local.jsonl"
    on_ray(str(tmp_path / "ragas.parquet"), out_ray, nli_config(tmp_path / "c1"), batch_size=2)
    score_locally(tmp_path / "ragas.parquet", out_local, nli_config(tmp_path / "c2"), batch_size=2)
    ray_lines = out_ray.read_text(encoding="utf-8").splitlines()
    assert ray_lines == out_local.read_text(encoding="utf-8").splitlines()
    reports = [json.loads(x) for x in ray_lines]
    assert [r["id"] for r in reports] == ["a", "b", "c"]
    assert reports[0]["verdict"] != "ERROR" and reports[0]["metadata"]["reference"] == "The reference."
    assert reports[2]["verdict"] == "ERROR" and "retrieved_contexts" in reports[2]["errors"][0]


def test_ids_json_cannot_hold_travel_to_the_actors_as_the_local_engine_reads_them(tmp_path: Path) -> None:
    """A Parquet decimal, date or UUID id is an id locally (io.ids.id_text: its text; a decimal with a fraction the
    row's error): the driver's json.dumps of such a row raised TypeError and failed the whole Ray run. Each row now
    reaches the actor as the local engine reads it: the same report id and the same Sample or error."""
    import datetime
    import decimal

    import pyarrow as pa
    import pyarrow.parquet as pq

    from groundjudge.io.rows import batches
    from groundjudge.io.tables import input_rows

    def table(ids: pa.Array) -> Path:
        path = tmp_path / f"ids-{len(list(tmp_path.iterdir()))}.parquet"
        pq.write_table(pa.table({"id": ids, "answer": ["a", "b"], "contexts": [["a"], ["b"]]}), path)
        return path

    D = decimal.Decimal
    files = [
        table(pa.array([D("1"), D("2.5")], pa.decimal128(5, 1))),
        table(pa.array([datetime.date(2026, 1, 2), None])),
        table(pa.array([b"\x01" * 16, b"\x02" * 16], pa.binary(16))),
    ]
    for path in files:
        local = [(n, str(p)) for b in batches(input_rows(path, set()), 8) for n, _, p in b]
        wired = [gj_ray._from_wire(gj_ray._to_wire(n, row)) for n, row in input_rows(path, set())]
        assert [(n, str(p)) for b in batches(wired, 8) for n, _, p in b] == local
    ids = [str(p) for b in batches(input_rows(files[0], set()), 8) for _, _, p in b]
    assert "id='1'" in ids[0] and "field 'id': is 2.5, a number that is not an integer" in ids[1]
    # any other cell JSON cannot hold: that row's error, named, not a failed run
    row = {"id": "m", "answer": "a", "contexts": ["a"], "metadata": {"at": datetime.date(2026, 1, 2)}}
    n, error = gj_ray._from_wire(gj_ray._to_wire(3, row))
    assert n == 3 and "row 3, field 'metadata': holds a value the Ray engine cannot send" in str(error)


# -- two actors: a kept pool serves only a run of its shape, so these follow the one-actor tests ------


# -- the same reports ---------------------------------------------------------------------------------------------


def test_fixtures_and_bad_rows_give_the_local_reports_line_for_line(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    bad = [
        b"not json\n",
        b'{"id": "latin", "contexts": ["caf\xe9"], "answer": "x"}\n',  # not UTF-8
        b"\n",  # blank: no row, but it counts as a line
        b"null\n",
        b'{"id": "eiffel-good", "contexts": ["a"], "answer": "dup"}\n',  # an id seen before
        b'{"id": "no-answer", "contexts": ["a"]}\n',
        b'{"id": "nan", "contexts": ["a"], "answer": "x", "label": NaN}\n',
    ]
    src.write_bytes(b"\xef\xbb\xbf" + (FIXTURES / "samples.jsonl").read_bytes() + b"".join(bad))
    out = tmp_path / "out.jsonl"
    seen: list[int] = []
    summary = on_ray(str(src), out, nli_config(tmp_path / "c1"), actors=2, batch_size=3, progress=seen.append)
    local = local_lines(src, nli_config(tmp_path / "c2"), batch_size=3)
    assert out.read_text(encoding="utf-8").splitlines() == local  # usage too: nli mode spends nothing
    assert seen == list(range(1, len(local) + 1))
    errors = [r for r in reports(local) if r.verdict == "ERROR"]
    assert [r.row for r in errors] == [9, 10, 12, 13, 14, 15]
    assert errors[3].id == "row-13" and "duplicate id" in errors[3].errors[0]
    expected = Summarizer()
    for r in reports(local):
        expected.add(r)
    assert summary == expected.summary()


def test_cascade_against_the_scripted_judge_equals_the_local_engine(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    rows = [
        {"id": "good", "contexts": [CONTEXT], "answer": GOOD_ANSWER, "question": "When?"},
        {"id": "bad", "contexts": [CONTEXT], "answer": BAD_ANSWER},
        {"id": "claim", "contexts": [CONTEXT], "claim": "The Eiffel Tower is in Paris."},
        {"id": "broken", "contexts": [], "answer": GOOD_ANSWER},
    ]
    src = write_rows(tmp_path / "in.jsonl", rows)
    out = tmp_path / "out.jsonl"
    on_ray(str(src), out, llm_config(llm_server, tmp_path / "c1"), actors=2, batch_size=2)
    ray_calls = len(llm_server.requests)
    local = local_lines(src, llm_config(llm_server, tmp_path / "c2"), batch_size=2)
    got = out.read_text(encoding="utf-8").splitlines()
    assert without_usage(got) == without_usage(local)
    assert [r.usage.calls for r in reports(got)] == [r.usage.calls for r in reports(local)] == [2, 2, 1, 0]
    assert ray_calls == len(llm_server.requests) - ray_calls == 5
    assert [r.verdict for r in reports(got)] == ["PASS", "FAIL", "PASS", "ERROR"]


# -- the cluster's budget and cache -----------------------------------------------------------------------------------


def test_the_call_budget_holds_across_actors_and_resume_finishes(llm_server: ScriptedLLMServer, tmp_path: Path) -> None:
    src = write_rows(tmp_path / "in.jsonl", answer_rows(8))
    out = tmp_path / "out.jsonl"
    # 16 calls wanted, 10 allowed: each actor alone would stay under the cap (8 calls each), the cluster does not
    cfg = llm_config(llm_server, tmp_path / "cache", max_calls=10, qa=False)
    with pytest.raises(RunStopped) as info:  # a run starts once every actor is up, so both spend
        on_ray(str(src), out, cfg, actors=2, batch_size=1)
    assert len(llm_server.requests) <= 10  # the cap of the cluster, not of each actor
    # OUT opens at the first report: on a loaded machine the stop can come before any row finished (seen once in
    # the README's command, 1 of 4 runs), and then OUT is left as it was, here not there at all
    written = reports(out.read_text().splitlines()) if out.exists() else []
    # only finished rows are written
    assert all(r.verdict != "ERROR" and r.usage.calls == 2 for r in written)
    assert info.value.summary.n == len(written) <= 5
    assert isinstance(info.value, BudgetExceededError)  # one RunStopped, still its cause's class
    # issue 29 defect 3: the cluster's ledger counts every billed call, those of rows that did not finish too
    assert info.value.result.billed.calls == llm_server.billed >= info.value.summary.usage.calls

    on_ray(str(src), out, llm_config(llm_server, tmp_path / "cache", qa=False), actors=2, resume=True)
    ids = [r.id for r in reports(out.read_text().splitlines())]
    assert sorted(ids) == sorted(f"a{i}" for i in range(8)) and len(set(ids)) == 8


def test_a_stop_in_one_actor_waits_for_the_other_actors_call_and_writes_its_finished_report(
    tmp_path: Path,
) -> None:
    """Row a0 in one actor, a1 in the other (one row a call: ``window=1``), a2 waiting for an actor. a0's claims
    reply waits until a1's judge call holds its place on the cluster's ledger, so a0's judge call is the one the cap
    refuses and a0's actor returns the stop; a1's judge reply comes seconds later, so a1's report reaches the driver
    after the stop. a1 finished: it is written (after the gap a0 leaves, as the local engine writes the answers in
    flight at a stop) and its call is in the bill; a2's call never starts (a bad row, it needs no LLM call: started,
    it would be written). --resume scores a0 and a2."""
    a1_judge_held, a0_claims_answered = threading.Event(), threading.Event()

    def claims(req: RecordedRequest) -> Reply:
        if "Row 0." in req.text:
            a1_judge_held.wait(60)
            a0_claims_answered.set()
        return claims_handler(req)

    def judge(req: RecordedRequest) -> Reply:
        reply = judge_handler(req)
        if "Row 1." in req.text:
            a1_judge_held.set()
            a0_claims_answered.wait(60)
            reply.delay = 3.0  # a0's actor is refused and returns its stop meanwhile
        return reply

    src = write_rows(tmp_path / "in.jsonl", [*answer_rows(2), {"id": "a2", "contexts": [], "answer": GOOD_ANSWER}])
    out = tmp_path / "out.jsonl"
    with ScriptedLLMServer(route({**HANDLERS, "claims": claims, "judge": judge})) as server:
        cfg = llm_config(server, tmp_path / "cache", max_calls=3, qa=False, window=1)
        with pytest.raises(RunStopped) as info:
            on_ray(str(src), out, cfg, actors=2, batch_size=1)
        assert isinstance(info.value, BudgetExceededError)
        written = reports(out.read_text().splitlines()) if out.exists() else []
        assert [(r.id, r.verdict, r.usage.calls) for r in written] == [("a1", "PASS", 2)]
        assert info.value.result.rows_written == info.value.summary.n == 1
        # a0's claims, a1's claims and judge: a1's judge call is in the bill too, settled after the stop came
        assert len(server.requests) == server.billed == info.value.result.billed.calls == 3

        on_ray(str(src), out, llm_config(server, tmp_path / "cache", qa=False), actors=2, resume=True)
        assert len(server.requests) == 4  # a0's judge call; its claims reply and all of a1 are not asked again
    assert [(r.id, r.verdict) for r in reports(out.read_text().splitlines())] == [
        ("a1", "PASS"),
        ("a0", "PASS"),
        ("a2", "ERROR"),
    ]


def test_ctrl_c_counts_the_call_a_killed_actor_had_in_flight(tmp_path: Path) -> None:
    """Row a0 in one actor, a1 in the other (one row a call). a1's claims request is read and answered only seconds
    later; a0's judge reply waits until it is read, so when a0's report reaches the driver and the user presses
    Ctrl-C, a1's call is in flight, and the actors go with it. The provider may bill it: it counts at its worst case,
    unsettled, as the local engine counts a send stopped by Ctrl-C (before, the bill left it out: the cluster's
    ledger still held it, and only its settled calls were read)."""
    a1_claims_read = threading.Event()

    def claims(req: RecordedRequest) -> Reply:
        reply = claims_handler(req)
        if "Row 1." in req.text:
            a1_claims_read.set()
            reply.delay = 5.0
        return reply

    def judge(req: RecordedRequest) -> Reply:
        if "Row 0." in req.text:
            a1_claims_read.wait(60)
        return judge_handler(req)

    def ctrl_c(done: int) -> None:
        raise KeyboardInterrupt

    src = write_rows(tmp_path / "in.jsonl", answer_rows(2))
    out = tmp_path / "out.jsonl"
    with ScriptedLLMServer(route({**HANDLERS, "claims": claims, "judge": judge})) as server:
        cfg = llm_config(server, tmp_path / "cache", qa=False, window=1)
        with pytest.raises(KeyboardInterrupt):
            on_ray(str(src), out, cfg, actors=2, batch_size=1, progress=ctrl_c)
        sent = len(server.requests)  # a0's claims and judge, a1's claims
    bill = json.loads(spent_path(out).read_text())["billed"]
    assert sent == 3 and (bill["calls"], bill.get("unsettled_calls")) == (3, 1)
    assert bill["unsettled_cost_usd"] > 0 and bill["cost_usd"] > bill["unsettled_cost_usd"]


def test_two_actors_share_one_cache_dir_and_cache_only_keeps_its_meaning(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    src = write_rows(tmp_path / "in.jsonl", answer_rows(4))
    cache = tmp_path / "shared-cache"
    first = tmp_path / "first.jsonl"
    on_ray(str(src), first, llm_config(llm_server, cache), actors=2, batch_size=1)
    calls = len(llm_server.requests)
    assert calls == 8
    second = tmp_path / "second.jsonl"
    summary = on_ray(str(src), second, llm_config(llm_server, cache, cache_mode="only"), actors=2, batch_size=1)
    assert len(llm_server.requests) == calls  # every call answered by the cache the other actors wrote
    assert summary.usage.cached_calls == 8
    assert without_usage(second.read_text().splitlines()) == without_usage(first.read_text().splitlines())
    # the same cache serves the local engine: the key is the same
    assert (
        local_lines(src, llm_config(llm_server, cache, cache_mode="only"), batch_size=1)
        == second.read_text().splitlines()
    )

    more = write_rows(tmp_path / "more.jsonl", answer_rows(6))
    with pytest.raises(CacheMissError):
        on_ray(
            str(more),
            tmp_path / "third.jsonl",
            llm_config(llm_server, cache, cache_mode="only"),
            actors=2,
            batch_size=1,
        )
    assert len(llm_server.requests) == calls


# -- Ray Data's pool (score_dataset): last, as it lets the kept actors go ------------------------------------------


def test_score_dataset_on_a_wice_slice_equals_the_local_engine(tmp_path: Path) -> None:
    with (SHARED / "benchmarks" / "wice-dev.jsonl").open(encoding="utf-8") as fh:
        rows = [json.loads(next(fh)) for _ in range(12)]
    result = gj_ray.score_dataset(
        ray.data.from_items(rows, override_num_blocks=4), nli_config(tmp_path / "c1"), batch_size=8, actors=2
    )
    got = sorted(result.take_all(), key=lambda r: r["row"])
    assert [r["row"] for r in got] == list(range(1, 13)) and not any(r["stop"] for r in got)
    local = [dumps(finite_report(r)) for r in Evaluator(nli_config(tmp_path / "c2")).evaluate_many(rows, 8)]
    assert [r["report"] for r in got] == local
    assert [r["id"] for r in got] == [row["id"] for row in rows]


def test_the_drivers_head_check_drops_every_second_judge_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    """The driver checks the NLI side alone (no judge, so no second judge): it dropped a fixed list of second-judge
    settings, not second_judge_reasoning_effort, so every cascade run on Ray that set it was refused."""
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    cfg = Config.make(
        llm="openai/gpt-4o-mini",
        mode="cascade",
        nli_model=str(SHARED_MODEL),
        second_judge="openai/o3",
        second_judge_reasoning_effort="low",
        second_judge_sample=0.5,
        second_judge_price={"input_per_mtok": 1, "output_per_mtok": 1},
    )
    gj_ray._check_fitted_for(cfg)


def test_thresholds_stored_for_other_weights_stop_the_ray_run_in_the_driver(
    tmp_path: Path, tiny_nli: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Thresholds stored beside the weights name the model they were fitted on: a cascade run without a head on
    other weights is refused in the driver, for the run's mode (the driver's own evaluator is an nli-mode one)."""
    import shutil

    from groundjudge.checker.nli import NLIModel
    from groundjudge.checker.profile import write_model_profile
    from groundjudge.models import LocalThresholds

    monkeypatch.setenv("OPENAI_API_KEY", "x")
    model = Path(shutil.copytree(tiny_nli, tmp_path / "model"))
    cascade = {"cascade": LocalThresholds(t_support=None, t_contradict=0.3)}
    write_model_profile(model, cascade, model="other-weights@0123/nli")
    cfg = Config(mode="cascade", llm="openai/gpt-4o-mini", nli_model=str(model), use_head=False)
    with pytest.raises(ConfigError, match=r"groundjudge\.json: its cascade thresholds were fitted on the scores of"):
        gj_ray._check_fitted_for(cfg)
    write_model_profile(model, cascade, model=NLIModel(str(model)).identity)
    gj_ray._check_fitted_for(cfg)


def test_thresholds_fitted_on_another_model_stop_the_ray_run_in_the_driver(tmp_path: Path) -> None:
    # calibrate --no-head writes thresholds with the model they were fitted on (use_head false): the driver's check
    # returned at once without a head in force, so the refusal would have come from every actor instead
    cfg = Config(
        mode="nli", nli_model=str(SHARED_MODEL), t_unsupported=0.2, thresholds_model="another/nli", use_head=False
    )
    with pytest.raises(ConfigError, match="were fitted on the scores of NLI model another/nli"):
        gj_ray._check_fitted_for(cfg)
    # one threshold given by hand leaves the other fitted one tied to its model (one rule: Config.fitted_thresholds)
    mixed = Config.overridden({**cfg.model_dump(exclude_unset=True), "t_support": 0.7}, {"t_unsupported": 0.1})
    with pytest.raises(ConfigError, match=r"^t_support were fitted on the scores of NLI model another/nli"):
        gj_ray._check_fitted_for(mixed)
    gj_ray._check_fitted_for(
        cfg.model_copy(
            update={"thresholds_model": Evaluator(cfg.model_copy(update={"thresholds_model": None})).nli.identity}
        )
    )
