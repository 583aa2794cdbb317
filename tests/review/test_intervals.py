"""Issue 21, sections 1, 2 and 4: an interval on every figure of the run summary and of ``compare``, the corrected
unsupported rate in both, and the review queue ordered by what a decision is worth. The estimators themselves are
tested in tests/review/test_stats.py; here, that the summary, compare and the page call them and show what they give."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from groundjudge.cli import app
from groundjudge.io.reports import dumps
from groundjudge.models import AnswerReport, Claim, ClaimNLI, ClaimVerdict, Scores
from groundjudge.review.compare import compare_runs, corrected_rates
from groundjudge.review.html import (
    decision_rows,
    informative_key,
    informative_reasons,
    label_shares,
    local_thresholds,
    render_html,
    risk_key,
)
from groundjudge.review.metrics import label_metrics, parse_reviews, read_labels
from groundjudge.review.notebook import Run
from groundjudge.review.stats import bootstrap_mean, clustered_mean, wilson
from groundjudge.review.summary import summarize, summary_rows

THRESHOLDS = {"thresholds": "support>=0.9 contradict>=never unsupported<=0.1"}


def _answer(
    rid: str,
    labels: list[str],
    *,
    routes: list[str] | None = None,
    support: list[float] | None = None,
    combined: float | None = 0.7,
    gold: str | None = None,
    verdict: str = "WARN",
) -> AnswerReport:
    routes = routes or ["nli"] * len(labels)
    support = support or [0.5] * len(labels)
    claims = [
        ClaimVerdict(
            claim=Claim(id=f"c{i}", text=f"{rid} says thing {i}."),
            label=lab,  # type: ignore[arg-type]
            route=route,  # type: ignore[arg-type]
            nli=ClaimNLI(entailment=ent, contradiction=0.05, passages_scored=1, passages_total=1),
        )
        for i, (lab, route, ent) in enumerate(zip(labels, routes, support, strict=True))
    ]
    n_sup = labels.count("SUPPORTED")
    return AnswerReport(
        id=rid,
        verdict=verdict,  # type: ignore[arg-type]
        mode="cascade",
        label=gold,
        claims=claims,
        scores=Scores(
            combined=combined,
            claims=n_sup / len(labels) if labels else None,
            n_claims=len(labels),
            n_judged=len(labels),
            n_supported=n_sup,
            n_contradicted=labels.count("CONTRADICTED"),
            n_unsupported=labels.count("UNSUPPORTED"),
            n_escalated=routes.count("judge"),
        ),
        versions=THRESHOLDS,
    )


# -- 1. the run summary ----------------------------------------------------------------------------------------


def test_the_summary_carries_an_interval_beside_each_figure() -> None:
    # 10 answers of one claim: 4 CONTRADICTED, so 4 of 10 answers have a contradicted claim and one not supported.
    # Wilson for 4 of 10 (Newcombe's formula): [0.1682, 0.6873]
    reports = [
        _answer(
            f"a{i}", ["CONTRADICTED" if i < 4 else "SUPPORTED"], combined=0.1 * i, verdict="FAIL" if i < 4 else "PASS"
        )
        for i in range(10)
    ]
    s = summarize(reports)
    data = json.loads(s.model_dump_json())
    assert data["answers_contradicted_share"] == pytest.approx(0.4)
    assert data["answers_contradicted_share_ci"] == pytest.approx([0.1682, 0.6873], abs=5e-5)
    assert data["answers_not_supported_share_ci"] == pytest.approx([0.1682, 0.6873], abs=5e-5)
    # 7 of 10 combined scores below 0.8 (0.0 ... 0.7): Wilson [0.3968, 0.8922]
    assert data["answers_below_threshold_share"] == pytest.approx(0.8)
    assert data["answers_below_threshold_share_ci"] == wilson(8, 10).ci
    # a mean over answers: the bootstrap over answers, the same draws as stats.bootstrap_mean (same seed, same answers)
    assert data["mean_combined"] == pytest.approx(0.45)
    assert data["mean_combined_ci"] == pytest.approx(bootstrap_mean([0.1 * i for i in range(10)]).ci)
    lo, hi = data["mean_combined_ci"]
    assert lo < 0.45 < hi and hi - lo == pytest.approx(2 * 1.96 * math.sqrt(0.0825 / 10), abs=0.06)
    # a figure nothing estimates: no interval rather than a made-up one
    assert data["mean_qa_score"] is None and data["mean_qa_score_ci"] == [None, None]
    # the table shows each figure with its interval
    rows = dict(summary_rows(s))
    assert rows["answers with a contradicted claim"] == "40.0% [16.8, 68.7]"
    assert rows["mean combined score / p10"].startswith(f"0.450 [{lo:.3f}, {hi:.3f}] / ")
    # the notebook's Run shows the same table
    assert "40.0% [16.8, 68.7]" in Run(reports, s.usage, 0, 0)._repr_html_()


def test_the_escalation_rate_is_resampled_by_answer_when_answers_hold_several_claims() -> None:
    # one claim an answer: the claims are independent, Wilson (3 of 10)
    single = [_answer(f"s{i}", ["SUPPORTED"], routes=["judge" if i < 3 else "nli"]) for i in range(10)]
    assert summarize(single).escalation_rate_ci == wilson(3, 10).ci
    # several claims an answer: the clustered bootstrap over answers, the same as stats.clustered_mean
    routes = [["judge", "judge", "judge"], ["nli"], ["judge", "nli"], ["nli", "nli", "nli", "nli"], ["judge"]] * 3
    reports = [_answer(f"m{i}", ["SUPPORTED"] * len(r), routes=r) for i, r in enumerate(routes)]
    s = summarize(reports)
    groups = [[1.0 if x == "judge" else 0.0 for x in r] for r in routes]
    assert s.escalation_rate == pytest.approx(15 / 33)
    assert s.escalation_rate_ci == pytest.approx(clustered_mean(groups).ci)
    assert s.escalation_rate_ci != pytest.approx(wilson(15, 33).ci)


def _gold_run(pos_flagged: int, pos: int, neg_clean: int, neg: int, unlabelled: int = 0) -> list[AnswerReport]:
    """Claim rows: ``pos`` truly unsupported (gold UNSUPPORTED), ``pos_flagged`` of them flagged; ``neg`` truly
    supported, ``neg_clean`` of them left SUPPORTED; then ``unlabelled`` SUPPORTED rows without a label."""
    rows = [
        _answer(f"p{i}", ["UNSUPPORTED" if i < pos_flagged else "SUPPORTED"], gold="UNSUPPORTED") for i in range(pos)
    ]
    rows += [_answer(f"n{i}", ["SUPPORTED" if i < neg_clean else "UNSUPPORTED"], gold="SUPPORTED") for i in range(neg)]
    rows += [_answer(f"u{i}", ["SUPPORTED"]) for i in range(unlabelled)]
    return rows


def test_the_summary_gives_the_corrected_rate_with_gold_rows_as_metrics_does() -> None:
    # sensitivity 20/25 = 0.8, specificity 45/50 = 0.9, raw (20 + 5) / 100 = 0.25 (25 unlabelled SUPPORTED rows):
    # (0.25 - 0.1) / (0.8 - 0.1) = 0.214286
    reports = _gold_run(20, 25, 45, 50, unlabelled=25)
    c = summarize(reports).corrected_unsupported_rate
    assert c is not None
    assert c["raw"] == pytest.approx(0.25) and c["raw_ci"] == wilson(25, 100).ci
    assert c["value"] == pytest.approx(0.15 / 0.7) and c["ci"][0] < c["value"] < c["ci"][1]
    assert c["labels"] == {"level": "claim", "positives": 25, "negatives": 50}
    assert c == label_metrics(reports)["corrected_unsupported_rate"]  # one path: the same as `metrics`
    rows = dict(summary_rows(summarize(reports)))
    assert rows["unsupported claims (raw)"].startswith("25.0% [")
    assert rows["unsupported claims, corrected for the checker's error"].startswith(f"{100 * c['value']:.1f}% [")
    # too few labels: no number, and how many more of each class
    few = summarize(_gold_run(8, 10, 27, 30)).corrected_unsupported_rate
    assert few is not None and few["value"] is None and few["needs"] == {"positives": 10, "negatives": 0}
    shown = dict(summary_rows(summarize(_gold_run(8, 10, 27, 30))))
    assert (
        "needs 10 more labelled claims that are not supported (has 10)"
        in shown["unsupported claims, corrected for the checker's error"]
    )
    # no labels: nothing about it
    assert summarize(_gold_run(0, 0, 0, 0, unlabelled=5)).corrected_unsupported_rate is None


# -- 1 and 2. compare ------------------------------------------------------------------------------------------


def _scored(rid: str, combined: float) -> AnswerReport:
    return _answer(rid, ["SUPPORTED"], combined=combined, verdict="PASS")


def test_compare_gives_the_minimum_detectable_difference_and_the_answers_needed() -> None:
    # stats' worked example: 20 paired differences, ten 1s and ten 0s (combined 0 in A; 1 or 0 in B):
    # MDD = 2.801585 * 0.512989 / sqrt(20) = 0.321364. The difference (0.5) is significant: no answers_needed
    a = [_scored(f"x{i}", 0.0) for i in range(20)]
    b = [_scored(f"x{i}", 1.0 if i < 10 else 0.0) for i in range(20)]
    m = compare_runs(a, b)["metrics"]["combined"]
    assert m["min_detectable_diff"] == pytest.approx(0.321364, abs=1e-6)
    assert m["significant"] and m["answers_needed"] is None
    assert m["mean_a_ci"] == [0.0, 0.0] and m["mean_b_ci"] == bootstrap_mean([1.0] * 10 + [0.0] * 10).ci
    # not significant: eleven +0.1 and nine -0.1 (mean 0.01, sd 0.102598): ceil((2.801585 * 0.102598 / 0.01)^2)
    # = ceil(826.2) = 827 answers to detect it
    b = [_scored(f"x{i}", 0.5 + (0.1 if i < 11 else -0.1)) for i in range(20)]
    a = [_scored(f"x{i}", 0.5) for i in range(20)]
    m = compare_runs(a, b)["metrics"]["combined"]
    assert not m["significant"] and m["diff"] == pytest.approx(0.01)
    sd = math.sqrt((11 * 0.09**2 + 9 * 0.11**2) / 19)
    assert m["answers_needed"] == math.ceil((2.801585 * sd / 0.01) ** 2)
    assert m["min_detectable_diff"] == pytest.approx(2.801585 * sd / math.sqrt(20), abs=1e-6)


def test_compare_with_a_label_file_prints_the_corrected_rate_paired(tmp_path: Path) -> None:
    # A: the gold run above (sensitivity 0.8, specificity 0.9). B: the same answers, 5 more true positives flagged
    # (sensitivity 1.0). The label file carries the gold labels; the scored rows carry none.
    a = [r.model_copy(update={"label": None}) for r in _gold_run(20, 25, 45, 50)]
    b = [r.model_copy(update={"label": None}) for r in _gold_run(25, 25, 45, 50)]
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({"id": r.id, "label": r.label}) + "\n" for r in _gold_run(20, 25, 45, 50)))
    pa, pb = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    pa.write_text("".join(dumps(r) + "\n" for r in a))
    pb.write_text("".join(dumps(r) + "\n" for r in b))
    result = CliRunner().invoke(app, ["compare", str(pa), str(pb), "--labels", str(labels), "--json"])
    assert result.exit_code == 0, result.output
    c = json.loads(result.stdout)["corrected_unsupported_rate"]
    assert c["paired"] and c["level"] == "claim" and c["labelled_answers"] == [75, 75]
    # A: raw 25/75, (1/3 - 0.1) / 0.7 = 1/3; B: raw 30/75 = 0.4, sensitivity 1: (0.4 - 0.1) / 0.9 = 1/3
    assert c["a"]["value"] == pytest.approx((25 / 75 - 0.1) / 0.7) and c["b"]["value"] == pytest.approx(1 / 3)
    assert c["raw_diff"] == pytest.approx(5 / 75) and c["diff"] == pytest.approx(0.0, abs=1e-12)
    # every answer labelled: each resample corrects both runs to that resample's own true rate, so the corrected
    # difference is 0 in every draw, while the raw difference (B flags 5 more) stays above 0
    assert c["diff_ci"] == pytest.approx([0.0, 0.0], abs=1e-12)
    assert 0 < c["raw_diff_ci"][0] < 5 / 75 < c["raw_diff_ci"][1]
    table = CliRunner().invoke(app, ["compare", str(pa), str(pb), "--labels", str(labels)])
    said = " ".join(table.output.split())
    assert "corrected for the checker's error: 33.3%" in said and "paired: the same labelled answers" in said
    assert "corrected rate B - A: +0.0 points [+0.0, +0.0] (paired" in said
    lo, hi = (f"{100 * x:+.1f}" for x in c["raw_diff_ci"])
    assert f"raw rate B - A: +6.7 points [{lo}, {hi}]" in said
    assert "detectable" in said


def test_compare_with_few_labels_says_how_many_more(tmp_path: Path) -> None:
    runs = _gold_run(4, 5, 9, 10), _gold_run(5, 5, 9, 10)
    c = corrected_rates(*runs)  # the gold labels the rows carry
    assert c is not None and c["a"]["value"] is None and c["a"]["needs"] == {"positives": 15, "negatives": 10}
    assert c["diff"] is None and c["diff_ci"] == [None, None] and c["raw_diff"] == pytest.approx(1 / 15)
    assert c["raw_diff_ci"][0] < 1 / 15 < c["raw_diff_ci"][1]
    paths = []
    for name, run in zip("ab", runs, strict=True):
        paths.append(tmp_path / f"{name}.jsonl")
        paths[-1].write_text("".join(dumps(r) + "\n" for r in run))
    result = CliRunner().invoke(app, ["compare", *map(str, paths)])
    assert result.exit_code == 0, result.output
    assert "needs 15 more labelled claims that are not supported (has 5)" in " ".join(result.output.split())
    # reviews as labels: a decision on a claim B does not have (another text) does not count for B
    review = {"id": "p0", "claim_id": "c0", "claim": "p0 says thing 0.", "label": "UNSUPPORTED"}
    reviews = parse_reviews([json.dumps(review)])
    c = corrected_rates(runs[0], runs[1], reviews=reviews)
    assert c is not None and c["level"] == "claim" and c["a"]["labels"]["positives"] == 5


def test_compare_refuses_labels_and_reviews_that_fall_on_neither_run(tmp_path: Path) -> None:
    # compare --labels / --reviews of another dataset or run (no id, claim id and text in common with the runs)
    # printed the comparison without the corrected rate and without a word why, exit 0; metrics refuses the same
    a = [r.model_copy(update={"label": None}) for r in _gold_run(20, 25, 45, 50)]
    pa = tmp_path / "a.jsonl"
    pa.write_text("".join(dumps(r) + "\n" for r in a))
    labels, reviews = tmp_path / "labels.jsonl", tmp_path / "reviews.jsonl"
    labels.write_text(json.dumps({"id": "other-0", "label": "SUPPORTED"}) + "\n")
    stale = {"id": "p0", "claim_id": "c0", "claim": "another run's claim.", "label": "UNSUPPORTED"}
    reviews.write_text(json.dumps(stale) + "\n")
    for option, path, said in (("--labels", labels, "none of its 1 labels"), ("--reviews", reviews, "none of its 1")):
        result = CliRunner().invoke(app, ["compare", str(pa), str(pa), option, str(path)])
        assert result.exit_code == 2 and said in " ".join(result.output.split()), result.output
    # some that fall on the runs: the corrected rate, and how many fell nowhere
    labels.write_text("".join(json.dumps({"id": r.id, "label": r.label}) + "\n" for r in _gold_run(20, 25, 45, 50)))
    with labels.open("a") as fh:
        fh.write(json.dumps({"id": "other-0", "label": "SUPPORTED"}) + "\n")
    result = CliRunner().invoke(app, ["compare", str(pa), str(pa), "--labels", str(labels), "--json"])
    assert result.exit_code == 0, result.output
    assert "corrected_unsupported_rate" in json.loads(result.stdout)
    assert "1 of the 76 labels in" in " ".join(result.stderr.split())


def test_a_label_file_with_a_bad_row_names_it(tmp_path: Path) -> None:
    bad = tmp_path / "labels.jsonl"
    bad.write_text('{"id": "a", "label": "SUPPORTED"}\n{"id": "b", "label": "maybe"}\n')
    with pytest.raises(Exception, match="row 2, field 'label'"):
        read_labels(bad)
    runs = tmp_path / "a.jsonl"
    runs.write_text(dumps(_scored("a", 0.5)) + "\n")
    result = CliRunner().invoke(app, ["compare", str(runs), str(runs), "--labels", str(bad)])
    assert result.exit_code == 2 and "row 2" in result.output


# -- 4. the queue by what a decision is worth --------------------------------------------------------------------


def _queue() -> list[AnswerReport]:
    return [
        # riskiest: a FAIL with a contradicted claim, where the NLI and the judge agree (support 0.1, CONTRADICTED)
        _answer("risky", ["CONTRADICTED"], routes=["judge"], support=[0.1], combined=0.1, verdict="FAIL"),
        # decided locally, far from every threshold (0.5: 0.4 from 0.9 and from 0.1)
        _answer("plain", ["SUPPORTED"], support=[0.5], combined=0.8),
        # decided locally at 0.92, 0.02 above the support threshold
        _answer("near", ["SUPPORTED"], support=[0.92], combined=0.9, verdict="PASS"),
        # the NLI finds it well supported (0.85) and the judge says UNSUPPORTED: a disagreement
        _answer("disagree", ["UNSUPPORTED", "SUPPORTED"], routes=["judge", "nli"], support=[0.85, 0.95], combined=0.6),
    ]


def test_the_informative_order_puts_a_disagreement_first() -> None:
    reports = _queue()
    assert local_thresholds(reports[0].versions) == {"support": 0.9, "unsupported": 0.1}
    assert sorted(reports, key=risk_key)[0].id == "risky"
    shares = label_shares(reports)
    order = [r.id for r in sorted(reports, key=lambda r: informative_key(r, shares))]
    # the disagreement; then the claim decided nearest a threshold (0.02 from 0.9 in "near", 0.05 in "disagree"
    # is behind its disagreement); then "plain" (0.4 from one) and "risky" (judged: no local decision) last
    assert order == ["disagree", "near", "plain", "risky"]
    assert informative_reasons(reports[3], shares)[0] == "1 NLI / judge disagreement"
    assert "decided locally 0.02 from a threshold" in informative_reasons(reports[2], shares)
    # a claim judged SUPPORTED whose NLI support is low is a disagreement too
    other = _answer("other", ["SUPPORTED"], routes=["judge"], support=[0.2], combined=0.9, verdict="PASS")
    # (a tie on disagreements: the answer with a local decision nearer a threshold, 0.05 from 0.9, comes first)
    assert [r.id for r in sorted([*reports, other], key=lambda r: informative_key(r, shares))][:2] == [
        "disagree",
        "other",
    ]


def _page_data(page: str) -> dict[str, Any]:
    blob = page.split("<script type='application/json' id='gj-data'>", 1)[1].split("</script>", 1)[0]
    return json.loads(blob)  # type: ignore[no-any-return]


def _header(page: str) -> dict[str, str]:
    from html.parser import HTMLParser

    rows: dict[str, str] = {}

    class Summary(HTMLParser):
        inside, name, text = 0, "", ""

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if ("id", "summary") in attrs:
                self.inside = 1
            elif self.inside and tag == "div":
                self.name, self.text = "", ""

        def handle_data(self, data: str) -> None:
            if self.inside:
                self.text += data

        def handle_endtag(self, tag: str) -> None:
            if self.inside and tag == "div":
                if ":" in self.text:
                    name, value = self.text.split(":", 1)
                    rows[name.strip()] = value.strip()
                    self.text = ""
                else:
                    self.inside = 0

    Summary().feed(page)
    return rows


def test_the_page_orders_by_information_and_says_what_the_decisions_are_worth(tmp_path: Path) -> None:
    reports = _queue()
    page = render_html(reports, order="informative")
    data = _page_data(page)
    assert data["order"] == "informative" and data["reports"][0]["id"] == "disagree"
    assert data["risk"][0][0] == "1 NLI / judge disagreement"
    head = _header(page)
    # the summary with its intervals, and the decisions the corrected rate needs: 20 of each class, none yet
    assert head["answers with a claim not supported"] == "50.0% [15.0, 85.0] of 4"
    assert head["decisions the corrected unsupported rate still needs"] == (
        "at least 40 (20 on claims that are not supported, 20 on supported ones)"
    )
    assert render_html(reports).count("decisions the corrected unsupported rate still needs") == 1
    # a previous export of decisions: 2 claims decided, one of each class; they count, and the page says so
    reviews = parse_reviews(
        [
            json.dumps({"id": "disagree", "claim_id": "c0", "claim": "disagree says thing 0.", "label": "SUPPORTED"}),
            json.dumps({"id": "risky", "claim_id": "c0", "claim": "risky says thing 0.", "label": "CONTRADICTED"}),
        ]
    )
    rows = dict(decision_rows(reports, reviews))
    assert rows["decisions the corrected unsupported rate still needs"] == (
        "at least 38 (19 on claims that are not supported, 19 on supported ones)"
    )
    assert rows["moved by 2 previous decisions (0 match no claim here)"] == (
        "corrected rate no number -> no number; labels 0 + 0 -> 1 + 1 (not supported + supported)"
    )
    # with enough labels the corrected rate moves, and the page gives both
    gold = _gold_run(20, 25, 45, 50)
    flip = [
        json.dumps({"id": f"n{i}", "claim_id": "c0", "claim": f"n{i} says thing 0.", "label": "UNSUPPORTED"})
        for i in range(45, 50)
    ]  # five false alarms were right after all (the decisions replace their gold labels)
    # before: raw 25/75, sensitivity 0.8, specificity 0.9: (1/3 - 0.1) / 0.7 = 33.3%; after: sensitivity 25/30,
    # specificity 45/45: (1/3 - 0) / (25/30) = 40.0%
    moved = dict(decision_rows(gold, parse_reviews(flip)))["moved by 5 previous decisions (0 match no claim here)"]
    assert moved.startswith("corrected rate 33.3% [") and "-> 40.0% [" in moved
    assert moved.endswith("labels 25 + 50 -> 30 + 45 (not supported + supported)")
    # the command: --order and --reviews passed through; a bad order is a usage error
    out = tmp_path / "out.jsonl"
    out.write_text("".join(dumps(r) + "\n" for r in reports))
    export = tmp_path / "reviews.jsonl"
    export.write_text("\n".join(flip[:1]) + "\n")
    html = tmp_path / "page.html"
    result = CliRunner().invoke(
        app, ["report", str(out), "--html", str(html), "--order", "informative", "--reviews", str(export)]
    )
    assert result.exit_code == 0, result.output
    assert _page_data(html.read_text(encoding="utf-8"))["reports"][0]["id"] == "disagree"
    bad = CliRunner().invoke(app, ["report", str(out), "--html", str(html), "--order", "newest"])
    assert bad.exit_code == 2 and "--order must be one of risk, informative" in bad.output


_LABELS = ["SUPPORTED", "UNSUPPORTED", "CONTRADICTED", "ERROR"]
_claims = st.lists(
    st.tuples(st.sampled_from(_LABELS), st.sampled_from(["nli", "judge"]), st.floats(0, 1)), min_size=0, max_size=4
)
_runs = st.lists(
    st.tuples(_claims, st.one_of(st.none(), st.floats(0, 1)), st.sampled_from([None, "SUPPORTED", "UNSUPPORTED"])),
    max_size=12,
)


def _build(run: list[Any]) -> list[AnswerReport]:
    return [
        _answer(
            f"r{i}",
            [c[0] for c in claims],
            routes=[c[1] for c in claims],
            support=[c[2] for c in claims],
            combined=combined,
            gold=gold,
            verdict="NO_CLAIMS" if not claims else "WARN",
        )
        for i, (claims, combined, gold) in enumerate(run)
    ]


@settings(max_examples=30, deadline=None, database=None)
@given(run=_runs)
def test_every_summary_figure_lies_in_its_interval(run: list[Any]) -> None:
    data = summarize(_build(run)).model_dump(mode="json")
    keys = [k[: -len("_ci")] for k in data if k.endswith("_ci")]
    assert len(keys) == 13  # every share and mean of the summary, citation precision and recall included
    for key in keys:
        value, (lo, hi) = data[key], data[f"{key}_ci"]
        if value is None:
            assert (lo, hi) in ((None, None), (0.0, 1.0)), key
        else:
            assert 0.0 <= lo <= value + 1e-12 and value - 1e-12 <= hi <= 1.0, key
    c = data["corrected_unsupported_rate"]
    # a claim row's gold label needs a claim to fall on: no such row, no corrected rate
    assert (c is None) == all(gold is None or not claims for claims, _, gold in run)
    if c is not None and c["value"] is not None:
        assert c["ci"][0] <= c["value"] <= c["ci"][1]


@settings(max_examples=30, deadline=None, database=None)
@given(run=_runs)
def test_the_informative_order_puts_every_disagreement_before_the_rest(run: list[Any]) -> None:
    reports = _build(run)
    shares = label_shares(reports)
    ordered = sorted(reports, key=lambda r: informative_key(r, shares))
    flags = [any(c.nli_disagrees for c in r.claims) for r in ordered]
    assert flags == sorted(flags, reverse=True)  # every answer with a disagreement first
    assert sorted(r.id for r in ordered) == sorted(r.id for r in reports)


def test_the_compare_page_shows_what_the_runs_could_detect_and_the_corrected_rates() -> None:
    from groundjudge.review.html import render_compare_html

    a, b = _gold_run(20, 25, 45, 50), _gold_run(25, 25, 45, 50)
    result = compare_runs(a, b)
    result["corrected_unsupported_rate"] = corrected_rates(a, b)
    page = render_compare_html(a, b, result)
    table = page.split("id='metrics-table'>", 1)[1].split("</table>", 1)[0]
    claims = result["metrics"]["claims"]
    assert "detectable at 80% power" in table
    assert f"<td class='num'>{claims['min_detectable_diff']:.3f}</td>" in table
    assert f"[{claims['mean_a_ci'][0]:.3f}, {claims['mean_a_ci'][1]:.3f}]" in table
    assert "unsupported claims, corrected for the checker&#x27;s error" in page.split("id='corrected'>", 1)[1]
    c = result["corrected_unsupported_rate"]
    lo, hi = c["diff_ci"]
    diff = page.split("id='corrected-diff'>", 1)[1].split("</p>", 1)[0]
    assert f"corrected {c['diff']:+.3f} <small>95% CI [{lo:+.3f}, {hi:+.3f}]</small>" in diff
    assert lo <= c["diff"] <= hi and "raw +0.067 <small>95% CI [" in diff
