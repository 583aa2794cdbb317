"""Issue 10: at most two LLM calls per answer with every check on, prompt-cache prefixes, and batch mode end to end."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groundjudge.cache import Cache
from groundjudge.config import Config
from groundjudge.pipeline.evaluator import Evaluator
from groundjudge.testing import ScriptedLLMServer, prompt_name, route
from tests.conftest import make_test_client
from tests.pipeline.test_pipeline import BAD_ANSWER, CONTEXT, GOOD_ANSWER, HANDLERS

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
        # the step's read of what the batch answered is that call, charged once, no cache hit: the summary said
        # "2.00 billed + 2.00 from the cache" for two requests an answer
        assert [r.usage.cached_calls for r in batched] == [0, 0, 0] and ev.usage.cached_calls == 0
        assert ev.usage.calls == 5
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
        assert dry.exit_code == 0 and json.loads(dry.stdout)["priced_as"] == "provider batch API"
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


# -- Honest again: a model without a price costs "unknown", never $0, and a USD budget on it needs a price ----------

COMPATIBLE = "openai-compatible/some-model"
# what a report's usage held before unpriced_calls existed: a priced run's reports keep exactly these keys
OLD_USAGE_KEYS = {
    "calls",
    "cached_calls",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "cached_input_tokens",
    "cache_write_tokens",
}


def _score(server: ScriptedLLMServer, tmp_path: Path, *extra: str, llm: str = COMPATIBLE, out: str = "out") -> Any:
    """``groundjudge score`` of two one-claim answers (llm mode, no QA: two calls an answer, one at a time)."""
    from typer.testing import CliRunner

    from groundjudge.cli import app

    data = tmp_path / "in.jsonl"
    rows = [{"id": f"r{i}", "contexts": [f"The shop opens at {i} am."], "answer": f"It opens at {i} am."} for i in "12"]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = ["score", str(data), "--out", str(tmp_path / f"{out}.jsonl"), "--cache-dir", str(tmp_path / "c")]
    args += ["--no-progress", "--llm", llm, "--base-url", server.openai_base_url, "--no-qa", "--mode", "llm"]
    args += ["--batch-size", "1", "--concurrency", "1", *extra]
    return CliRunner().invoke(app, args, env={"COLUMNS": "200"})


@pytest.fixture
def _cli_nli(monkeypatch: pytest.MonkeyPatch, shared_nli: Any) -> None:
    from tests.conftest import SHARED_MODEL

    monkeypatch.setenv("GROUNDJUDGE_NLI_MODEL", str(SHARED_MODEL))


def _said(result: Any) -> str:
    return " ".join(result.output.split())


def _one_claim() -> Any:
    from tests.cli.test_cli import ONE_CLAIM

    return ONE_CLAIM


@pytest.mark.usefixtures("_cli_nli")
def test_a_budget_on_a_model_without_a_price_is_refused(tmp_path: Path) -> None:
    with ScriptedLLMServer(_one_claim()) as server:
        result = _score(server, tmp_path, "--budget", "1")
        assert result.exit_code == 2, result.output
        said = _said(result)
        assert f"no price known for {COMPATIBLE}" in said, said
        assert "--price IN,OUT" in said and "price=" in said, said  # how, on the command line and in Python
        assert server.requests == [] and not (tmp_path / "out.jsonl").exists()


@pytest.mark.usefixtures("_cli_nli")
@pytest.mark.parametrize(
    ("price", "budget", "calls", "spent"),
    [
        # a call's worst case (its input and a 4096-token reply at $2/M) is far above $0.0001: none is made
        ("1,2", "0.0001", 0, "$0.0000 spent of $0.0001"),
        # output at $1/M: a call holds at most $0.004096 and costs $0.003 (3000 tokens); the second could pass $0.005
        ("0,1", "0.005", 1, "$0.0030 spent of $0.0050"),
    ],
)
def test_a_price_on_the_command_line_makes_the_budget_bite(
    tmp_path: Path, price: str, budget: str, calls: int, spent: str
) -> None:
    import dataclasses

    one_claim = _one_claim()
    with ScriptedLLMServer(lambda req: dataclasses.replace(one_claim(req), output_tokens=3000)) as server:
        result = _score(server, tmp_path, "--price", price, "--budget", budget)
        assert result.exit_code == 3, result.output
        said = _said(result)
        assert f"stopped: budget reached: {spent}" in said, said
        assert len(server.requests) == calls


@pytest.mark.usefixtures("_cli_nli")
def test_without_a_price_the_cost_is_unknown_never_zero(tmp_path: Path) -> None:
    from groundjudge.io.reports import dumps
    from groundjudge.models import AnswerReport

    with ScriptedLLMServer(_one_claim()) as server:
        dry = _score(server, tmp_path, "--dry-run")
        assert dry.exit_code == 0, dry.output
        estimate = json.loads(dry.stdout)
        assert estimate["llm_calls_upper_bound"] == 4 and estimate["estimated_cost_usd"] is None
        assert f"no price known for {COMPATIBLE}" in estimate["cost"] and "--price" in estimate["cost"]
        result = _score(server, tmp_path)
        assert result.exit_code == 0, result.output
        assert len(server.requests) == 4
    said = _said(result)
    assert "unknown (4 calls to a model without a price)" in said, said
    assert "$0.0000" not in said, said
    lines = (tmp_path / "out.jsonl").read_text().splitlines(keepends=True)
    for line in lines:
        usage = json.loads(line)["usage"]
        assert usage["calls"] == usage["unpriced_calls"] == 2 and usage["cost_usd"] == 0
        assert dumps(AnswerReport.model_validate_json(line)) + "\n" == line  # read back as written


@pytest.mark.usefixtures("_cli_nli")
def test_a_priced_report_is_byte_identical_to_before(tmp_path: Path) -> None:
    from groundjudge.io.reports import dumps
    from groundjudge.models import AnswerReport

    with ScriptedLLMServer(_one_claim()) as server:
        result = _score(server, tmp_path, llm="openai/gpt-4o-mini")
        assert result.exit_code == 0, result.output
    assert "unknown" not in _said(result)
    lines = (tmp_path / "out.jsonl").read_text().splitlines(keepends=True)
    assert len(lines) == 2
    for line in lines:
        assert "unpriced_calls" not in line
        assert set(json.loads(line)["usage"]) == OLD_USAGE_KEYS and json.loads(line)["usage"]["cost_usd"] > 0
        assert dumps(AnswerReport.model_validate_json(line)) + "\n" == line


@cache
def _clients() -> tuple[Any, Any]:
    """Two clients of one model: without a price, and with one given to the client."""
    from groundjudge.llm import LLMClient, Price, get_provider

    provider = get_provider(f"{COMPATIBLE}@http://127.0.0.1:9/v1")  # never called: usage_of reads a response
    return LLMClient(provider, price=Price(0.15, 0.60)), LLMClient(provider)


CALLS = st.lists(
    st.tuples(
        st.sampled_from(["priced", "unpriced", "cached"]),
        st.integers(0, 200_000),
        st.integers(0, 8_000),
        st.integers(0, 200_000),
    ),
    max_size=30,
)


@settings(max_examples=150, deadline=None)
@given(calls=CALLS, per_report=st.integers(1, 4))
def test_usage_sums_never_show_a_known_zero_when_a_call_had_no_price(
    calls: list[tuple[str, int, int, int]], per_report: int
) -> None:
    from groundjudge.llm import Ledger, LLMResponse
    from groundjudge.models import AnswerReport, Scores, Usage
    from groundjudge.review.summary import summarize, summary_rows

    priced, unpriced = _clients()
    ledger = Ledger()
    usages: list[Usage] = []
    for kind, tokens_in, tokens_out, cached in calls:
        if kind == "cached":
            usage = Usage(cached_calls=1)
            ledger.record(usage)
        else:
            response = LLMResponse("{}", tokens_in, tokens_out, cached_input_tokens=min(cached, tokens_in))
            usage = (priced if kind == "priced" else unpriced).costs.usage_of(response)
            ledger.reserve(0.0)
            ledger.settle(0.0, usage)
        usages.append(usage)
    total, n_unpriced = ledger.total, sum(kind == "unpriced" for kind, *_ in calls)
    assert total.unpriced_calls == n_unpriced and (total.unpriced_calls > 0) == (n_unpriced > 0)
    assert total.calls == sum(kind != "cached" for kind, *_ in calls)
    text = total.cost_text()
    if n_unpriced:
        assert "unknown" in text and f"{n_unpriced} call" in text and not re.fullmatch(r"\$[0-9.]+", text)
        assert text.startswith("$") == (total.calls > n_unpriced)  # the known part of a mixed run is said
    else:
        assert text == f"${total.cost_usd:.4f}"
    # the run summary sums the reports' usage the same way, and says the same
    reports = [
        AnswerReport(
            id=f"a{i}", verdict="PASS", mode="llm", scores=Scores(), usage=sum(usages[i : i + per_report], Usage())
        )
        for i in range(0, len(usages), per_report)
    ]
    summary = summarize(reports)
    assert summary.usage.unpriced_calls == n_unpriced and summary.usage.calls == total.calls
    cost_row = dict(summary_rows(summary))["cost"]
    assert ("unknown" in cost_row) == (n_unpriced > 0)
    assert not n_unpriced or f"{n_unpriced} call" in cost_row
    # the count travels in JSON only when there is something to say
    data = json.loads(total.model_dump_json())
    assert ("unpriced_calls" in data) == (n_unpriced > 0)
    assert Usage.model_validate_json(total.model_dump_json()) == total


def test_a_price_in_the_config_is_checked() -> None:
    from groundjudge.errors import ConfigError

    given = {"input_per_mtok": 0.5, "output_per_mtok": 1.5}
    assert Config.make(price=given).price == given and Config().price is None
    for bad in (
        {"input_per_mtok": -1.0, "output_per_mtok": 1.0},
        {"input_per_mtok": 1.0},
        {"input_per_mtok": 1.0, "output_per_mtok": 1.0, "cached_per_mtok": 0.1},
        {"input_per_mtok": float("inf"), "output_per_mtok": 1.0},
    ):
        with pytest.raises(ConfigError, match="price"):
            Config.make(price=bad)


@pytest.mark.usefixtures("_cli_nli")
@pytest.mark.parametrize("price", ["1", "a,b", "1,2,3", "-1,2"])
def test_a_bad_price_on_the_command_line_is_a_usage_error(tmp_path: Path, price: str) -> None:
    with ScriptedLLMServer(_one_claim()) as server:
        result = _score(server, tmp_path, "--price", price)
        assert result.exit_code == 2 and "price" in result.output, result.output
        assert server.requests == []


def test_the_ray_engine_actors_use_the_price(shared_nli: Any, tmp_path: Path) -> None:
    # the actor's own client (no Ray started here: the callable class is built in this process)
    from groundjudge.errors import ConfigError
    from groundjudge.llm import Price
    from tests.conftest import SHARED_MODEL

    ray_engine = pytest.importorskip("groundjudge.runs.ray")
    base = {"llm": f"{COMPATIBLE}@http://127.0.0.1:9/v1", "budget_usd": 1.0, "cache_dir": str(tmp_path / "c")}
    base["nli_model"] = str(SHARED_MODEL)
    with pytest.raises(ConfigError, match="no price known"):
        ray_engine._Scorer(Config(**base), None, None, 8)
    scorer = ray_engine._Scorer(Config(**base, price={"input_per_mtok": 1, "output_per_mtok": 2}), None, None, 8)
    assert scorer.evaluator.client.price == Price(1.0, 2.0)


def test_an_unknown_cost_is_said_wherever_a_cost_is() -> None:
    import math

    from groundjudge.cli.common import cost_cell
    from groundjudge.models import Usage
    from groundjudge.review.metrics import label_metrics
    from groundjudge.review.notebook import Run, to_dataframe
    from tests.test_workflows import _report

    priced, unpriced = Usage(calls=2, cost_usd=0.01), Usage(calls=3, unpriced_calls=3)
    mixed = priced + unpriced
    assert [u.cost_text() for u in (priced, unpriced, mixed)] == [
        "$0.0100",
        "unknown (3 calls to a model without a price)",
        "$0.0100 + unknown for 3 calls",
    ]
    assert [cost_cell(u) for u in (priced, unpriced, mixed)] == ["$0.0100", "$?", "$0.0100+?"]  # the progress bar
    assert [u.known_cost() for u in (priced, unpriced, mixed)] == [0.01, None, None]
    reports = [
        _report("p", "consistent").model_copy(update={"usage": priced}),
        _report("u", "hallucinated").model_copy(update={"usage": unpriced}),
    ]
    frame = to_dataframe(reports)
    assert frame.loc["p", "cost_usd"] == 0.01 and math.isnan(frame.loc["u", "cost_usd"])
    assert "5 billed (cost $0.0100 + unknown for 3 calls)" in Run(reports, mixed, 0, 0).cache_note
    assert "3 billed (cost unknown (3 calls" in Run(reports[1:], unpriced, 0, 0).cache_note
    m = label_metrics(reports)  # what 'groundjudge review' says
    assert m["cost_usd"] is None and m["cost"] == "$0.0100 + unknown for 3 calls"
    assert label_metrics(reports[:1])["cost_usd"] == 0.01


def test_a_provider_batch_still_running_stops_the_run_and_a_new_evaluator_collects_it(
    shared_nli: Any, tmp_path: Path
) -> None:
    """Resume across processes: the run stops (BatchPendingError, the CLI's exit 4) while its provider batches run;
    an evaluator built afresh on the same state file collects them, pays nothing twice, and reports as a direct
    run does."""
    from groundjudge.errors import BatchPendingError

    with ScriptedLLMServer(route(HANDLERS)) as server:
        direct_reports = list(_ev(server, shared_nli, tmp_path / "direct").evaluate_many(ROWS))
        sent_direct = len(server.requests)
        server.batch_polls = 5
        kw: dict[str, Any] = {"batch_api": True, "batch_state": str(tmp_path / "b.json"), "batch_poll_seconds": 0.01}
        first = _ev(server, shared_nli, tmp_path / "c", **kw, batch_max_wait_hours=1e-9)
        with pytest.raises(BatchPendingError):
            list(first.evaluate_many(ROWS))
        running = len(server.batches)
        again = _ev(server, shared_nli, tmp_path / "c", **kw)
        reports = list(again.evaluate_many(ROWS))
        assert running >= 1 and sum(o.resumed for o in again.batch_outcomes) >= 1
        assert len(server.batches) - running == sum(1 for o in again.batch_outcomes if o.submitted)
        assert [r.model_dump(exclude={"usage"}) for r in reports] == [
            r.model_dump(exclude={"usage"}) for r in direct_reports
        ]
        # each request billed is counted once, in the two runs' sum: the batches left running by the run that
        # submitted them (at their worst case, unsettled), not again by the run that collected them
        assert first.usage.unsettled_calls >= 1
        assert sum(o.counted_earlier.calls for o in again.batch_outcomes) == first.usage.unsettled_calls
        assert first.usage.calls + again.usage.calls == len(server.requests) - sent_direct


def test_a_cost_with_calls_sent_with_no_reply_says_it_is_at_most() -> None:
    """Calls sent with no reply are counted at their worst case: wherever the cost is said, it says how much of it is
    that bound; a report without them is byte for byte what it was before the fields existed."""
    from groundjudge.cli.common import cost_cell
    from groundjudge.models import Usage

    answered = Usage(calls=1, input_tokens=10, output_tokens=5, cost_usd=0.01)
    lost = Usage(calls=2, cost_usd=0.07, unsettled_calls=2, unsettled_cost_usd=0.07)
    both = answered + lost
    assert both.cost_text() == "$0.0800 (at most; $0.0700 of it is the worst case of 2 calls sent with no reply)"
    assert cost_cell(both) == "<=$0.0800" and cost_cell(answered) == "$0.0100"
    assert both.model_dump(mode="json")["unsettled_calls"] == 2
    assert "unsettled" not in answered.model_dump_json()  # left out when 0: reports as before
    assert Usage.model_validate_json(both.model_dump_json()) == both


def test_a_share_of_a_packed_call_sent_with_no_reply_says_it_is_at_most() -> None:
    """A packed call's usage is shared out to its answers with the call counted on the first alone: the others'
    parts (and a sum of some answers that leaves the first out: report --only-flagged, the rows a stop left out) hold
    a share of its worst case and no unsettled call, and their cost was said as a plain figure, not a bound."""
    from groundjudge.cli.common import cost_cell
    from groundjudge.llm.base import LLMRequest
    from groundjudge.llm.packing import share_packed
    from groundjudge.models import Message, Usage

    lost = Usage(calls=1, cost_usd=0.09, unsettled_calls=1, unsettled_cost_usd=0.09)
    said = (Message(role="system", content="s"), Message(role="user", content="x" * 10))
    blocks = [LLMRequest(said, {}, "reply") for _ in range(3)]
    first, *others = share_packed(lost, blocks)
    assert first.unsettled_calls == 1 and all(p.unsettled_calls == 0 and p.unsettled_cost_usd > 0 for p in others)
    for part in (*others, others[0] + others[1]):
        assert "at most" in part.cost_text() and "a share of the worst case" in part.cost_text(), part.cost_text()
        assert cost_cell(part).startswith("<=")
    assert sum(share_packed(lost, blocks), Usage()).cost_text() == (
        "$0.0900 (at most; $0.0900 of it is the worst case of 1 call sent with no reply)"
    )


def test_a_server_that_never_answers_cannot_pass_max_calls(shared_nli: Any, tmp_path: Path) -> None:
    """Every call times out: each one sent counts against max_calls, so the run stops at the cap (it sent 6 per
    answer, the retry policy's attempts, when a call with no reply counted nothing), and its usage says the cost is
    a bound."""
    from groundjudge import errors
    from groundjudge.llm import Ledger, RetryPolicy
    from groundjudge.testing import Reply

    retry = RetryPolicy(max_attempts=6, initial_wait=0.001, max_wait=0.002, jitter=0.001)
    with ScriptedLLMServer(lambda req: Reply.slow(0.6)) as server:
        cache = Cache(tmp_path / "c")
        client = make_test_client(server, cache=cache, ledger=Ledger(max_calls=3), timeout=0.2, retry=retry)
        ev = Evaluator(Config(), nli=shared_nli, client=client, cache=cache)
        with pytest.raises(errors.BudgetExceededError):
            list(ev.evaluate_many(ROWS))
        sent = len(server.requests)
    assert 0 < sent <= 3  # what the server had read when the run stopped (a loaded machine may read one later)
    assert ev.usage.calls == ev.usage.unsettled_calls == 3 and ev.usage.cost_usd == ev.usage.unsettled_cost_usd > 0
    assert "at most" in ev.usage.cost_text()
