"""QA consistency: questions about the answer's facts, answered from the answer and, blind, from the sources.

Two calls per answer: one writes the questions with the answer's own replies; one answers them from the sources
(NOT_FOUND allowed) before comparing. score = consistent / asked.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from pydantic import BaseModel

from groundjudge.judge import Source, format_sources
from groundjudge.llm.client import LLMClient
from groundjudge.models import QAItem, QAResult, Usage
from groundjudge.prompts import fenced, load_prompt, make_fence, render


class Question(BaseModel):
    question: str
    answer_from_answer: str


class Questions(BaseModel):
    questions: list[Question]  # no maxItems: not every strict-schema server takes it; extra ones are dropped


class Check(BaseModel):
    id: str
    context_answer: str
    consistent: bool


class Checks(BaseModel):
    answers: list[Check]


def qa_consistency(
    client: LLMClient, answer: str, sources: Sequence[Source], question: str | None = None, n: int = 4
) -> tuple[QAResult, Usage]:
    """Ask ``n`` verification questions; the score is the share answered the same way by the sources."""
    ask = load_prompt("qa_questions")
    generated, usage = client.complete_json(
        render(ask, question=question or "(none given)", answer=answer, n=str(n)), Questions, prompt=ask.ref
    )
    items = [QAItem(question=q.question, answer_from_answer=q.answer_from_answer) for q in generated.questions[:n]]
    if not items:
        return QAResult(items=[], score=None, error="no verification questions could be asked"), usage
    check = load_prompt("qa_check")
    listing = json.dumps(
        [{"id": f"q{i}", "question": it.question, "expected": it.answer_from_answer} for i, it in enumerate(items, 1)],
        ensure_ascii=False,
        indent=1,
    )
    fence = make_fence(listing, *(s.text for s in sources))
    checked, more = client.complete_json(
        render(
            check, sources=format_sources(sources, fence), questions=fenced(fence, "QUESTIONS", listing), fence=fence
        ),
        Checks,
        prompt=check.ref,
    )
    usage = usage + more
    by_id = {c.id.strip(): c for c in checked.answers}
    for i, it in enumerate(items, 1):
        c = by_id.get(f"q{i}")
        if c is not None:
            it.context_answer = c.context_answer
            it.consistent = c.consistent and c.context_answer.strip().upper() != "NOT_FOUND"
    consistent = sum(1 for it in items if it.consistent)
    missing = sum(1 for it in items if it.consistent is None)
    return QAResult(
        items=items,
        score=consistent / len(items),
        error=f"{missing} question(s) got no check" if missing else None,
    ), usage
