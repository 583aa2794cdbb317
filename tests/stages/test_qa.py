"""Issue "Honest again": the QA word shortcut agrees at once only on the same content tokens in the same order.

Order, signs, numbers, currencies, units and negations are tokens that must match; anything else goes to the model
(``agree``) and, without one, does not agree. Identical replies (up to case, accents, spacing and trailing
punctuation) always agree.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

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


# -- properties -------------------------------------------------------------------------------------------------

WORDS = ["Paris", "Lyon", "Zürich", "Besançon", "Chelsea", "Arsenal", "Eiffel", "tower", "river", "red", "blue"]
WORDS += ["beat", "won", "open", "bridge", "engineer", "north", "south", "rose", "fell", "Straße"]
FILLER = ["the", "a", "an", "in", "of", "to", "from", "is", "was", "it", "and", "at", "on", "by", "for"]
NEGATIONS = ["not", "no", "never"]
MINUS, PLUS = ["-", "\u2212"], ["", "+"]
CURRENCIES = {
    "GBP": ["£{}", "{} GBP", "{}£"],
    "USD": ["${}", "{} USD", "US${}"],
    "EUR": ["€{}", "{} EUR", "{} €"],
    "JPY": ["¥{}", "{} JPY"],
    "CHF": ["{} CHF", "CHF {}"],
}
UNITS = ["°C", "°F", "%", "km", "m", "kg", "g", "mi", "ft", "s", "h", "K", "mph", "km/h", "‰"]

numbers = st.one_of(
    st.integers(0, 5000).map(str), st.tuples(st.integers(0, 99), st.integers(1, 9)).map(lambda t: f"{t[0]}.{t[1]}")
)


@st.composite
def pieces(draw: st.DrawFn) -> list[tuple[str, str, tuple[str, ...]]]:
    """A reply as pieces (kind, text, parts): words, filler, numbers, signed numbers, money, measures, scores."""
    out: list[tuple[str, str, tuple[str, ...]]] = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["word", "filler", "number", "signed", "money", "measure", "score"]))
        if kind == "word":
            w = draw(st.sampled_from(WORDS))
            out.append((kind, w, (w,)))
        elif kind == "filler":
            w = draw(st.sampled_from(FILLER))
            out.append((kind, w, (w,)))
        elif kind == "number":
            n = draw(numbers)
            out.append((kind, n, (n,)))
        elif kind == "signed":
            sign, n = draw(st.sampled_from(MINUS + PLUS)), draw(numbers)
            out.append((kind, sign + n, (sign, n)))
        elif kind == "money":
            code = draw(st.sampled_from(sorted(CURRENCIES)))
            fmt, n = draw(st.sampled_from(CURRENCIES[code])), draw(numbers)
            out.append((kind, fmt.format(n), (code, fmt, n)))
        elif kind == "measure":
            unit, n, gap = draw(st.sampled_from(UNITS)), draw(numbers), draw(st.sampled_from(["", " "]))
            out.append((kind, f"{n}{gap}{unit}", (n, gap, unit)))
        else:
            home, away = draw(st.lists(st.sampled_from(WORDS[:8]), min_size=2, max_size=2, unique=True))
            x, y = draw(st.integers(0, 9)), draw(st.integers(0, 9))
            out.append((kind, f"{home} beat {away} {x}-{y}", (home, away, str(x), str(y))))
    return out


def text(reply: list[tuple[str, str, tuple[str, ...]]]) -> str:
    return " ".join(t for _, t, _ in reply)


@st.composite
def changed_pairs(draw: st.DrawFn) -> tuple[str, str, str]:
    """A reply and a copy that says something else with (mostly) the same words: (how, reply, changed copy)."""
    reply = draw(pieces())
    how = draw(st.sampled_from(["order", "sign", "number", "currency", "unit", "negation", "score"]))
    changed = list(reply)
    if how == "order":
        content = [i for i, (k, _, _) in enumerate(reply) if k in ("word", "number")]
        pairs = [(i, j) for i in content for j in content if i < j and reply[i][1].lower() != reply[j][1].lower()]
        if not pairs:  # too few content words to swap: add two
            a, b = draw(st.lists(st.sampled_from(WORDS), min_size=2, max_size=2, unique=True))
            reply = [*reply, ("word", a, (a,)), ("word", b, (b,))]
            changed = list(reply)
            pairs = [(len(reply) - 2, len(reply) - 1)]
        i, j = draw(st.sampled_from(pairs))
        changed[i], changed[j] = reply[j], reply[i]
    elif how == "score":
        at = [i for i, (k, _, _) in enumerate(reply) if k == "score"]
        if not at:
            reply = [*reply, ("score", "Chelsea beat Arsenal 3-1", ("Chelsea", "Arsenal", "3", "1"))]
            changed, at = list(reply), [len(reply) - 1]
        i = draw(st.sampled_from(at))
        home, away, x, y = reply[i][2]
        if x == y:
            changed[i] = ("score", f"{away} beat {home} {x}-{y}", ())
        elif draw(st.booleans()):
            changed[i] = ("score", f"{home} beat {away} {y}-{x}", ())
        else:
            changed[i] = ("score", f"{away} beat {home} {x}-{y}", ())
    elif how == "sign":
        n = draw(numbers)
        sign = draw(st.sampled_from(MINUS + PLUS))
        other = draw(st.sampled_from(PLUS if sign in MINUS else MINUS))
        at = draw(st.integers(0, len(reply)))
        changed = [*reply[:at], ("signed", other + n, ()), *reply[at:]]
        reply = [*reply[:at], ("signed", sign + n, ()), *reply[at:]]
    elif how == "number":
        at = [i for i, (k, _, _) in enumerate(reply) if k in ("number", "signed", "money", "measure")]
        if not at:
            reply = [*reply, ("number", "7", ("7",))]
            changed, at = list(reply), [len(reply) - 1]
        i = draw(st.sampled_from(at))
        kind, old, parts = reply[i]
        n = parts[-1] if kind in ("number", "signed") else parts[2] if kind == "money" else parts[0]
        new = draw(numbers.filter(lambda m: m != n))
        changed[i] = (kind, re.sub(rf"(?<![\d.]){re.escape(n)}(?![\d.])", new, old, count=1), ())
    elif how == "currency":
        code, n = draw(st.sampled_from(sorted(CURRENCIES))), draw(numbers)
        other = draw(st.sampled_from([c for c in CURRENCIES if c != code] + [""]))
        mine = draw(st.sampled_from(CURRENCIES[code])).format(n)
        theirs = draw(st.sampled_from(CURRENCIES[other])).format(n) if other else n
        at = draw(st.integers(0, len(reply)))
        changed = [*reply[:at], ("money", theirs, ()), *reply[at:]]
        reply = [*reply[:at], ("money", mine, ()), *reply[at:]]
    elif how == "unit":
        unit, n, gap = draw(st.sampled_from(UNITS)), draw(numbers), draw(st.sampled_from(["", " "]))
        other = draw(st.sampled_from([u for u in UNITS if u.casefold() != unit.casefold()] + [""]))
        at = draw(st.integers(0, len(reply)))
        changed = [*reply[:at], ("measure", f"{n}{gap}{other}".strip(), ()), *reply[at:]]
        reply = [*reply[:at], ("measure", f"{n}{gap}{unit}", ()), *reply[at:]]
    else:  # negation: a word more, or n't on a word
        at = draw(st.integers(0, len(reply) - 1))
        if draw(st.booleans()):
            word = draw(st.sampled_from(NEGATIONS))
            changed = [*reply[:at], ("negation", word, ()), *reply[at:]]
        else:
            kind, old, _ = reply[at]
            changed[at] = (kind, old + draw(st.sampled_from(["n't", "n’t"])), ())
    return how, text(reply), text(changed)


@settings(deadline=None, max_examples=200)
@given(changed_pairs(), st.booleans())
def test_a_reply_that_says_something_else_never_agrees_without_the_model(
    pair: tuple[str, str, str], flip: bool
) -> None:
    how, expected, found = pair
    if flip:
        expected, found = found, expected
    assert replies_agree(Q, expected, found, None) is False
    yes = Recorder(1.0)
    agreed = replies_agree(Q, expected, found, yes)
    if how == "number":  # other numbers never agree at once; a number moved to another place goes to the model
        assert agreed is bool(yes.calls)
    else:
        assert agreed is True and yes.calls == [[(f"{Q} {expected}", f"{Q} {found}")]]


@st.composite
def copies(draw: st.DrawFn) -> tuple[str, str]:
    """A reply and a copy differing only in case, surrounding whitespace or trailing punctuation."""
    only_filler = st.lists(st.sampled_from(FILLER), min_size=1, max_size=3).map(" ".join)
    reply = draw(st.one_of(pieces().map(text), only_filler))
    copy = reply
    case = draw(st.sampled_from(["same", "upper", "lower", "title", "swap", "random"]))
    if case == "random":
        flips = draw(st.lists(st.booleans(), min_size=len(copy), max_size=len(copy)))
        copy = "".join(c.upper() if f else c.lower() for c, f in zip(copy, flips, strict=True))
    elif case != "same":
        copy = {"upper": str.upper, "lower": str.lower, "title": str.title, "swap": str.swapcase}[case](copy)
    space = st.text(alphabet=" \t\n\u00a0", max_size=3)
    trailing = draw(st.sampled_from(["", ".", "!", "?", "...", "…", ",", ";", ":"]))
    copy = draw(space) + copy + trailing + draw(space)
    return reply, copy


@settings(deadline=None, max_examples=200)
@given(copies())
def test_a_reply_agrees_with_itself_and_with_a_copy_up_to_case_spacing_and_trailing_punctuation(
    pair: tuple[str, str],
) -> None:
    reply, copy = pair
    agrees_at_once(reply, reply)
    agrees_at_once(reply, copy)
    agrees_at_once(copy, reply)


# -- numbers, dates and units written two ways (issue 32) -------------------------------------------------------

WRITTEN_TWO_WAYS = [
    ("How many?", "1,000", "1000"),
    ("How many?", "12,345.50 people", "12345.5 people"),
    ("How many?", "03", "3"),
    ("How far?", "5 km", "5 kilometres"),
    ("How far?", "5 km", "5 Kilometers."),
    ("How fast?", "50 km/h", "50 kilometres per hour"),
    ("How heavy?", "2.5 kg", "2.50 kilograms"),
    ("How much?", "5%", "5 per cent"),
    ("How warm?", "-3 °C", "-3 degrees Celsius"),
    ("How long?", "3 hours", "3 h"),
    ("When?", "March 3, 2020", "2020-03-03"),
    ("When?", "3 March 2020", "March 3rd, 2020"),
    ("When?", "the 3rd of March 2020", "2020-03-03"),
    ("When?", "in Sept. 2019", "September 2019"),
    ("When?", "on March 3, 2020", "2020-03-03"),
]


@pytest.mark.parametrize(("question", "expected", "found"), WRITTEN_TWO_WAYS)
def test_a_number_date_or_unit_written_another_way_agrees_at_once(question: str, expected: str, found: str) -> None:
    agrees_at_once(expected, found, question)
    agrees_at_once(found, expected, question)


@pytest.mark.parametrize(
    ("expected", "found"),
    [
        ("1,000", "1,001"),
        ("March 3, 2020", "March 4, 2020"),
        ("March 3, 2020", "2020-03-04"),
        ("2020-03-04", "2020-04-03"),  # the 4th of March is not the 3rd of April
        ("March 3, 2020", "April 3, 2020"),
        ("1,5", "15"),  # a decimal comma is not a thousands comma
        ("5 kilometres", "6 km"),
    ],
)
def test_other_numbers_or_dates_never_agree_even_if_the_model_says_so(expected: str, found: str) -> None:
    yes = Recorder(1.0)
    assert not replies_agree(Q, expected, found, yes) and not replies_agree(Q, found, expected, yes)
    assert yes.calls == []


@pytest.mark.parametrize(
    ("expected", "found"),
    [
        ("March 2020", "2020"),  # less said is not another fact: the model decides
        ("5 km", "5 miles"),
        ("5 m", "5 metres"),  # "m" may be millions: never read as metres
        ("1.5 million", "1.5"),
    ],
)
def test_what_the_forms_do_not_settle_goes_to_the_model(expected: str, found: str) -> None:
    goes_to_the_model(expected, found)
    goes_to_the_model(found, expected)


MONTH_NAMES = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October"]
MONTH_NAMES += ["November", "December"]


@st.composite
def one_date_two_ways(draw: st.DrawFn) -> tuple[str, str, object]:
    """Two written forms of one date, and the date."""
    y, m, d = draw(st.integers(1000, 2999)), draw(st.integers(1, 12)), draw(st.integers(1, 28))
    name = MONTH_NAMES[m - 1]
    suffix = draw(st.sampled_from(["", "st", "nd", "rd", "th"]))
    forms = [
        f"{y}-{m:02d}-{d:02d}",
        f"{y}-{m}-{d}",
        f"{name} {d}{suffix}, {y}",
        f"{name} {d} {y}",
        f"{d}{suffix} {name} {y}",
        f"{d} of {name}, {y}",
        f"{name[:3]}. {d}, {y}",
    ]
    return draw(st.sampled_from(forms)), draw(st.sampled_from(forms)), (y, m, d)


@st.composite
def one_number_two_ways(draw: st.DrawFn) -> tuple[str, str, object]:
    """Two written forms of one number (with one unit, as a symbol or written out), and the number and unit."""
    whole, cents = draw(st.integers(0, 10**7)), draw(st.integers(0, 99))
    forms = [f"{whole}", f"{whole:,}", f"{whole}.0", f"{whole:,}.00"]
    if cents:
        forms = [f"{whole}.{cents:02d}", f"{whole:,}.{cents:02d}", f"{whole}.{cents:02d}0"]
    unit = draw(st.sampled_from([("", ""), ("km", "kilometres"), ("%", "percent"), ("kg", "kilograms")]))
    return (
        f"{draw(st.sampled_from(forms))} {unit[0]}".strip(),
        f"{draw(st.sampled_from(forms))} {draw(st.sampled_from(unit))}".strip(),
        (whole, cents, unit[0]),
    )


@settings(deadline=None, max_examples=200)
@given(st.one_of(one_date_two_ways(), one_number_two_ways()), st.sampled_from(["", "in ", "on ", "It was "]))
def test_one_number_or_date_in_any_two_forms_agrees_at_once(pair: tuple[str, str, object], filler: str) -> None:
    expected, found, _ = pair
    agrees_at_once(expected, filler + found)
    agrees_at_once(filler + found, expected)


@settings(deadline=None, max_examples=200)
@given(st.one_of(one_date_two_ways(), one_number_two_ways()), st.one_of(one_date_two_ways(), one_number_two_ways()))
@example(("1000.01", "1000.01", (1000, 1, "")), ("1000-01-01", "1000-01-01", (1000, 1, 1)))  # a number, a date
def test_two_numbers_or_dates_agree_at_once_exactly_when_they_are_equal(
    a: tuple[str, str, object], b: tuple[str, str, object]
) -> None:
    """Two forms of one value agree at once; a date against another date, or a number against another number (its
    unit aside), never agrees, whatever the model says."""
    yes = Recorder(1.0)
    verdict = replies_agree(Q, a[0], b[1], yes)
    assert verdict is replies_agree(Q, b[1], a[0], yes)
    if a[2] == b[2]:
        assert verdict and not yes.calls
    elif isinstance(a[2][2], str) is isinstance(b[2][2], str):  # both numbers (a unit last) or both dates (a day)
        same_number = len(a[2]) == 3 and isinstance(a[2][2], str) and a[2][:2] == b[2][:2]  # another unit
        assert verdict is same_number and (not yes.calls) is (not same_number)


def test_check_qa_leaves_the_model_only_the_pairs_the_words_cannot_settle() -> None:
    from groundjudge.stages.qa import check_qa

    items = [
        QAItem(question="When?", answer_from_answer="March 3, 2020"),
        QAItem(question="Who?", answer_from_answer="Eiffel"),
        QAItem(question="How far?", answer_from_answer="5 km"),
        QAItem(question="Where?", answer_from_answer="Paris"),
    ]
    check = check_qa(items, {"q1": "2020-03-03", "q2": "his firm", "q3": "6 kilometres"})
    assert check.pairs == [("Who? Eiffel", "Who? his firm")]
    assert [it.consistent for it in check.result([0.9]).items] == [True, True, False, None]
    assert [it.consistent for it in check.result(None).items] == [True, False, False, None]
    assert check.result([0.1]).error == "1 question(s) got no answer from the sources"
    assert check_qa([], {}).result(None).error == "no verification questions could be asked"
