"""Attacks on the second judge's call at its limits (docs/how-to/second-judge.md): a call that times out, a reply cut
off at its output cap, a cache-only replay where only the first judge is cached, and a resume that adds or changes
the second judge. Invariant: the second judge never changes a score; its failures are its own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from groundjudge.cache import Cache
from groundjudge.errors import CacheMissError
from groundjudge.llm import Ledger
from groundjudge.pipeline.evaluator import Evaluator
from groundjudge.testing import RecordedRequest, Reply, ScriptedLLMServer, route
from tests.conftest import SHARED_MODEL, make_test_client
from tests.pipeline.test_second_judge import (
    FLAGGED,
    ROWS,
    SECOND,
    SECOND_MODEL,
    make,
    ruling,
    servers,  # noqa: F401
    settings_for,
    verdicts,
)

runner = CliRunner()


def _with_second(first: ScriptedLLMServer, other: ScriptedLLMServer, nli: Any, tmp: Path, **kw: Any) -> Evaluator:
    cache = Cache(tmp / "c")
    ledger = Ledger()
    return Evaluator(
        settings_for(other),
        nli=nli,
        client=make_test_client(first, cache=cache, ledger=ledger),
        cache=cache,
        second_client=make_test_client(other, "anthropic", model=SECOND_MODEL, cache=cache, ledger=ledger, **kw),
    )


def _with_failing_second(
    servers: Any,  # noqa: F811
    shared_nli: Any,
    tmp_path: Path,
    script: Any,
    **kw: Any,
) -> tuple[list[Any], list[Any], int]:
    """The reports of ROWS without a second judge, and with one answering by ``script`` (its client built with
    ``kw``), and how many requests the second judge's server read."""
    first, _ = servers
    plain = list(make(servers, shared_nli, tmp_path / "plain", second=False).evaluate_many(ROWS))
    with ScriptedLLMServer(route({"judge": script})) as other:
        got = list(_with_second(first, other, shared_nli, tmp_path, **kw).evaluate_many(ROWS))
        sent = len(other.requests)
    return got, plain, sent


def _second_failed(got: list[Any], plain: list[Any]) -> list[Any]:
    """The reports of a run whose second judge failed: rulings as without it, no answer harmed, each flagged
    answer's claims a second-judge ERROR and no disagreement, the others never looked at. The flagged ones."""
    assert [ruling(r) for r in got] == [ruling(r) for r in plain]
    for r in got:
        assert r.verdict != "ERROR" and not r.errors
        if r.id in FLAGGED:
            assert r.claims and all(c.second_judge is not None and c.second_judge.label == "ERROR" for c in r.claims)
            assert not r.judges_disagree
        else:
            assert r.second_judge is None
    return [r for r in got if r.id in FLAGGED]


def test_a_second_judge_call_that_times_out_is_its_error_and_the_answer_the_first_judges(
    servers: Any,  # noqa: F811
    shared_nli: Any,
    tmp_path: Path,
) -> None:
    slow = verdicts(SECOND)
    got, plain, sent = _with_failing_second(
        servers, shared_nli, tmp_path, lambda r: Reply.slow(1.5, slow(r)), timeout=0.2
    )
    assert sent >= len(FLAGGED)  # it was asked, and did not answer in time
    for r in _second_failed(got, plain):
        assert r.second_judge is not None and r.second_judge.error and "timed out" in r.second_judge.error


def _cut(req: RecordedRequest) -> Reply:
    """A second judge whose reply stops at its output cap after the first verdict."""
    full = json.loads(verdicts(SECOND)(req).content or "{}")
    text = json.dumps(full)
    return Reply.truncated(text[: len(text) - 20])


def test_a_second_judge_reply_cut_off_at_its_output_cap_is_its_error_never_partial_verdicts(
    servers: Any,  # noqa: F811
    shared_nli: Any,
    tmp_path: Path,
) -> None:
    got, plain, _ = _with_failing_second(servers, shared_nli, tmp_path, _cut)
    for r in _second_failed(got, plain):
        assert r.second_judge is not None and r.second_judge.error, r.second_judge
        assert r.second_judge.usage.calls >= 1  # the cut reply was billed


def test_cache_only_with_the_first_judge_cached_and_the_second_not_stops_the_run(
    servers: Any,  # noqa: F811
    shared_nli: Any,
    tmp_path: Path,
) -> None:
    first, second = servers
    list(make(servers, shared_nli, tmp_path / "c", second=False).evaluate_many(ROWS))  # the first judge cached
    s0, f0 = len(second.requests), len(first.requests)
    ev = make(servers, shared_nli, tmp_path / "c", cache_mode="only")
    got: list[Any] = []
    with pytest.raises(CacheMissError, match="claude-haiku"):  # the first judge hit, the second missed
        got.extend(ev.evaluate_many(ROWS))
    assert [r.id for r in got] == ["c1", "c2"]  # the answers before the miss are handed out
    assert len(second.requests) == s0 and len(first.requests) == f0


@pytest.mark.parametrize("change", ["add", "model"])
def test_a_resume_that_adds_or_changes_the_second_judge_is_refused_naming_it(
    servers: Any,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    change: str,
) -> None:
    from groundjudge.cli import app

    first, second = servers
    monkeypatch.setenv("GROUNDJUDGE_NLI_MODEL", str(SHARED_MODEL))
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"t_support": "never", "t_contradict": "never", "t_unsupported": None}))
    out = tmp_path / "out.jsonl"
    base = ["score", str(data), "--out", str(out), "--cache-dir", str(tmp_path / "c"), "--no-progress"]
    base += ["--llm", "openai/gpt-4o-mini", "--base-url", first.openai_base_url, "--config", str(config)]
    sj = ["--second-judge-base-url", second.anthropic_base_url]
    part = tmp_path / "part.jsonl"  # the first run scores part of the rows
    part.write_text("".join(json.dumps(r) + "\n" for r in ROWS[2:4]))
    before = ["score", str(part), *base[2:]] + ([] if change == "add" else ["--second-judge", SECOND_MODEL, *sj])
    res = runner.invoke(app, before)
    assert res.exit_code == 0, res.output
    written = out.read_text()
    s0 = len(second.requests)
    other = SECOND_MODEL if change == "add" else "anthropic/claude-sonnet-4-5"
    res = runner.invoke(app, [*base, "--resume", "--second-judge", other, *sj])
    assert res.exit_code == 2, res.output
    assert "second_judge" in res.output, res.output
    # the hint names the one option that differs, never one this run left unset as OUT's did
    assert "second-judge-sample" not in res.output and "second_judge_sample unset" not in res.output, res.output
    assert out.read_text() == written and len(second.requests) == s0
