"""metrics, compare and calibrate: the numbers against hand computations, and the commands."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from groundjudge.cli import app
from groundjudge.io.reports import dumps
from groundjudge.learn.calibrate import fit_thresholds
from groundjudge.models import AnswerReport, Claim, ClaimNLI, ClaimVerdict, Scores
from groundjudge.review.compare import compare_runs, mcnemar_p, permutation_p
from groundjudge.review.metrics import balanced_accuracy, cohen_kappa, confusion, label_metrics, per_label
from tests.conftest import sentences_are_claims

runner = CliRunner()


def test_metrics_match_a_hand_computed_confusion_matrix() -> None:
    gold = ["S", "S", "S", "S", "N", "N", "N", "N", "N", "N"]
    pred = ["S", "S", "S", "N", "N", "N", "N", "N", "S", "S"]
    #            pred S  pred N
    # gold S        3       1
    # gold N        2       4
    assert confusion(gold, pred, ["S", "N"]) == [[3, 1], [2, 4]]
    assert balanced_accuracy(gold, pred, ["S", "N"]) == pytest.approx((3 / 4 + 4 / 6) / 2)
    # observed 0.7; expected (4*5 + 6*5) / 100 = 0.5; kappa = 0.2 / 0.5
    assert cohen_kappa(gold, pred, ["S", "N"]) == pytest.approx(0.4)
    pl = per_label(gold, pred, ["S", "N"])
    assert pl["S"]["precision"] == pytest.approx(3 / 5) and pl["S"]["recall"] == pytest.approx(3 / 4)
    assert pl["S"]["f1"] == pytest.approx(2 * 0.6 * 0.75 / 1.35)
    assert pl["N"]["support"] == 6


def _report(
    rid: str,
    label: str | None,
    claim_label: str = "SUPPORTED",
    route: str = "nli",
    combined: float = 0.9,
    verdict: str = "PASS",
    cost: float = 0.0,
) -> AnswerReport:
    claims = [
        ClaimVerdict(
            claim=Claim(id="c1", text="x"),
            label=claim_label,
            route=route,  # type: ignore[arg-type]
            nli=ClaimNLI(entailment=0.5, passages_scored=1),
        )
    ]
    n_sup = int(claim_label == "SUPPORTED")
    return AnswerReport(
        id=rid,
        verdict=verdict,
        mode="cascade",
        label=label,
        claims=claims,  # type: ignore[arg-type]
        scores=Scores(
            combined=combined,
            claims=float(n_sup),
            n_claims=1,
            n_judged=int(claim_label != "ERROR"),
            n_supported=n_sup,
            n_contradicted=int(claim_label == "CONTRADICTED"),
            contradicted_share=float(claim_label == "CONTRADICTED"),
            coverage=1.0,
        ),
    )


def test_label_metrics_claim_level_by_route() -> None:
    reports = [
        _report("1", "SUPPORTED", "SUPPORTED", "nli"),
        _report("2", "SUPPORTED", "UNSUPPORTED", "judge"),
        _report("3", "CONTRADICTED", "CONTRADICTED", "judge"),
        _report("4", "UNSUPPORTED", "SUPPORTED", "nli"),
        _report("5", "UNSUPPORTED", "ERROR", "judge"),
        _report("6", None),
    ]
    m = label_metrics(reports)
    assert m["level"] == "claim" and m["n"] == 5 and m["unlabelled"] == 1
    # binary: gold S,S,N,N,N ; pred S,N,N,S,ERROR
    assert m["labels"] == ["SUPPORTED", "NOT_SUPPORTED", "ERROR"]
    assert m["confusion"] == [[1, 1, 0], [1, 1, 1], [0, 0, 0]]
    assert m["balanced_accuracy"] == pytest.approx((1 / 2 + 1 / 3) / 2)
    assert m["three_way"]["confusion"][2] == [0, 0, 1, 0]  # CONTRADICTED row
    assert m["by_route"]["nli"]["n"] == 2 and m["by_route"]["judge"]["n"] == 3
    assert m["escalation_rate"] == pytest.approx(3 / 5)


def test_label_metrics_answer_level() -> None:
    reports = [_report("a", "consistent"), _report("b", "hallucinated", "CONTRADICTED"), _report("c", "hallucinated")]
    m = label_metrics(reports)
    assert m["level"] == "answer" and m["confusion"] == [[1, 0], [1, 1]]
    with pytest.raises(ValueError, match="no report carries a gold label"):
        label_metrics([_report("x", None)])


def test_metrics_command(tmp_path: Path) -> None:
    path = tmp_path / "scored.jsonl"
    rows = [_report("1", "SUPPORTED"), _report("2", "UNSUPPORTED", "UNSUPPORTED", "judge"), _report("3", "UNSUPPORTED")]
    path.write_text("".join(dumps(r) + "\n" for r in rows))
    result = runner.invoke(app, ["metrics", str(path)])
    assert result.exit_code == 0, result.output
    last = json.loads(result.output.strip().splitlines()[-1])
    assert last["n"] == 3 and last["balanced_accuracy"] == pytest.approx(0.75)
    assert last["escalation_rate"] == pytest.approx(1 / 3) and "kappa" in last
    # intervals beside the figures; the corrected rate wants 20 labels of each class and has 2 and 1
    assert last["kappa_ci"][0] <= last["kappa"] <= last["kappa_ci"][1]
    assert last["escalation_rate_ci"] == pytest.approx([0.0615, 0.7923], abs=1e-4)  # Wilson, 1 of 3
    corrected = last["corrected_unsupported_rate"]
    assert corrected["value"] is None and corrected["ci"] == [None, None]
    assert corrected["needs"] == {"positives": 18, "negatives": 19}
    assert corrected["raw"] == pytest.approx(1 / 3) and corrected["labels"] == {
        "level": "claim",
        "positives": 2,
        "negatives": 1,
    }
    said = " ".join(result.output.split())
    assert "needs 18 more labelled claims that are not supported (has 2) and 19 more that are supported (has 1)" in said


def _labelled_claims() -> list[AnswerReport]:
    """100 claim rows: 25 gold SUPPORTED (5 flagged), 25 gold UNSUPPORTED (20 flagged, 5 of them CONTRADICTED),
    50 unlabelled (10 flagged, 2 of them could not be judged: ERROR counts as flagged), and an answer that failed
    whole (no claims: in no claim-level rate)."""
    rows = [_report(f"s{i}", "SUPPORTED", "UNSUPPORTED" if i < 5 else "SUPPORTED") for i in range(25)]
    rows += [
        _report(f"u{i}", "UNSUPPORTED", "SUPPORTED" if i < 5 else ("CONTRADICTED" if i < 10 else "UNSUPPORTED"))
        for i in range(25)
    ]
    rows += [
        _report(f"x{i}", None, "ERROR" if i < 2 else ("UNSUPPORTED" if i < 10 else "SUPPORTED")) for i in range(50)
    ]
    failed = AnswerReport(id="failed", verdict="ERROR", mode="cascade", scores=Scores(), errors=["boom"])
    return [*rows, failed]


def test_metrics_command_prints_the_corrected_unsupported_rate(tmp_path: Path) -> None:
    path = tmp_path / "scored.jsonl"
    path.write_text("".join(dumps(r) + "\n" for r in _labelled_claims()))
    result = runner.invoke(app, ["metrics", str(path)])
    assert result.exit_code == 0, result.output
    corrected = json.loads(result.output.strip().splitlines()[-1])["corrected_unsupported_rate"]
    # raw (5 + 20 + 10) / 100 = 0.35; sensitivity 20/25 = 0.8, specificity 20/25 = 0.8;
    # Rogan-Gladen (0.35 + 0.8 - 1) / (0.8 + 0.8 - 1) = 0.25
    assert corrected["value"] == pytest.approx(0.25) and corrected["raw"] == pytest.approx(0.35)
    assert corrected["sensitivity"] == pytest.approx(0.8) and corrected["specificity"] == pytest.approx(0.8)
    assert corrected["labels"] == {"level": "claim", "positives": 25, "negatives": 25}
    assert corrected["n"] == 100 and corrected["failed_answers"] == 1 and corrected["by"] == "pooled"
    lo, hi = corrected["ci"]
    assert 0.0 <= lo < 0.25 < hi <= 1.0 and "needs" not in corrected
    assert corrected["raw_ci"] == pytest.approx([0.2637, 0.4475], abs=1e-4)  # Wilson, 35 of 100
    said = " ".join(result.output.split())
    assert "unsupported claims (raw): 35.0% [26.4, 44.7] of 100" in said
    assert f"corrected for the checker's error: 25.0% [{100 * lo:.1f}, {100 * hi:.1f}]" in said
    assert "1 answer(s) failed whole" in said


def test_corrected_rate_per_route_and_at_the_answer_level() -> None:
    # the same claims, half decided by the judge: each route has 25 + 25 labels only if both get their own;
    # here the judge's labelled claims are 10 + 10, so one pooled pair corrects all
    rows = _labelled_claims()
    m = label_metrics(rows)
    assert m["corrected_unsupported_rate"]["by"] == "pooled"
    judged = [r.model_copy(update={"claims": [r.claims[0].model_copy(update={"route": "judge"})]}) for r in rows[:100]]
    both = rows[:100] + [r.model_copy(update={"id": r.id + "-j"}) for r in judged]
    corrected = label_metrics(both)["corrected_unsupported_rate"]
    assert corrected["by"] == "route" and corrected["value"] == pytest.approx(0.25)
    assert corrected["routes"]["judge"]["corrected"] == pytest.approx(0.25)
    # answer level: hallucinated is positive; 3 answers labelled, far too few
    answers = [_report("a", "consistent"), _report("b", "hallucinated", "CONTRADICTED"), _report("c", "hallucinated")]
    corrected = label_metrics(answers)["corrected_unsupported_rate"]
    assert corrected["labels"] == {"level": "answer", "positives": 2, "negatives": 1}
    assert corrected["raw"] == pytest.approx(1 / 3) and corrected["needs"] == {"positives": 18, "negatives": 19}


# -- compare ---------------------------------------------------------------------------------------------------


def _run(scores: list[float], verdicts: list[str]) -> list[AnswerReport]:
    return [_report(str(i), None, combined=s, verdict=v) for i, (s, v) in enumerate(zip(scores, verdicts, strict=True))]


def test_compare_finds_a_planted_regression_and_not_noise() -> None:
    rng = random.Random(1)
    base = [rng.uniform(0.6, 1.0) for _ in range(40)]
    a = _run(base, ["PASS" if s >= 0.7 else "FAIL" for s in base])
    worse_scores = [max(0.0, s - 0.15 + rng.uniform(-0.05, 0.05)) for s in base]
    b = _run(worse_scores, ["PASS" if s >= 0.7 else "FAIL" for s in worse_scores])
    result = compare_runs(a, b)
    combined = result["metrics"]["combined"]
    assert combined["diff"] < -0.1 and combined["ci95"][1] < 0 and combined["p_value"] < 0.01
    assert combined["b_worse"] and result["b_significantly_worse"]
    assert result["mcnemar"]["pass_lost"] > 0 and result["mcnemar"]["pass_gained"] == 0
    assert result["most_changed"] and result["most_changed"][0]["combined_diff"] < 0
    same = compare_runs(a, a)
    assert same["metrics"]["combined"]["p_value"] == 1.0 and not same["b_significantly_worse"]
    assert same["verdict_flips"] == {} and same["most_changed"] == []


@pytest.mark.parametrize("seed", [7, 10])
def test_compare_does_not_call_noise_a_regression(seed: int) -> None:
    # Issue 13: "not noise" only compared a run with itself. Here B is A plus small random changes both ways
    # (seeded): 7 loses one PASS and gains none, 10 drifts down (-0.005, p 0.08) with flips both ways.
    rng = random.Random(seed)
    base = [rng.uniform(0.6, 1.0) for _ in range(40)]
    a = _run(base, ["PASS" if s >= 0.7 else "FAIL" for s in base])
    noisy = [min(1.0, max(0.0, s + rng.uniform(-0.03, 0.03))) for s in base]
    b = _run(noisy, ["PASS" if s >= 0.7 else "FAIL" for s in noisy])
    result = compare_runs(a, b)
    combined = result["metrics"]["combined"]
    assert combined["diff"] != 0 and any(d > 0 for d in (y - x for x, y in zip(base, noisy, strict=True)))
    assert combined["p_value"] > 0.05 and combined["ci95"][0] < 0 < combined["ci95"][1]
    assert not combined["significant"] and not combined["b_worse"]
    assert result["verdict_flips"] and result["mcnemar"]["pass_lost"] >= 1 and result["mcnemar"]["p_value"] == 1.0
    assert not result["b_significantly_worse"]
    assert result["most_changed"]  # the noise is still listed, just not called significant


def test_paired_tests_by_hand() -> None:
    assert permutation_p([1.0, 1.0, 1.0]) == pytest.approx(2 / 8)  # exact: only all-plus and all-minus as extreme
    assert mcnemar_p(0, 5) == pytest.approx(2 / 32)
    assert mcnemar_p(3, 3) == 1.0


def test_compare_command_gates_ci(tmp_path: Path) -> None:
    rng = random.Random(2)
    base = [rng.uniform(0.7, 1.0) for _ in range(30)]
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text("".join(dumps(r) + "\n" for r in _run(base, ["PASS"] * 30)))
    b.write_text("".join(dumps(r) + "\n" for r in _run([s - 0.3 for s in base], ["FAIL"] * 30)))
    worse = runner.invoke(app, ["compare", str(a), str(b), "--json", "--fail-if-worse"])
    assert worse.exit_code == 1 and json.loads(worse.stdout)["b_significantly_worse"]
    same = runner.invoke(app, ["compare", str(a), str(a), "--fail-if-worse"])
    assert same.exit_code == 0 and "not significantly worse" in same.output


# -- calibrate -------------------------------------------------------------------------------------------------


def test_fit_thresholds_reaches_the_target() -> None:
    rng = random.Random(0)
    ent, con, gold = [], [], []
    for _ in range(400):
        s = rng.random() < 0.4
        ent.append(min(1.0, max(0.0, rng.gauss(0.7 if s else 0.35, 0.2))))
        con.append(min(1.0, max(0.0, rng.gauss(0.1 if s else 0.4, 0.15))))
        gold.append(s)
    fit = fit_thresholds(ent, con, gold, target=0.9)
    supported_calls = [g for e, c, g in zip(ent, con, gold, strict=True) if e >= fit.t_support and e >= c]
    assert len(supported_calls) >= 10 and sum(supported_calls) / len(supported_calls) >= 0.9
    assert fit.local_precision is not None and fit.local_precision >= 0.9
    # a model whose contradiction head says nothing: low entailment has to carry the "not supported" calls
    no_con = fit_thresholds(ent, [0.0] * len(ent), gold, target=0.9)
    assert no_con.t_unsupported is not None and no_con.t_unsupported < no_con.t_support
    assert no_con.local_precision is not None and no_con.local_precision >= 0.9
    assert 0 < fit.escalation_rate < 1 and fit.decided + round(fit.escalation_rate * fit.n) == fit.n
    strict = fit_thresholds(ent, con, gold, target=0.99)
    assert strict.escalation_rate >= fit.escalation_rate


def test_calibrate_command_writes_a_config_score_takes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shared_nli: Any
) -> None:
    from tests.conftest import FIXTURES, SHARED_MODEL

    monkeypatch.setenv("GROUNDJUDGE_NLI_MODEL", str(SHARED_MODEL))
    rows = [json.loads(x) for x in (FIXTURES / "samples.jsonl").read_text().splitlines() if x.strip()]
    claims = [r for r in rows if "claim" in r] * 5  # 15 labelled claims
    data = tmp_path / "labelled.jsonl"
    data.write_text("".join(json.dumps({**r, "id": f"{r['id']}-{i}"}) + "\n" for i, r in enumerate(claims)))
    config = tmp_path / "cfg.json"
    result = runner.invoke(
        app,
        [
            "calibrate",
            str(data),
            "--out",
            str(config),
            "--target",
            "0.9",
            "--min-decided",
            "3",
            "--cache-dir",
            str(tmp_path / "c"),
        ],
    )
    assert result.exit_code == 0, result.output
    fit = json.loads(next(x for x in result.output.splitlines() if x.startswith("{")))  # stderr notes are mixed in
    written = json.loads(config.read_text())
    assert written["t_support"] == fit["t_support"] and fit["n"] == 15
    out = tmp_path / "out.jsonl"
    scored = runner.invoke(
        app,
        [
            "score",
            str(data),
            "--out",
            str(out),
            "--config",
            str(config),
            "--no-progress",
            "--cache-dir",
            str(tmp_path / "c"),
        ],
    )
    assert scored.exit_code == 0, scored.output
    used = {json.loads(x)["versions"]["thresholds"] for x in out.read_text().splitlines()}
    shown = {k: "never" if fit[k] is None else fit[k] for k in ("t_support", "t_contradict", "t_unsupported")}
    assert used == {
        f"support>={shown['t_support']} contradict>={shown['t_contradict']} unsupported<={shown['t_unsupported']}"
    }


def test_calibrate_fits_a_runs_claims_on_every_piece_not_on_its_stored_scores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shared_nli: Any
) -> None:
    """A run's stored scores may have stopped early (nli mode at t_support; the cascade once only the NLI part could
    change: stages.route.settled_at), so calibrate scores a run's claims again, every selected passage, with the
    model the run names: the fit from the run's OUT is the fit from the claim rows themselves, whatever the OUT
    stored (here every stored entailment and contradiction is replaced by 0.01)."""
    from tests.conftest import FIXTURES, SHARED_MODEL

    monkeypatch.setenv("GROUNDJUDGE_NLI_MODEL", str(SHARED_MODEL))
    rows = [json.loads(x) for x in (FIXTURES / "samples.jsonl").read_text().splitlines() if x.strip()]
    claims = [r for r in rows if "claim" in r] * 5
    data = tmp_path / "labelled.jsonl"
    data.write_text("".join(json.dumps({**r, "id": f"{r['id']}-{i}"}) + "\n" for i, r in enumerate(claims)))
    cache = ["--cache-dir", str(tmp_path / "c")]
    out = tmp_path / "out.jsonl"
    scored = runner.invoke(app, ["score", str(data), "--out", str(out), "--mode", "nli", "--no-progress", *cache])
    assert scored.exit_code == 0, scored.output
    reports = [json.loads(x) for x in out.read_text().splitlines()]
    assert all(r["versions"]["nli_model"] for r in reports)  # the run names its model
    for r in reports:
        for c in r["claims"]:
            c["nli"]["entailment"] = c["nli"]["contradiction"] = 0.01
    out.write_text("".join(json.dumps(r) + "\n" for r in reports))

    def fit(labelled: Path) -> dict[str, Any]:
        args = ["calibrate", str(labelled), "--target", "0.9", "--min-decided", "3", "--no-head", *cache]
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        return dict(json.loads(next(x for x in result.output.splitlines() if x.startswith("{"))))

    from_rows, from_out = fit(data), fit(out)
    assert from_rows["t_support"] is not None  # the rows' own fit says SUPPORTED somewhere
    for key in ("n", "t_support", "t_contradict", "t_unsupported"):
        assert from_out[key] == from_rows[key], key


def test_summarizer_is_exact_in_constant_memory() -> None:
    from groundjudge.review.summary import Summarizer

    rng = random.Random(3)
    scores = [round(rng.random(), 3) for _ in range(501)]
    s = Summarizer(worst=3)
    for i, x in enumerate(scores):
        s.add(_report(str(i), None, claim_label="CONTRADICTED" if i % 10 == 0 else "SUPPORTED", combined=x))
    summary = s.summary()
    ordered = sorted(scores)
    assert summary.n == 501 and summary.mean_combined == pytest.approx(sum(scores) / 501)
    assert summary.p10_combined == pytest.approx(ordered[50], abs=1e-9)
    assert [score for _, score in summary.worst] == pytest.approx(ordered[:3])
    assert summary.answers_contradicted_share == pytest.approx(51 / 501)


def test_summarizer_skips_non_finite_scores_and_counts_the_row_failed() -> None:
    # Issue 13: the run summary died on a NaN score.
    from groundjudge.io.reports import finite_report
    from groundjudge.review.summary import Summarizer

    s = Summarizer()
    s.add(_report("ok", None, combined=0.8))
    poisoned = _report("nan", None, combined=0.9)
    poisoned.scores.combined = float("nan")
    poisoned.scores.nli = float("inf")
    s.add(poisoned)
    summary = s.summary()
    assert summary.n == 2 and summary.rows_failed == 1
    assert summary.mean_combined == pytest.approx(0.8) and summary.p10_combined == pytest.approx(0.8)
    assert summary.worst == [("ok", 0.8)] and summary.failures[0].startswith("nan: non-finite score")
    # the writer's guard: the same report becomes an ERROR of its row, in strict JSON
    fixed = finite_report(poisoned)
    assert fixed.verdict == "ERROR" and fixed.scores.combined is None and fixed.scores.n_claims == 1
    assert "scores.nli, scores.combined" in fixed.errors[0]
    assert json.loads(dumps(fixed))["id"] == "nan"
    with pytest.raises(ValueError):
        dumps(poisoned)
    assert finite_report(_report("fine", None)) == _report("fine", None)


def test_summary_gives_the_dataset_rate_unchecked_claims_and_requests_per_answer() -> None:
    # Issue 12.5: the share of answers scoring below 0.8 beside the share of answers with a contradicted claim; the
    # claims nobody checked for a contradiction; requests and tokens per answer.
    from groundjudge.models import Usage
    from groundjudge.review.summary import Summarizer, summarize, summary_rows

    reports = [
        _report("a", None, combined=0.9),
        _report("b", None, combined=0.79),  # below 0.8: counts, though nothing is contradicted
        _report("c", None, claim_label="CONTRADICTED", combined=0.5, verdict="FAIL"),
        _report("d", None, combined=0.8),  # at the threshold: not below
    ]
    for r in reports:
        r.scores.n_contradiction_unchecked = r.scores.n_supported
        r.usage = Usage(calls=2, cached_calls=1, input_tokens=1000, output_tokens=100, cached_input_tokens=250)
    s = summarize(reports)
    assert (
        s.answers_below_threshold_share == pytest.approx(2 / 4) and s.answers_scored == 4 and s.score_threshold == 0.8
    )
    assert s.answers_contradicted_share == pytest.approx(1 / 4)
    assert s.contradiction_unchecked == 3 and s.claims == 4
    rows = dict(summary_rows(s))
    assert rows["answers scoring below 0.8"] == "50.0% [15.0, 85.0] of 4 scored"  # with the Wilson interval
    assert rows["answers with a contradicted claim"] == "25.0% [4.6, 69.9]"
    assert rows["contradiction not checked"] == (
        "3 of 4 claims (decided locally by a model with no calibrated contradiction head)"
    )
    assert rows["LLM requests per answer"] == "2.00 billed + 1.00 from the cache; tokens in 1000 / out 100"
    assert rows["input tokens from the provider's prompt cache"] == "25.0% (1000 of 4000)"
    # another threshold; an answer without a combined score (NO_CLAIMS) is not in the denominator
    strict = Summarizer(threshold=0.85)
    for r in [*reports, AnswerReport(id="e", verdict="NO_CLAIMS", mode="nli", scores=Scores())]:
        strict.add(r)
    t = strict.summary()
    assert t.answers_below_threshold_share == pytest.approx(3 / 4) and t.answers_scored == 4 and t.n == 5
    assert "answers scoring below 0.85" in dict(summary_rows(t))


# -- presets ---------------------------------------------------------------------------------------------------


def judge_by_the_source(req: Any) -> Any:
    from groundjudge.testing import Reply, claims_in

    verdicts: list[dict[str, Any]] = []
    for cid, text in claims_in(req).items():
        if "moon" in text:
            verdicts.append({"claim_id": cid, "verdict": "UNSUPPORTED", "reason": "Not in the source.", "quotes": []})
        else:
            quote = [{"source": 1, "text": text}]
            verdicts.append({"claim_id": cid, "verdict": "SUPPORTED", "reason": "Stated.", "quotes": quote})
    return Reply.json({"verdicts": verdicts})


def test_a_preset_changes_the_verdict_of_the_same_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shared_nli: Any
) -> None:
    # Issue 13: no test used a preset. Four of five claims supported, none contradicted: grounded share 0.8 is a
    # WARN by default (fail below 0.7, warn below 0.85) and a FAIL for medical-legal (fail below 0.9).
    from groundjudge.testing import ScriptedLLMServer, route
    from tests.conftest import SHARED_MODEL

    monkeypatch.setenv("GROUNDJUDGE_NLI_MODEL", str(SHARED_MODEL))
    facts = ["The shop opens at 9 am.", "It closes at 5 pm.", "It sells bread.", "It sells milk."]
    row = {"id": "shop", "contexts": [" ".join(facts)], "answer": " ".join([*facts, "It delivers to the moon."])}
    data = tmp_path / "in.jsonl"
    data.write_text(json.dumps(row) + "\n")
    config = tmp_path / "cfg.json"
    config.write_text(json.dumps({"weights": {"claims": 1.0, "nli": 0.0, "qa": 0.0}}))
    verdicts = {}
    with ScriptedLLMServer(route({"claims": sentences_are_claims, "judge": judge_by_the_source})) as server:
        for preset in ("default", "medical-legal", "research"):
            out = tmp_path / f"{preset}.jsonl"
            result = runner.invoke(
                app,
                [
                    "score", str(data), "--out", str(out), "--config", str(config), "--preset", preset,
                    "--llm", "openai/gpt-4o-mini", "--base-url", server.openai_base_url, "--mode", "llm",
                    "--no-qa", "--cache-dir", str(tmp_path / "c"), "--no-progress",
                ],
            )  # fmt: skip
            assert result.exit_code == 0, result.output
            report = json.loads(out.read_text())
            assert report["scores"]["combined"] == pytest.approx(0.8)
            assert [c["label"] for c in report["claims"]].count("SUPPORTED") == 4
            verdicts[preset] = report["verdict"]
        assert len(server.requests) == 2  # one claims call and one judge call: the other runs replay the cache
    assert verdicts == {"default": "WARN", "medical-legal": "FAIL", "research": "PASS"}


def test_compare_leaves_non_finite_scores_out() -> None:
    # A NaN score (a report written before the writer refused them) must not turn every statistic into NaN.
    import math

    base = [0.9, 0.8, 0.85, 0.95, 0.7, 0.75]
    a = _run(base, ["PASS"] * 6)
    b = _run([s - 0.01 for s in base], ["PASS"] * 6)
    b[2].scores.combined = float("nan")
    a[4].scores.combined = float("inf")
    result = compare_runs(a, b)
    combined = result["metrics"]["combined"]
    assert combined["n"] == 4 and combined["diff"] == pytest.approx(-0.01)
    assert all(math.isfinite(x) for x in (combined["p_value"], *combined["ci95"], combined["mean_a"]))
    assert all(math.isfinite(row["combined_diff"]) for row in result["most_changed"])


def test_a_repeated_id_is_paired_once_by_its_last_report() -> None:
    """A --retry-errors run killed before it compacts OUT leaves the old ERROR line and the new one: the comparison
    pairs the id once, with the report that replaced the other."""
    a = [_report("q1", None, combined=0.9), _report("q2", None, combined=0.9)]
    b = [_report("q1", None, combined=0.1, verdict="FAIL"), _report("q2", None), _report("q1", None, combined=0.9)]
    result = compare_runs(a, b)
    assert result["paired"] == 2 and not result["mcnemar"]["pass_lost"]
