"""QA consistency: questions about the answer's facts, answered from the answer and, blind, from the sources.

The questions and the answer's own replies come from the claim-extraction call (it reads only the answer); the
sources' replies come from the judge's call (it reads the sources and never sees the answer's replies). This module
compares the two replies locally (:func:`replies_agree`: the same tokens in the same order, else the local NLI model
both ways) and scores: consistent / asked. No extra LLM call.
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


_NUM = re.compile(r"\d+(?:[.,]\d+)*")
# A reply's tokens: numbers ("1,889", "3.5"), words, and every other character on its own, so a sign (- − +), a
# currency symbol, a unit symbol (° % ‰ /) or a score separator ("3-1" against "3:1") is a token that must match.
_TOKEN = re.compile(r"\d+(?:[.,]\d+)*|[^\W\d_]+|_|[^\w\s]")
_TRAILING = ".,;:!?…"
# Words a reply may have before what it says without changing it: "in 1889" says what "1889" says, "It is open" what
# "open" says. Only at the start, and only these: "to Paris" is not "from Paris", "by 1889" is not "1889".
_LEADING_FILLER = frozenset("a an the it this that there is was are were be been in on at".split())


def _tokens(text: str) -> list[str]:
    """The reply's tokens, in order, ignoring case, accents, spacing and trailing punctuation."""
    folded = unicodedata.normalize("NFD", text).casefold()
    folded = "".join(c for c in folded if not unicodedata.combining(c)).replace("’", "'")
    folded = re.sub(r"n't\b", " not", folded)  # "isn't" -> "is not"
    folded = re.sub(r"\b(it|that|there|this)'s\b", r"\1 is", folded)  # "it's" -> "it is"
    folded = folded.strip()
    bare = folded.rstrip(_TRAILING + " \t\n\r\f\v\u00a0")
    return _TOKEN.findall(bare or folded)  # a reply made only of punctuation keeps it


def _numbers(text: str) -> set[str]:
    return {n.replace(",", "") for n in _NUM.findall(text)}


def _leading_filler_only(longer: list[str], shorter: list[str]) -> bool:
    """Whether ``longer`` is ``shorter`` after a few leading filler words, and ``shorter`` says something."""
    extra = len(longer) - len(shorter)
    return (
        extra > 0
        and longer[extra:] == shorter
        and all(t in _LEADING_FILLER for t in longer[:extra])
        and any(t not in _LEADING_FILLER for t in shorter)
    )


def _lexical_verdict(expected: str, found: str) -> bool | None:
    """What the tokens alone settle: False, True, or None when only a model can tell (see :func:`replies_agree`)."""
    if not found.strip() or found.strip().upper().strip(".") == NOT_FOUND:
        return False
    a, b = _tokens(expected), _tokens(found)
    if not a or not b:
        return False
    if a == b:
        return True  # the same reply: "The" and "the.", "−3 °C" and "−3°C"
    if _numbers(expected) != _numbers(found) and _numbers(expected) and _numbers(found):
        return False
    if _leading_filler_only(a, b) or _leading_filler_only(b, a):
        return True  # "1889" and "in 1889", "open" and "It is open"
    return None  # other order, sign, currency, unit, a word more or less ("after 1889"): the model decides


def _statements(question: str, expected: str, found: str) -> tuple[str, str]:
    return f"{question} {expected}", f"{question} {found}"


def replies_agree(question: str, expected: str, found: str, agree: Agree | None) -> bool:
    """Whether the sources' reply ``found`` says what the answer's reply ``expected`` says.

    NOT_FOUND never agrees; different numbers never agree. The two agree at once only when they are the same
    tokens in the same order, ignoring case, accents, spacing and trailing punctuation ("The" and "the."), or when one
    is the other after a few leading filler words ("1889" and "in 1889", "open" and "It is open"). Signs, currency
    symbols and codes, units and score separators are tokens, so "3-1" and "1-3", "-3 °C" and "3 °C", "£5" and "$5",
    "from Lyon to Paris" and "from Paris to Lyon" are not the same reply. Any other pair ("after 1889", "Paris,
    Texas", "Eiffel and Koechlin" against "Eiffel", a negation on one side) goes to the local model: the two
    statements "question reply", entailment both ways (without a model: they do not agree).
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
