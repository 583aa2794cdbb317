"""A judge verdict the second judge disagreed with teaches neither calibrate nor tune (``learn.labels.judge_usable``).

An earlier review found both commands learning the first judge's label on a claim the second judge gave another
verdict for, as if it were clean: a label two judges disagree on is noise to fit a checker's thresholds or weights
on, and the precision calibrate promises is measured on those labels. Now such a claim teaches only where a reviewer
decided it (the reviewer's label), and each command says how many it left out and why. A second judge that failed on
a claim (``judges_disagree`` None: nothing to compare) leaves the first judge's verdict as it was.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from groundjudge.checker.nli import NLIModel
from groundjudge.learn.labels import collect_labels, judge_left_out, judge_usable
from groundjudge.learn.tune import TuneSettings, load_examples
from groundjudge.models import AnswerReport, Claim, ClaimNLI, ClaimVerdict, Quote, Scores, SecondVerdict
from groundjudge.review.metrics import Review
from tests.conftest import write_jsonl

CONTEXT = "The Eiffel Tower is in Paris. It was completed in 1889."
QUOTE = Quote(text="The Eiffel Tower is in Paris", doc=0, start=0, end=28, verified=True)
NLI = ClaimNLI(entailment=0.9, contradiction=0.05, passages_scored=1, passages_total=1)


def _verdict(cid: str, text: str, second: str | None) -> ClaimVerdict:
    """A SUPPORTED claim the judge decided with a verified quote; the second judge's label ``second`` (None: it did
    not look; "ERROR": it failed, nothing to compare)."""
    return ClaimVerdict(
        claim=Claim(id=cid, text=text),
        label="SUPPORTED",
        route="judge",
        nli=NLI,
        quotes=[QUOTE],
        second_judge=None if second is None else SecondVerdict(label=second),  # type: ignore[arg-type]
        judges_disagree=None if second in (None, "ERROR") else second != "SUPPORTED",
    )


def _report() -> AnswerReport:
    claims = [
        _verdict("c1", "The Eiffel Tower is in Paris.", "CONTRADICTED"),  # the judges disagree
        _verdict("c2", "The tower is in Paris.", "SUPPORTED"),  # they agree
        _verdict("c3", "The Tower stands in Paris.", "ERROR"),  # the second judge failed: nothing to compare
        _verdict("c4", "Paris has the Eiffel Tower.", None),  # the second judge did not look
        _verdict("c5", "The Eiffel Tower is a Paris landmark.", "UNSUPPORTED"),  # disagree, but a reviewer decided
    ]
    return AnswerReport(id="a", verdict="PASS", mode="llm", claims=claims, contexts=[CONTEXT], scores=Scores())


def test_the_rule_leaves_out_a_verdict_the_second_judge_disagreed_with() -> None:
    by_id = {v.claim.id: v for v in _report().claims}
    assert [judge_usable(by_id[c]) for c in ("c1", "c2", "c3", "c4")] == [False, True, True, True]
    assert judge_left_out(by_id["c1"]) == "judges_disagree"
    # a problem of the first judge's own is said first: an unverified quote is that, whatever the second judge said
    bad = by_id["c1"].model_copy(update={"quotes": [QUOTE.model_copy(update={"verified": False})]})
    assert judge_left_out(bad) == "unverified"


def test_calibrate_teaches_no_label_the_judges_disagree_on_unless_a_reviewer_decided_it() -> None:
    report = _report()
    found = collect_labels([report], from_out=True, source="scored.jsonl")
    assert sorted(found.texts) == sorted(v.claim.text for v in report.claims if v.claim.id in ("c2", "c3", "c4"))
    assert found.taught == {"judge": 3}
    assert any("3 judge verdicts used as labels; left out: 2 disputed by the second judge" in n for n in found.notes)

    # a reviewer's decision wins: the claim the judges disagree on teaches the reviewer's label
    review = Review(id="a", claim_id="c5", claim=report.claims[4].claim.text, label="UNSUPPORTED")
    found = collect_labels([report], from_out=True, source="scored.jsonl", reviews=[review], reviews_name="r.jsonl")
    assert dict(zip(found.texts, found.labels, strict=True))[review.claim] == "UNSUPPORTED"
    assert found.taught == {"reviews": 1, "judge": 3}
    assert any("left out: 1 disputed by the second judge (no reviewer decided them)" in n for n in found.notes)


@pytest.fixture(scope="module")
def tokenizer(tiny_nli: Path) -> Any:
    return NLIModel(str(tiny_nli), device="cpu").tokenizer


def test_tune_trains_on_no_label_the_judges_disagree_on_unless_a_reviewer_decided_it(
    tmp_path: Path, tokenizer: Any
) -> None:
    report = _report()
    scored = write_jsonl(tmp_path / "scored.jsonl", [report.model_dump_json()])
    decision = {"id": "a", "claim_id": "c5", "claim": report.claims[4].claim.text, "label": "UNSUPPORTED"}
    reviews = write_jsonl(tmp_path / "reviews.jsonl", [decision])
    said: list[str] = []
    settings = TuneSettings(passage_tokens=32, passage_overlap=8)
    examples = {ex.id: ex for ex in load_examples([scored, reviews], tokenizer, settings, said.append)}
    assert {k: (ex.label, ex.source) for k, ex in examples.items()} == {
        "a/c2": ("SUPPORTED", "judge"),
        "a/c3": ("SUPPORTED", "judge"),
        "a/c4": ("SUPPORTED", "judge"),
        "a/c5": ("UNSUPPORTED", "review"),
    }
    assert "judge verdicts left out: 1 disputed by the second judge (no reviewer decided them)" in said


def test_tune_says_every_reason_a_judge_verdict_did_not_teach_as_calibrate_does(tmp_path: Path, tokenizer: Any) -> None:
    # tune said only the second judge's count: a run whose judge erred, or quoted what the sources do not hold,
    # taught less than asked and tune said nothing of why
    report = _report()
    claims = [
        report.claims[1],
        report.claims[0],  # the judges disagree
        report.claims[2].model_copy(update={"label": "ERROR", "error": "judge: timed out"}),
        report.claims[3].model_copy(update={"quotes": [QUOTE.model_copy(update={"verified": False})]}),
        report.claims[4].model_copy(update={"route": "nli", "second_judge": None, "judges_disagree": None}),
    ]
    scored = write_jsonl(tmp_path / "scored.jsonl", [report.model_copy(update={"claims": claims}).model_dump_json()])
    said: list[str] = []
    examples = load_examples([scored], tokenizer, TuneSettings(passage_tokens=32, passage_overlap=8), said.append)
    assert [ex.id for ex in examples] == ["a/c2"]
    left_out = collect_labels([AnswerReport.model_validate_json(scored.read_text())], from_out=True, source="s")
    assert len(left_out.texts) == 1
    reasons = (
        "1 decided locally (never judged), 1 judge errors, 1 with an unverified quote, "
        "1 disputed by the second judge (no reviewer decided them)"
    )
    assert said == [f"judge verdicts left out: {reasons}"]
    assert any(f"left out: {reasons}." in n for n in left_out.notes)  # the same words as calibrate's
