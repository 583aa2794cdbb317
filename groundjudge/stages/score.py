"""Claim, NLI and QA scores, their weighted combination, and the PASS / WARN / FAIL verdict with its reasons.

Honest by construction: ERROR claims count in coverage, never as SUPPORTED; an answer with no claims is
NO_CLAIMS (no 1.0, no NaN); weights are renormalised over the parts that were meant to run (a part that was meant
to run and failed counts as its worst value, never dropped).

The reported claim score is SUPPORTED / judged, with coverage beside it. The combined score takes the claim part's
lower bound, SUPPORTED / all claims, so that a claim the judge failed on can only lower it: dropping the claim
from the denominator would reward a failure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

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
    qa_failed = bool(qa_expected and n and (qa_score is None or (qa is not None and qa.error)))
    if qa_expected and n and qa_score is None:
        qa_score = 0.0  # failed, refused or asked nothing (unanswered questions already count as inconsistent)
    claims_lower_bound = supported / n if n else None  # ERROR counted as not supported
    claims_failed = any(c.claim.origin == "fallback" for c in claims)
    # no combined score when nothing was judged, nor when the claims call failed: the answer's claims are unknown,
    # and a number there would read as a judgement (the parts stay, on the sentences checked for review)
    parts = {"claims": claims_lower_bound, "nli": nli_score, "qa": qa_score}
    combined = combine(parts, weights) if judged and not claims_failed else None
    # citations made (an unjudged claim's citations of real sources are unknown: not counted), those that support
    unchecked = sum(len(c.cited or []) for c in claims if c.citation == "UNCHECKED")
    cites = [
        (
            len(c.cited_unknown or []) + (0 if c.citation == "UNCHECKED" else len(c.cited or [])),
            len(c.cited_supporting or []),
            c.citation,
        )
        for c in claims
    ]
    precision, recall = citation_scores(cites)
    return Scores(
        claims=claim_score,
        nli=nli_score,
        qa=qa_score,
        combined=combined,
        contradicted_share=contradicted / n if judged else None,
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
        citation_precision=precision,
        citation_recall=recall,
        n_citations=sum(made for made, _, _ in cites) + unchecked,
        n_citations_supporting=sum(good for _, good, _ in cites),
        n_citations_unchecked=unchecked,
        claims_failed=claims_failed,
        n_nli_errors=sum(1 for c in claims if c.nli is not None and c.nli.error),
        qa_failed=qa_failed,
    )


def citation_scores(claims: Sequence[tuple[int, int, str | None]]) -> tuple[float | None, float | None]:
    """Citation precision and recall of an answer, as ALCE defines them, from each claim's (citations made and
    checked, citations that support it, its citation label: CITED_SUPPORTS when its cited sources support it).

    Recall: the share of claims whose cited sources support them (an uncited claim counts as not supported).
    Precision: the share of citations that support the claim they are attached to (a source that supports only
    together with another one counts as not supporting: each source is checked alone). Both None when the answer
    cites nothing. A claim whose citation is UNCHECKED (it could not be judged) is left out of both: its citation
    is unknown, not wrong (the verdict rule holds the unknown against the answer: :func:`decide`); its markers that
    name no source are wrong whatever the judge says, and count.
    """
    made = sum(n for n, _, _ in claims)
    if not made:
        return None, None
    good = sum(k for _, k, _ in claims)
    known = [label for *_, label in claims if label != "UNCHECKED"]
    recall = sum(1 for label in known if label == "CITED_SUPPORTS") / len(known) if known else None
    return good / made, recall


def _failures(scores: Scores, qa: QAResult | None) -> list[str]:
    """A WARN for each stage that was meant to run and failed, other than the judge (its unjudged claims lower the
    coverage): the NLI model on some claims, the QA check. Each counts its worst value in the combined score; the
    verdict says so too, so that no failure can PASS."""
    s = scores
    out = []
    if s.n_nli_errors:
        out.append(f"WARN: NLI: {s.n_nli_errors} of {s.n_claims} claims not scored by the local model (count 0)")
    if s.qa_failed:
        why = qa.error if qa is not None and qa.error else "gave no score"
        out.append(f"WARN: QA check failed: {why}")
    return out


class Ruling(NamedTuple):
    """A verdict and the rules that made it, each ``"VERDICT: why"`` with its numbers (:func:`decide`)."""

    verdict: AnswerVerdict
    reasons: list[str]


# A verdict's reasons name the rules that fired; the verdict is the most severe of them (SEVERITY).
SEVERITY: dict[str, int] = {"PASS": 0, "WARN": 1, "FAIL": 2, "ERROR": 3, "NO_CLAIMS": 4}


def _num(x: float, limit: float) -> tuple[str, str]:
    """``x`` and ``limit`` at two decimals, more where two decimals would show them equal."""
    for digits in (2, 4, 6):
        a, b = f"{x:.{digits}f}", f"{limit:.{digits}f}"
        if a != b or x == limit:
            return a, b
    return f"{x:.17g}", f"{limit:.17g}"


def _parts(scores: Scores, weights: Mapping[str, float] | None) -> dict[str, float | None]:
    """The parts the combined score is made of: the claim part is its lower bound, SUPPORTED over all claims."""
    s = scores
    lower = s.n_supported / s.n_claims if s.n_claims else None
    parts = {"claims": lower, "nli": s.nli, "qa": s.qa}
    if weights is None:
        return parts
    return {k: v for k, v in parts.items() if weights.get(k, 0) > 0}


def _qa_text(qa: QAResult | None, value: float | None) -> str:
    """What the QA check found, for a reason: how many answers disagreed, or why it gave no score."""
    if qa is None or not qa.items:
        if qa is None and value != 0:
            return ""  # the check's details were not handed in
        why = qa.error if qa is not None and qa.error else "gave no score"
        return f"QA: {why} (counts 0)" if value == 0 else f"QA: {why}"
    bad = sum(1 for it in qa.items if not it.consistent)
    text = f"QA: {bad} of {len(qa.items)} answers inconsistent"
    return text + (f" ({qa.error})" if qa.error else "")


def _combined_text(
    scores: Scores, op: str, limit: float, weights: Mapping[str, float] | None, qa: QAResult | None
) -> str:
    """``combined 0.62 < 0.70 (claims 1.00 x 0.50, nli 0.41 x 0.30, qa 0.33 x 0.20)`` and which parts pulled it
    down: those below the limit, with what the claims and the QA check found."""
    s = scores
    assert s.combined is not None
    value, bound = _num(s.combined, limit)
    parts = _parts(s, weights)
    present = {k: v for k, v in parts.items() if v is not None}
    total = sum(weights[k] for k in present) if weights is not None else 0.0
    shown = ", ".join(
        f"{k} {v:.2f} x {weights[k] / total:.2f}" if weights is not None and total > 0 else f"{k} {v:.2f}"
        for k, v in present.items()
    )
    text = f"combined {value} {op} {bound} ({shown})"
    low = [k for k, v in present.items() if v < limit]
    if s.n_supported == s.n_claims:
        text += "; the one claim SUPPORTED" if s.n_claims == 1 else f"; all {s.n_claims} claims SUPPORTED"
    if low:
        named = ", ".join(f"{k} {present[k]:.2f}" for k in low)
        text += f"; pulled down by {named} (below {bound})"
        if "claims" in low:
            others = {"UNSUPPORTED": s.n_unsupported, "CONTRADICTED": s.n_contradicted, "not judged": s.n_errors}
            rest = ", ".join(f"{count} {name}" for name, count in others.items() if count)
            of = f"{s.n_supported} of {s.n_claims} claim{'s' * (s.n_claims != 1)}"
            text += f"; {of} SUPPORTED" + (f" ({rest})" if rest else "")
        qa_text = _qa_text(qa, present["qa"]) if "qa" in low else ""
        text += f"; {qa_text}" if qa_text else ""
    return text


def decide(
    scores: Scores,
    thresholds: Thresholds,
    weights: Mapping[str, float] | None = None,
    qa: QAResult | None = None,
    *,
    min_citation_precision: float | None = None,
) -> Ruling:
    """PASS / WARN / FAIL from the combined score and the contradicted share; NO_CLAIMS and ERROR as such; with
    the reasons: every rule that fired, with its numbers, as ``"VERDICT: why"``; the verdict is the most severe.

    The contradicted share is CONTRADICTED claims over all claims. When some claims could not be judged and they
    alone could push it past the limit, the answer cannot be decided: ERROR, never a better verdict. ``weights``
    (the config's) and ``qa`` (the answer's QA check) only make the reasons say more: how the combined score is made
    and what the QA check found.

    A stage that was meant to run and failed never gives a PASS: a failed claims call is ERROR (the answer's
    sentences were checked in place of its claims, for review only); claims not judged, claims the NLI model could
    not score and a failed QA check WARN at best. ``min_citation_precision`` (off when None): citation precision
    below it FAILs (an answer that cites nothing has none); citations left unchecked (their claims not judged) that,
    wrong, would put it below the limit make the answer ERROR, never a better verdict.
    """
    s, t = scores, thresholds
    n = s.n_claims
    if s.claims_failed:
        checked = f"its {n} sentences were checked in their place for review" if n else "it has no sentence to check"
        return Ruling("ERROR", [f"ERROR: the claims call failed ({checked}): the answer's claims are unknown"])
    if n == 0:
        return Ruling("NO_CLAIMS", ["NO_CLAIMS: the answer has no claim to check"])
    if s.n_judged == 0:
        return Ruling("ERROR", [f"ERROR: none of the {n} claims could be judged"])
    if s.combined is None:
        return Ruling("ERROR", ["ERROR: no combined score (no part of it has a value and a weight above 0)"])
    limit = t.max_contradicted
    share = s.contradicted_share or 0.0
    coverage_low = s.coverage is not None and s.coverage < 1.0
    shown = _num(s.coverage, 1.0)[0] if s.coverage is not None else ""
    coverage = f"coverage {shown} < 1: {s.n_errors} of {n} claims not judged" if coverage_low else ""
    failed = _failures(s, qa)  # a stage that failed: never a PASS
    fails = []
    if s.combined < t.min_grounded:
        fails.append("FAIL: " + _combined_text(s, "<", t.min_grounded, weights, qa))
    if share > limit:
        a, b = _num(share, limit)
        fails.append(f"FAIL: {s.n_contradicted} of {n} claims contradicted ({a} > {b})")
    precision = s.citation_precision
    if min_citation_precision is not None and precision is not None and precision < min_citation_precision:
        a, b = _num(precision, min_citation_precision)
        made = s.n_citations - s.n_citations_unchecked
        fails.append(
            f"FAIL: citation precision {a} < {b}: {s.n_citations_supporting} of {made} citations support the "
            "claim they are attached to"
        )
    if fails:
        return Ruling("FAIL", fails + [f"WARN: {coverage}"] * coverage_low + failed)
    worst = (s.n_contradicted + s.n_errors) / n
    if worst > limit:
        a, b = _num(worst, limit)
        return Ruling(
            "ERROR",
            [
                f"ERROR: undecided: {s.n_errors} of {n} claims not judged could, if contradicted, put the "
                f"contradicted share past its limit ({s.n_contradicted} + {s.n_errors} of {n} = {a} > {b})"
            ],
        )
    if min_citation_precision is not None and s.n_citations_unchecked:
        lowest = s.n_citations_supporting / s.n_citations if s.n_citations else 0.0
        if lowest < min_citation_precision:
            a, b = _num(lowest, min_citation_precision)
            return Ruling(
                "ERROR",
                [
                    f"ERROR: undecided: {s.n_citations_unchecked} citations of claims not judged could, if wrong, put "
                    f"citation precision below its limit ({s.n_citations_supporting} of {s.n_citations} = {a} < {b})"
                ],
            )
    warns = []
    if s.combined < t.warn:
        warns.append("WARN: " + _combined_text(s, "<", t.warn, weights, qa))
    if coverage_low:
        warns.append(f"WARN: {coverage}")
    warns += failed
    if warns:
        return Ruling("WARN", warns)
    a, b = _num(s.combined, t.warn)
    c, d = _num(share, limit)
    return Ruling(
        "PASS",
        [f"PASS: combined {a} >= {b}; {s.n_contradicted} of {n} claims contradicted ({c} <= {d}); all judged"],
    )
