"""Issue "Honest again": the QA word shortcut agrees at once only on the same content tokens in the same order.

Order, signs, numbers, currencies, units and negations are tokens that must match; anything else goes to the model
(``agree``) and, without one, does not agree. Identical replies (up to case, accents, spacing and trailing
punctuation) always agree.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from groundjudge.models import QAItem
from groundjudge.stages.qa import replies_agree, score_qa

Q = "What?"


class Recorder:
    """An ``agree`` callable that records the pairs it was asked about and answers ``score`` for each."""

    def __init__(self, score: float) -> None:
        self.score = score
        self.calls: list[list[tuple[str, str]]] = []

    def __call__(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        self.calls.append(list(pairs))
        return [self.score] * len(pairs)


def goes_to_the_model(expected: str, found: str, question: str = Q) -> None:
    """Assert the shortcut does not settle the pair: no model, no agreement; with a model, its word counts."""
    assert replies_agree(question, expected, found, None) is False
    yes, no = Recorder(0.9), Recorder(0.1)
    assert replies_agree(question, expected, found, yes) is True
    assert replies_agree(question, expected, found, no) is False
    asked = [[(f"{question} {expected}", f"{question} {found}")]]
    assert yes.calls == asked and no.calls == asked


def agrees_at_once(expected: str, found: str, question: str = Q) -> None:
    """Assert the shortcut agrees without asking the model (a model saying no is not asked)."""
    assert replies_agree(question, expected, found, None) is True
    no = Recorder(0.0)
    assert replies_agree(question, expected, found, no) is True
    assert no.calls == []


# -- hand cases -------------------------------------------------------------------------------------------------

SAME_WORDS_OTHER_FACT = [
    ("Who won?", "Chelsea beat Arsenal 3-1", "Arsenal beat Chelsea 3-1"),
    ("What was the score?", "3-1", "1-3"),
    ("What was the route?", "from Lyon to Paris", "from Paris to Lyon"),
    ("What was the route?", "to Lyon from Paris", "from Lyon to Paris"),
    ("What was the temperature?", "-3 °C", "3 °C"),
    ("What was the temperature?", "\u22123 °C", "3 °C"),
    ("What was the temperature?", "+3 °C", "-3 °C"),
    ("What was the temperature?", "3 °C", "3 °F"),
    ("What did it cost?", "£5", "$5"),
    ("What did it cost?", "5 USD", "5 EUR"),
    ("What did it cost?", "€5", "5"),
    ("How far?", "5 km", "5 m"),
    ("How much?", "5 %", "5"),
    ("Where did it go?", "to Paris", "from Paris"),
    ("When?", "1889", "by 1889"),
    ("Who?", "the president", "a president"),
    ("Is it open?", "it is open", "it is not open"),
    ("Is it open?", "it is open", "it isn't open"),
    ("Has it closed?", "never", "no"),
]


@pytest.mark.parametrize(("question", "expected", "found"), SAME_WORDS_OTHER_FACT)
def test_same_words_in_another_order_sign_currency_or_unit_go_to_the_model(
    question: str, expected: str, found: str
) -> None:
    goes_to_the_model(expected, found, question)
    goes_to_the_model(found, expected, question)


@pytest.mark.parametrize(
    ("expected", "found"),
    [
        ("The", "The"),
        ("The", "the."),
        ("in", " In "),
        ("1889", "1889."),
        ("1889", "in 1889"),
        ("in 1889", "It was in 1889."),
        ("Paris", "in Paris"),
        ("Eiffel Tower", "the Eiffel tower"),
        ("open", "It is open."),
        ("Zürich", "ZURICH"),
        ("-3 °C", "-3°C"),
        ("\u22123 °C", "\u2212 3 °c!"),
        ("Chelsea beat Arsenal 3-1", "chelsea beat arsenal 3 - 1"),
        ("isn't open", "is not open"),
    ],
)
def test_the_same_reply_up_to_case_spacing_accents_or_leading_filler_agrees_at_once(expected: str, found: str) -> None:
    agrees_at_once(expected, found)
    agrees_at_once(found, expected)


def test_not_found_and_other_numbers_never_agree_even_if_the_model_says_so() -> None:
    yes = Recorder(1.0)
    assert not replies_agree(Q, "NOT_FOUND", "NOT_FOUND", yes)
    assert not replies_agree(Q, "1889", "not_found.", yes)
    assert not replies_agree(Q, "1889", "  ", yes)
    assert not replies_agree(Q, "3-1", "3-2", yes)
    assert not replies_agree(Q, "£5", "£50", yes)
    assert yes.calls == []


def test_score_qa_asks_the_model_about_every_pair_with_the_same_words() -> None:
    items = [QAItem(question=q, answer_from_answer=e) for q, e, _ in SAME_WORDS_OTHER_FACT]
    found = {f"q{i}": f for i, (_, _, f) in enumerate(SAME_WORDS_OTHER_FACT, 1)}
    assert score_qa(items, found, None).score == 0.0  # without a model none of them agrees
    no = Recorder(0.1)
    assert score_qa(items, found, no).score == 0.0
    assert len(no.calls) == 1 and len(no.calls[0]) == len(items)  # all in one call
