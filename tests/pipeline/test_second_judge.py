"""Issue 21, section 3: a second judge for what matters (README "Second judge").

Two ScriptedLLMServer instances, the real OpenAI SDK for the first judge and the real Anthropic SDK for the second,
the shared NLI model; claim rows with every claim escalated to the judge, so each row makes one first-judge call and
the rows the run flags one second-judge call.
"""

from __future__ import annotations

import itertools
import json
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from groundjudge.cache import Cache
from groundjudge.config import Config
from groundjudge.errors import BudgetExceededError, ConfigError
from groundjudge.io.reports import dumps
from groundjudge.llm import Ledger
from groundjudge.models import AnswerReport, ClaimVerdict, SecondVerdict
from groundjudge.pipeline.evaluator import Evaluator, in_second_sample
from groundjudge.review.html import informative_key, label_shares, risk_key
from groundjudge.review.metrics import Review, judges_agreement, review_metrics
from groundjudge.review.summary import summarize
from groundjudge.testing import RecordedRequest, Reply, ScriptedLLMServer, claims_in, route
from groundjudge.testing.assertions import grounding_problems
from tests.conftest import SHARED_MODEL, make_test_client

runner = CliRunner()

CONTEXT = (
    "The Eiffel Tower is a wrought-iron lattice tower in Paris, France. It was designed by the company of "
    "Gustave Eiffel and completed in 1889 for the World's Fair. The tower is 330 metres tall."
)
# id, claim, first judge's verdict, second judge's verdict
TABLE = [
    ("c1", "The Eiffel Tower is in Paris.", "SUPPORTED", "SUPPORTED"),  # PASS: no second look
    ("c2", "The Eiffel Tower was completed in 1889.", "SUPPORTED", "CONTRADICTED"),  # PASS: no look (it'd disagree)
    ("c3", "The Eiffel Tower was completed in 1901.", "CONTRADICTED", "UNSUPPORTED"),  # flagged; judges disagree
    ("c4", "The tower is 330 metres tall.", "UNSUPPORTED", "SUPPORTED"),  # flagged (FAIL, NLI disagrees)
    ("c5", "The Eiffel Tower is made of gold.", "UNSUPPORTED", "UNSUPPORTED"),  # flagged; they agree
]
ROWS: list[dict[str, Any]] = [{"id": rid, "claim": text, "contexts": [CONTEXT]} for rid, text, _, _ in TABLE]
FIRST = {text: v for _, text, v, _ in TABLE}
SECOND = {text: v for _, text, _, v in TABLE}
FLAGGED = ["c3", "c4", "c5"]
SECOND_MODEL = "anthropic/claude-haiku-4-5"


def verdicts(table: dict[str, str]) -> Callable[[RecordedRequest], Reply]:
    """A judge that answers every claim by ``table``, quoting the sources."""

    def reply(req: RecordedRequest) -> Reply:
        out = []
        for cid, text in claims_in(req).items():
            quote = "completed in 1889 for the World's Fair"  # found in the sources: a verified quote
            out.append(
                {
                    "claim_id": cid,
                    "verdict": table[text],
                    "reason": "scripted",
                    "quotes": [{"source": 1, "text": quote}],
                }
            )
        return Reply.json({"verdicts": out})

    return reply


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[ScriptedLLMServer, ScriptedLLMServer]]:
    with (
        ScriptedLLMServer(route({"judge": verdicts(FIRST)})) as first,
        ScriptedLLMServer(route({"judge": verdicts(SECOND)})) as second,
    ):
        yield first, second


def settings_for(second: ScriptedLLMServer | None, **kw: Any) -> Config:
    judge = {"second_judge": SECOND_MODEL, "second_judge_base_url": second.anthropic_base_url} if second else {}
    base: dict[str, Any] = {
        "mode": "cascade",
        "t_support": "never",
        "t_contradict": "never",
        "t_unsupported": None,
        "max_attempts": 1,
    }
    base["weights"] = {"claims": 1.0, "nli": 0.0, "qa": 0.0}  # the verdict follows the judge's labels alone
    return Config(**{**base, "batch_poll_seconds": 0.0, **judge, **kw})


def make(
    servers: tuple[ScriptedLLMServer, ScriptedLLMServer], nli: Any, cache_dir: Path, second: bool = True, **kw: Any
) -> Evaluator:
    cache = Cache(cache_dir, mode=kw.get("cache_mode", "use"))
    client = make_test_client(servers[0], cache=cache, **({"ledger": kw.pop("ledger")} if "ledger" in kw else {}))
    return Evaluator(settings_for(servers[1] if second else None, **kw), nli=nli, client=client, cache=cache)


def judged(server: ScriptedLLMServer, start: int = 0) -> list[str]:
    """The claims a server was asked about, in order."""
    return sorted(text for r in server.requests[start:] for text in claims_in(r).values())


def ruling(r: AnswerReport) -> Any:
    """What the first judge decides: the verdict, its reasons, the scores and each claim's label."""
    return r.verdict, r.verdict_reasons, r.scores.model_dump(), [c.label for c in r.claims], r.errors


# -- what the second judge looks at, what it says, and what it never changes -----------------------------------------


@pytest.mark.parametrize("batch", [False, True], ids=["stream", "batch"])
def test_flagged_answers_go_to_the_second_judge_and_disagreements_are_flagged_never_scored(
    servers: Any, shared_nli: Any, tmp_path: Path, batch: bool
) -> None:
    first, second = servers
    plain = list(make(servers, shared_nli, tmp_path / "plain", second=False).evaluate_many(ROWS))
    s0, f0 = len(second.requests), len(first.requests)
    ev = make(servers, shared_nli, tmp_path / "c", batch_api=batch)
    reports = list(ev.evaluate_many(ROWS))
    assert [r.id for r in reports] == [rid for rid, *_ in TABLE]
    assert [ruling(r) for r in reports] == [ruling(r) for r in plain]  # the first judge decides
    assert [r.verdict for r in reports] == ["PASS", "PASS", "FAIL", "FAIL", "FAIL"]
    # the flagged answers, and only they, went to the second judge (through its provider batch in batch mode)
    assert judged(second, s0) == sorted(text for rid, text, *_ in TABLE if rid in FLAGGED)
    assert len(first.requests) - f0 == len(ROWS)
    if batch:
        assert all(r.batch_id is not None for r in second.requests[s0:]) and second.batches
    by_id = {r.id: r for r in reports}
    assert by_id["c3"].second_judge is not None and by_id["c3"].second_judge.why == ["FAIL", "contradicted"]
    assert by_id["c4"].second_judge is not None and "FAIL" in by_id["c4"].second_judge.why
    assert {rid: r.judges_disagree for rid, r in by_id.items()} == {
        "c1": None, "c2": None, "c3": True, "c4": True, "c5": False
    }  # fmt: skip
    c3 = by_id["c3"].claims[0]
    assert c3.second_judge is not None and c3.second_judge.label == "UNSUPPORTED" and c3.judges_disagree
    assert "judges_disagree" in c3.flags and "judges_disagree" not in by_id["c5"].claims[0].flags
    assert by_id["c1"].second_judge is None and "judges_disagree" not in dumps(by_id["c1"])
    # what it cost is in the answer's usage, the evaluator's (one ledger) and the summary, and apart
    assert by_id["c3"].usage.calls == 2 and by_id["c1"].usage.calls == 1
    assert ev.usage.calls == len(ROWS) + len(FLAGGED)
    s = summarize(reports)
    assert s.second_judge is not None
    j = s.second_judge
    assert (j["answers"], j["answers_disagree"], j["claims_disagree"]) == (3, 2, 2)
    assert s.second_judge["usage"]["calls"] == 3 and s.usage.calls == len(ROWS) + len(FLAGGED)
    assert s.rows_failed == 0 and ev.versions()["second_judge"] == SECOND_MODEL


def test_without_a_second_judge_reports_and_summary_carry_none_of_its_keys(
    servers: Any, shared_nli: Any, tmp_path: Path
) -> None:
    reports = list(make(servers, shared_nli, tmp_path / "c", second=False).evaluate_many(ROWS))
    for r in reports:
        assert "second_judge" not in dumps(r) and "judges_disagree" not in dumps(r)  # versions included
    assert summarize(reports).second_judge is None


def test_the_queue_raises_answers_whose_judges_disagree_in_both_orders(
    servers: Any, shared_nli: Any, tmp_path: Path
) -> None:
    reports = list(make(servers, shared_nli, tmp_path / "c").evaluate_many(ROWS))
    shares = label_shares(reports)
    by_risk = [r.id for r in sorted(reports, key=risk_key)]
    by_info = [r.id for r in sorted(reports, key=lambda r: informative_key(r, shares))]
    # c3 and c4 (disagreement) before c5 (FAIL too, the judges agree)
    assert by_risk.index("c3") < by_risk.index("c5") and by_risk.index("c4") < by_risk.index("c5")
    assert set(by_info[:2]) == {"c3", "c4"}
    without = [r.model_copy(update={"judges_disagree": None}) for r in reports]
    assert risk_key(without[2]) > risk_key(reports[2])


def test_the_sample_is_deterministic_and_the_same_for_both_engines(
    servers: Any, shared_nli: Any, tmp_path: Path
) -> None:
    ids = [f"row-{i}" for i in range(2000)]
    picked = [i for i in ids if in_second_sample(i, 0.1)]
    assert 150 < len(picked) < 250  # about a tenth
    assert picked == [i for i in reversed(ids) if in_second_sample(i, 0.1)][::-1]  # order does not matter
    assert not any(in_second_sample(i, 0.0) for i in ids) and all(in_second_sample(i, 1.0) for i in ids)
    _, second = servers
    sampled = [r for r in ROWS if in_second_sample(r["id"], 0.7) and r["id"] not in FLAGGED]
    assert sampled, "the ids picked must include an unflagged row"
    seen = []
    for batch in (False, True):
        s0 = len(second.requests)
        ev = make(servers, shared_nli, tmp_path / f"c{batch}", second_judge_sample=0.7, batch_api=batch)
        reports = list(ev.evaluate_many(ROWS))
        seen.append(judged(second, s0))
        for r in reports:
            if r.id in [x["id"] for x in sampled]:
                assert r.second_judge is not None and r.second_judge.why == ["sample"]
    assert seen[0] == seen[1] == sorted(r["claim"] for r in ROWS if r["id"] in FLAGGED or r in sampled)


def test_a_cached_run_replays_both_judges_for_free(servers: Any, shared_nli: Any, tmp_path: Path) -> None:
    first, second = servers
    reports = list(make(servers, shared_nli, tmp_path / "c").evaluate_many(ROWS))
    f0, s0 = len(first.requests), len(second.requests)
    ev = make(servers, shared_nli, tmp_path / "c", cache_mode="only")
    again = list(ev.evaluate_many(ROWS))
    assert len(first.requests) == f0 and len(second.requests) == s0  # nothing sent
    assert ev.usage.calls == 0 and ev.usage.cached_calls == len(ROWS) + len(FLAGGED)
    skip: Any = {"usage": True, "second_judge": {"usage"}}
    assert [r.model_dump(exclude=skip) for r in again] == [r.model_dump(exclude=skip) for r in reports]


def test_the_budget_counts_the_second_judges_calls(servers: Any, shared_nli: Any, tmp_path: Path) -> None:
    _, second = servers
    s0 = len(second.requests)
    ev = make(servers, shared_nli, tmp_path / "c", ledger=Ledger(max_calls=len(ROWS) + 1), concurrency=1)
    got: list[AnswerReport] = []
    with pytest.raises(BudgetExceededError):
        for r in ev.evaluate_many(ROWS, batch_size=len(ROWS)):
            got.append(r)
    assert ev.usage.calls == len(ROWS) + 1  # one cap for both judges
    assert len(second.requests) - s0 == 1
    assert len(got) < len(ROWS)


def test_a_second_judge_needs_a_first(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="second_judge"):
        Evaluator(Config(mode="nli", second_judge=SECOND_MODEL))
    with pytest.raises(ConfigError, match="second_judge"):
        Config.make(second_judge_sample=0.1)
    with pytest.raises(ConfigError, match="first judge's model"):
        Evaluator(Config(llm="openai/gpt-4o-mini", second_judge="openai/gpt-4o-mini"))


# -- failure honesty ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fault", ["error400", "malformed", "missing_ids"])
def test_a_failing_second_judge_is_noted_and_changes_nothing(
    servers: Any, shared_nli: Any, tmp_path: Path, fault: str
) -> None:
    plain = list(make(servers, shared_nli, tmp_path / "plain", second=False).evaluate_many(ROWS))
    _, second = servers
    replies = {
        "error400": lambda r: Reply.error(400),
        "malformed": lambda r: Reply.text("{not json"),
        "missing_ids": lambda r: Reply.json({"verdicts": []}),
    }
    second.script = route({"judge": replies[fault]})
    try:
        reports = list(make(servers, shared_nli, tmp_path / "c").evaluate_many(ROWS))
    finally:
        second.script = route({"judge": verdicts(SECOND)})
    assert [ruling(r) for r in reports] == [ruling(r) for r in plain]
    for r in reports:
        if r.id in FLAGGED:
            assert r.second_judge is not None and r.judges_disagree is None
            assert r.claims[0].second_judge is not None and r.claims[0].second_judge.label == "ERROR"
            if fault != "missing_ids":
                assert r.second_judge.error
    assert summarize(reports).rows_failed == 0
    assert summarize(reports).second_judge["errors"] == (len(FLAGGED) if fault != "missing_ids" else 0)  # type: ignore[index]


def test_a_failed_provider_batch_of_second_judge_calls_is_its_error_not_the_answers(
    servers: Any, shared_nli: Any, tmp_path: Path
) -> None:
    state = tmp_path / "batches.json"
    kw: Any = {"batch_api": True, "batch_state": str(state)}
    plain = list(make(servers, shared_nli, tmp_path / "c", second=False, **kw).evaluate_many(ROWS))
    state.write_text("{ damaged")  # the runner refuses it: the second judge's batch fails as a whole
    reports = list(make(servers, shared_nli, tmp_path / "c", **kw).evaluate_many(ROWS))  # first judge: cached
    assert [ruling(r) for r in reports] == [ruling(r) for r in plain]
    for r in reports:
        if r.id in FLAGGED:
            assert r.second_judge is not None and "provider batch" in (r.second_judge.error or "")


LABELS = ["SUPPORTED", "CONTRADICTED", "UNSUPPORTED", "supported", "ERROR", "maybe"]
reply_strategy = st.one_of(
    st.sampled_from(["error400", "error500", "malformed", "empty", "refusal"]),
    st.lists(
        st.fixed_dictionaries(
            {
                "claim_id": st.sampled_from(["c1", "c2", "[c1]", "x", ""]),
                "verdict": st.sampled_from(LABELS),
                "reason": st.text(max_size=5),
                "quotes": st.lists(
                    st.fixed_dictionaries(
                        {
                            "source": st.integers(-1, 3),
                            "text": st.sampled_from(["", "It is 330 metres tall", "nonsense here ok"]),
                        }
                    ),
                    max_size=2,
                ),
            }
        ),
        max_size=3,
    ),
)


@settings(max_examples=8, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=st.lists(reply_strategy, min_size=3, max_size=3), sample=st.sampled_from([None, 1.0]))
def test_whatever_the_second_judge_replies_the_score_and_verdict_are_the_first_judges(
    servers: Any, shared_nli: Any, plan: list[Any], sample: float | None
) -> None:
    first, _ = servers
    with tempfile.TemporaryDirectory() as tmp, ScriptedLLMServer() as other:
        replies = itertools.cycle(plan)  # retries and re-asks take the next one

        def script(req: RecordedRequest) -> Reply:
            p = next(replies)
            if p == "error400":
                return Reply.error(400)
            if p == "error500":
                return Reply.error(500)
            if p == "malformed":
                return Reply.text('{"verdicts": [')
            if p == "empty":
                return Reply.text("")
            if p == "refusal":
                return Reply.refusal()
            return Reply.json({"verdicts": p})

        other.script = script
        cache = Cache(Path(tmp) / "c")
        cfg = settings_for(None, second_judge_sample=None)
        ev = Evaluator(cfg, nli=shared_nli, client=make_test_client(first, cache=cache), cache=cache)
        plain = list(ev.evaluate_many(ROWS))
        twin = make_test_client(other, "anthropic", model=SECOND_MODEL, max_reasks=0)
        cfg2 = settings_for(other, second_judge_sample=sample)
        client = make_test_client(first, cache=cache)
        ev = Evaluator(cfg2, nli=shared_nli, client=client, cache=cache, second_client=twin)
        reports = list(ev.evaluate_many(ROWS))
        assert [ruling(r) for r in reports] == [ruling(r) for r in plain]
        assert summarize(reports).rows_failed == summarize(plain).rows_failed
        assert [grounding_problems(r) for r in reports] == [grounding_problems(r) for r in plain]  # the gate


# -- the dry run -----------------------------------------------------------------------------------------------------


def test_the_dry_run_counts_the_second_judge(servers: Any, shared_nli: Any, tmp_path: Path) -> None:
    _, second = servers
    # nothing cached: up to one call of each judge per row (any answer could be flagged)
    dry = make(servers, shared_nli, tmp_path / "c").estimate(ROWS)
    assert dry["second_judge_calls"] == {"cached": 0, "exact": 0, "upper_bound": len(ROWS)}
    assert dry["upper_bound_calls"] == dry["llm_calls_upper_bound"] == 2 * len(ROWS)
    assert "up to 5 more, one for each answer that could be flagged" in dry["note"]
    # the first judge's verdicts cached (a run without the second judge): the second judge's calls are exact
    list(make(servers, shared_nli, tmp_path / "c", second=False).evaluate_many(ROWS))
    dry = make(servers, shared_nli, tmp_path / "c").estimate(ROWS)
    assert dry["second_judge_calls"] == {"cached": 0, "exact": len(FLAGGED), "upper_bound": 0}
    assert dry["cached_calls"] == len(ROWS) and dry["llm_calls_upper_bound"] == len(FLAGGED)
    s0 = len(second.requests)
    list(make(servers, shared_nli, tmp_path / "c").evaluate_many(ROWS))
    assert len(second.requests) - s0 == len(FLAGGED)  # what it said
    dry = make(servers, shared_nli, tmp_path / "c").estimate(ROWS)
    assert dry["second_judge_calls"] == {"cached": len(FLAGGED), "exact": 0, "upper_bound": 0}
    assert dry["note"] == f"all {len(ROWS) + len(FLAGGED)} calls are cached: this run is free"


# -- metrics -----------------------------------------------------------------------------------------------------------


def _report(rid: str, pairs: list[tuple[str, str | None]]) -> AnswerReport:
    claims = [
        ClaimVerdict(
            claim={"id": f"k{i}", "text": f"{rid} claim {i}"},
            label=a,
            route="judge",
            second_judge=SecondVerdict(label=b) if b else None,
            judges_disagree=(a != b) if b else None,
        )
        for i, (a, b) in enumerate(pairs)
    ]
    disagree = any(c.judges_disagree for c in claims)
    return AnswerReport(id=rid, verdict="PASS", mode="cascade", scores={}, claims=claims, judges_disagree=disagree)


def test_metrics_kappa_of_the_two_judges_on_a_worked_example() -> None:
    S, U, C = "SUPPORTED", "UNSUPPORTED", "CONTRADICTED"
    # first  S S S S S U U U C C ; second S S S S U U U S C U
    # observed agreement 7/10; marginals first S5 U3 C2, second S5 U4 C1: expected (25 + 12 + 2) / 100 = 0.39
    # kappa = (0.7 - 0.39) / (1 - 0.39) = 0.31 / 0.61 = 0.508197
    reports = [
        _report("a", [(S, S), (S, S), (S, S)]),
        _report("b", [(S, S), (S, U), (U, U)]),
        _report("c", [(U, U), (U, S), (C, C), (C, U)]),
        _report("d", [(S, None)]),  # not second-judged: not counted
    ]
    j = judges_agreement(reports)
    assert j is not None
    assert j["n"] == 10 and j["answers"] == 3 and j["disagree"] == 3 and j["answers_disagree"] == 2
    assert j["kappa"] == pytest.approx(0.31 / 0.61)
    assert j["agreement"] == pytest.approx(0.7)
    lo, hi = j["kappa_ci"]
    assert lo <= j["kappa"] <= hi and hi - lo > 0.1  # three answers: a wide interval
    assert j["confusion"] == [[4, 1, 0], [1, 2, 0], [0, 1, 1]]  # rows first (S, U, C), columns second
    assert judges_agreement(reports[3:]) is None
    # with reviews: each judge against the people, on the same claims
    reviews = [Review(id=r.id, claim_id=c.claim.id, claim=c.claim.text, label=S) for r in reports[:3] for c in r.claims]
    m = review_metrics(reports, reviews)
    vs = m["judges"]["vs_people"]
    assert vs["n"] == 10
    assert vs["first"]["agreement"] == pytest.approx(5 / 10) and vs["second"]["agreement"] == pytest.approx(5 / 10)


def test_cli_scores_with_a_second_judge_and_metrics_reports_the_two_judges(
    servers: Any, shared_nli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from groundjudge.cli import app

    first, second = servers
    monkeypatch.setenv("GROUNDJUDGE_NLI_MODEL", str(SHARED_MODEL))
    data, out, config = tmp_path / "in.jsonl", tmp_path / "out.jsonl", tmp_path / "config.json"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    config.write_text(json.dumps({"t_support": "never", "t_contradict": "never", "t_unsupported": None}))
    args = ["score", str(data), "--out", str(out), "--cache-dir", str(tmp_path / "c"), "--no-progress", "--json"]
    args += ["--llm", "openai/gpt-4o-mini", "--base-url", first.openai_base_url, "--config", str(config)]
    args += ["--second-judge", SECOND_MODEL, "--second-judge-base-url", second.anthropic_base_url]
    dry = runner.invoke(app, [*args, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert json.loads(dry.stdout)["second_judge_calls"]["upper_bound"] == len(ROWS)
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output  # FAIL verdicts are not failed rows
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["second_judge"]["answers"] == len(FLAGGED) and summary["second_judge"]["answers_disagree"] == 2
    metrics = runner.invoke(app, ["metrics", str(out)])
    assert metrics.exit_code == 0, metrics.output
    last = json.loads(metrics.stdout.strip().splitlines()[-1])
    assert last["level"] == "judges" and last["judges"]["n"] == len(FLAGGED)
    assert last["judges"]["kappa_ci"][0] is not None


def test_metrics_compare_judge_with_judge_and_the_local_model_with_the_judge_apart() -> None:
    """Issue 29 §3: on flagged answers whose claims the local model decided, the second judge was compared with the
    NLI verdict, and those pairs were counted as "two judges"; labels from a gold file were called "people"."""
    S, U = "SUPPORTED", "UNSUPPORTED"
    judged = _report("a", [(S, S), (U, U), (S, U)])
    local = _report("b", [(S, U), (U, S), (S, S)])
    local.claims = [c.model_copy(update={"route": "nli"}) for c in local.claims]
    j = judges_agreement([judged, local])
    assert j is not None and j["compared"] == "first judge vs second judge"
    assert j["n"] == 3 and j["answers"] == 1 and j["agreement"] == pytest.approx(2 / 3) and j["disagree"] == 1
    assert j["claims_judged"] == 6 and j["second_judge_errors"] == 0
    lvj = j["local_vs_judge"]
    assert lvj["compared"] == "local model vs second judge" and lvj["n"] == 3 and lvj["disagree"] == 2
    assert lvj["agreement"] == pytest.approx(1 / 3) and lvj["confusion"] == [[1, 1, 0], [1, 0, 0], [0, 0, 0]]
    assert "local_vs_judge" not in judges_agreement([judged])  # type: ignore[operator]
    gold = [(r, c, S) for r in (judged, local) for c in r.claims]
    vs = judges_agreement([judged, local], gold, labels_from="gold labels")["vs_people"]  # type: ignore[index]
    assert vs["labels_from"] == "gold labels" and vs["first_is"] == "judge or local model" and vs["n"] == 6
    reviews = [Review(id=judged.id, claim_id=c.claim.id, claim=c.claim.text, label=S) for c in judged.claims]
    vs = review_metrics([judged, local], reviews)["judges"]["vs_people"]
    assert vs["labels_from"] == "reviewers" and vs["first_is"] == "judge" and vs["n"] == 3
