"""QA consistency: questions about the answer's facts, answered from the answer and, blind, from the sources.

The questions and the answer's own replies come from the claim-extraction call (it reads only the answer); the
sources' replies come from the judge's call (it reads the sources and never sees the answer's replies). This module
compares the two replies locally (:func:`replies_agree`: the same tokens in the same order, a number, date or unit
written another way being the same token; other numbers or dates disagree; else the local NLI model both ways) and
scores: consistent / asked. No extra LLM call. The engine compares the replies of a cut batch's answers together
(:func:`check_qa` settles what the words can, :attr:`QACheck.pairs` go to the model in one batch).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from groundjudge.models import QAItem, QAResult

NOT_FOUND = "NOT_FOUND"
# Entailment both ways between "question + reply" statements above which two differently worded replies agree.
AGREE_AT = 0.5

Agree = Callable[[Sequence[tuple[str, str]]], list[float]]
"""Entailment both ways (the lower of the two) for each pair of statements, by a local model."""


# A reply's tokens: numbers ("1,889", "3.5"), words, and every other character on its own, so a sign (- − +), a
# currency symbol, a unit symbol (° % ‰ /) or a score separator ("3-1" against "3:1") is a token that must match.
_TOKEN = re.compile(r"\d+(?:[.,]\d+)*|[^\W\d_]+|_|[^\w\s]")
_TRAILING = ".,;:!?…"
# Words a reply may have before what it says without changing it: "in 1889" says what "1889" says, "It is open" what
# "open" says. Only at the start, and only these: "to Paris" is not "from Paris", "by 1889" is not "1889".
_LEADING_FILLER = frozenset("a an the it this that there is was are were be been in on at".split())

# -- numbers, dates and units written two ways (README "QA check"): one canonical token each ----------------------

_THOUSANDS = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?")  # "1,000", "12,345.5": the commas group thousands
_PLAIN = re.compile(r"\d+(?:\.\d+)?")
_MONTHS = {
    name: i
    for i, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        1,
    )
    for name in names
}
_MONTH = "(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(\d{4})"
# Dates written as a date, nothing more: "2020-03-03", "March 3, 2020", "3rd of March 2020", "March 2020". Numbers
# alone ("3/3/2020": March or the 3rd of a month?) are never read as dates.
_DATES = (
    (re.compile(rf"(?<![\w.,-]){_YEAR}-(\d{{1,2}})-(\d{{1,2}})(?![\w-]|[.,]\d)"), "ymd"),
    (re.compile(rf"\b{_MONTH}\s+{_DAY}(?:\s*,)?\s+{_YEAR}(?![\w-]|[.,]\d)"), "mdy"),
    (re.compile(rf"(?<![\w.,-]){_DAY}\s+(?:of\s+)?{_MONTH}(?:\s*,)?\s+{_YEAR}(?![\w-]|[.,]\d)"), "dmy"),
    (re.compile(rf"\b{_MONTH}(?:\s*,)?\s+{_YEAR}(?![\w-]|[.,]\d)"), "my"),
)
_DATE_TAG = "\x00date:"  # a date's token: no token of a text is one (a NUL in a reply is a token of its own)
# Units written out or as their symbol, after a number: one token list each. Only spellings that name one unit ("m"
# is metres or millions, "g" grams or g-force: left as written); different units are never equal here.
_UNIT_SPELLINGS: dict[tuple[str, ...], tuple[str, ...]] = {}
for _symbol, _spellings in (
    (("km", "/", "h"), ("kph", "kmh", "kilometres per hour", "kilometers per hour", "km per hour")),
    (("mph",), ("miles per hour", "mile per hour")),
    (("km",), ("kms", "kilometre", "kilometres", "kilometer", "kilometers")),
    (("cm",), ("centimetre", "centimetres", "centimeter", "centimeters")),
    (("mm",), ("millimetre", "millimetres", "millimeter", "millimeters")),
    (("mi",), ("mile", "miles")),
    (("ft",), ("foot", "feet")),
    (("kg",), ("kgs", "kilogram", "kilograms", "kilogramme", "kilogrammes", "kilo", "kilos")),
    (("%",), ("percent", "per cent", "pct")),
    (("°", "c"), ("degrees celsius", "degree celsius", "celsius", "° celsius", "degrees c")),
    (("°", "f"), ("degrees fahrenheit", "degree fahrenheit", "fahrenheit", "° fahrenheit", "degrees f")),
    (("h",), ("hour", "hours", "hr", "hrs")),
    (("min",), ("minute", "minutes", "mins")),
):
    for _spelling in _spellings:
        _UNIT_SPELLINGS[tuple(_TOKEN.findall(_spelling))] = _symbol
_UNIT_LENGTHS = sorted({len(k) for k in _UNIT_SPELLINGS}, reverse=True)


def _number(token: str) -> str:
    """A number's canonical text: thousands commas dropped, leading and trailing zeros too ("1,000.50" -> "1000.5",
    "03" -> "3"); a number written another way ("1,5", "1.000.000") is left as written."""
    if _THOUSANDS.fullmatch(token):
        token = token.replace(",", "")
    if not _PLAIN.fullmatch(token):
        return token
    whole, _, part = token.partition(".")
    whole, part = whole.lstrip("0") or "0", part.rstrip("0")
    return f"{whole}.{part}" if part else whole


def _date(kind: str, groups: tuple[str, ...]) -> str | None:
    """A date's token (``_DATE_TAG`` + ``YYYY-MM-DD`` or ``YYYY-MM``), None when it is no calendar date."""
    if kind == "ymd":
        y, mo, d = int(groups[0]), int(groups[1]), int(groups[2])
    elif kind == "mdy":
        y, mo, d = int(groups[2]), _MONTHS[groups[0]], int(groups[1])
    elif kind == "dmy":
        y, mo, d = int(groups[2]), _MONTHS[groups[1]], int(groups[0])
    else:
        y, mo, d = int(groups[1]), _MONTHS[groups[0]], 0
    if not (1 <= mo <= 12 and 0 <= d <= 31) or (kind != "my" and d == 0):
        return None
    return f"{_DATE_TAG}{y:04d}-{mo:02d}" + (f"-{d:02d}" if d else "")


def _dated(text: str) -> list[str]:
    """``text`` cut into pieces: a date's token where a date is written, the text between as it is."""
    spans: list[tuple[int, int, str]] = []
    for pattern, kind in _DATES:
        for m in pattern.finditer(text):
            if any(m.start() < e and s < m.end() for s, e, _ in spans):
                continue  # a longer form already read it ("March 3, 2020" before "March ... 2020")
            token = _date(kind, m.groups())
            if token is not None:
                spans.append((m.start(), m.end(), token))
    out, at = [], 0
    for s, e, token in sorted(spans):
        out += [text[at:s], token]
        at = e
    return [*out, text[at:]]


def _units(tokens: list[str]) -> list[str]:
    """Numbers in canonical text and a unit written out after a number as its symbol ("5 kilometres" -> 5 km)."""
    out: list[str] = []
    i = 0
    while i < len(tokens):
        t = tokens[i]
        if not t[:1].isdigit():
            out.append(t)
            i += 1
            continue
        out.append(_number(t))
        i += 1
        for n in _UNIT_LENGTHS:
            symbol = _UNIT_SPELLINGS.get(tuple(tokens[i : i + n]))
            if symbol is not None:
                out += symbol
                i += n
                break
    return out


def _tokens(text: str) -> list[str]:
    """The reply's tokens, in order, ignoring case, accents, spacing and trailing punctuation; a date is one token,
    a number its canonical text, a unit written out its symbol ("March 3, 2020", "1,000 kilometres")."""
    folded = unicodedata.normalize("NFD", text).casefold()
    folded = "".join(c for c in folded if not unicodedata.combining(c)).replace("’", "'")
    folded = re.sub(r"n't\b", " not", folded)  # "isn't" -> "is not"
    folded = re.sub(r"\b(it|that|there|this)'s\b", r"\1 is", folded)  # "it's" -> "it is"
    folded = folded.strip()
    bare = folded.rstrip(_TRAILING + " \t\n\r\f\v\u00a0")
    tokens: list[str] = []
    for piece in _dated(bare or folded):  # a reply made only of punctuation keeps it
        tokens += [piece] if piece.startswith(_DATE_TAG) else _TOKEN.findall(piece)
    return _units(tokens)


def _numbers(tokens: list[str]) -> set[str]:
    """The numbers a reply states: each number's canonical text, and a date's year and day (a month is a word in
    "March 2020" and a number in "2020-03": left out, so that the two forms count the same)."""
    out: set[str] = set()
    for t in tokens:
        if t.startswith(_DATE_TAG):
            year, *month_day = t.removeprefix(_DATE_TAG).split("-")
            out.update(_number(x) for x in [year, *month_day[1:]])
        elif t[:1].isdigit():
            out.add(t)
    return out


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
    na, nb = _numbers(a), _numbers(b)
    if na != nb and na and nb:
        return False
    da, db = {t for t in a if t.startswith(_DATE_TAG)}, {t for t in b if t.startswith(_DATE_TAG)}
    if da != db and da and db:
        return False  # other dates: "March 3, 2020" and "April 3, 2020"
    if _leading_filler_only(a, b) or _leading_filler_only(b, a):
        return True  # "1889" and "in 1889", "open" and "It is open"
    return None  # other order, sign, currency, unit, a word more or less ("after 1889"): the model decides


def _statements(question: str, expected: str, found: str) -> tuple[str, str]:
    return f"{question} {expected}", f"{question} {found}"


def replies_agree(question: str, expected: str, found: str, agree: Agree | None) -> bool:
    """Whether the sources' reply ``found`` says what the answer's reply ``expected`` says.

    NOT_FOUND never agrees; different numbers or dates never agree. A number, a date or a unit written another way
    is the same token ("1,000" and "1000", "March 3, 2020" and "2020-03-03", "5 km" and "5 kilometres"). The two
    agree at once only when they are the same tokens in the same order, ignoring case, accents, spacing and trailing
    punctuation ("The" and "the."), or when one is the other after a few leading filler words ("1889" and "in 1889",
    "open" and "It is open"). Signs, currency symbols and codes, units and score separators are tokens, so "3-1" and
    "1-3", "-3 °C" and "3 °C", "£5" and "$5", "from Lyon to Paris" and "from Paris to Lyon" are not the same reply.
    Any other pair ("after 1889", "Paris, Texas", "Eiffel and Koechlin" against "Eiffel", a negation on one side)
    goes to the local model: the two statements "question reply", entailment both ways (without a model: they do
    not agree).
    """
    settled = _lexical_verdict(expected, found)
    if settled is not None:
        return settled
    return agree is not None and agree([_statements(question, expected, found)])[0] >= AGREE_AT


@dataclass
class QACheck:
    """An answer's questions with the sources' replies, each settled by the words where they can
    (:func:`replies_agree`), and the statement pairs only the model can settle (:attr:`pairs`): the engine scores
    the pairs of many answers in one batch (:meth:`result` takes each answer's share back)."""

    items: list[QAItem]
    undecided: list[QAItem] = field(default_factory=list)

    @property
    def pairs(self) -> list[tuple[str, str]]:
        """The statement pairs ("question reply") the model must compare, in question order."""
        return [_statements(it.question, it.answer_from_answer, it.context_answer or "") for it in self.undecided]

    def result(self, scores: Sequence[float] | None) -> QAResult:
        """The check's result, ``scores`` being the model's agreement for :attr:`pairs` (None: no model; the
        undecided pairs do not agree). score = consistent / asked; a question the sources side never answered counts
        against and is named in ``error``. No questions: no score, and ``error`` says so."""
        if not self.items:
            return QAResult(items=[], score=None, error="no verification questions could be asked")
        out = [it.model_copy() for it in self.items]
        if scores is not None:
            decided = {id(it): score >= AGREE_AT for it, score in zip(self.undecided, scores, strict=True)}
            for it, new in zip(self.items, out, strict=True):
                if id(it) in decided:
                    new.consistent = decided[id(it)]
        consistent = sum(1 for it in out if it.consistent)
        missing = sum(1 for it in out if it.consistent is None)
        return QAResult(
            items=out,
            score=consistent / len(out),
            error=f"{missing} question(s) got no answer from the sources" if missing else None,
        )


def check_qa(items: Sequence[QAItem], answers: dict[str, str]) -> QACheck:
    """Compare each question's two replies by the words: the answer's own (``answer_from_answer``) and the
    sources' (``answers`` by id q1, q2, ...); the pairs the words cannot settle wait for the model (``pairs``)."""
    check = QACheck(items=[it.model_copy() for it in items])
    for i, it in enumerate(check.items, 1):
        found = answers.get(f"q{i}")
        if found is not None:
            it.context_answer = found
            it.consistent = _lexical_verdict(it.answer_from_answer, found)
            if it.consistent is None:
                it.consistent = False  # without a model, or until it says otherwise
                check.undecided.append(it)
    return check


def score_qa(items: Sequence[QAItem], answers: dict[str, str], agree: Agree | None = None) -> QAResult:
    """Compare each question's two replies (:func:`check_qa`), the pairs the words cannot settle in one call of the
    model (``agree``), and score them (:meth:`QACheck.result`)."""
    check = check_qa(items, answers)
    pairs = check.pairs
    return check.result(agree(pairs) if pairs and agree is not None else None)
