"""Cheap text signals (content terms, numbers, months, find_conflict): pure text, imports nothing of groundjudge."""

from __future__ import annotations

import re
from collections.abc import Sequence

_TOKEN = re.compile(r"[a-z0-9]+(?:[.,][0-9]+)*")
_STOP = frozenset(
    """a an the and or but of to in on at by for with from as is are was were be been being it its this that these
    those there their they he she his her we you i not no do does did has have had will would can could may might
    than then so such which who whom whose what when where why how all any each also into about over after
    before""".split()
)


def terms(text: str) -> list[str]:
    """Content words of a text: lower-cased, stop words dropped, plurals folded."""
    out = []
    for t in _TOKEN.findall(text.lower()):
        if t in _STOP:
            continue
        if len(t) > 4 and t.endswith("s") and not t.endswith("ss"):
            t = t[:-1]  # crude plural folding: "wins" ~ "win"
        out.append(t)
    return out


_PLAIN = re.compile(r"[^\w]+")


def plain_words(text: str) -> str:
    """A text's words, lower-cased, joined by single spaces (punctuation and whitespace runs dropped): two texts
    that differ only in case, punctuation and spacing read the same."""
    return _PLAIN.sub(" ", text.lower()).strip()


_ROUGH_END = re.compile(r"(?<=[.!?])\s+|\n+")


def rough_sentences(text: str) -> list[str]:
    """A text cut at sentence ends and line breaks, roughly (no offsets, abbreviations not spared): enough to ask
    which sentence holds a claim's words (``chunking.split_sentences`` is the careful one)."""
    return [s for s in _ROUGH_END.split(text) if s.strip()]


def _common_in_order(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence of two word lists."""
    row = [0] * (len(b) + 1)
    for x in a:
        prev = 0
        for j, y in enumerate(b, start=1):
            prev, row[j] = row[j], prev + 1 if x == y else max(row[j], row[j - 1])
    return row[-1]


def ordered_share(claim_terms: Sequence[str], sentences: Sequence[Sequence[str]]) -> float:
    """The largest share of a claim's content words that one sentence holds in the claim's order (1.0: the claim's
    content words stand in one sentence, in order, whatever lies between them)."""
    if not claim_terms:
        return 0.0
    words = set(claim_terms)
    best = 0
    for sent in sentences:
        if 2 * len(words.intersection(sent)) < len(words) or len(words.intersection(sent)) <= best:
            continue  # it cannot beat the best so far, nor hold half the claim
        best = max(best, _common_in_order(claim_terms, sent))
    return best / len(claim_terms)


_NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:[.,]\d+)*(?:\s?%)?")
_MONTHS = {
    m: i
    for i, names in enumerate(
        (
            "january jan",
            "february feb",
            "march mar",
            "april apr",
            "may",
            "june jun",
            "july jul",
            "august aug",
            "september sep sept",
            "october oct",
            "november nov",
            "december dec",
        ),
        start=1,
    )
    for m in names.split()
}
_MONTH_WORD = re.compile(r"\b(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\b\.?", re.IGNORECASE)


def numbers(text: str) -> set[str]:
    """Numbers as written, thousands separators dropped and trailing zeros of decimals removed ("1,250.0" ->
    "1250")."""
    out = set()
    for m in _NUMBER.finditer(text):
        raw = m.group(0).replace(" ", "").lstrip("+")
        pct = raw.endswith("%")
        raw = raw.rstrip("%")
        if re.fullmatch(r"-?\d{1,3}(,\d{3})+(\.\d+)?", raw):
            raw = raw.replace(",", "")
        raw = raw.replace(",", ".")
        if "." in raw:
            raw = raw.rstrip("0").rstrip(".")
        out.add(raw + ("%" if pct else ""))
    return out


def months(text: str) -> set[int]:
    """The months a text names, as 1-12 ("may" only when written "May")."""
    return {
        _MONTHS[m.group(1).lower()]
        for m in _MONTH_WORD.finditer(text)
        if m.group(1).lower() != "may" or m.group(0)[0].isupper()
    }


def find_conflict(claim: str, passage: str, min_overlap: float = 0.5) -> str | None:
    """What :func:`conflict_of` finds, as text ("the claim says 500; the passage says 330"), or None."""
    found = conflict_of(claim, passage, min_overlap)
    return found[1] if found is not None else None


_YEAR = re.compile(r"^(1[5-9]|20)\d\d$")


def conflict_of(claim: str, passage: str, min_overlap: float = 0.5) -> tuple[str, str] | None:
    """A cheap sign that a passage speaks of the same thing as the claim but disagrees on a number or a month.

    The passage must share at least ``min_overlap`` of the claim's content words (two at least, unless the claim has
    fewer: "It was completed in 1899" has one); then a number
    or month of the claim that the passage does not contain, while the passage gives other ones, is a conflict.
    Returns its kind, ``date`` (a month, or a year on both sides) or ``number``, and what differs ("the claim says
    500; the passage says 330"), or None. The NLI model of a cascade may miss
    such contradictions, so the pipeline escalates them to the judge rather than calling them itself.
    """
    claim_numbers, passage_numbers = numbers(claim), numbers(passage)
    claim_months, passage_months = months(claim), months(passage)
    if not ((claim_numbers and passage_numbers) or (claim_months and passage_months)):
        return None
    words = {t for t in terms(_NUMBER.sub(" ", claim)) if not t.isdigit()}
    shared = words & set(terms(passage))
    if not shared or len(shared) < min(2, len(words)) or len(shared) < min_overlap * len(words):
        return None
    missing = sorted(claim_numbers - passage_numbers)
    if missing and passage_numbers:
        others = sorted(passage_numbers - claim_numbers)[:3]
        years = all(_YEAR.match(x) for x in missing) and any(_YEAR.match(x) for x in passage_numbers - claim_numbers)
        said = f"the claim says {', '.join(missing)}; the passage says {', '.join(others) or 'other numbers'}"
        return "date" if years else "number", said
    month_missing = claim_months - passage_months
    if month_missing and passage_months and not claim_months & passage_months:
        names = [
            "",
            "January",
            "February",
            "March",
            "April",
            "May",
            "June",
            "July",
            "August",
            "September",
            "October",
            "November",
            "December",
        ]
        return "date", (
            f"the claim says {', '.join(names[m] for m in sorted(month_missing))}; the passage says "
            f"{', '.join(names[m] for m in sorted(passage_months))}"
        )
    return None
