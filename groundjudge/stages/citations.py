"""Citation markers in an answer: found, stripped from the text the claims come from, and kept as the claims' citations.

An answer may cite its sources with markers: ``[1]``, ``[2, 3]``, ``[1-3]``, ``[1][2]``, ``【1】``, footnotes
``^1`` and ``[^1]``, or ``[doc-id]`` when the contexts are objects with an ``id``. :func:`parse_citations` finds
them (never inside code, fenced or inline, nor inside a double-quoted passage, an inch mark ``12"`` opening none;
never in ``1[2]3``, ``x[1]``, ``arr_2[1]``, ``2^10``, a markdown link ``[1](url)`` or a footnote definition
``[1]: ...``; after a number they are: ``iOS 4[1]``), strips them, and remembers where each stood;
:func:`claim_citations` gives each claim the markers of the sentences it comes from. A marker that names no source
(``[9]`` with three sources) is kept as an unknown citation of its claim: a wrong citation, never a crash.

:func:`classify` names what a claim's citation is worth (``CITED_SUPPORTS``, ``OTHER_SUPPORTS``, ``NOT_SUPPORTED``,
``UNCITED``, ``UNCHECKED``); the answer's citation precision and recall are
:func:`groundjudge.stages.score.citation_scores`.

Styles (``--citation-style``): ``auto`` (every form; a bracket matching a context id is that id, else a number is
a position), ``numeric`` (positions only, even when contexts have ids), ``id`` (context ids only), ``footnote``
(``^1`` and ``[^1]`` only) and ``none`` (no markers are read).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from groundjudge.chunking import split_sentences
from groundjudge.models import Claim, Span

CitationStyle = Literal["auto", "numeric", "id", "footnote", "none"]
STYLES: tuple[str, ...] = ("auto", "numeric", "id", "footnote", "none")
Citation = Literal["CITED_SUPPORTS", "OTHER_SUPPORTS", "NOT_SUPPORTED", "UNCITED", "UNCHECKED"]


@dataclass(frozen=True)
class Marker:
    """One citation marker: where it stood in the answer, where it was cut from the stripped text, what it cites."""

    start: int  # in the original text
    end: int
    at: int  # in the stripped text: the position the marker was removed from
    sources: tuple[int, ...]  # 0-based indices of the contexts it cites
    unknown: tuple[str, ...] = ()  # references that name no source ("9" with three sources)


@dataclass
class Parsed:
    """An answer with its markers stripped: ``text`` and, for each of its characters, where it stood before."""

    original: str
    text: str
    markers: list[Marker]
    origin: list[int]  # origin[i]: index in ``original`` of text[i]; origin[len(text)] = len(original)

    def span_in_original(self, span: Span) -> Span:
        """A span of the stripped text as a span of the original answer (markers inside it included)."""
        if not self.markers:
            return span
        start = self.origin[span.start]
        end = self.origin[span.end - 1] + 1 if span.end > span.start else start
        return Span(start=start, end=end, text=self.original[start:end])


@dataclass
class ClaimCites:
    """What one claim cites: context indices (0-based) and references that name no source."""

    sources: list[int] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)

    @property
    def any(self) -> bool:
        return bool(self.sources or self.unknown)


_BRACKET = re.compile(r"\[([^\[\]\n]{1,80})\]|【([^【】\n]{1,80})】")
_FOOTNOTE = re.compile(r"\^(\d{1,3})(?!\d)")
_FENCE = re.compile(r"```.*?(?:```|\Z)|~~~.*?(?:~~~|\Z)", re.DOTALL)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
# a double quote right after a digit is an inch mark (12" screen), never the start of a quoted passage
_QUOTED = re.compile(r"(?<!\d)\"[^\"\n]{0,600}\"|“[^”\n]{0,600}”")
_RANGE = re.compile(r"(\d{1,3})\s*[-–]\s*(\d{1,3})")
_ASCII_WORD = re.compile(r"[A-Za-z0-9_]")
_ID_NUMBER = re.compile(r"^(.*?\D)\d+$")


def _protected(text: str) -> list[tuple[int, int]]:
    """Code (fenced, inline) and double-quoted passages: nothing there is a citation."""
    spans = [(m.start(), m.end()) for m in _FENCE.finditer(text)]

    def free(a: int, b: int) -> bool:
        return not any(s < b and a < e for s, e in spans)

    for pattern in (_INLINE_CODE, _QUOTED):
        spans += [(m.start(), m.end()) for m in pattern.finditer(text) if free(m.start(), m.end())]
    return spans


def _resolve(
    items: list[str], n_sources: int, ids: Sequence[str] | None, style: str
) -> tuple[list[int], list[str]] | None:
    """The sources a bracket's items cite and the references that name none; None when it is not a citation."""
    index = {i: k for k, i in enumerate(ids)} if ids else {}
    prefixes = {m.group(1) for i in index if (m := _ID_NUMBER.match(i))}
    sources: list[int] = []
    unknown: list[str] = []
    for raw in items:
        item = raw.strip()
        if style != "numeric" and item in index:
            sources.append(index[item])
            continue
        if style == "id":
            m = _ID_NUMBER.match(item)
            if m and m.group(1) in prefixes:  # looks like a context id ("doc-9") but names none
                unknown.append(item)
                continue
            return None
        if item.isdecimal():  # not isdigit(): "²" is a digit that int() cannot read
            k = int(item)
            (sources.append(k - 1) if 1 <= k <= n_sources else unknown.append(item))
            continue
        r = _RANGE.fullmatch(item)
        if r and int(r.group(1)) <= int(r.group(2)) <= int(r.group(1)) + 20:
            for k in range(int(r.group(1)), int(r.group(2)) + 1):
                (sources.append(k - 1) if 1 <= k <= n_sources else unknown.append(str(k)))
            continue
        m = _ID_NUMBER.match(item)
        if ids and style != "numeric" and m and m.group(1) in prefixes:
            unknown.append(item)
            continue
        return None
    return sources, unknown


def _bracket_marker(
    text: str, m: re.Match[str], n_sources: int, ids: Sequence[str] | None, style: str
) -> Marker | None:
    fullwidth = m.group(2) is not None
    body = m.group(2) if fullwidth else m.group(1)
    start, end = m.start(), m.end()
    after = text[end : end + 1]
    before = text[start - 1 : start] if start else ""
    footnote = body.startswith("^")
    if footnote:
        body = body[1:]
    if style == "footnote" and not footnote:
        return None
    if not fullwidth:
        if _ASCII_WORD.match(after) or after == "(":  # 1[2]3, [1]abc, a markdown link [1](url)
            return None
        if after == ":" and (start == 0 or text[start - 1] == "\n"):  # a footnote definition "[1]: ..."
            return None
        if before == "_" or (before.isalpha() and start >= 2 and not text[start - 2].isalnum() and not footnote):
            return None  # an index: x[1], arr_2[1] ("France[1]" and "iOS 4[1]" are citations)
        if before.isalnum() and start >= 2 and text[start - 2] == "_":
            return None
    items = re.split(r"[,;]", body)
    resolved = _resolve(items, n_sources, ids, style)
    if resolved is None:
        return None
    return Marker(start=start, end=end, at=-1, sources=tuple(resolved[0]), unknown=tuple(resolved[1]))


def find_markers(text: str, n_sources: int, ids: Sequence[str] | None = None, style: str = "auto") -> list[Marker]:
    """Citation markers of ``text`` in order (``at`` not yet set): see the module docstring for the rules."""
    if style == "none" or not text:
        return []
    protected = _protected(text)

    def free(a: int, b: int) -> bool:
        return not any(s < b and a < e for s, e in protected)

    found: list[Marker] = []
    for m in _BRACKET.finditer(text):
        if free(m.start(), m.end()) and (mk := _bracket_marker(text, m, n_sources, ids, style)) is not None:
            found.append(mk)
    if style in ("auto", "footnote", "numeric"):
        for m in _FOOTNOTE.finditer(text):
            before = text[m.start() - 1 : m.start()] if m.start() else ""
            if not before or before.isspace() or before.isdigit() or before == "[":  # 2^10 is a power
                continue
            if not free(m.start(), m.end()) or any(f.start <= m.start() < f.end for f in found):
                continue
            k = int(m.group(1))
            src, unk = ((k - 1,), ()) if 1 <= k <= n_sources else ((), (m.group(1),))
            found.append(Marker(start=m.start(), end=m.end(), at=-1, sources=src, unknown=unk))
    found.sort(key=lambda mk: mk.start)
    return found


def parse_citations(text: str, n_sources: int, ids: Sequence[str] | None = None, style: str = "auto") -> Parsed:
    """``text`` without its citation markers, and the markers with where each stood.

    A space before a marker goes with it when the marker ends a word's run ("Paris [1]." -> "Paris."), so the
    stripped text keeps every word of the original, and only those, with the spacing a reader expects.
    """
    markers = find_markers(text, n_sources, ids, style)
    if not markers:
        return Parsed(original=text, text=text, markers=[], origin=list(range(len(text) + 1)))
    out: list[str] = []
    origin: list[int] = []
    placed: list[Marker] = []
    pos = 0
    for mk in markers:
        cut = mk.start
        after = text[mk.end : mk.end + 1]
        # the spaces before a marker go with it, unless a word follows it directly ("巴黎 [1]是" keeps its space)
        if not after.isalnum():
            while cut > pos and text[cut - 1] in " \t":
                cut -= 1
        for i in range(pos, cut):
            out.append(text[i])
            origin.append(i)
        placed.append(Marker(start=mk.start, end=mk.end, at=len(out), sources=mk.sources, unknown=mk.unknown))
        pos = mk.end
    for i in range(pos, len(text)):
        out.append(text[i])
        origin.append(i)
    origin.append(len(text))
    return Parsed(original=text, text="".join(out), markers=placed, origin=origin)


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"\w+", text.lower()) if len(w) > 2}


def claim_citations(parsed: Parsed, claims: Sequence[Claim]) -> list[ClaimCites]:
    """Each claim's citations: the markers of the sentences its span (in the stripped text) overlaps; a claim with
    no span takes the sentence sharing most of its words. A marker belongs to the sentence it ends or follows."""
    if not parsed.markers:
        return [ClaimCites() for _ in claims]
    sentences = split_sentences(parsed.text) or [Span(start=0, end=len(parsed.text), text=parsed.text)]
    owned: list[list[Marker]] = [[] for _ in sentences]
    for mk in parsed.markers:
        k = max((i for i, s in enumerate(sentences) if s.start <= mk.at), default=0)
        owned[k].append(mk)
    out: list[ClaimCites] = []
    for claim in claims:
        if claim.span is not None:
            hit = [i for i, s in enumerate(sentences) if s.start < claim.span.end and claim.span.start < s.end]
        else:
            words = _words(claim.text)
            overlap = [len(words & _words(s.text)) for s in sentences]
            best = max(overlap, default=0)
            hit = [overlap.index(best)] if best else []
        cites = ClaimCites()
        for i in hit:
            for mk in owned[i]:
                cites.sources += [s for s in mk.sources if s not in cites.sources]
                cites.unknown += [u for u in mk.unknown if u not in cites.unknown]
        cites.sources.sort()
        out.append(cites)
    return out


def classify(cites: ClaimCites, supported: bool, supporting: set[int], *, judged: bool = True) -> Citation:
    """What a claim's citation is worth: ``supported`` is its verdict, ``supporting`` the cited sources (0-based)
    that support it alone. Only a cited source that supports the claim makes it CITED_SUPPORTS. A claim that could
    not be judged (``judged`` False) and cites a source is UNCHECKED: its citation is unknown, not wrong (one that
    cites only sources that do not exist is wrong whatever the judge says)."""
    if not cites.any:
        return "UNCITED"
    if not judged and cites.sources:
        return "UNCHECKED"
    if not supported:
        return "NOT_SUPPORTED"
    return "CITED_SUPPORTS" if supporting & set(cites.sources) else "OTHER_SUPPORTS"
