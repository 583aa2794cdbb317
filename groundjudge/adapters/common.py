"""What every adapter shares: one evaluator, one way to check an answer, one score, verdict and reason.

:class:`Grounding` holds the evaluator (given, else the pytest plugin's default, built from the environment on first
use: ``GROUNDJUDGE_LLM``, else nli mode; see :func:`groundjudge.testing.default_evaluator`), the threshold and the
contradiction rule, and turns a tool's sample into an :class:`Outcome`: the groundjudge report, the score the tool
records, whether it passes and why. Passing is :func:`groundjudge.testing.grounding_problems`' rule, the one
``assert_grounded`` applies: a judged answer whose combined score reaches the threshold, with no contradicted claim
(unless allowed), no stage that failed. An answer that could not be judged (ERROR, NO_CLAIMS) has no score
(``Outcome.score`` None, ``Outcome.unscored`` says why) and fails: each adapter says "not scored" in its tool's
way (RAGAS NaN, an Inspect unscored Score, DeepEval's ``error``, no promptfoo named score), so that it never lowers
a tool's averages like a real score, nor passes.
"""

from __future__ import annotations

import asyncio
import importlib
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Concatenate, ParamSpec, TypeVar

from groundjudge.errors import ArgumentError
from groundjudge.models import AnswerReport
from groundjudge.testing.assertions import (
    check_min_score,
    default_evaluator,
    explain_report,
    grounding_problems,
    is_judged,
)

DEFAULT_THRESHOLD = 0.8  # assert_grounded's min_score

S = TypeVar("S")
P = ParamSpec("P")
R = TypeVar("R")


def in_thread(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], Awaitable[R]]:
    """``method`` as a coroutine that runs it in a worker thread, so the event loop goes on meanwhile."""

    async def run(self: S, *args: P.args, **kwargs: P.kwargs) -> R:
        return await asyncio.to_thread(method, self, *args, **kwargs)

    run.__doc__ = f":meth:`{method.__name__}` in a worker thread, so the event loop goes on while it runs."
    return run


def require(module: str, extra: str) -> ModuleType:
    """Import a tool's package, or raise an ImportError that names the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"groundjudge.adapters.{extra} needs the {module.split('.')[0]} package: pip install 'groundjudge[{extra}]'"
        ) from exc


def as_contexts(value: Any) -> Any:
    """A tool's contexts as a list of passages: a single string is one passage; None stays None (the row's
    ERROR then names the field)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, Sequence):
        return list(value)
    return value


def retrieved_or(retrieved: Any, fallback: Any) -> Any:
    """The sources a tool's answer saw: what was retrieved whenever it is given, an empty list included (the answer
    had no sources, and nothing it says is supported by them), else ``fallback`` (DeepEval's ``context``, the ideal
    documents). Falling back on an empty retrieval judged the answer against documents it never saw."""
    return retrieved if retrieved is not None else fallback


@dataclass(frozen=True)
class Outcome:
    """One checked answer: ``report`` (the whole :class:`~groundjudge.models.AnswerReport`), ``score`` (the combined
    score; None when the answer could not be judged: ERROR, NO_CLAIMS), ``success``, ``reason``, and ``unscored``
    (why there is no score: the verdict's first reason; None when there is one)."""

    report: AnswerReport
    score: float | None
    success: bool
    reason: str
    unscored: str | None = None

    def claims(self) -> list[dict[str, Any]]:
        """The per-claim verdicts as plain data (text, label, route, reason, verified quotes)."""
        return [
            {
                "claim": c.claim.text,
                "label": c.label,
                "route": c.route,
                "reason": c.reason,
                "quotes": [q.text for q in c.quotes if q.verified],
            }
            for c in self.report.claims
        ]


def outcome(report: AnswerReport, threshold: float, allow_contradicted: bool = False) -> Outcome:
    """Score, verdict and reason of ``report`` against ``threshold``."""
    combined = report.scores.combined
    judged = is_judged(report)
    score = combined if judged and combined is not None and math.isfinite(combined) else None
    unscored = None if score is not None else (report.verdict_reasons or [report.verdict])[0]
    problems = grounding_problems(report, threshold, allow_contradicted)
    s = report.scores
    if problems:
        head = f"not grounded: {'; '.join(problems)} (verdict {report.verdict})"
    else:
        head = (
            f"grounded: combined score {combined:.3f} >= {threshold}, {s.n_supported} of {s.n_claims} claim(s) "
            f"supported (verdict {report.verdict})"
        )
    reason = "\n".join([head, *explain_report(report)])
    return Outcome(report=report, score=score, success=not problems, reason=reason, unscored=unscored)


class Grounding:
    """One evaluator and one pass rule, shared by an adapter instance.

    Args:
        evaluator: the :class:`~groundjudge.pipeline.Evaluator` to use; None: the default one (the pytest plugin's,
            else built from the environment on first use: ``GROUNDJUDGE_LLM``, else nli mode).
        threshold: the combined score an answer needs to pass, a number from 0 to 1 (else an ArgumentError).
        allow_contradicted: let an answer with a contradicted claim pass when its score is high enough: True or
            False (anything else, such as the string "false", is an ArgumentError).
    """

    def __init__(
        self, evaluator: Any = None, threshold: float = DEFAULT_THRESHOLD, allow_contradicted: bool = False
    ) -> None:
        if not isinstance(allow_contradicted, bool):  # bool("false") is True: a string would let contradictions pass
            raise ArgumentError(f"allow_contradicted must be true or false, not {allow_contradicted!r}")
        self._evaluator = evaluator
        self.threshold = check_min_score(threshold, "threshold")  # assert_grounded's check of its bar
        self.allow_contradicted = allow_contradicted

    @property
    def evaluator(self) -> Any:
        """The evaluator given, else the default one (built on first use, then shared by every adapter)."""
        return self._evaluator if self._evaluator is not None else default_evaluator()

    def check(
        self,
        answer: Any,
        contexts: Any,
        question: str | None = None,
        *,
        reference: str | None = None,
        id: str = "answer",
    ) -> Outcome:
        """Check ``answer`` against ``contexts``; a bad field (no contexts, no answer) is an ERROR report naming it.

        Raises:
            BudgetExceededError, CacheMissError: the run's stops, as :meth:`Evaluator.evaluate_many` raises them.
        """
        row: dict[str, Any] = {"id": id, "answer": answer, "contexts": as_contexts(contexts), "question": question}
        if reference is not None:
            row["reference"] = reference  # io.tables keeps it as metadata["reference"]
        report = next(iter(self.evaluator.evaluate_many([row])))
        return outcome(report, self.threshold, self.allow_contradicted)

    acheck = in_thread(check)
