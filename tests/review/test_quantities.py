"""Issue 18 "Honest again": one name per quantity, old report files still read, and every verdict says which rules
made it (``stages.score.decide``)."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groundjudge.config import Config, Thresholds
from groundjudge.errors import ConfigError
from groundjudge.io.reports import dumps, read_reports
from groundjudge.models import AnswerReport, Claim, ClaimNLI, ClaimVerdict, QAItem, QAResult, Scores
from groundjudge.review.compare import LOWER_IS_BETTER, METRICS, compare_runs, corrected_rates
from groundjudge.review.metrics import label_metrics, unsupported_rate
from groundjudge.review.summary import summarize, summary_rows
from groundjudge.stages.score import SEVERITY, compute_scores, decide

WEIGHTS = {"claims": 0.4, "nli": 0.3, "qa": 0.3}


def _claim(i: int, label: str, support: float = 0.9) -> ClaimVerdict:
    return ClaimVerdict(
        claim=Claim(id=f"c{i}", text=f"claim {i}"),
        label=label,  # type: ignore[arg-type]
        route="judge",
        nli=ClaimNLI(entailment=support, passages_scored=1),
    )


def _implied(reasons: list[str]) -> str:
    """The verdict the reasons name: the most severe prefix (each reason is ``VERDICT: why``)."""
    prefixes = [r.split(":", 1)[0] for r in reasons]
    assert prefixes and all(p in SEVERITY for p in prefixes), reasons
    return max(prefixes, key=SEVERITY.__getitem__)


def _oracle(s: Scores, t: Thresholds) -> str:
    """The verdict rule as it stood before the reasons (written out here only to check decide against)."""
    if s.n_claims == 0:
        return "NO_CLAIMS"
    if s.n_judged == 0 or s.combined is None:
        return "ERROR"
    share = s.contradicted_share or 0.0
    if s.combined < t.min_grounded or share > t.max_contradicted:
        return "FAIL"
    if (s.n_contradicted + s.n_errors) / s.n_claims > t.max_contradicted:
        return "ERROR"
    if s.combined < t.warn or (s.coverage is not None and s.coverage < 1.0) or s.qa_failed or s.n_nli_errors:
        return "WARN"
    return "PASS"


unit = st.floats(0, 1, allow_nan=False)


@st.composite
def scored(draw: st.DrawFn) -> tuple[Scores, QAResult | None]:
    """Claims with any labels and supports, a QA check or none: scores as the pipeline computes them."""
    labels = draw(st.lists(st.sampled_from(["SUPPORTED", "UNSUPPORTED", "CONTRADICTED", "ERROR"]), max_size=12))
    claims = [_claim(i, label, draw(unit)) for i, label in enumerate(labels)]
    qa = draw(
        st.one_of(
            st.none(),
            st.lists(st.booleans(), min_size=1, max_size=4).map(
                lambda ok: QAResult(
                    items=[QAItem(question="q", answer_from_answer="a", consistent=c) for c in ok],
                    score=sum(ok) / len(ok),
                )
            ),
            st.just(QAResult(error="no verification questions could be asked")),
        )
    )
    weights = draw(st.fixed_dictionaries({"claims": unit, "nli": unit, "qa": unit}))
    if not any(weights.values()):
        weights["claims"] = 1.0
    return compute_scores(claims, qa, weights, 0.5, qa_expected=qa is not None), qa


@st.composite
def thresholds(draw: st.DrawFn) -> Thresholds:
    low, high = sorted((draw(unit), draw(unit)))
    return Thresholds(min_grounded=low, warn=high, max_contradicted=draw(unit))


def _check(s: Scores, t: Thresholds, weights: dict[str, float] | None, qa: QAResult | None) -> None:
    ruling = decide(s, t, weights, qa)
    assert ruling.verdict == _oracle(s, t)
    assert _implied(ruling.reasons) == ruling.verdict, ruling
    if ruling.verdict == "PASS":
        assert all(r.startswith("PASS: ") for r in ruling.reasons), ruling
    fails = [r for r in ruling.reasons if r.startswith("FAIL: ")]
    if ruling.verdict == "FAIL":
        assert fails, ruling
    for r in fails:  # each names its rule with the numbers and the limit it crossed
        assert re.search(r"(combined|claims contradicted).*\d[\d.e+-]* [<>] \d[\d.e+-]*", r), r


@settings(max_examples=300, deadline=None, database=None)
@given(scored(), thresholds(), st.booleans())
def test_the_reasons_name_the_verdict_decide_gives(
    case: tuple[Scores, QAResult | None], t: Thresholds, w: bool
) -> None:
    s, qa = case
    _check(s, t, WEIGHTS if w else None, qa)


@settings(max_examples=300, deadline=None, database=None)
@given(
    st.builds(
        Scores,
        combined=st.none() | unit,
        nli=st.none() | unit,
        qa=st.none() | unit,
        contradicted_share=st.none() | unit,
        coverage=st.none() | unit,
        n_claims=st.integers(0, 20),
        n_judged=st.integers(0, 20),
        n_supported=st.integers(0, 20),
        n_contradicted=st.integers(0, 20),
        n_errors=st.integers(0, 20),
    ),
    thresholds(),
)
def test_the_reasons_hold_for_any_scores(s: Scores, t: Thresholds) -> None:
    # scores no pipeline makes (counts that do not add up) still get reasons that match the verdict
    _check(s, t, WEIGHTS, None)


def test_an_all_supported_answer_that_fails_says_the_claims_held_and_what_pulled_it_down() -> None:
    claims = [_claim(i, "SUPPORTED", 0.41) for i in range(5)]
    qa = QAResult(
        items=[QAItem(question="q", answer_from_answer="a", consistent=c) for c in (True, False, False)], score=1 / 3
    )
    weights = {"claims": 0.5, "nli": 0.3, "qa": 0.2}
    s = compute_scores(claims, qa, weights, 0.5, qa_expected=True)
    assert s.n_supported == 5 and s.not_supported_share == 0.0 and s.contradicted_share == 0.0
    ruling = decide(s, Thresholds(min_grounded=0.8, warn=0.9), weights, qa)
    assert ruling.verdict == "FAIL"
    assert ruling.reasons == [
        "FAIL: combined 0.69 < 0.80 (claims 1.00 x 0.50, nli 0.41 x 0.30, qa 0.33 x 0.20); all 5 claims SUPPORTED; "
        "pulled down by nli 0.41, qa 0.33 (below 0.80); QA: 2 of 3 answers inconsistent"
    ]


def test_a_one_claim_answer_is_counted_in_the_singular() -> None:
    """Issue 29: reasons said "all 1 claims SUPPORTED" and "0 of 1 claims SUPPORTED"."""
    weights = {"claims": 0.5, "nli": 0.5}
    held = decide(compute_scores([_claim(0, "SUPPORTED", 0.1)], None, weights, 0.5), Thresholds(), weights)
    assert "; the one claim SUPPORTED" in held.reasons[0] and "1 claims" not in held.reasons[0]
    failed = decide(compute_scores([_claim(0, "UNSUPPORTED", 0.1)], None, weights, 0.5), Thresholds(), weights)
    assert "; 0 of 1 claim SUPPORTED (1 UNSUPPORTED)" in failed.reasons[0], failed.reasons


def test_each_rule_gives_its_reason() -> None:
    t = Thresholds()  # 0.7 / 0.85 / 0.1
    contradicted = compute_scores(
        [_claim(i, "SUPPORTED", 1.0) for i in range(7)] + [_claim(7 + i, "CONTRADICTED", 1.0) for i in range(3)],
        None,
        WEIGHTS,
        0.5,
    )
    assert decide(contradicted, t, WEIGHTS).reasons == ["FAIL: 3 of 10 claims contradicted (0.30 > 0.10)"]
    partial = compute_scores([_claim(i, "SUPPORTED", 1.0) for i in range(9)] + [_claim(9, "ERROR")], None, WEIGHTS, 0.5)
    ruling = decide(partial, t, WEIGHTS)
    assert ruling.verdict == "WARN" and "WARN: coverage 0.90 < 1: 1 of 10 claims not judged" in ruling.reasons
    undecided = compute_scores([_claim(0, "SUPPORTED", 1.0), _claim(1, "ERROR")] * 3, None, {"nli": 1.0}, 0.5)
    ruling = decide(undecided, Thresholds(min_grounded=0.0, warn=0.0), {"nli": 1.0})
    assert ruling.verdict == "ERROR" and ruling.reasons[0].startswith("ERROR: undecided: 3 of 6 claims not judged")
    assert decide(compute_scores([], None, WEIGHTS, 0.5), t).reasons == ["NO_CLAIMS: the answer has no claim to check"]
    assert decide(compute_scores([_claim(0, "ERROR")], None, WEIGHTS, 0.5), t).reasons == [
        "ERROR: none of the 1 claims could be judged"
    ]
    # a limit crossed by less than two decimals show is shown with the digits that tell the two apart
    close = Scores(combined=0.6999, n_claims=1, n_judged=1, n_supported=1, coverage=1.0, contradicted_share=0.0)
    assert decide(close, t).reasons[0].startswith("FAIL: combined 0.6999 < 0.7000")
    clean = compute_scores([_claim(i, "SUPPORTED", 1.0) for i in range(4)], None, WEIGHTS, 0.5)
    assert decide(clean, t).reasons == [
        "PASS: combined 1.00 >= 0.85; 0 of 4 claims contradicted (0.00 <= 0.10); all judged"
    ]


def _report(rid: str, labels: list[str], weights: dict[str, float] = WEIGHTS, support: float = 0.2) -> AnswerReport:
    claims = [_claim(i, label, 1.0 if label == "SUPPORTED" else support) for i, label in enumerate(labels)]
    s = compute_scores(claims, None, weights, 0.5)
    ruling = decide(s, Thresholds(), weights)
    return AnswerReport(
        id=rid, verdict=ruling.verdict, verdict_reasons=ruling.reasons, mode="nli", scores=s, claims=claims
    )


def test_compare_moves_the_not_supported_share_when_unsupported_claims_are_added() -> None:
    # the case: six unsupported claims added, nothing contradicted, showed +0.000
    a = [_report(f"r{i}", ["SUPPORTED"] * 4) for i in range(8)]
    b = [_report(f"r{i}", ["SUPPORTED"] * 4 + ["UNSUPPORTED"] * (6 if i < 4 else 0)) for i in range(8)]
    assert "not_supported_share" in METRICS and {"not_supported_share", "contradicted_share"} <= LOWER_IS_BETTER
    m = compare_runs(a, b)["metrics"]
    assert m["contradicted_share"]["diff"] == 0.0
    assert m["not_supported_share"]["diff"] == pytest.approx(4 * 0.6 / 8)
    assert m["not_supported_share"]["mean_a"] == 0.0 and m["not_supported_share"]["mean_b"] > 0
    assert summarize(b).answers_not_supported_share == pytest.approx(0.5)
    assert summarize(b).answers_contradicted_share == 0.0
    # the gate (compare --fail-if-worse, the pytest baseline) sees it even where the combined score does not move:
    # here only the NLI part counts, and the added claims are entailed
    nli_only = {"nli": 1.0}
    a = [_report(f"r{i}", ["SUPPORTED"] * 4, nli_only) for i in range(16)]
    b = [_report(f"r{i}", ["SUPPORTED"] * 4 + ["UNSUPPORTED"] * 6 * (i < 12), nli_only, 1.0) for i in range(16)]
    result = compare_runs(a, b)
    assert result["metrics"]["combined"]["diff"] == 0.0 and result["verdict_flips"] == {}
    assert result["metrics"]["not_supported_share"]["b_worse"] and result["b_significantly_worse"]


OLD_LINE = (
    '{"id": "old-1", "verdict": "FAIL", "mode": "cascade", "scores": {"claims": 0.5, "nli": 0.6, "qa": null, '
    '"combined": 0.54, "hallucination_ratio": 0.25, "coverage": 1.0, "n_claims": 4, "n_judged": 4, "n_supported": 2, '
    '"n_contradicted": 1, "n_unsupported": 1, "n_errors": 0, "n_escalated": 2, "n_weak": 0, '
    '"n_contradiction_unchecked": 0}, "claims": [], "qa": null, "usage": {}, "errors": [], "question": null, '
    '"answer": "x", "contexts": ["y"], "label": null, "metadata": {}, "row": 0, "versions": {}, "nli_pairs": 0}\n'
)


def test_a_report_line_written_before_the_rename_still_reads_and_compares(tmp_path: Path) -> None:
    old = tmp_path / "old.jsonl"
    old.write_text(OLD_LINE, encoding="utf-8")
    [r] = list(read_reports(old))
    assert r.scores.contradicted_share == 0.25 and r.scores.not_supported_share == 0.5 and r.verdict_reasons == []
    written = json.loads(dumps(r))
    assert "hallucination_ratio" not in written["scores"] and written["scores"]["contradicted_share"] == 0.25
    assert list(written)[:3] == ["id", "verdict", "verdict_reasons"]
    # an old run against a new one: every metric pairs
    new = _report("old-1", ["SUPPORTED"] * 3 + ["UNSUPPORTED"])
    result = compare_runs([r], [new])
    assert result["paired"] == 1 and set(result["metrics"]) == set(METRICS) - {
        "qa",
        "citation_precision",
        "citation_recall",
    }
    assert result["metrics"]["contradicted_share"]["diff"] == pytest.approx(-0.25)
    assert result["metrics"]["not_supported_share"]["diff"] == pytest.approx(-0.25)
    # the commands that read report files
    from typer.testing import CliRunner

    from groundjudge.cli import app

    newer = tmp_path / "new.jsonl"
    newer.write_text(dumps(new) + "\n", encoding="utf-8")
    runner = CliRunner()
    for args in (["report", str(old)], ["compare", str(old), str(newer), "--json"], ["diagnose", str(old)]):
        out = runner.invoke(app, args)
        assert out.exit_code == 0, (args, out.output)


def test_the_summary_names_each_share_and_shows_why_answers_did_not_pass() -> None:
    reports = [_report("good", ["SUPPORTED"] * 4), _report("bad", ["SUPPORTED"] * 3 + ["CONTRADICTED"])]
    s = summarize(reports)
    rows = summary_rows(s)
    names = [name for name, _ in rows]
    assert not any("hallucinat" in name for name in names)
    assert dict(rows)["answers with a claim not supported"] == "50.0% [9.5, 90.5] of 2"  # Wilson, 1 of 2
    assert ("not passed", "bad: FAIL: 1 of 4 claims contradicted (0.25 > 0.10)") in rows
    # the notebook: a report's table and the frame carry the reasons
    assert "FAIL: 1 of 4 claims contradicted (0.25 &gt; 0.10)" in reports[1]._repr_html_()
    pytest.importorskip("pandas")
    from groundjudge.review.notebook import to_dataframe

    assert to_dataframe(reports).loc["bad", "verdict_reasons"] == "FAIL: 1 of 4 claims contradicted (0.25 > 0.10)"


def test_max_hallucinated_is_a_deprecated_name_of_max_contradicted(tmp_path: Path) -> None:
    with pytest.warns(DeprecationWarning, match="max_contradicted"):
        t = Thresholds(max_hallucinated=0.2)
    assert t.max_contradicted == 0.2
    with pytest.warns(DeprecationWarning):
        assert t.max_hallucinated == 0.2
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"thresholds": {"max_hallucinated": 0.3}}), encoding="utf-8")
    with pytest.warns(DeprecationWarning):
        assert Config.load(config).effective_thresholds.max_contradicted == 0.3
    with pytest.raises(ConfigError, match="max_contradicted only"):
        Config.make(thresholds={"max_hallucinated": 0.3, "max_contradicted": 0.2})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert Thresholds(max_contradicted=0.2).max_contradicted == 0.2  # the new name warns of nothing


# -- issue 29 defect 5: answers with no claims or that failed are not rated at the answer level ------------------


def _labelled(report: AnswerReport, label: str | None) -> AnswerReport:
    return report.model_copy(update={"label": label})


def _failed_whole(rid: str, label: str | None = None) -> AnswerReport:
    """An answer that failed before its claims were known (verdict ERROR, no claim)."""
    return AnswerReport(id=rid, verdict="ERROR", mode="nli", scores=Scores(), errors=["boom"], label=label)


def test_no_claims_and_error_answers_are_left_out_of_the_answer_level_rates() -> None:
    # the run: 5 answers with claims (one not supported), 2 NO_CLAIMS, 1 that failed whole; it read
    # answers_not_supported_share 20% of 5 but corrected_unsupported_rate.raw 50% of 8
    rated = [_report(f"ok{i}", ["SUPPORTED"] * 2) for i in range(4)] + [_report("bad", ["SUPPORTED", "UNSUPPORTED"])]
    run = [
        *[_labelled(r, "hallucinated" if r.id == "bad" else "consistent") for r in rated],
        _labelled(_report("none1", []), "consistent"),
        _labelled(_report("none2", []), "hallucinated"),
        _failed_whole("failed", "consistent"),
    ]
    assert [r.verdict for r in run[5:]] == ["NO_CLAIMS", "NO_CLAIMS", "ERROR"]
    s = summarize(run)
    assert s.answers_not_supported_share == pytest.approx(0.2) and s.answers_rated == 5
    assert s.answers_not_rated == {"NO_CLAIMS": 2, "ERROR": 1}
    c = s.corrected_unsupported_rate
    assert c is not None and c["labels"]["level"] == "answer"
    assert c["raw"] == pytest.approx(0.2) and c["n"] == 5 and c["not_rated"] == {"NO_CLAIMS": 2, "ERROR": 1}
    assert c["labels"]["positives"] == 1 and c["labels"]["negatives"] == 4  # no label of an unrated answer
    assert c == label_metrics(run)["corrected_unsupported_rate"]  # metrics: the same numbers
    rows = dict(summary_rows(s))
    assert rows["answers with a claim not supported"].endswith("of 5 (not rated: 2 NO_CLAIMS, 1 ERROR)")
    assert rows["unsupported answers (raw)"].endswith("of 5 (not rated: 2 NO_CLAIMS, 1 ERROR)")
    # an ERROR answer with claims (none could be judged) is not rated either
    error = _report("unjudged", ["ERROR", "ERROR"])
    assert error.verdict == "ERROR"
    s = summarize([*run, _labelled(error, "consistent")])
    assert s.answers_not_supported_share == pytest.approx(0.2) and s.answers_rated == 5
    assert s.answers_not_rated == {"NO_CLAIMS": 2, "ERROR": 2} and s.answers_with_claims == 6


def test_unrated_answers_no_longer_lower_the_specificity_the_correction_divides_by() -> None:
    clean = [_labelled(_report(f"c{i}", ["SUPPORTED"]), "consistent") for i in range(20)]
    flagged = [_labelled(_report(f"f{i}", ["UNSUPPORTED"]), "hallucinated") for i in range(20)]
    empty = [_labelled(_report(f"e{i}", []), "consistent") for i in range(10)]
    run = clean + flagged + empty
    for c in (
        summarize(run).corrected_unsupported_rate,
        label_metrics(run)["corrected_unsupported_rate"],
        (corrected_rates(run, run) or {})["a"],
    ):
        assert c is not None and c["labels"]["level"] == "answer"
        # a perfect checker on the rated answers: the correction is the raw rate (it read specificity 20/30)
        assert c["specificity"] == 1.0 and c["sensitivity"] == 1.0
        assert c["raw"] == c["value"] == 0.5 and c["n"] == 40 and c["not_rated"] == {"NO_CLAIMS": 10}


_rated_answers = st.lists(
    st.tuples(
        st.lists(st.sampled_from(["SUPPORTED", "UNSUPPORTED", "CONTRADICTED"]), min_size=1, max_size=3),
        st.sampled_from([None, "consistent", "hallucinated"]),
    ),
    max_size=30,
)
_unrated_answers = st.lists(
    st.tuples(
        st.sampled_from(["no claims", "failed whole", "unjudged"]),
        st.sampled_from([None, "consistent", "hallucinated"]),
        st.integers(0, 40),
    ),
    min_size=1,
    max_size=10,
)


@settings(max_examples=40, deadline=None, database=None)
@given(rated=_rated_answers, unrated=_unrated_answers)
def test_adding_unrated_answers_never_changes_the_answer_level_rates(rated: list, unrated: list) -> None:
    """Property: NO_CLAIMS and ERROR answers added anywhere in a run change no answer-level rate of the rated
    answers (raw, corrected, sensitivity, specificity, intervals); they are counted beside it."""
    base = [_labelled(_report(f"r{i}", labels), gold) for i, (labels, gold) in enumerate(rated)]
    run = list(base)
    for j, (kind, gold, at) in enumerate(unrated):
        extra = {
            "no claims": lambda rid: _report(rid, []),
            "failed whole": _failed_whole,
            "unjudged": lambda rid: _report(rid, ["ERROR"]),
        }[kind](f"u{j}")
        run.insert(min(at, len(run)), _labelled(extra, gold))
    before, after = summarize(base), summarize(run)
    assert after.answers_rated == before.answers_rated == len(base)
    assert sum(after.answers_not_rated.values()) == len(unrated)
    assert after.answers_not_supported_share == before.answers_not_supported_share
    assert after.answers_not_supported_share_ci == before.answers_not_supported_share_ci
    was, now = before.corrected_unsupported_rate, after.corrected_unsupported_rate
    assert (was is None) == (now is None)
    if was is not None and now is not None:
        now.pop("not_rated")
        was.pop("not_rated", None)
        assert now == was
    rate_before = unsupported_rate(base, "answer").as_json("answer")
    rate_after = unsupported_rate(run, "answer").as_json("answer")
    assert rate_after.pop("not_rated") == after.answers_not_rated
    rate_before.pop("not_rated", None)
    assert rate_after == rate_before


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(["SUPPORTED", "UNSUPPORTED", "CONTRADICTED", "ERROR"]), max_size=6))
def test_the_answer_rule_is_one_rule_for_reports_and_replays(labels: list[str]) -> None:
    """``tally.answer_prediction`` (reports) and the benchmarks' replays (decided labels, no report) read one rule,
    ``tally.every_claim_supported``: consistent when there is a claim and every one is SUPPORTED."""
    from groundjudge.tally import answer_prediction, every_claim_supported

    verdicts = [_claim(i, lab) for i, lab in enumerate(labels)]
    scores = compute_scores(verdicts, None, WEIGHTS, 0.5)
    report = AnswerReport(id="a", answer="x", mode="cascade", claims=verdicts, scores=scores, verdict="PASS")
    expected = bool(labels) and all(lab == "SUPPORTED" for lab in labels)
    assert answer_prediction(report) == ("consistent" if expected else "hallucinated")
    assert every_claim_supported(len(labels), labels.count("SUPPORTED")) is expected


def test_a_long_id_does_not_set_the_width_of_every_line_of_a_piped_summary() -> None:
    """A table is at least as wide as its longest word, so an answer id of 5,000 characters among the worst, failed or
    not-passed rows made every line of a summary piped to a file or a CI log 5,000 characters wide. The table now
    shows such a word's start and "…"; the JSON summary and the rows the review page and notebook show keep the id
    whole (a reviewer searches for it)."""
    import io

    from rich.console import Console

    from groundjudge.cli.common import print_summary

    long_id = "x" * 5000
    failed = AnswerReport(id=long_id + "f", verdict="ERROR", mode="nli", scores=Scores(), errors=["boom " + "y" * 3000])
    s = summarize([_report(long_id, ["UNSUPPORTED"] * 2), failed])
    assert long_id in json.dumps(s.model_dump())
    assert dict(summary_rows(s))["worst"].startswith(long_id + " (")
    console = Console(file=io.StringIO(), width=100, force_terminal=False)
    print_summary(console, s)
    lines = console.file.getvalue().splitlines()  # type: ignore[attr-defined]
    assert lines and max(len(line) for line in lines) < 300, max(len(line) for line in lines)
    assert "x" * 79 + "…" in console.file.getvalue()  # type: ignore[attr-defined]


def test_a_failed_answer_never_lowers_the_share_of_answers_with_a_contradicted_claim() -> None:
    """An ERROR answer whose judged claims hold no contradiction (its failed claims unknown) counted as an answer
    without one: a run whose answers all failed said "answers with a contradicted claim 0.0%", and failures diluted
    the share. It now counts only an ERROR answer that shows a CONTRADICTED claim."""

    def failed(report: AnswerReport) -> AnswerReport:
        return report.model_copy(update={"verdict": "ERROR", "errors": ["judge: no verdict for claim(s) c9"]})

    clean = [_report(f"r{i}", ["SUPPORTED", "CONTRADICTED" if i == 0 else "SUPPORTED"]) for i in range(4)]
    assert summarize(clean).answers_contradicted_share == pytest.approx(1 / 4)
    assert summarize([failed(r) for r in clean[1:]]).answers_contradicted_share is None  # all failed: no share
    with_failures = [*clean, *(failed(_report(f"e{i}", ["SUPPORTED"])) for i in range(4))]
    assert summarize(with_failures).answers_contradicted_share == pytest.approx(1 / 4)
    shown = [*clean, failed(_report("e", ["CONTRADICTED", "SUPPORTED"]))]  # a failure that shows one still counts
    assert summarize(shown).answers_contradicted_share == pytest.approx(2 / 5)


_LABELS = st.sampled_from(["SUPPORTED", "UNSUPPORTED", "CONTRADICTED"])


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.lists(_LABELS, min_size=1, max_size=4), min_size=1, max_size=8),
    st.lists(st.lists(st.sampled_from(["SUPPORTED", "UNSUPPORTED"]), min_size=1, max_size=4), min_size=1, max_size=8),
    st.data(),
)
def test_a_failed_answer_that_shows_no_contradiction_never_moves_the_share(
    labels: list[list[str]], failed_labels: list[list[str]], data: st.DataObject
) -> None:
    """Over generated runs: failed answers (ERROR) whose judged claims show no contradiction, added anywhere in the
    run, leave ``answers_contradicted_share`` as it was (what failed is unknown; counted as answers without a
    contradiction, they lowered it); a failed answer that shows one counts as one."""
    clean = [_report(f"r{i}", ls) for i, ls in enumerate(labels)]
    failed = [
        _report(f"e{i}", ls).model_copy(update={"verdict": "ERROR", "errors": ["judge: no verdict for c9"]})
        for i, ls in enumerate(failed_labels)
    ]
    run = list(clean)
    for f in failed:
        run.insert(data.draw(st.integers(0, len(run))), f)
    assert summarize(run).answers_contradicted_share == summarize(clean).answers_contradicted_share
    scores = failed[0].scores.model_copy(update={"n_contradicted": 1})
    shown = failed[0].model_copy(update={"claims": [*failed[0].claims, _claim(9, "CONTRADICTED")], "scores": scores})
    with_one = summarize([*clean, shown]).answers_contradicted_share
    before = summarize(clean).answers_contradicted_share
    assert before is not None and with_one is not None and with_one >= before
