"""The review page's sources: each answer's source documents in full, with the evidence marked in place.

Every verified judge quote (each piece of a quote joined by an ellipsis) and every passage the NLI stage selected
(best entailment, best contradiction) is a :class:`Mark` on its document, named by a reference the claim's row on the
page links to (:func:`claim_links`). :func:`highlight` cuts the raw text at the marks' offsets and escapes each piece
on its own, so no text (an answer, a source, a quote) can add markup, and overlapping or out-of-range marks cannot
break the page. The blocks are written as static HTML (:func:`source_blocks`); the page's script moves each into its
answer's card.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from html import escape
from itertools import pairwise
from typing import Any

from groundjudge.models import AnswerReport, ClaimVerdict, Passage

KINDS = ("quote", "entail", "contra")  # a judge's verified quote, the NLI's support passage, its contradiction passage


@dataclass(frozen=True)
class Mark:
    """A stretch ``[start, end)`` of one source to highlight, of ``kind`` (one of :data:`KINDS`); ``ref`` is the
    token the claim's link names (letters, digits and ``-`` only)."""

    start: int
    end: int
    kind: str
    ref: str


def html_text(value: str) -> str:
    """``value`` as HTML text that can be written as UTF-8 and reads back the same in a browser: a lone surrogate
    shows as its escape, a carriage return survives (HTML would fold CR LF into LF), NUL shows as U+FFFD (as HTML
    shows it anyway)."""
    safe = value.encode("utf-8", "backslashreplace").decode("utf-8")
    return escape(safe).replace("\r", "&#13;").replace("\x00", "&#xFFFD;")


def highlight(text: str, marks: Iterable[Mark]) -> str:
    """``text`` as escaped HTML with each mark as ``<mark class="hl KIND..." data-hl="REF...">``.

    The text is cut at every mark's start and end (clipped to the text; empty and reversed marks are left out), each
    piece escaped on its own; a piece covered by several marks is one ``<mark>`` naming all their kinds and refs.
    With the tags removed and the entities unescaped, the output is ``text`` (NUL as U+FFFD: see :func:`html_text`).
    """
    n = len(text)
    spans: list[tuple[int, int, Mark]] = []
    cuts = {0, n}
    for m in marks:
        s, e = max(0, min(n, m.start)), max(0, min(n, m.end))
        if s < e:
            spans.append((s, e, m))
            cuts.update((s, e))
    points = sorted(cuts)
    out = []
    for a, b in pairwise(points):
        piece = html_text(text[a:b])
        over = [m for s, e, m in spans if s <= a and b <= e]
        if not over:
            out.append(piece)
            continue
        kinds = " ".join(k for k in KINDS if any(m.kind == k for m in over))
        refs = " ".join(dict.fromkeys(m.ref for m in over))
        out.append(f'<mark class="hl {escape(kinds)}" data-hl="{escape(refs)}">{piece}</mark>')
    return "".join(out)


def _ref(claim: int, kind: str, quote: int | None = None) -> str:
    return f"c{claim}-{'q' + str(quote) if kind == 'quote' else kind}"


def nli_passages(c: ClaimVerdict) -> list[tuple[str, Passage]]:
    """The NLI passages a claim marks: its best support passage, and its best contradiction passage unless the claim
    is SUPPORTED (the most contradicting passage of a supported claim is noise, not evidence, on the page); none
    when its NLI check failed (``nli.error``: what it holds is no score)."""
    if c.nli is None or c.nli.error:
        return []
    pairs = [("entail", c.nli.entailment_passage)]
    if c.label != "SUPPORTED":
        pairs.append(("contra", c.nli.contradiction_passage))
    return [(kind, p) for kind, p in pairs if p is not None]


def source_marks(report: AnswerReport) -> dict[int, list[Mark]]:
    """Each document's marks: the claims' verified quotes and their NLI passages, by document index (marks on a
    document the report does not have are left out)."""
    docs = len(report.contexts)
    out: dict[int, list[Mark]] = {}

    def add(doc: int | None, start: int | None, end: int | None, kind: str, ref: str) -> None:
        if doc is not None and 0 <= doc < docs and start is not None and end is not None:
            out.setdefault(doc, []).append(Mark(start, end, kind, ref))

    for ci, c in enumerate(report.claims):
        for qi, q in enumerate(c.quotes):
            if q.verified:
                pieces: list[tuple[int | None, int | None]] = [(q.start, q.end)] if not q.parts else list(q.parts)
                for s, e in pieces:
                    add(q.doc, s, e, "quote", _ref(ci, "quote", qi))
        for kind, p in nli_passages(c):
            add(p.doc, p.start, p.end, kind, _ref(ci, kind))
    return out


def claim_links(report: AnswerReport) -> list[list[dict[str, Any]]]:
    """For each claim, what its row links to: ``{"ref", "kind", "doc"}`` per verified quote and NLI passage on a
    document of the report (the marks of :func:`source_marks`), and ``{"kind": "unverified", "text"}`` for a quote
    not found in the sources."""
    marked = {m.ref for marks in source_marks(report).values() for m in marks}
    out = []
    for ci, c in enumerate(report.claims):
        links: list[dict[str, Any]] = []
        for qi, q in enumerate(c.quotes):
            ref = _ref(ci, "quote", qi)
            if ref in marked:
                links.append({"ref": ref, "kind": "quote", "doc": q.doc})
            elif not q.verified:
                links.append({"kind": "unverified", "text": q.text})
        for kind, p in nli_passages(c):
            if _ref(ci, kind) in marked:
                links.append({"ref": _ref(ci, kind), "kind": kind, "doc": p.doc})
        out.append(links)
    return out


def source_blocks(reports: Sequence[AnswerReport]) -> str:
    """Every document of every report, highlighted, as ``<div class="src-text" id="gj-src-REPORT-DOC">`` (the
    report's place in ``reports``, the document's index): the page's script moves each into its card."""
    out = []
    for ri, r in enumerate(reports):
        marks = source_marks(r)
        for doc, text in enumerate(r.contexts):
            out.append(f'<div class="src-text" id="gj-src-{ri}-{doc}">{highlight(text, marks.get(doc, []))}</div>')
    return "".join(out)
