"""QA consistency: questions about the answer's facts, answered from the answer and, blind, from the sources.

The questions and the answer's own replies come from the claim-extraction call (it reads only the answer); the
sources' replies come from the judge's call (it reads the sources and never sees the answer's replies). This module
compares the two replies locally (:func:`replies_agree`: the same words or numbers, else the local NLI model both
ways) and scores: consistent / asked. No extra LLM call.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence

from groundjudge.models import QAItem, QAResult

NOT_FOUND = "NOT_FOUND"
# Entailment both ways between "question + reply" statements above which two differently worded replies agree.
AGREE_AT = 0.5

Agree = Callable[[Sequence[tuple[str, str]]], list[float]]
"""Entailment both ways (the lower of the two) for each pair of statements, by a local model."""


_ARTICLES = re.compile(r"\b(?:a|an|the)\b")
_NUM = re.compile(r"\d+(?:[.,]\d+)*")


# Words that turn a reply around or make it partial: a lexical shortcut never accepts a pair they tell apart.
_NEGATIONS = frozenset(
    "not no never none nothing nobody nowhere neither nor without except cannot unknown false".split()
)
_HEDGES = frozenset("or either maybe possibly perhaps about approximately around".split())
# Words a reply may add without adding a fact ("in 1889" says what "1889" says).
_FILLER = frozenset("of in on at to for by from and is was are were be been it its s that this with as".split())


def _words(text: str) -> list[str]:
    folded = unicodedata.normalize("NFKD", text).casefold()
    folded = "".join(c for c in folded if not unicodedata.combining(c))
    folded = re.sub(r"n['’]t\b", " not", folded)  # "isn't" -> "is not"
    return re.findall(r"\w+", _ARTICLES.sub(" ", folded))


def _numbers(text: str) -> set[str]:
    return {n.replace(",", "") for n in _NUM.findall(text)}


def _lexical_verdict(expected: str, found: str) -> bool | None:
    """What the words alone settle: False, True, or None when only a model can tell (see :func:`replies_agree`)."""
    if not found.strip() or found.strip().upper().strip(".") == NOT_FOUND:
        return False
    a, b = set(_words(expected)), set(_words(found))
    if not a or not b:
        return False
    if _numbers(expected) != _numbers(found) and _numbers(expected) and _numbers(found):
        return False
    turned = (a & _NEGATIONS) != (b & _NEGATIONS) or bool((a ^ b) & _HEDGES)
    if not turned and not (a - b - _FILLER) and not (b - a - _FILLER):
        return True  # the same words but filler: "1889" and "in 1889"
    return None  # a word more on either side can change the fact ("after 1889", "Paris, Texas"): the model decides


def _statements(question: str, expected: str, found: str) -> tuple[str, str]:
    return f"{question} {expected}", f"{question} {found}"


def replies_agree(question: str, expected: str, found: str, agree: Agree | None) -> bool:
    """Whether the sources' reply ``found`` says what the answer's reply ``expected`` says.

    NOT_FOUND never agrees; different numbers never agree. The two agree at once when they have the same words,
    ignoring case, accents, articles and filler words ("1889" and "in 1889"). Any word more on either side can change
    the fact ("after 1889", "Paris, Texas", "John Smith's brother"; "Eiffel and Koechlin" against "Eiffel"), so those
    pairs, like every other, go to the local model: the two statements "question reply", entailment both ways
    (without a model: they do not agree).
    """
    settled = _lexical_verdict(expected, found)
    if settled is not None:
        return settled
    return agree is not None and agree([_statements(question, expected, found)])[0] >= AGREE_AT


def score_qa(items: Sequence[QAItem], answers: dict[str, str], agree: Agree | None = None) -> QAResult:
    """Compare each question's two replies: the answer's own (``answer_from_answer``) and the sources' (``answers``
    by id q1, q2, ...), as :func:`replies_agree` does, the pairs the words cannot settle in one call of the model.
    score = consistent / asked; a question the sources side never answered counts against and is named in
    ``error``. No questions: no score, and ``error`` says so (the pipeline counts it as failed)."""
    if not items:
        return QAResult(items=[], score=None, error="no verification questions could be asked")
    out = [it.model_copy() for it in items]
    undecided: list[QAItem] = []
    for i, it in enumerate(out, 1):
        found = answers.get(f"q{i}")
        if found is not None:
            it.context_answer = found
            it.consistent = _lexical_verdict(it.answer_from_answer, found)
            if it.consistent is None:
                it.consistent = False  # without a model, or until it says otherwise
                undecided.append(it)
    if undecided and agree is not None:
        scores = agree([_statements(it.question, it.answer_from_answer, it.context_answer or "") for it in undecided])
        for it, score in zip(undecided, scores, strict=True):
            it.consistent = score >= AGREE_AT
    consistent = sum(1 for it in out if it.consistent)
    missing = sum(1 for it in out if it.consistent is None)
    return QAResult(
        items=out,
        score=consistent / len(out),
        error=f"{missing} question(s) got no answer from the sources" if missing else None,
    )
