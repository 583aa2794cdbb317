"""Attacks on the second judge (README "Second judge"): the options combined as a careless user would, hostile and
malformed second-judge replies, the budget running out on a second-judge call, and the two judges' metrics on
degenerate files. Invariant: no second-judge outcome makes a score, verdict or gate better."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from groundjudge.cache import Cache
from groundjudge.config import Config
from groundjudge.models import AnswerReport, ClaimVerdict, SecondVerdict
from groundjudge.pipeline.evaluator import Evaluator
from groundjudge.review.metrics import judges_agreement
from groundjudge.testing import RecordedRequest, Reply, ScriptedLLMServer, claims_in, route
from tests.conftest import SHARED_MODEL, make_test_client
from tests.pipeline.test_pipeline import BAD_ANSWER, CONTEXT, GOOD_ANSWER, HANDLERS
from tests.pipeline.test_second_judge import ROWS, SECOND_MODEL, ruling, servers, settings_for  # noqa: F401

runner = CliRunner()

HOSTILE = '</script><!--<script>]]>\u2028\u2029\x00\u202e<img src=x onerror="window.pwned=1">'


def _cli_args(data: Path, out: Path, tmp_path: Path, first: Any, second: Any) -> list[str]:
    tmp_path.mkdir(exist_ok=True)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"t_support": "never", "t_contradict": "never", "t_unsupported": None}))
    args = ["score", str(data), "--out", str(out), "--cache-dir", str(tmp_path / "c"), "--no-progress"]
    args += ["--llm", "openai/gpt-4o-mini", "--base-url", first.openai_base_url, "--config", str(config)]
    args += ["--second-judge", SECOND_MODEL, "--second-judge-base-url", second.anthropic_base_url]
    return [*args, "--concurrency", "1"]


def _without_usage(path: Path) -> list[dict[str, Any]]:
    skip: Any = {"usage": True, "second_judge": {"usage"}}
    return [AnswerReport.model_validate_json(x).model_dump(exclude=skip) for x in path.read_text().splitlines()]


def test_the_budget_running_out_on_a_second_judge_call_loses_nothing_and_resume_gives_one_runs_file(
    servers: Any,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from groundjudge.cli import app

    first, second = servers
    monkeypatch.setenv("GROUNDJUDGE_NLI_MODEL", str(SHARED_MODEL))
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    whole = tmp_path / "whole.jsonl"
    res = runner.invoke(app, _cli_args(data, whole, tmp_path / "w", first, second))
    assert res.exit_code == 0, res.output
    # one call for each row's first judge, then the flagged rows' second judge: the cap stops on the second one
    out = tmp_path / "out.jsonl"
    s0 = len(second.requests)
    args = _cli_args(data, out, tmp_path / "s", first, second)
    res = runner.invoke(app, [*args, "--max-calls", str(len(ROWS) + 1)])
    assert res.exit_code == 3, res.output
    assert len(second.requests) - s0 == 1
    written = _without_usage(out)
    whole_rows = _without_usage(whole)
    assert written == whole_rows[: len(written)]  # what is written is what the whole run writes
    res = runner.invoke(app, [*args, "--resume"])
    assert res.exit_code == 0, res.output
    assert sorted(_without_usage(out), key=lambda r: r["id"]) == sorted(whole_rows, key=lambda r: r["id"])


def _second_judge_script(req: RecordedRequest) -> Reply:
    """A hostile second judge: hostile reasons, an id twice (the second reading worse), ids it was not asked."""
    out = []
    for cid, _ in claims_in(req).items():
        out.append({"claim_id": cid, "verdict": "SUPPORTED", "reason": HOSTILE, "quotes": []})
        out.append({"claim_id": cid, "verdict": "UNSUPPORTED", "reason": "second reading " + HOSTILE, "quotes": []})
    out.append({"claim_id": "c99", "verdict": "CONTRADICTED", "reason": "not asked", "quotes": []})
    out.append({"claim_id": "", "verdict": "CONTRADICTED", "reason": "no id", "quotes": []})
    return Reply.json({"verdicts": out})


@pytest.mark.parametrize("mode,qa", [("cascade", True), ("llm", False), ("llm", True)])
def test_answer_rows_with_qa_and_a_hostile_second_judge_change_nothing_of_the_first_judges(
    shared_nli: Any, tmp_path: Path, mode: str, qa: bool
) -> None:
    rows = [
        {"id": "good", "contexts": [CONTEXT], "answer": GOOD_ANSWER, "question": "When?"},
        {"id": "bad", "contexts": [CONTEXT], "answer": BAD_ANSWER, "question": "When?"},
        {"id": "cited", "contexts": [CONTEXT, "Other."], "answer": BAD_ANSWER + " [2]"},
        {"id": "claim", "contexts": [CONTEXT], "claim": "The Eiffel Tower was completed in 1899."},
    ]
    with (
        ScriptedLLMServer(route(HANDLERS)) as first,
        ScriptedLLMServer(route({"judge": _second_judge_script})) as other,
    ):
        cache = Cache(tmp_path / "c")
        kw: dict[str, Any] = {"mode": mode, "qa": qa, "second_judge_sample": 1.0}
        plain_cfg = settings_for(None, **{**kw, "second_judge_sample": None})
        plain = list(
            Evaluator(
                plain_cfg, nli=shared_nli, client=make_test_client(first, cache=cache), cache=cache
            ).evaluate_many(rows)
        )
        twin = make_test_client(other, "anthropic", model=SECOND_MODEL)
        ev = Evaluator(
            settings_for(other, **kw),
            nli=shared_nli,
            client=make_test_client(first, cache=cache),
            cache=cache,
            second_client=twin,
        )
        got = list(ev.evaluate_many(rows))
    assert [ruling(r) for r in got] == [ruling(r) for r in plain]
    looked = [r for r in got if r.second_judge is not None]
    assert looked, "the sample of 1.0 sends every answer with a judged claim"
    for r in looked:
        assert r.second_judge is not None and r.second_judge.error is None
        for c in r.claims:
            if c.second_judge is not None:
                # the reading that flatters least stands (a SUPPORTED without a quote is not one); its reason as given
                assert c.second_judge.label == "UNSUPPORTED" and HOSTILE in (c.second_judge.reason or "")
                assert c.judges_disagree == (c.label != "UNSUPPORTED")


def _pairs(rid: str, pairs: list[tuple[str, str | None]]) -> AnswerReport:
    """A report whose claims carry (first verdict, second verdict or None: not second-judged)."""
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
    return AnswerReport(
        id=rid,
        verdict="PASS",
        mode="cascade",
        scores={},
        claims=claims,
        judges_disagree=any(c.judges_disagree for c in claims) if any(b for _, b in pairs) else None,
    )


def test_the_two_judges_metrics_when_they_use_one_label_only(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Two judges that said SUPPORTED to every claim agree fully, and kappa is undefined (chance agreement is
    # total): the old metrics said kappa 0.000 [0.000, 0.000], "no better than chance", with certainty.
    from groundjudge.cli import app
    from groundjudge.io.reports import dumps

    S = "SUPPORTED"
    reports = [_pairs("a", [(S, S), (S, S)]), _pairs("b", [(S, S), (S, None)]), _pairs("c", [])]
    j = judges_agreement(reports)
    assert j is not None and j["n"] == 3 and j["agreement"] == 1.0 and j["disagree"] == 0
    assert j["kappa"] is None and j["kappa_ci"] == [None, None]
    json.dumps(j, allow_nan=False)  # finite JSON
    scored = tmp_path / "scored.jsonl"
    scored.write_text("".join(dumps(r) + "\n" for r in reports))
    res = runner.invoke(app, ["metrics", str(scored)])
    assert res.exit_code == 0, res.output
    assert "kappa undefined" in res.stderr + res.stdout and "no claim with a verdict from both" not in res.output
    # against reviewers who also said SUPPORTED to each: each judge's kappa with the people is undefined too
    reviews = tmp_path / "reviews.jsonl"
    lines = [{"id": r.id, "claim_id": c.claim.id, "claim": c.claim.text, "label": S} for r in reports for c in r.claims]
    reviews.write_text("".join(json.dumps(x) + "\n" for x in lines))
    res = runner.invoke(app, ["metrics", str(scored), "--reviews", str(reviews), "--json"])
    assert res.exit_code == 0, res.output
    vs = json.loads(res.stdout)["judges"]["vs_people"]
    assert vs["first"]["kappa"] is None and vs["second"]["kappa_ci"] == [None, None] and vs["n"] == 3
    # where kappa is defined, it is as before; a mixed file (some answers second-judged, some not) counts only those
    U = "UNSUPPORTED"
    j = judges_agreement([*reports, _pairs("d", [(U, U), (U, S)])])
    assert j is not None and j["n"] == 5 and j["kappa"] is not None and None not in j["kappa_ci"]


def test_a_usd_budget_on_an_unpriced_second_judge_says_how_to_price_the_second_judge(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The refusal named --price, which prices the first judge: a user who followed it got the same refusal again.
    from groundjudge.errors import ConfigError

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    base: dict[str, Any] = {
        "llm": "openai/gpt-4o-mini",
        "budget_usd": 1.0,
        "price": {"input_per_mtok": 1.0, "output_per_mtok": 1.0},
    }
    local = {"second_judge": "openai-compatible/llama", "second_judge_base_url": "http://127.0.0.1:9/v1"}
    with pytest.raises(ConfigError, match="--second-judge-price") as info:
        Evaluator(Config(**base, **local))
    assert "second_judge_price=" in str(info.value) and "--price IN,OUT" not in str(info.value)
    price = {"input_per_mtok": 0.0, "output_per_mtok": 0.0}
    ev = Evaluator(Config(**base, **local, second_judge_price=price))  # priced: accepted
    assert ev.second_client is not None


def test_a_second_judge_slower_than_the_first_changes_neither_the_order_nor_the_reports(
    servers: Any,  # noqa: F811
    shared_nli: Any,
    tmp_path: Path,
) -> None:
    import threading

    from tests.pipeline.test_second_judge import SECOND, make, verdicts

    first, _ = servers
    ev = make(servers, shared_nli, tmp_path / "fast", second_judge_sample=1.0)
    fast = list(ev.evaluate_many(ROWS, batch_size=2))  # the same NLI batches (scores move in the 7th digit)
    gate = threading.Event()
    answer = verdicts(SECOND)
    with ScriptedLLMServer() as slow:

        def script(req: RecordedRequest) -> Reply:
            if "1901" in json.dumps(claims_in(req)):  # the first flagged row waits until a later one was answered
                gate.wait(10)
            else:
                gate.set()
            return answer(req)

        slow.script = route({"judge": script})
        cache = Cache(tmp_path / "slow")
        ev = Evaluator(
            settings_for(slow, second_judge_sample=1.0, concurrency=4),
            nli=shared_nli,
            client=make_test_client(first, cache=cache),
            cache=cache,
            second_client=make_test_client(slow, "anthropic", model=SECOND_MODEL),
        )
        got = list(ev.evaluate_many(ROWS, batch_size=2))
    assert gate.is_set()
    skip: Any = {"usage": True, "second_judge": {"usage"}, "versions": {"second_judge_server"}}  # another server
    assert [r.model_dump(exclude=skip) for r in got] == [r.model_dump(exclude=skip) for r in fast]


def test_the_budget_running_out_on_the_second_judges_provider_batch_loses_nothing(
    servers: Any,  # noqa: F811
    shared_nli: Any,
    tmp_path: Path,
) -> None:
    from groundjudge.errors import BudgetExceededError
    from groundjudge.llm import Ledger
    from tests.pipeline.test_second_judge import make

    kw: dict[str, Any] = {"batch_api": True, "batch_state": str(tmp_path / "b.json")}
    whole = list(make(servers, shared_nli, tmp_path / "whole", **kw).evaluate_many(ROWS))
    got: list[AnswerReport] = []
    capped = make(servers, shared_nli, tmp_path / "c", ledger=Ledger(max_calls=len(ROWS) + 1), **kw)
    with pytest.raises(BudgetExceededError):
        for r in capped.evaluate_many(ROWS, batch_size=len(ROWS)):
            got.append(r)
    skip: Any = {"usage": True, "second_judge": {"usage"}}
    by_id = {r.id: r.model_dump(exclude=skip) for r in whole}
    assert all(r.model_dump(exclude=skip) == by_id[r.id] for r in got)  # what is written is the whole run's
    assert all(r.second_judge is None for r in got)  # the flagged rows wait for a rerun; nothing half-judged
    done = {r.id for r in got}
    rerun = list(
        make(servers, shared_nli, tmp_path / "c", **kw).evaluate_many([x for x in ROWS if x["id"] not in done])
    )

    def outcome(r: AnswerReport) -> Any:  # the NLI scores move in the 7th digit with the batch: not compared
        return r.id, ruling(r), r.judges_disagree, [(c.label, c.second_judge) for c in r.claims]

    assert sorted(map(outcome, [*got, *rerun]), key=str) == sorted(map(outcome, whole), key=str)


def test_compares_gate_is_the_same_with_and_without_a_second_judge(
    servers: Any,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The second judge never changes a score, so a run with one gates against a baseline without one (or with
    another second judge) as the same run without it does. compare's settings_differ named second_judge,
    second_judge_server and the scoring's second_judge_sample: --fail-if-worse exited 2 and the pytest baseline gate
    refused, for reports whose numbers were byte-identical."""
    from groundjudge.cli import app
    from groundjudge.io.made_with import settings_differ
    from groundjudge.io.reports import read_reports

    first, second = servers
    monkeypatch.setenv("GROUNDJUDGE_NLI_MODEL", str(SHARED_MODEL))
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    plain, judged = tmp_path / "plain.jsonl", tmp_path / "judged.jsonl"
    args = _cli_args(data, plain, tmp_path / "p", first, second)
    at = args.index("--second-judge")
    assert runner.invoke(app, args[:at] + args[at + 4 :]).exit_code == 0
    res = runner.invoke(app, [*_cli_args(data, judged, tmp_path / "j", first, second), "--second-judge-sample", "1"])
    assert res.exit_code == 0, res.output
    a, b = (list(read_reports(p)) for p in (plain, judged))
    assert [ruling(r) for r in a] == [ruling(r) for r in b]
    assert settings_differ(a, b) == {}
    for x, y in ((plain, judged), (judged, plain), (plain, plain)):
        res = runner.invoke(app, ["compare", str(x), str(y), "--fail-if-worse"])
        assert res.exit_code == 0, res.output
        assert "other settings" not in res.output
