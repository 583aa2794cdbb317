"""Guards for generation code: check an answer before it reaches a user, or regenerate until it is grounded."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from groundjudge.models import AnswerReport
from groundjudge.pipeline import Evaluator

GenerateFn = Callable[..., str]


def verify(
    evaluator: Evaluator, answer: str, sources: Sequence[str] | str, question: str | None = None
) -> AnswerReport:
    """The report on ``answer`` against ``sources``."""
    return evaluator.evaluate(answer, sources, question)


def verify_or_reject(
    evaluator: Evaluator,
    answer: str,
    sources: Sequence[str] | str,
    fallback: str,
    question: str | None = None,
    allow_warn: bool = False,
) -> tuple[str, AnswerReport]:
    """``answer`` if it passes (or warns, with ``allow_warn``), else ``fallback``; and the report either way."""
    report = evaluator.evaluate(answer, sources, question)
    ok = report.verdict == "PASS" or (allow_warn and report.verdict == "WARN")
    return (answer if ok else fallback), report


@dataclass
class Attempt:
    answer: str
    report: AnswerReport


@dataclass
class ValidatedAnswer:
    """The last answer generated, whether it met the threshold, and every attempt."""

    answer: str
    report: AnswerReport
    passed: bool
    attempts: list[Attempt] = field(default_factory=list)


def feedback_for(report: AnswerReport) -> str:
    """What to tell the generator: the claims that were not grounded, and why."""
    lines = []
    for c in report.claims:
        if c.label == "SUPPORTED":
            continue
        why = c.reason or {"CONTRADICTED": "the sources say otherwise", "ERROR": "could not be checked"}.get(
            c.label, "the sources do not say this"
        )
        lines.append(f'- "{c.claim.text}" ({c.label.lower()}: {why})')
    if not lines:
        return "Stay closer to the sources."
    return "These statements are not backed by the sources; remove or correct them:\n" + "\n".join(lines)


def generate_with_validation(
    evaluator: Evaluator,
    generate_fn: GenerateFn,
    question: str,
    context: Sequence[str] | str,
    threshold: float = 0.7,
    max_retries: int = 2,
) -> ValidatedAnswer:
    """Generate, check, and regenerate with the flagged claims named until the combined score reaches
    ``threshold`` with no contradiction, at most ``max_retries`` times after the first.

    ``generate_fn(question, context)`` or ``generate_fn(question, context, feedback)``: the third argument, when the
    function takes it, is None the first time and then names the claims to fix.
    """
    takes_feedback = len(inspect.signature(generate_fn).parameters) >= 3
    attempts: list[Attempt] = []
    feedback: str | None = None
    for _ in range(max_retries + 1):
        answer = generate_fn(question, context, feedback) if takes_feedback else generate_fn(question, context)
        report = evaluator.evaluate(answer, context, question)
        attempts.append(Attempt(answer, report))
        s = report.scores
        if s.combined is not None and s.combined >= threshold and not s.n_contradicted and not s.n_errors:
            return ValidatedAnswer(answer, report, True, attempts)
        feedback = feedback_for(report)
    return ValidatedAnswer(attempts[-1].answer, attempts[-1].report, False, attempts)
