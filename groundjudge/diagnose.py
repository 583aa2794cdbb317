"""Why an answer failed: retrieval (the contexts) or generation (the answer)?

:func:`diagnose` reads one report and measures

- context precision: the share of the given contexts that bear on any claim of the answer, from the evidence the
  pipeline already selected (a claim's best entailment or contradiction passage when its score reaches
  ``evidence_floor``, and the documents of the judge's verified quotes);
- context recall, when the row carried a reference answer (input field ``reference``, kept as
  ``metadata["reference"]``): the share of the reference's sentences the contexts support, by the evaluator's NLI
  model in nli mode;

then names the cause, with the claims and passages behind the call:

========================  ==========  ============================================================================
cause                     blame       when
========================  ==========  ============================================================================
``context_ignored``       generation  a claim is contradicted by the contexts, or the contexts support the reference
                                      (recall >= ``recall_floor``) and the answer still says what they do not
``irrelevant_context``    retrieval   most contexts bear on no claim (precision < ``precision_floor``): the model
                                      filled the gaps from memory
``missing_context``       retrieval   the contexts do not support the reference (recall < ``recall_floor``)
``not_scored``            -           the answer's report is ERROR: the run failed on it, so its claims and scores
                                      say too little to blame either (score it again with ``--retry-errors``)
``no_claims``             -           the answer's report is NO_CLAIMS: it states nothing to check (empty, a
                                      refusal, a question back), so neither retrieval nor generation is blamed
``unclear``               -           none of these
``none``                  -           the answer did not fail
========================  ==========  ============================================================================
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from groundjudge.models import AnswerReport, ClaimVerdict

if TYPE_CHECKING:
    from groundjudge.pipeline.evaluator import Evaluator

Cause = Literal[
    "none", "not_scored", "no_claims", "context_ignored", "irrelevant_context", "missing_context", "unclear"
]

ADVICE: dict[str, str] = {
    "none": "Nothing to fix: the answer passed.",
    "context_ignored": "Good context ignored: the contexts hold what was needed, the answer did not keep to them. "
    "Strengthen the grounding prompt (see prompts/grounded_answer.md) or regenerate with the flagged claims named.",
    "irrelevant_context": "Irrelevant chunks retrieved: most contexts bear on no claim, so the model filled the gaps "
    "from memory. Improve retrieval (query, reranking, filtering) or let the model say it does not know.",
    "missing_context": "Key context missing: the contexts do not support the reference answer. Retrieve more or "
    "better documents (recall, chunking, top-k).",
    "not_scored": "Not scored: the run failed on this answer (the errors above say where), so nothing here blames "
    "retrieval or generation. Score it again: groundjudge score INPUT --out OUT --resume --retry-errors.",
    "no_claims": "Nothing to check: the answer states no claim (an empty answer, a refusal, a question back). If it "
    "should have, read the answer itself; a claim the claims step missed is seen by scoring it with --llm.",
    "unclear": "Unclear: neither retrieval nor generation is clearly to blame; read the claims and passages below.",
}


class ClaimEvidence(BaseModel):
    """A claim behind the call: its verdict and the closest source text."""

    text: str
    label: str
    route: str
    reason: str = ""
    entailment: float | None = None
    contradiction: float | None = None
    doc: int | None = None
    passage: str | None = Field(None, description="the closest source text: a verified quote, else the NLI passage")


class Diagnosis(BaseModel):
    """Whether retrieval or generation is to blame for an answer, and what the call rests on."""

    id: str
    verdict: str
    verdict_reasons: list[str] = Field(default_factory=list, description="the rules that made the verdict")
    failed: bool
    cause: Cause
    blame: Literal["retrieval", "generation"] | None = None
    advice: str
    context_precision: float | None = None
    relevant_contexts: list[int] = Field(default_factory=list, description="indexes of the contexts that bear")
    n_contexts: int = 0
    context_recall: float | None = None
    reference_claims: list[ClaimEvidence] = Field(default_factory=list)
    claims: list[ClaimEvidence] = Field(default_factory=list, description="the answer's claims that failed")
    explanation: str = ""


def closest_source(c: ClaimVerdict) -> tuple[int | None, str | None]:
    """(doc, text) of the source text closest to a claim: its first verified quote, else its best NLI passage
    (the contradiction passage for a contradicted claim)."""
    for q in c.quotes:
        if q.verified:
            return q.doc, q.text
    if c.nli is not None:
        first = c.nli.contradiction_passage if c.label == "CONTRADICTED" else c.nli.entailment_passage
        second = c.nli.entailment_passage if c.label == "CONTRADICTED" else c.nli.contradiction_passage
        passage = first or second
        if passage is not None:
            return passage.doc, passage.text
    if c.quotes:
        return c.quotes[0].doc, c.quotes[0].text
    return None, None


def evidence_of(c: ClaimVerdict) -> ClaimEvidence:
    """A claim verdict as :class:`ClaimEvidence`."""
    doc, text = closest_source(c)
    return ClaimEvidence(
        text=c.claim.text,
        label=c.label,
        route=c.route,
        reason=c.reason,
        entailment=c.nli.entailment if c.nli else None,
        contradiction=c.nli.contradiction if c.nli else None,
        doc=doc,
        passage=text,
    )


def relevant_contexts(report: AnswerReport, evidence_floor: float = 0.5) -> set[int]:
    """Indexes of the contexts that bear on some claim: a claim's best entailment passage scoring at least
    ``evidence_floor``, the contradiction passage of a claim the NLI stage found CONTRADICTED (a contradiction
    score alone is not trusted: a small model's contradiction head may be at chance), or a verified judge quote."""
    docs: set[int] = set()
    for c in report.claims:
        if c.nli is not None:
            if c.nli.entailment_passage is not None and c.nli.entailment >= evidence_floor:
                docs.add(c.nli.entailment_passage.doc)
            if c.label == "CONTRADICTED" and c.route == "nli" and c.nli.contradiction_passage is not None:
                docs.add(c.nli.contradiction_passage.doc)
        docs.update(q.doc for q in c.quotes if q.verified and q.doc is not None)
    return {d for d in docs if 0 <= d < len(report.contexts)}


def reference_of(report: AnswerReport) -> str | None:
    """The reference answer a row carried (``metadata["reference"]``), if any."""
    ref = report.metadata.get("reference")
    return ref if isinstance(ref, str) and ref.strip() else None


def _nli_evaluator(evaluator: Evaluator) -> Evaluator:
    """``evaluator`` itself in nli mode, else one in nli mode sharing its NLI model and cache (no LLM)."""
    if evaluator.mode == "nli":
        return evaluator
    from groundjudge.config import Config
    from groundjudge.pipeline.evaluator import Evaluator

    # the model and how passages are cut carry over; the thresholds are the model's own for nli mode (a cascade's
    # thresholds only decide what to escalate)
    keep: tuple[str, ...] = ("nli_model", "device", "batch_size", "passage_tokens", "passage_overlap", "evidence_k")
    keep += ("nli_kind", "nli_supported_label", "nli_trust_remote_code", "nli_max_length", "cache_dir", "cache_mode")
    keep += ("head", "use_head")  # the same verdict head (or none), so that a --no-head run is diagnosed without one
    base = {k: v for k, v in evaluator.config.model_dump(exclude_unset=True).items() if k in keep}
    return Evaluator(Config.make(**base, mode="nli"), nli=evaluator.nli, cache=evaluator.cache)


def context_recall(
    reference: str, contexts: list[str], evaluator: Evaluator
) -> tuple[float | None, list[ClaimEvidence]]:
    """Share of the reference's sentences the contexts support (NLI mode), and each sentence's evidence. A sentence
    that could not be checked counts as not supported (leaving it out would make recall look complete and blame
    generation); None when none could be."""
    report = _nli_evaluator(evaluator).evaluate(reference, contexts, id="reference")
    evidence = [evidence_of(c) for c in report.claims]
    if not any(c.label != "ERROR" for c in report.claims):
        return None, evidence
    return sum(c.label == "SUPPORTED" for c in report.claims) / len(report.claims), evidence


def failed(report: AnswerReport) -> bool:
    """Worth diagnosing: not a PASS, or a claim that is not SUPPORTED."""
    return report.verdict != "PASS" or any(c.label != "SUPPORTED" for c in report.claims)


def diagnose(
    report: AnswerReport,
    evaluator: Evaluator | None = None,
    *,
    reference: str | None = None,
    evidence_floor: float = 0.5,
    precision_floor: float = 0.5,
    recall_floor: float = 0.5,
) -> Diagnosis:
    """Say whether retrieval or generation is to blame for ``report``'s failure.

    Args:
        report: a report from :meth:`Evaluator.evaluate` or a ``groundjudge score`` output line.
        evaluator: measures context recall (its NLI model, in nli mode); without it, recall is not measured.
        reference: the reference answer; default ``report.metadata["reference"]``.
        evidence_floor: the NLI score at which a claim's best passage counts as bearing on it.
        precision_floor: below this context precision, retrieval brought mostly irrelevant chunks.
        recall_floor: below this context recall, key context is missing.
    """
    failing = [c for c in report.claims if c.label != "SUPPORTED"]
    n_contexts = len(report.contexts)
    relevant = relevant_contexts(report, evidence_floor)
    precision = len(relevant) / n_contexts if n_contexts and report.claims else None
    reference = reference if reference is not None else reference_of(report)
    recall: float | None = None
    ref_claims: list[ClaimEvidence] = []
    if reference and evaluator is not None and report.contexts:
        recall, ref_claims = context_recall(reference, list(report.contexts), evaluator)

    contradicted = [c for c in failing if c.label == "CONTRADICTED"]
    unsupported = [c for c in failing if c.label == "UNSUPPORTED"]
    cause: Cause
    shown = f"{len(relevant)} of {n_contexts} contexts bear on a claim"
    is_failed = failed(report)
    if not is_failed:
        cause, why = "none", "the answer passed"
    elif report.verdict == "ERROR":
        cause = "not_scored"
        why = "the answer was not scored: " + ("; ".join(report.errors) or "its report says ERROR")
    elif report.verdict == "NO_CLAIMS":
        cause, why = "no_claims", "the answer states no claim the checker could read"
    elif contradicted:
        cause = "context_ignored"
        why = f"{len(contradicted)} claim(s) contradicted by the contexts: they held the answer and it was not used"
    elif recall is not None and recall < recall_floor:
        cause = "missing_context"
        why = f"the contexts support {recall:.0%} of the reference's sentences (below {recall_floor:.0%})"
    elif recall is not None and unsupported:
        cause = "context_ignored"
        why = (
            f"the contexts support {recall:.0%} of the reference's sentences, yet {len(unsupported)} claim(s) of the "
            "answer are not in them"
        )
    elif precision is not None and precision < precision_floor and unsupported:
        cause = "irrelevant_context"
        why = f"{shown} (precision {precision:.0%}); {len(unsupported)} claim(s) come from elsewhere"
    else:
        cause = "unclear"
        why = "no contradiction, " + (
            "no reference answer to measure recall" if recall is None else f"recall {recall:.0%}"
        )
        if precision is not None:
            why += f", {shown}"
    blame: Literal["retrieval", "generation"] | None = {
        "context_ignored": "generation",
        "irrelevant_context": "retrieval",
        "missing_context": "retrieval",
    }.get(cause)  # type: ignore[assignment]
    return Diagnosis(
        id=report.id,
        verdict=report.verdict,
        verdict_reasons=list(report.verdict_reasons),
        failed=is_failed,
        cause=cause,
        blame=blame,
        advice=ADVICE[cause],
        context_precision=precision,
        relevant_contexts=sorted(relevant),
        n_contexts=n_contexts,
        context_recall=recall,
        reference_claims=ref_claims,
        claims=[evidence_of(c) for c in failing],
        explanation=why,
    )


def diagnosis_lines(d: Diagnosis) -> list[str]:
    """A diagnosis as plain text lines (what ``groundjudge diagnose`` prints)."""

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.0f}%"

    lines = [
        f"{d.id}: {d.verdict}; cause: {d.cause}" + (f" ({d.blame} is to blame)" if d.blame else ""),
        *(f"  why: {reason}" for reason in d.verdict_reasons),
        f"  {d.explanation}",
        f"  context precision {pct(d.context_precision)} ({len(d.relevant_contexts)} of {d.n_contexts}: "
        f"{', '.join(str(i + 1) for i in d.relevant_contexts) or 'none'}); context recall {pct(d.context_recall)}",
        f"  {d.advice}",
    ]
    for c in d.claims:
        where = f"source {c.doc + 1}" if c.doc is not None else "no source"
        lines.append(f'  - {c.label} "{c.text}"' + (f": {c.reason}" if c.reason else ""))
        lines.append(f"    closest ({where}): {_short(c.passage) if c.passage else '-'}")
    missing = [c for c in d.reference_claims if c.label != "SUPPORTED"]
    for c in missing:
        lines.append(f'  - reference not supported by the contexts: "{c.text}"')
    return lines


def _short(text: str, width: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def as_json(d: Diagnosis) -> dict[str, Any]:
    """A diagnosis as plain JSON data."""
    return d.model_dump(mode="json")
