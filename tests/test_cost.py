"""Issue 10: at most two LLM calls per answer with every check on, prompt-cache prefixes, and batch mode end to end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from groundjudge.cache import Cache
from groundjudge.config import Config
from groundjudge.pipeline.evaluator import Evaluator
from groundjudge.testing import ScriptedLLMServer, prompt_name, route
from tests.conftest import make_test_client
from tests.test_pipeline import BAD_ANSWER, CONTEXT, GOOD_ANSWER, HANDLERS

ROWS = [
    {"id": "good", "answer": GOOD_ANSWER, "contexts": [CONTEXT]},
    {"id": "bad", "answer": BAD_ANSWER, "contexts": [CONTEXT], "question": "When was it built?"},
    {"id": "claim", "claim": "The tower is 330 metres tall.", "contexts": [CONTEXT]},
]


def _ev(server: ScriptedLLMServer, shared_nli: Any, cache_dir: Path, provider: str = "openai", **kw: Any) -> Evaluator:
    cache = Cache(cache_dir, mode=kw.get("cache_mode", "use"))
    client = make_test_client(server, provider, cache=cache)
    kw.setdefault("batch_poll_seconds", 0.0)
    return Evaluator(Config(**kw), nli=shared_nli, client=client, cache=cache)


def direct(server: ScriptedLLMServer) -> list[Any]:
    return [r for r in server.requests if r.batch_id is None]


def test_at_most_two_calls_per_answer_with_every_check_on(shared_nli: Any, tmp_path: Path) -> None:
    with ScriptedLLMServer(route(HANDLERS)) as server:
        reports = list(_ev(server, shared_nli, tmp_path / "c").evaluate_many(ROWS))
        names = [prompt_name(r) for r in server.requests]
    assert [r.usage.calls for r in reports] == [2, 2, 1]  # claim rows: the judge alone, no QA
    assert names.count("claims_qa") == 2 and names.count("verify") == 2 and names.count("judge") == 1
    assert all(r.qa is not None and r.qa.score is not None for r in reports[:2])


def test_no_call_reads_the_sources_when_nothing_escalates_and_qa_is_off(shared_nli: Any, tmp_path: Path) -> None:
    with ScriptedLLMServer(route(HANDLERS)) as server:
        # every claim decided locally (support at 0.01): one call per answer, the extraction
        report = _ev(server, shared_nli, tmp_path / "c", qa=False, t_support=0.01).evaluate(GOOD_ANSWER, [CONTEXT])
        assert [prompt_name(r) for r in server.requests] == ["claims"]
    assert report.usage.calls == 1 and all(c.route == "nli" for c in report.claims)


def test_prompts_put_the_stable_part_first(shared_nli: Any, tmp_path: Path) -> None:
    with ScriptedLLMServer(route(HANDLERS)) as server:
        list(_ev(server, shared_nli, tmp_path / "c").evaluate_many(ROWS[:2]))
        verify = [r for r in server.requests if prompt_name(r) == "verify"]
    assert len(verify) == 2
    systems = {r.messages[0]["content"] for r in verify}
    assert len(systems) == 1  # the same instructions (and fence) for every answer: a cacheable prefix
    users = [r.messages[-1]["content"] for r in verify]
    shared = CONTEXT in users[0] and all(u.index(CONTEXT) < u.index("QUESTIONS") for u in users)
    assert shared  # the sources come before the answer's own questions and claims


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_batch_mode_answers_every_call_through_the_batch_api(shared_nli: Any, tmp_path: Path, provider: str) -> None:
    with ScriptedLLMServer(route(HANDLERS)) as server:
        # no provider prefix cache, so that the two runs differ by the batch discount alone
        server.min_cached_prefix_tokens = server.anthropic_min_cache_tokens = 10**9
        direct_reports = list(_ev(server, shared_nli, tmp_path / "direct", provider).evaluate_many(ROWS))
        server.requests.clear()
        ev = _ev(server, shared_nli, tmp_path / "batch", provider, batch_api=True)
        batched = list(ev.evaluate_many(ROWS))
        assert direct(server) == []  # every LLM call went through the provider batch
        assert [r.model_dump(exclude={"usage"}) for r in batched] == [
            r.model_dump(exclude={"usage"}) for r in direct_reports
        ]
        cost_direct = sum(r.usage.cost_usd for r in direct_reports)
        assert ev.usage.cost_usd == pytest.approx(cost_direct / 2, rel=0.05)  # half price
        # and each answer's report carries what its calls cost in the batch, as direct reports do
        assert sum(r.usage.cost_usd for r in batched) == pytest.approx(ev.usage.cost_usd)
        assert [r.usage.calls for r in batched] == [r.usage.calls for r in direct_reports]
        assert sum(o.submitted for o in ev.batch_outcomes) == 5  # 2 extractions, then 3 sources-side calls
        server.requests.clear()
        replay = list(_ev(server, shared_nli, tmp_path / "batch", provider, cache_mode="only").evaluate_many(ROWS))
        assert server.requests == [] and [r.verdict for r in replay] == [r.verdict for r in batched]


def test_an_expired_batch_request_is_called_directly_never_dropped(shared_nli: Any, tmp_path: Path) -> None:
    with ScriptedLLMServer(route(HANDLERS)) as server:
        server.batch_expire_after = 1  # the first batch expires with one request answered
        ev = _ev(server, shared_nli, tmp_path / "c", batch_api=True)
        reports = list(ev.evaluate_many(ROWS))
        assert ev.batch_outcomes[0].expired >= 1
        assert len(direct(server)) >= 1  # the unanswered one was asked directly
    assert [r.id for r in reports] == ["good", "bad", "claim"]
    assert all(r.verdict != "ERROR" for r in reports)


def test_batch_mode_needs_a_writable_cache() -> None:
    from groundjudge.errors import ConfigError

    with pytest.raises(ConfigError, match="cache_mode"):
        Config.make(batch_api=True, cache_mode="refresh")  # it would pay twice: the second pass never reads


def test_score_batch_api_from_the_command_line(
    shared_nli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from typer.testing import CliRunner

    from groundjudge.cli import app
    from tests.conftest import SHARED_MODEL

    monkeypatch.setenv("GROUNDJUDGE_NLI_MODEL", str(SHARED_MODEL))
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    out = tmp_path / "out.jsonl"
    with ScriptedLLMServer(route(HANDLERS)) as server:
        base = [
            "score",
            str(src),
            "--out",
            str(out),
            "--llm",
            "openai/gpt-4o-mini",
            "--base-url",
            server.openai_base_url,
        ]
        common = ["--cache-dir", str(tmp_path / "c"), "--no-progress", "--batch-api"]
        dry = CliRunner().invoke(app, [*base, *common, "--dry-run"])
        assert dry.exit_code == 0 and json.loads(dry.output)["priced_as"] == "provider batch API"
        assert not out.exists() and server.requests == []
        result = CliRunner().invoke(app, [*base, *common, "--config", str(_poll_now(tmp_path))])
        assert result.exit_code == 0, result.output
        assert direct(server) == [] and server.requests  # all through the batch endpoints
    assert (tmp_path / "out.jsonl.batches.json").is_file()  # beside OUT: a rerun resumes the same batches
    assert [json.loads(x)["id"] for x in out.read_text().splitlines()] == ["good", "bad", "claim"]


def _poll_now(tmp_path: Path) -> Path:
    config = tmp_path / "config.json"
    config.write_text('{"batch_poll_seconds": 0}')
    return config
