"""Evidence windows centred on the sentences that matter: a claim's best BM25 sentences with their neighbours.

A fixed passage mixes the one sentence a claim rests on with text that has nothing to do with it, and a small model
loses the sentence: a claim stated word for word as the last sentence of a 128-token passage can score low
entailment against that passage and high against the sentence with its neighbours. :class:`SentenceIndex` holds
the sentences of one sample's passages (each once, by its place in its document) with BM25 over them;
:meth:`SentenceIndex.windows` gives, for a claim, windows around its best-matching sentences: the sentence with the
one before and the one after, and (``pairs``) the sentence with the one after and with the one before, for claims
that need two. Every window is a slice of one passage's text, so its offsets in the document are exact (quotes
and page marks land where they did).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from groundjudge.checker.bm25 import BM25
from groundjudge.chunking import split_sentences
from groundjudge.errors import ArgumentError
from groundjudge.models import Passage, Span

ALL_SHAPES = ("alone", "centre", "pairs")
# the sentence alone and with its neighbours: on the dev files (80 WiCE, 302 Factcheck-GPT claims, nli mode at the
# shared model's 0.55) as accurate as any other choice and as passages alone, and every claim of 200 stated word
# for word in an unrelated passage found (95% with passages alone); pairs cost 15-19% more pairs for nothing seen
SHAPES = ("alone", "centre")


@dataclass(frozen=True)
class _Where:
    passage: int  # index into the sample's passages
    index: int  # the sentence's place among that passage's sentences


class SentenceIndex:
    """The sentences of one sample's passages, BM25 over them, and where each stands among its neighbours.

    A sentence that overlapping passages share is one sentence (its document and offsets); its windows are cut
    from the passage where it has the most neighbours on both sides.
    """

    def __init__(self, passages: Sequence[Passage]) -> None:
        self.passages = list(passages)
        self.spans: list[list[Span]] = [split_sentences(p.text) for p in self.passages]
        keys: dict[tuple[int, int, int], int] = {}
        self.where: list[_Where] = []
        self.texts: list[str] = []
        for pi, (p, spans) in enumerate(zip(self.passages, self.spans, strict=True)):
            for si, s in enumerate(spans):
                key = (p.doc, p.start + s.start, p.start + s.end)
                here = _Where(pi, si)
                if key not in keys:
                    keys[key] = len(self.texts)
                    self.where.append(here)
                    self.texts.append(s.text)
                elif self._room(here) > self._room(self.where[keys[key]]):
                    self.where[keys[key]] = here
        self.bm25 = BM25(self.texts) if self.texts else None

    def _room(self, w: _Where) -> int:
        """Neighbours a sentence has in its passage: 2 with one on each side, else 1 or 0."""
        return int(w.index > 0) + int(w.index < len(self.spans[w.passage]) - 1)

    def _cut(self, pi: int, first: int, last: int) -> Passage:
        p, spans = self.passages[pi], self.spans[pi]
        a, b = spans[first].start, spans[last].end
        return Passage(doc=p.doc, start=p.start + a, end=p.start + b, text=p.text[a:b])

    def windows(self, claim: str, sentences: int, shapes: Sequence[str] = SHAPES) -> list[Passage]:
        """Windows around the claim's ``sentences`` best BM25 sentences (best first), in the order of ``shapes``
        for each: ``alone`` (the sentence), ``centre`` (with the sentence before and the one after), ``pairs`` (with
        the one after, then with the one before). No window twice, and none that is a whole passage already (those
        are scored as passages); a sentence that shares no content word with the claim centres nothing."""
        return [w for _, w in self.shaped(claim, sentences, shapes)]

    def shaped(self, claim: str, sentences: int, shapes: Sequence[str] = SHAPES) -> list[tuple[str, Passage]]:
        """:meth:`windows`, each with its shape."""
        unknown = set(shapes) - set(ALL_SHAPES)
        if unknown:
            raise ArgumentError(f"unknown window shapes {sorted(unknown)}; known: {', '.join(ALL_SHAPES)}")
        if self.bm25 is None or sentences < 1:
            return []
        scores = self.bm25.scores(claim)
        ranked = sorted(range(len(scores)), key=lambda i: (-scores[i], i))[:sentences]
        out: list[tuple[str, Passage]] = []
        seen = {(p.doc, p.start, p.end) for p in self.passages}
        for i in ranked:
            if scores[i] <= 0:
                break  # no content word in common: nothing to centre on
            w = self.where[i]
            before, after = max(0, w.index - 1), min(len(self.spans[w.passage]) - 1, w.index + 1)
            cuts = {
                "alone": [(w.index, w.index)],
                "centre": [(before, after)],
                "pairs": [(w.index, after), (before, w.index)],
            }
            for shape in shapes:
                for first, last in cuts[shape]:
                    window = self._cut(w.passage, first, last)
                    key = (window.doc, window.start, window.end)
                    if key not in seen:
                        seen.add(key)
                        out.append((shape, window))
        return out
