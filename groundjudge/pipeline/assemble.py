"""An :class:`~groundjudge.models.AnswerReport` from a finished :class:`~groundjudge.pipeline.work.Work`.

Holds :func:`answer_report` (the sample's fields and the cost), :func:`failed_report` (an ERROR report) and
:func:`final_report` (claim verdicts, scores, the verdict and its reasons).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from groundjudge.config import Config
from groundjudge.errors import NLIError
from groundjudge.models import AnswerReport, ClaimVerdict, Label, Scores, SecondJudging, SecondVerdict
from groundjudge.pipeline.citing import citation_fields
from groundjudge.pipeline.work import SecondPlan, Work
from groundjudge.stages.judge import JudgedClaim
from groundjudge.stages.score import compute_scores, decide


def answer_report(work: Work, mode: str, **fields: Any) -> AnswerReport:
    """A report carrying the sample and what this answer cost; ``fields`` are the verdict, scores, claims ..."""
    s = work.sample
    return AnswerReport(
        id=s.id,
        mode=mode,
        usage=work.usage,
        question=s.question,
        answer=s.answer if s.answer is not None else s.claim,
        contexts=s.contexts,
        context_ids=s.context_ids,
        label=s.label,
        metadata=s.metadata,
        row=work.row,
        sources=s.sources,
        conversation=s.conversation,
        **fields,
    )


_VERDICTS = ("SUPPORTED", "CONTRADICTED", "UNSUPPORTED")


def second_verdict(plan: SecondPlan | None, claim_id: str, first: Label) -> tuple[SecondVerdict | None, bool | None]:
    """The second judge's verdict on a claim and whether it differs from the report's (None: nothing to compare:
    no second verdict, or one side is ERROR). Any difference counts, UNSUPPORTED against CONTRADICTED too."""
    if plan is None or claim_id not in plan.claim_ids:
        return None, None
    j = plan.judged.get(claim_id)
    if j is None:
        why = plan.error or "the second judge gave no verdict"
        return SecondVerdict(label="ERROR", error=why), None
    verdict = SecondVerdict(label=j.label, reason=j.reason, error_type=j.error_type, flags=j.flags, error=j.error)
    if j.label not in _VERDICTS or first not in _VERDICTS:
        return verdict, None
    return verdict, j.label != first


def failed_report(work: Work, mode: str) -> AnswerReport:
    """The ERROR report of an answer that failed: every claim counts as an error."""
    return answer_report(
        work,
        mode,
        verdict="ERROR",
        scores=Scores(n_claims=len(work.claims), n_errors=len(work.claims)),
        errors=[*work.errors, work.failed or "failed"],
    )


def final_report(
    work: Work, *, mode: str, config: Config, versions: Callable[[], dict[str, str]], qa_expected: bool
) -> AnswerReport:
    """The report of an answer that went through every stage (an ERROR report if it failed on the way).

    Args:
        work: the finished answer.
        mode: the evaluation mode, as reported.
        config: the weights, weak floor and verdict thresholds.
        versions: gives the versions behind the report (asked only for a report that is not ERROR).
        qa_expected: whether QA was meant to run on this answer (a QA that did not run then counts as failed).

    Raises:
        NLIError: a score is not a finite number (the caller makes the row ERROR).
    """
    w = work
    if w.failed is not None:
        return failed_report(w, mode)
    c = config
    verdicts: list[ClaimVerdict] = []
    for i, (claim, nli, d) in enumerate(zip(w.claims, w.nli, w.decisions, strict=True)):
        judged = w.judged.get(claim.id)
        if d.route == "judge" and judged is None:
            judged = JudgedClaim(label="ERROR", error="not judged")
        flags = [*d.flags, *(judged.flags if judged else [])]
        weak = nli.passages_scored and nli.support < c.weak_floor
        if weak and (judged is None or judged.label != "ERROR"):
            flags.append("weak")
        if judged is not None:
            label, reason, quotes, error = judged.label, judged.reason, judged.quotes, judged.error
            error_type = judged.error_type
        else:
            label, reason, quotes, error = d.label or "ERROR", d.note, [], nli.error
            error_type = d.error_type
        cites = citation_fields(w, i, label, quotes)
        if cites.get("cited_unknown"):
            flags.append("unknown_citation")
        second, differ = second_verdict(w.second, claim.id, label)
        if differ:
            flags.append("judges_disagree")
        verdicts.append(
            ClaimVerdict(
                claim=claim,
                label=label,
                route=d.route,
                nli=nli,
                reason=reason,
                quotes=quotes,
                flags=flags,
                error=error,
                contradiction_checked=d.contradiction_checked and label != "ERROR",
                error_type=error_type if label in ("CONTRADICTED", "UNSUPPORTED") else None,
                second_judge=second,
                judges_disagree=differ,
                **cites,
            )
        )
    # a claim the NLI stage could not score counts 0 in the NLI part; the report says why, even when the judge
    # went on to decide the claim
    unscored = [f"NLI: claim {v.claim.id} not scored: {v.nli.error}" for v in verdicts if v.nli and v.nli.error]
    scores = compute_scores(verdicts, w.qa, c.weights, c.weak_floor, qa_expected=qa_expected)
    if not all(math.isfinite(v) for v in scores.model_dump().values() if isinstance(v, float)):
        raise NLIError("a score is not a finite number")  # never written; the batch driver makes the row ERROR
    ruling = decide(scores, c.effective_thresholds, c.weights, w.qa, min_citation_precision=c.min_citation_precision)
    extra: dict[str, Any] = {}
    if w.second is not None:  # shown beside the verdicts; never in the scores or the verdict above
        compared = [v.judges_disagree for v in verdicts if v.judges_disagree is not None]
        plan = w.second
        error = plan.error or (None if plan.judged else "the second judge gave no verdict")
        extra["second_judge"] = SecondJudging(
            model=plan.model,
            why=plan.why,
            claims=len(plan.claim_ids),
            disagree=sum(compared),
            usage=plan.usage,
            error=error,
        )
        extra["judges_disagree"] = any(compared) if compared else None
    return answer_report(
        w,
        mode,
        verdict=ruling.verdict,
        verdict_reasons=ruling.reasons,
        scores=scores,
        claims=verdicts,
        qa=w.qa,
        errors=[*w.errors, *unscored],
        versions=versions(),
        **extra,
    )
