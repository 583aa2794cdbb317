"""Claim, NLI and QA scores, their weighted combination, and the PASS / WARN / FAIL verdict.

Honest by construction: ERROR claims count in coverage, never as SUPPORTED; an answer with no claims is
NO_CLAIMS (no 1.0, no NaN); weights are renormalised over the parts that were meant to run (a part that was meant
to run and failed counts as its worst value, never dropped).

The reported claim score is SUPPORTED / judged, with coverage beside it. The combined score takes the claim part's
lower bound, SUPPORTED / all claims, so that a claim the judge failed on can only lower it: dropping the claim
from the denominator would reward a failure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from groundjudge.config import Thresholds
from groundjudge.models import AnswerVerdict, ClaimVerdict, QAResult, Scores


def combine(parts: Mapping[str, float | None], weights: Mapping[str, float]) -> float | None:
    """Weighted mean over the parts that have a value, weights renormalised over them."""
    present = {k: v for k, v in parts.items() if v is not None and weights.get(k, 0) > 0}
    total = sum(weights[k] for k in present)
    if not present or total <= 0:
        return None
    return sum(weights[k] * v for k, v in present.items()) / total


def compute_scores(
    claims: Sequence[ClaimVerdict],
    qa: QAResult | None,
    weights: Mapping[str, float],
    weak_floor: float,
    *,
    qa_expected: bool = False,
) -> Scores:
    """Scores of one answer. Every part that was meant to run and could not counts as its worst value: a claim the
    NLI stage could not score counts 0, a failed or empty QA check (``qa_expected``) counts 0. The NLI part is the
    mean support score: the verdict head's probability where a head is in force, else the entailment."""
    judged = [c for c in claims if c.label != "ERROR"]
    n = len(claims)
    supported = sum(c.label == "SUPPORTED" for c in judged)
    contradicted = sum(c.label == "CONTRADICTED" for c in judged)
    entailments = [c.nli.support if c.nli is not None and c.nli.passages_scored else 0.0 for c in claims]
    claim_score = supported / len(judged) if judged else None
    nli_score = sum(entailments) / n if n and any(c.nli is not None for c in claims) else None
    qa_score = qa.score if qa is not None else None
    if qa_expected and n and qa_score is None:
        qa_score = 0.0  # failed, refused or asked nothing (unanswered questions already count as inconsistent)
    claims_lower_bound = supported / n if n else None  # ERROR counted as not supported
    combined = combine({"claims": claims_lower_bound, "nli": nli_score, "qa": qa_score}, weights) if judged else None
    return Scores(
        claims=claim_score,
        nli=nli_score,
        qa=qa_score,
        combined=combined,
        hallucination_ratio=contradicted / n if judged else None,
        coverage=len(judged) / n if n else None,
        n_claims=n,
        n_judged=len(judged),
        n_supported=supported,
        n_contradicted=contradicted,
        n_unsupported=sum(c.label == "UNSUPPORTED" for c in judged),
        n_errors=n - len(judged),
        n_escalated=sum(c.route == "judge" for c in claims),
        n_weak=sum(1 for c in claims if "weak" in c.flags),
        n_contradiction_unchecked=sum(1 for c in judged if not c.contradiction_checked),
    )


def decide(scores: Scores, thresholds: Thresholds) -> AnswerVerdict:
    """PASS / WARN / FAIL from the combined score and the hallucination ratio; NO_CLAIMS and ERROR as such.

    The hallucination ratio is contradicted claims over all claims. When some claims could not be judged and they
    alone could push the ratio past the limit, the answer cannot be decided: ERROR, never a better verdict.
    """
    if scores.n_claims == 0:
        return "NO_CLAIMS"
    if scores.n_judged == 0 or scores.combined is None:
        return "ERROR"
    ratio = scores.hallucination_ratio or 0.0
    worst_ratio = (scores.n_contradicted + scores.n_errors) / scores.n_claims
    if scores.combined < thresholds.min_grounded or ratio > thresholds.max_hallucinated:
        return "FAIL"
    if worst_ratio > thresholds.max_hallucinated:
        return "ERROR"
    if scores.combined < thresholds.warn or (scores.coverage is not None and scores.coverage < 1.0):
        return "WARN"
    return "PASS"
