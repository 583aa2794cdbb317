"""One answer in flight through the stages, and how a stage runs over a batch of them.

Holds :class:`Work`, the conditions that stop a whole run (:data:`RUN_STOPS`), how an error is recorded
(:func:`describe`, :func:`error_report`), :func:`run_local` / :func:`run_call`, which run a step on one live answer
so that a failure lands in that answer alone, and :func:`each`, a local step over a batch.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from groundjudge.errors import (
    BatchPendingError,
    BudgetExceededError,
    CacheMissError,
    DeferredCallError,
    GroundjudgeError,
)
from groundjudge.models import AnswerReport, Claim, ClaimNLI, Passage, QAItem, QAResult, Sample, Scores, Usage
from groundjudge.stages.citations import ClaimCites
from groundjudge.stages.judge import JudgedClaim
from groundjudge.stages.route import Decision

log = logging.getLogger(__name__)

# Conditions of the whole run, not of one answer: they end evaluate_many after the finished answers.
RUN_STOPS = (BudgetExceededError, CacheMissError, BatchPendingError)


def error_report(error: Exception | str, row: int | None, rid: str | None = None, mode: str = "") -> AnswerReport:
    """The report of a row that could not be evaluated at all."""
    return AnswerReport(
        id=rid if rid is not None else f"row-{row}",
        verdict="ERROR",
        mode=mode,
        scores=Scores(),
        errors=[str(error)],
        row=row,
    )


def describe(exc: BaseException) -> str:
    """An error as it is recorded in a report: its type and message."""
    return f"{type(exc).__name__}: {exc}"


@dataclass
class SecondPlan:
    """The second judge's part of an answer (README "Second judge"): why it looks, the claims it judges, what it
    said and cost, its error. Never scored: the report shows it beside the first judge's verdicts."""

    model: str
    why: list[str]
    claim_ids: list[str]
    judged: dict[str, JudgedClaim] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    error: str | None = None


@dataclass
class Work:
    """One answer in flight: its sample and row, and what each stage found for it."""

    sample: Sample
    row: int | None
    claims: list[Claim] = field(default_factory=list)
    passages: list[Passage] = field(default_factory=list)
    nli: list[ClaimNLI] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)
    questions: list[QAItem] = field(default_factory=list)  # QA: from the claim-extraction call
    judged: dict[str, JudgedClaim] = field(default_factory=dict)
    qa: QAResult | None = None
    qa_replies: dict[str, str] | None = None  # QA: the sources' replies, until the comparison (Steps.compare)
    usage: Usage = field(default_factory=Usage)
    errors: list[str] = field(default_factory=list)
    stop: GroundjudgeError | None = None
    failed: str | None = None  # an error that leaves nothing to score: the report is ERROR
    deferred: list[str] = field(default_factory=list)  # batch mode: cache keys of its calls waiting for the batch
    # citations (pipeline.citing): the answer with its markers read, each claim's citations, each cited source's
    # NLI result per claim, and the cited sources that entail each claim locally
    citing: Any = None
    cites: list[ClaimCites] = field(default_factory=list)
    cited_nli: list[dict[int, ClaimNLI]] = field(default_factory=list)
    cited_support: list[set[int]] = field(default_factory=list)
    second: SecondPlan | None = None  # the second judge's part, when it looks at this answer

    @property
    def live(self) -> bool:
        return self.stop is None and self.failed is None


def _with_row(exc: GroundjudgeError, w: Work) -> GroundjudgeError:
    """A cache-only miss names the row it stopped at (the budget and a pending batch are the run's, not a row's)."""
    if isinstance(exc, CacheMissError) and not str(exc).startswith("row "):
        named = CacheMissError(f"row {w.row} (id {w.sample.id!r}): {exc}")
        named.__cause__ = exc
        return named
    return exc


def _step(w: Work, fn: Callable[[Work], None]) -> Exception | None:
    """Run ``fn`` on ``w`` if it is live: a run stop is kept in ``w.stop`` (the run ends after the finished
    answers); any other exception is handed back for the caller's rule."""
    if not w.live:
        return None
    try:
        fn(w)
    except RUN_STOPS as exc:
        w.stop = _with_row(exc, w)
    except Exception as exc:
        return exc
    return None


def run_local(w: Work, fn: Callable[[Work], None]) -> None:
    """Run a local step on one live work item; an exception fails that item alone (its report is ERROR)."""
    exc = _step(w, fn)
    if exc is not None:  # a bug or a bad input in one row must not end the run
        log.debug("row %s failed", w.row, exc_info=exc)
        w.failed = describe(exc)


def run_call(w: Work, fn: Callable[[Work], None]) -> None:
    """Run a step that calls the LLM on one live work item; its error is recorded in the item, which goes on (a
    failed call leaves a part unscored, counted at its worst), and what a failed call cost is kept."""
    exc = _step(w, fn)
    if isinstance(exc, DeferredCallError):
        w.deferred.append(exc.key)  # batch mode: answered by the provider batch, then this stage runs again
    elif exc is not None:  # recorded in this answer's report, never ends the run
        if not isinstance(exc, GroundjudgeError):
            log.warning("row %s: unexpected %s", w.row, describe(exc), exc_info=exc)
        w.errors.append(describe(exc))
        usage = getattr(exc, "usage", None)
        if usage is not None:
            w.usage = w.usage + usage


def each(works: list[Work], fn: Callable[[Work], None]) -> None:
    """Run a local step on each live work item (:func:`run_local`)."""
    for w in works:
        run_local(w, fn)
