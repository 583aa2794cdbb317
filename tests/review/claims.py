"""A claim of an answer as the claims stage gives it: its text with its span (code-point offsets) in the answer."""

from __future__ import annotations

from groundjudge.models import Claim, Span


def claim_at(answer: str, cid: str, text: str) -> Claim:
    """The claim ``text`` (its first place in ``answer``), its span set."""
    start = answer.index(text)
    return Claim(id=cid, text=text, span=Span(text=text, start=start, end=start + len(text)))
