"""QA consistency: questions about the answer's facts, answered from the answer and, blind, from the sources.

Two calls per answer: one writes the questions with the answer's own replies; one answers them from the sources
alone (NOT_FOUND allowed) without ever seeing the answer or its replies. The two replies are then compared locally
(:func:`replies_agree`): the same words or numbers, else the local NLI model both ways. score = consistent / asked.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable, Sequence

from pydantic import BaseModel

from groundjudge.judge import Source, format_sources
from groundjudge.llm.client import LLMClient
from groundjudge.models import QAItem, QAResult, Usage
from groundjudge.prompts import fenced, load_prompt, make_fence, render

NOT_FOUND = "NOT_FOUND"
# Entailment both ways between "question + reply" statements above which two differently worded replies agree.
AGREE_AT = 0.5

Agree = Callable[[Sequence[tuple[str, str]]], list[float]]
"""Entailment both ways (the lower of the two) for each pair of statements, by a local model."""


class Question(BaseModel):
    question: str
    answer_from_answer: str


class Questions(BaseModel):
    questions: list[Question]  # no maxItems: not every strict-schema server takes it; extra ones are dropped


class ContextAnswer(BaseModel):
    id: str
    context_answer: str


class ContextAnswers(BaseModel):
    answers: list[ContextAnswer]


_ARTICLES = re.compile(r"\b(?:a|an|the)\b")
_NUM = re.compile(r"\d+(?:[.,]\d+)*")


def _words(text: str) -> list[str]:
    folded = unicodedata.normalize("NFKD", text).casefold()
    folded = "".join(c for c in folded if not unicodedata.combining(c))
    return re.findall(r"\w+", _ARTICLES.sub(" ", folded))


def _numbers(text: str) -> set[str]:
    return {n.replace(",", "") for n in _NUM.findall(text)}


def replies_agree(question: str, expected: str, found: str, agree: Agree | None) -> bool:
    """Whether the sources' reply ``found`` says what the answer's reply ``expected`` says.

    NOT_FOUND never agrees; different numbers never agree; the same words (ignoring case, accents, articles and
    punctuation), or one reply's words all inside the other's, agree; otherwise the local model decides on the two
    statements "question reply" both ways (without a model: they do not agree).
    """
    if not found.strip() or found.strip().upper().strip(".") == NOT_FOUND:
        return False
    a, b = _words(expected), _words(found)
    if not a or not b:
        return False
    if _numbers(expected) != _numbers(found) and _numbers(expected) and _numbers(found):
        return False
    if a == b or set(a) <= set(b) or set(b) <= set(a):
        return True
    if agree is None:
        return False
    score = agree([(f"{question} {expected}", f"{question} {found}")])[0]
    return score >= AGREE_AT


def qa_consistency(
    client: LLMClient,
    answer: str,
    sources: Sequence[Source],
    question: str | None = None,
    n: int = 4,
    agree: Agree | None = None,
) -> tuple[QAResult, Usage]:
    """Ask ``n`` verification questions; the score is the share the sources answer the same way.

    A check that asks no question has no score and says so in ``error`` (the pipeline counts it as failed).
    """
    ask = load_prompt("qa_questions")
    generated, usage = client.complete_json(
        render(ask, question=question or "(none given)", answer=answer, n=str(n)), Questions, prompt=ask.ref
    )
    items = [
        QAItem(question=q.question.strip(), answer_from_answer=q.answer_from_answer.strip())
        for q in generated.questions
        if q.question.strip()
    ][:n]
    if not items:
        return QAResult(items=[], score=None, error="no verification questions could be asked"), usage
    check = load_prompt("qa_check")
    # blind: the side that answers from the sources sees the questions only, never the answer's replies
    listing = json.dumps(
        [{"id": f"q{i}", "question": it.question} for i, it in enumerate(items, 1)], ensure_ascii=False, indent=1
    )
    fence = make_fence(listing, *(s.text for s in sources))
    checked, more = client.complete_json(
        render(
            check, sources=format_sources(sources, fence), questions=fenced(fence, "QUESTIONS", listing), fence=fence
        ),
        ContextAnswers,
        prompt=check.ref,
    )
    usage = usage + more
    by_id = {c.id.strip(): c for c in checked.answers}
    for i, it in enumerate(items, 1):
        c = by_id.get(f"q{i}")
        if c is not None:
            it.context_answer = c.context_answer.strip()
            it.consistent = replies_agree(it.question, it.answer_from_answer, it.context_answer, agree)
    consistent = sum(1 for it in items if it.consistent)
    missing = sum(1 for it in items if it.consistent is None)
    return QAResult(
        items=items,
        score=consistent / len(items),
        error=f"{missing} question(s) got no answer from the sources" if missing else None,
    ), usage
