"""diagnose: retrieval or generation to blame? Context precision, context recall from a reference, the cause."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from groundjudge.cli import app
from groundjudge.diagnose import diagnose, diagnosis_lines
from groundjudge.models import AnswerReport, Claim, ClaimNLI, ClaimVerdict, Passage, Scores
from groundjudge.testing import ScriptedLLMServer, route
from tests.conftest import SHARED_MODEL, make_nli_evaluator
from tests.pipeline.test_pipeline import BAD_ANSWER, CONTEXT, GOOD_ANSWER, HANDLERS, evaluator

runner = CliRunner()

OFF_TOPIC = [
    "Bananas are rich in potassium and grow in tropical climates.",
    "The stock market closed higher on Friday after strong earnings reports.",
]
INVENTED = "The Eiffel Tower has a restaurant run by a famous chef on its second floor."
REFERENCE = "The Eiffel Tower is in Paris. It was completed in 1889."


def test_a_contradicted_claim_blames_generation_with_the_quote(shared_nli: Any, tmp_path: Path) -> None:
    with ScriptedLLMServer(route(HANDLERS)) as server:
        report = evaluator(server, shared_nli, tmp_path, qa=False).evaluate(BAD_ANSWER, [CONTEXT, *OFF_TOPIC])
    d = diagnose(report)
    assert d.failed and d.cause == "context_ignored" and d.blame == "generation"
    assert "strengthen the grounding prompt" in d.advice.lower()
    # both claims quote source 1; the two off-topic contexts bear on nothing
    assert d.relevant_contexts == [0] and d.n_contexts == 3 and d.context_precision == 1 / 3
    (bad,) = d.claims
    assert bad.label == "CONTRADICTED" and bad.text == "The Eiffel Tower was completed in 1899."
    assert bad.passage == "completed in 1889" and bad.doc == 0 and bad.reason == "The source says 1889."
    text = "\n".join(diagnosis_lines(d))
    assert "generation is to blame" in text and "closest (source 1): completed in 1889" in text
    assert "  why: FAIL: 1 of 2 claims contradicted (0.50 > 0.10)" in text.splitlines()


def test_irrelevant_chunks_blame_retrieval(shared_nli: Any, tmp_path: Path) -> None:
    report = make_nli_evaluator(shared_nli, tmp_path).evaluate(INVENTED, OFF_TOPIC)
    d = diagnose(report)
    assert report.verdict == "FAIL" and d.cause == "irrelevant_context" and d.blame == "retrieval"
    assert d.context_precision == 0.0 and d.context_recall is None
    assert "filled the gaps from memory" in d.advice and d.claims[0].label == "UNSUPPORTED"
    assert d.claims[0].passage is not None  # the closest NLI passage, even though it does not bear


def test_a_reference_measures_recall_missing_context_vs_context_ignored(shared_nli: Any, tmp_path: Path) -> None:
    ev = make_nli_evaluator(shared_nli, tmp_path)
    # the contexts hold nothing of the reference: key context missing
    missing = ev.evaluate(INVENTED, OFF_TOPIC)
    d = diagnose(missing, ev, reference=REFERENCE)
    assert d.context_recall == 0.0 and d.cause == "missing_context" and d.blame == "retrieval"
    assert [c.label for c in d.reference_claims] == ["UNSUPPORTED", "UNSUPPORTED"]
    assert "reference not supported by the contexts" in "\n".join(diagnosis_lines(d))
    # the contexts support the reference, the answer says something else: good context ignored
    ignored = ev.evaluate(INVENTED, [CONTEXT])
    ignored.metadata["reference"] = REFERENCE  # as io.py keeps a row's reference
    d = diagnose(ignored, ev)
    assert d.context_recall == 1.0 and d.cause == "context_ignored" and d.blame == "generation"
    # an evaluator with an LLM measures recall with its NLI model alone: no LLM call
    with ScriptedLLMServer(route(HANDLERS)) as server:
        cascade = evaluator(server, shared_nli, tmp_path / "c", qa=False)
        assert diagnose(ignored, cascade).context_recall == 1.0
        assert not server.requests


def test_a_passing_answer_has_nothing_to_blame(shared_nli: Any, tmp_path: Path) -> None:
    d = diagnose(make_nli_evaluator(shared_nli, tmp_path).evaluate(GOOD_ANSWER, [CONTEXT, OFF_TOPIC[0]]))
    assert not d.failed and d.cause == "none" and d.blame is None and d.claims == []
    assert d.context_precision == 0.5


def test_precision_counts_only_passages_that_bear() -> None:
    def verdict(ent: float, doc: int) -> ClaimVerdict:
        p = Passage(doc=doc, start=0, end=1, text="x")
        nli = ClaimNLI(entailment=ent, entailment_passage=p, passages_scored=1)
        return ClaimVerdict(claim=Claim(id="c", text="t"), label="UNSUPPORTED", route="nli", nli=nli)

    report = AnswerReport(
        id="r",
        verdict="FAIL",
        mode="nli",
        scores=Scores(),
        contexts=["a", "b", "c", "d"],
        claims=[verdict(0.9, 1), verdict(0.1, 2), verdict(0.6, 1)],
    )
    d = diagnose(report)
    assert d.relevant_contexts == [1] and d.context_precision == 0.25 and d.cause == "irrelevant_context"


def test_diagnose_command(shared_nli: Any, tmp_path: Path) -> None:
    data = tmp_path / "in.jsonl"
    rows = [
        {"id": "good", "answer": GOOD_ANSWER, "contexts": [CONTEXT]},
        {"id": "memory", "answer": INVENTED, "contexts": OFF_TOPIC},
        {"id": "ignored", "answer": INVENTED, "contexts": [CONTEXT], "reference": REFERENCE},
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.jsonl"
    common = ["--nli-model", str(SHARED_MODEL), "--cache-dir", str(tmp_path / "c")]
    scored = runner.invoke(app, ["score", str(data), "--out", str(out), "--no-progress", *common])
    assert scored.exit_code == 0, scored.output
    result = runner.invoke(app, ["diagnose", str(out), "--json", *common])
    assert result.exit_code == 0, result.output
    found = {d["id"]: d for d in map(json.loads, result.output.splitlines())}
    assert set(found) == {"memory", "ignored"}  # only failed answers
    assert found["memory"]["cause"] == "irrelevant_context"
    assert found["ignored"]["cause"] == "context_ignored" and found["ignored"]["context_recall"] == 1.0
    one = runner.invoke(app, ["diagnose", str(out), "--id", "ignored", *common], terminal_width=200)
    assert one.exit_code == 0 and "ignored: FAIL; cause: context_ignored (generation is to blame)" in one.output
    none = runner.invoke(app, ["diagnose", str(out), "--id", "nope"])
    assert none.exit_code == 2 and "no answer with id 'nope'" in none.output


def test_a_reference_sentence_that_could_not_be_checked_counts_against_recall(shared_nli: Any, tmp_path: Path) -> None:
    ev = make_nli_evaluator(shared_nli, tmp_path)
    too_long = "The Eiffel Tower " + "is very tall and " * 300 + "stands in Paris."  # past the NLI window: ERROR
    report = ev.evaluate(INVENTED, [CONTEXT])
    d = diagnose(report, ev, reference=REFERENCE + " " + too_long)
    labels = [c.label for c in d.reference_claims]
    assert "ERROR" in labels and labels.count("SUPPORTED") == 2
    assert d.context_recall == 2 / 3  # not 1.0: recall is not known to be complete


def test_an_error_report_is_not_scored_not_blamed_on_retrieval_or_generation(tmp_path: Path) -> None:
    # the run failed on the answer (a judge outage): no cause from its claims; the errors and --retry-errors are said,
    # also where a claim it did score was contradicted (the report's numbers cannot be trusted)
    contradicted = ClaimVerdict(
        claim=Claim(id="c0", text="The tower is in Rome.", answer_span=(0, 21)),
        label="CONTRADICTED",
        route="nli",
        nli=ClaimNLI(entailment=0.0, contradiction=0.99, neutral=0.01),
    )
    failed = AnswerReport(
        id="e1", verdict="ERROR", mode="cascade", scores=Scores(), errors=["judge: HTTP 500"], claims=[contradicted]
    )
    d = diagnose(failed)
    assert d.failed and d.cause == "not_scored" and d.blame is None
    assert "judge: HTTP 500" in d.explanation and "--retry-errors" in d.advice
    out = tmp_path / "out.jsonl"
    out.write_text(failed.model_dump_json() + "\n", encoding="utf-8")
    result = runner.invoke(app, ["diagnose", str(out)], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "e1: ERROR; cause: not_scored" in result.output and "judge: HTTP 500" in result.output
    assert "to blame)" not in result.output


def test_a_no_claims_report_is_nothing_to_check_not_unclear() -> None:
    # an answer with no claim (empty, a refusal) was diagnosed "unclear: neither retrieval nor generation...", which
    # sends a reader looking for a cause in claims and passages that are not there
    empty = AnswerReport(id="n1", verdict="NO_CLAIMS", mode="nli", scores=Scores())
    d = diagnose(empty)
    assert d.cause == "no_claims" and d.blame is None and "states no claim" in d.advice
