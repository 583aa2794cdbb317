"""Okapi BM25 over a sample's passages or sentences: how evidence is picked for a claim before NLI scores it."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from groundjudge.checker.signals import terms


class BM25:
    """Okapi BM25 over one sample's passages."""

    def __init__(self, docs: Sequence[str], k1: float = 1.5, b: float = 0.75) -> None:
        self.tfs = [Counter(terms(d)) for d in docs]
        self.lens = [sum(tf.values()) for tf in self.tfs]
        self.avg = (sum(self.lens) / len(self.lens)) if self.lens else 0.0
        df: Counter[str] = Counter()
        for tf in self.tfs:
            df.update(tf.keys())
        n = len(docs)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}
        self.k1, self.b = k1, b

    def scores(self, query: str) -> list[float]:
        q = set(terms(query))
        out = []
        for tf, length in zip(self.tfs, self.lens, strict=True):
            s = 0.0
            norm = self.k1 * (1 - self.b + self.b * length / self.avg) if self.avg else self.k1
            for t in q:
                f = tf.get(t)
                if f:
                    s += self.idf[t] * f * (self.k1 + 1) / (f + norm)
            out.append(s)
        return out

    def rank(self, query: str) -> list[int]:
        """Passage indices, best first; ties keep document order."""
        scores = self.scores(query)
        return sorted(range(len(scores)), key=lambda i: (-scores[i], i))
