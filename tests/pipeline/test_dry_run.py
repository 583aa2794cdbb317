"""The dry run (issue 18, "Honest again"): exact where the cache makes it knowable, an upper bound only where the
claims or their NLI scores are not cached yet, said in words; it writes nothing and sends nothing.

Real SDKs against ScriptedLLMServer, the shared NLI model by path, cascade mode with and without QA.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from groundjudge.cache import Cache
from groundjudge.config import Config
from groundjudge.pipeline.evaluator import Evaluator
from groundjudge.testing import RecordedRequest, Reply, ScriptedLLMServer, fenced_block, prompt_name, route
from tests.conftest import SHARED_MODEL, make_test_client
from tests.pipeline.test_pipeline import CONTEXT, QUESTIONS, judge_handler

runner = CliRunner()


def sentence_claims(req: RecordedRequest) -> Reply:
    """Each sentence of the answer is a claim (and, with QA, two questions)."""
    answer = fenced_block(req, "ANSWER")
    claims = [{"text": s, "source": s} for s in re.findall(r"[^.]+\.", answer)]
    extra = {"questions": QUESTIONS} if prompt_name(req) == "claims_qa" else {}
    return Reply.json({"claims": claims, **extra})


HANDLERS: dict[str, Any] = {
    "claims": sentence_claims,
    "claims_qa": sentence_claims,
    "judge": judge_handler,
    "verify": judge_handler,
}

# Distinct rows: some are decided by the local checker (a source sentence word for word), some go to the judge.
POOL: list[dict[str, Any]] = [
    {"id": "a1", "contexts": [CONTEXT], "answer": "The Eiffel Tower is a wrought-iron lattice tower in Paris, France."},
    {"id": "a2", "contexts": [CONTEXT], "answer": "The Eiffel Tower is in Paris. It was completed in 1889."},
    {"id": "a3", "contexts": [CONTEXT], "answer": "The Eiffel Tower was completed in 1899."},
    {"id": "a4", "contexts": [CONTEXT], "answer": "The tower is 330 metres tall."},
    {"id": "a5", "contexts": [CONTEXT], "answer": "The tower was painted green by Napoleon. It is in Paris."},
    {"id": "c1", "contexts": [CONTEXT], "claim": "It is 330 metres tall."},
    {"id": "c2", "contexts": [CONTEXT], "claim": "The tower was built in 1750."},
    {"id": "a6", "contexts": [CONTEXT], "answer": "It was designed by the company of Gustave Eiffel."},
]


@pytest.fixture(scope="module")
def server() -> Any:
    with ScriptedLLMServer(route(HANDLERS)) as s:
        yield s


def make(server: ScriptedLLMServer, shared_nli: Any, cache_dir: Path, **kw: Any) -> Evaluator:
    cache = Cache(cache_dir)
    client = make_test_client(server, cache=cache)
    return Evaluator(Config(mode="cascade", **kw), nli=shared_nli, client=client, cache=cache)


def entries(cache_dir: Path) -> int:
    c = Cache(cache_dir)
    try:
        return int(c.stats()["total_entries"])
    finally:
        c.close()


@pytest.mark.parametrize("qa", [False, True])
def test_after_a_complete_run_every_call_is_cached_and_the_run_is_free(
    server: ScriptedLLMServer, shared_nli: Any, tmp_path: Path, qa: bool
) -> None:
    ev = make(server, shared_nli, tmp_path / "c", qa=qa)
    before = len(server.requests)
    reports = list(ev.evaluate_many(POOL))
    sent = len(server.requests) - before
    assert all(r.verdict != "ERROR" for r in reports), [r.errors for r in reports]
    if not qa:  # some claims were decided locally: their answers made no judge call, which the bound counted
        assert any(c.route == "nli" for r in reports for c in r.claims)
        assert sent < 2 * 6 + 2
    stored, usage = entries(tmp_path / "c"), ev.usage
    dry = make(server, shared_nli, tmp_path / "c", qa=qa).estimate(POOL)
    assert len(server.requests) - before == sent  # nothing sent
    assert entries(tmp_path / "c") == stored and ev.usage == usage  # nothing written, nothing spent
    assert dry["cached_calls"] == sent and dry["llm_calls_upper_bound"] == 0 and dry["estimated_cost_usd"] == 0
    assert dry["exact_calls"] == dry["upper_bound_calls"] == 0
    assert dry["note"] == f"all {sent} calls are cached: this run is free"


@pytest.mark.parametrize("qa", [False, True])
def test_a_sources_side_call_the_cache_lacks_is_counted_exactly(
    server: ScriptedLLMServer, shared_nli: Any, tmp_path: Path, qa: bool
) -> None:
    # A run whose judge failed: the claims and the NLI scores are cached, no sources-side reply is.
    start = len(server.requests)
    server.script = route({**HANDLERS, "judge": lambda r: Reply.error(400), "verify": lambda r: Reply.error(400)})
    try:
        list(make(server, shared_nli, tmp_path / "c", qa=qa).evaluate_many(POOL))
    finally:
        server.script = route(HANDLERS)
    judged = [r for r in server.requests[start:] if prompt_name(r) in ("judge", "verify")]
    extracted = len(server.requests) - start - len(judged)
    dry = make(server, shared_nli, tmp_path / "c", qa=qa).estimate(POOL)
    assert dry["upper_bound_calls"] == 0 and dry["upper_bound_rows"] == {"claims": 0, "nli": 0}
    assert dry["cached_calls"] == extracted and dry["exact_calls"] == len(judged) > 0
    ev = make(server, shared_nli, tmp_path / "c", qa=qa)
    before = len(server.requests)
    list(ev.evaluate_many(POOL))
    assert len(server.requests) - before == dry["exact_calls"] == dry["llm_calls_upper_bound"]  # what it said
    assert ev.usage.cached_calls == dry["cached_calls"]
    total = extracted + len(judged)
    said = f"{extracted} of {total} calls are cached (free); {len(judged)} calls to send, about $"
    assert dry["note"].startswith(said), dry["note"]
    assert "at most" not in dry["note"] and "upper bound" not in dry["note"]


def test_rows_added_after_a_run_are_an_upper_bound_and_the_rest_exact(
    server: ScriptedLLMServer, shared_nli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from groundjudge.cli import app

    monkeypatch.setenv("GROUNDJUDGE_NLI_MODEL", str(SHARED_MODEL))
    data, out, cache_dir = tmp_path / "in.jsonl", tmp_path / "out.jsonl", tmp_path / "c"
    data.write_text("".join(json.dumps(r) + "\n" for r in POOL[:5]))  # a1-a5
    args = ["score", str(data), "--out", str(out), "--cache-dir", str(cache_dir), "--no-progress"]
    args += ["--llm", "openai/gpt-4o-mini", "--base-url", server.openai_base_url, "--no-qa", "--batch-size", "2"]
    before = len(server.requests)
    assert runner.invoke(app, args).exit_code == 0
    sent = len(server.requests) - before

    again = runner.invoke(app, [*args, "--dry-run", "--resume"])
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["rows"] == 0 and "no LLM calls needed: this run is free" in again.stderr
    full = runner.invoke(app, [*args, "--dry-run", "--overwrite"])
    assert full.exit_code == 0, full.output
    assert json.loads(full.stdout)["cached_calls"] == sent
    assert f"all {sent} calls are cached: this run is free" in full.stderr  # said in words, on stderr

    data.write_text("".join(json.dumps(r) + "\n" for r in POOL))  # c1, c2 (claim rows) and a6 (an answer) added
    stored, written = entries(cache_dir), out.read_bytes()
    pending = runner.invoke(app, [*args, "--dry-run", "--resume"])  # the pending rows only
    assert pending.exit_code == 0, pending.output
    estimate = json.loads(pending.stdout)
    assert estimate["rows"] == 3 and estimate["cached_calls"] == 0
    assert estimate["exact_calls"] == 1  # a6's claims call
    assert estimate["upper_bound_rows"] == {"claims": 1, "nli": 2} and estimate["upper_bound_calls"] == 3
    said = " ".join(pending.stderr.split())
    assert said.startswith("0 of 4 calls are cached (free); at most 4 calls to send, about $"), said
    assert "1 exactly and up to 3 more" in said and "counted as if every claim went to the judge" in said, said
    everything = json.loads(runner.invoke(app, [*args, "--dry-run", "--overwrite"]).stdout)
    assert everything["rows"] == 8 and everything["cached_calls"] == sent  # the earlier rows: exact, and free
    assert everything["exact_calls"] == 1 and everything["upper_bound_calls"] == 3
    assert len(server.requests) - before == sent  # no dry run sent anything
    assert entries(cache_dir) == stored and out.read_bytes() == written  # nor wrote anything
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c", "in.jsonl", "out.jsonl"]

    assert runner.invoke(app, [*args, "--resume"]).exit_code == 0
    assert 1 <= len(server.requests) - before - sent <= 4  # within what the dry run said


def test_a_dry_run_makes_no_cache_and_loads_the_model_only_for_known_claims(
    server: ScriptedLLMServer, tmp_path: Path
) -> None:
    from groundjudge.errors import GroundjudgeError

    cache_dir = tmp_path / "none"
    cache = Cache(cache_dir)
    client = make_test_client(server, cache=cache)
    # a model that cannot load: the dry run of answers whose claims are not cached must not need it
    ev = Evaluator(Config(mode="cascade", nli_model=str(tmp_path / "no-model")), client=client, cache=cache)
    answers = [r for r in POOL if "answer" in r]
    dry = ev.estimate(answers)
    assert dry["exact_calls"] == 6 and dry["upper_bound_rows"] == {"claims": 6, "nli": 0}
    assert not cache_dir.exists()  # not even an empty cache is made
    with pytest.raises(GroundjudgeError, match="NLI model"):
        ev.estimate([r for r in POOL if "claim" in r])  # a claim row's routing needs the model's fingerprint


def test_a_damaged_nli_entry_is_not_counted_as_known_nor_scored_by_the_model(
    server: ScriptedLLMServer, shared_nli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An NLI entry that is not JSON is a miss to ``Cache.get`` but was known to the dry run's ``peek``: the dry run
    ran the model for it (it promises never to) and called the answer's sources-side call exact."""
    list(make(server, shared_nli, tmp_path / "c").evaluate_many(POOL))
    cache = Cache(tmp_path / "c")
    damaged = [key for key in cache.store.iterkeys() if str(key).startswith("nli:")]
    for key in damaged:
        cache.store.set(key, "[0.9, 0.0")  # a value cut short
    cache.close()
    assert damaged
    predicted: list[int] = []
    real = shared_nli.predict
    monkeypatch.setattr(shared_nli, "predict", lambda pairs, *a, **k: predicted.append(len(pairs)) or real(pairs))
    before = len(server.requests)
    dry = make(server, shared_nli, tmp_path / "c").estimate(POOL)
    assert predicted == [] and len(server.requests) == before  # the dry run ran no model and sent nothing
    with_claims = sum(1 for r in POOL if "claim" in r) + sum(1 for r in POOL if "answer" in r)
    assert dry["upper_bound_rows"] == {"claims": 0, "nli": with_claims}, dry


def test_batch_api_prices_at_the_batch_rate_and_writes_no_batch_state(
    server: ScriptedLLMServer, shared_nli: Any, tmp_path: Path
) -> None:
    state = tmp_path / "batches.json"
    direct = make(server, shared_nli, tmp_path / "c").estimate(POOL)
    batch = make(server, shared_nli, tmp_path / "c", batch_api=True, batch_state=str(state)).estimate(POOL)
    assert batch["priced_as"] == "provider batch API" and "at the batch API's price" in batch["note"]
    assert batch["llm_calls_upper_bound"] == direct["llm_calls_upper_bound"]
    assert batch["estimated_cost_usd"] == pytest.approx(direct["estimated_cost_usd"] / 2, rel=1e-3)
    list(make(server, shared_nli, tmp_path / "c").evaluate_many(POOL[:4]))  # a direct run fills part of the cache
    direct = make(server, shared_nli, tmp_path / "c").estimate(POOL)
    batch = make(server, shared_nli, tmp_path / "c", batch_api=True, batch_state=str(state)).estimate(POOL)
    assert 0 < batch["cached_calls"] == direct["cached_calls"] and batch["exact_calls"] == direct["exact_calls"]
    assert batch["estimated_cost_usd"] == pytest.approx(direct["estimated_cost_usd"] / 2, rel=1e-3)
    assert not state.exists()
    only = make(server, shared_nli, tmp_path / "c", cache_mode="only").estimate(POOL)
    assert only["cached_calls"] == direct["cached_calls"] and "cache-only mode the run stops" in only["note"]


def test_an_unpriced_model_costs_unknown_until_every_call_is_cached(
    server: ScriptedLLMServer, shared_nli: Any, tmp_path: Path
) -> None:
    def unpriced() -> Evaluator:
        cache = Cache(tmp_path / "c")
        client = make_test_client(server, model="openai-compatible/some-model", cache=cache)
        return Evaluator(Config(mode="cascade"), nli=shared_nli, client=client, cache=cache)

    cold = unpriced().estimate(POOL)
    assert cold["estimated_cost_usd"] is None and "cost unknown" in cold["note"] and "$" not in cold["note"]
    list(unpriced().evaluate_many(POOL))
    warm = unpriced().estimate(POOL)
    assert warm["note"].startswith("all ") and warm["note"].endswith(" calls are cached: this run is free")
    assert warm["estimated_cost_usd"] == 0  # nothing to send: free, not unknown


@settings(max_examples=6, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    earlier=st.lists(st.sampled_from(range(len(POOL))), unique=True),
    now=st.lists(st.sampled_from(range(len(POOL))), unique=True, min_size=1),
    qa=st.booleans(),
)
def test_the_run_stays_within_what_the_dry_run_said(
    server: ScriptedLLMServer, shared_nli: Any, earlier: list[int], now: list[int], qa: bool
) -> None:
    # Whatever an earlier run left in the cache: the cached calls are served free, the run sends at least the
    # exact calls and at most the bound, and exactly the exact calls when nothing is a bound.
    with tempfile.TemporaryDirectory() as tmp:
        cache_dir = Path(tmp) / "c"
        list(make(server, shared_nli, cache_dir, qa=qa).evaluate_many([POOL[i] for i in earlier]))
        rows = [POOL[i] for i in now]
        dry = make(server, shared_nli, cache_dir, qa=qa).estimate(rows)
        ev = make(server, shared_nli, cache_dir, qa=qa)
        before = len(server.requests)
        list(ev.evaluate_many(rows))
        sent = len(server.requests) - before
        assert ev.usage.cached_calls == dry["cached_calls"]
        assert dry["exact_calls"] <= sent <= dry["llm_calls_upper_bound"]
        if dry["upper_bound_calls"] == 0:
            assert sent == dry["exact_calls"]
        if dry["llm_calls_upper_bound"] == 0:  # nothing it could not vouch for: free, and said so
            assert sent == 0 and dry["note"].endswith("this run is free")


@pytest.mark.parametrize("provider", ["openai", "anthropic", "openai-compatible"])
def test_the_estimate_counts_the_schema_the_provider_bills(
    server: ScriptedLLMServer, shared_nli: Any, tmp_path: Path, provider: str
) -> None:
    # Issue 34: the schema goes as the structured-output format (OpenAI response_format, Anthropic's forced tool; on
    # a compatible server also as text) and is billed as input. The dry run's input tokens (at $1 a million, output
    # free) match what the server receives for the same calls, by the same count: characters / 4 of the messages
    # and of the format object.
    from groundjudge.llm import LLMClient, Price, get_provider

    def client(cache: Cache) -> LLMClient:
        if provider == "openai-compatible":
            prov = get_provider(f"openai-compatible/qwen2.5:7b@{server.openai_base_url}")
            return LLMClient(prov, cache=cache, sleep=lambda s: None, price=Price(1.0, 0.0))
        return make_test_client(server, provider, cache=cache, price=Price(1.0, 0.0))

    def ev(cache_dir: Path) -> Evaluator:
        cache = Cache(cache_dir)
        return Evaluator(Config(mode="cascade"), nli=shared_nli, client=client(cache), cache=cache)

    # a run whose judge failed: claims and NLI scores cached, every sources-side call exact in the dry run
    server.script = route({**HANDLERS, "judge": lambda r: Reply.error(400), "verify": lambda r: Reply.error(400)})
    try:
        list(ev(tmp_path / "c").evaluate_many(POOL))
    finally:
        server.script = route(HANDLERS)
    dry = ev(tmp_path / "c").estimate(POOL)
    assert dry["upper_bound_calls"] == 0 and dry["exact_calls"] > 0
    before = len(server.requests)
    list(ev(tmp_path / "c").evaluate_many(POOL))
    sent = server.requests[before:]
    assert len(sent) == dry["exact_calls"] and all(r.format_text for r in sent)
    received = sum(len(r.text) // 4 + len(r.format_text) // 4 for r in sent)
    estimated = dry["estimated_cost_usd"] * 1e6
    assert estimated == pytest.approx(received, rel=0.03), (estimated, received)


def test_a_reasoning_judge_s_estimate_says_its_reasoning_is_not_in_it(
    server: ScriptedLLMServer, shared_nli: Any, tmp_path: Path
) -> None:
    """A dry run prices a call's output at the replies seen so far (256 tokens an answer before any); a reasoning
    model also bills the reasoning it never shows, up to the 25,000-token cap: the estimate said nothing of it."""
    cache = Cache(tmp_path / "c")
    client = make_test_client(server, model="openai/o4-mini", cache=cache)
    dry = Evaluator(Config(mode="cascade"), nli=shared_nli, client=client, cache=cache).estimate(POOL)
    assert dry["estimated_cost_usd"] is not None
    assert (
        "o4-mini reasons before it answers, and those tokens, billed as output, are not in this estimate"
        in (dry["note"])
    )
    plain = make(server, shared_nli, tmp_path / "c2").estimate(POOL)
    assert "reason" not in plain["note"]


def test_the_dry_run_reads_rows_as_a_run_does_a_dataframe_by_its_rows_one_dict_refused(
    server: ScriptedLLMServer, shared_nli: Any, tmp_path: Path
) -> None:
    """``ev.estimate(frame)`` iterated the DataFrame, i.e. its column names: every column was a bad row and no call
    was counted, so the notebook's "what will this cost" said nothing before ``ev.run(frame)`` paid; one dict
    counted its keys as bad rows where ``run`` refuses it. The dry run reads rows with the run's reader."""
    pd = pytest.importorskip("pandas")
    from groundjudge.errors import ConfigError

    ev = make(server, shared_nli, tmp_path / "c")
    listed = ev.estimate(POOL)
    framed = ev.estimate(pd.DataFrame(POOL))
    assert (framed["rows"], framed["bad_rows"]) == (listed["rows"], listed["bad_rows"]) == (len(POOL), 0)
    assert framed["llm_calls_upper_bound"] == listed["llm_calls_upper_bound"] > 0
    with pytest.raises(ConfigError, match=r"one row \(a dict\) given where rows go"):
        ev.estimate(POOL[0])
