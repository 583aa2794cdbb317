"""Evidence selection: which passages each claim is scored against, and the per-claim NLI result.

Passages are ranked for each claim by BM25; the top ``k`` (or all) are scored in rounds (rank 1, then ranks 2-3,
then the rest), batched across every claim of every sample in the call. A claim stops once a passage entails it at
``early_exit`` or above. A claim too long to fit next to a passage gets that passage cut into smaller windows, so
that nothing is truncated; a claim too long for the model's window at all comes back unscored with ``error`` set.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from groundjudge.checker.nli import CONTRADICTION, ENTAILMENT, NEUTRAL, NLIModel, NLIScorer
from groundjudge.chunking import chunk_document, chunk_documents
from groundjudge.errors import InputError
from groundjudge.models import ClaimNLI, Passage

_TOKEN = re.compile(r"[a-z0-9]+(?:[.,][0-9]+)*")
_STOP = frozenset(
    """a an the and or but of to in on at by for with from as is are was were be been being it its this that these
    those there their they he she his her we you i not no do does did has have had will would can could may might
    than then so such which who whom whose what when where why how all any each also into about over after
    before""".split()
)
ROUNDS = (1, 2)  # ranks scored in round 1, then round 2; every later round takes the rest up to k


def _terms(text: str) -> list[str]:
    out = []
    for t in _TOKEN.findall(text.lower()):
        if t in _STOP:
            continue
        if len(t) > 4 and t.endswith("s") and not t.endswith("ss"):
            t = t[:-1]  # crude plural folding: "wins" ~ "win"
        out.append(t)
    return out


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


def _numbers(text: str) -> set[str]:
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


def _months(text: str) -> set[int]:
    return {
        _MONTHS[m.group(1).lower()]
        for m in _MONTH_WORD.finditer(text)
        if m.group(1).lower() != "may" or m.group(0)[0].isupper()
    }


def find_conflict(claim: str, passage: str, min_overlap: float = 0.5) -> str | None:
    """A cheap sign that a passage speaks of the same thing as the claim but disagrees on a number or a month.

    The passage must share at least ``min_overlap`` of the claim's content words (two at least, unless the claim has
    fewer: "It was completed in 1899" has one); then a number
    or month of the claim that the passage does not contain, while the passage gives other ones, is a conflict.
    Returns what differs ("the claim says 500; the passage says 330"), or None. The NLI model of a cascade may miss
    such contradictions, so the pipeline escalates them to the judge rather than calling them itself.
    """
    claim_numbers, passage_numbers = _numbers(claim), _numbers(passage)
    claim_months, passage_months = _months(claim), _months(passage)
    if not ((claim_numbers and passage_numbers) or (claim_months and passage_months)):
        return None
    words = {t for t in _terms(_NUMBER.sub(" ", claim)) if not t.isdigit()}
    shared = words & set(_terms(passage))
    if not shared or len(shared) < min(2, len(words)) or len(shared) < min_overlap * len(words):
        return None
    missing = sorted(claim_numbers - passage_numbers)
    if missing and passage_numbers:
        others = sorted(passage_numbers - claim_numbers)[:3]
        return f"the claim says {', '.join(missing)}; the passage says {', '.join(others) or 'other numbers'}"
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
        return (
            f"the claim says {', '.join(names[m] for m in sorted(month_missing))}; the passage says "
            f"{', '.join(names[m] for m in sorted(passage_months))}"
        )
    return None


class BM25:
    """Okapi BM25 over one sample's passages."""

    def __init__(self, docs: Sequence[str], k1: float = 1.5, b: float = 0.75) -> None:
        self.tfs = [Counter(_terms(d)) for d in docs]
        self.lens = [sum(tf.values()) for tf in self.tfs]
        self.avg = (sum(self.lens) / len(self.lens)) if self.lens else 0.0
        df: Counter[str] = Counter()
        for tf in self.tfs:
            df.update(tf.keys())
        n = len(docs)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}
        self.k1, self.b = k1, b

    def scores(self, query: str) -> list[float]:
        q = set(_terms(query))
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


@dataclass
class _ClaimState:
    item: int
    claim: str
    queue: list[Passage]  # passages still to score, best first
    result: ClaimNLI = field(default_factory=ClaimNLI)
    done: bool = False


class EvidenceSelector:
    """Scores claims against their most relevant passages.

    Args:
        scorer: the cached NLI scorer.
        k: passages per claim, best BM25 first; None scores every passage.
        early_exit: stop a claim once a passage entails it at this probability (None: never stop early).
    """

    def __init__(self, scorer: NLIScorer, k: int | None = 4, early_exit: float | None = 0.9) -> None:
        if k is not None and k < 1:
            raise ValueError("k must be >= 1 or None (all passages)")
        self.scorer = scorer
        self.k = k
        self.early_exit = early_exit

    def _fit(self, passage: Passage, claim_tokens: int) -> list[Passage]:
        """The passage, or windows of it small enough to sit next to the claim within the model's limit."""
        model = self.scorer.model
        room = model.max_length - model.special_tokens - claim_tokens - 2  # 2: tokenizer boundary slack
        if room < 16:
            raise InputError(
                f"claim of {claim_tokens} tokens leaves no room for evidence in the NLI model's "
                f"{model.max_length}-token window; split it into smaller claims",
                field="claim",
            )
        if passage.n_tokens and passage.n_tokens <= room:
            return [passage]
        windows = chunk_document(passage.text, passage.doc, model.tokenizer, room, overlap_tokens=room // 8)
        return [w.model_copy(update={"start": w.start + passage.start, "end": w.end + passage.start}) for w in windows]

    def check(self, items: Sequence[tuple[Sequence[str], Sequence[Passage]]]) -> list[list[ClaimNLI]]:
        """For each (claims, passages) item, one :class:`ClaimNLI` per claim, in order."""
        states: list[_ClaimState] = []
        all_claims = [c for claims, _ in items for c in claims]
        claim_tokens = iter(self.scorer.model.count_tokens(all_claims))
        for i, (claims, passages) in enumerate(items):
            bm25 = BM25([p.text for p in passages]) if claims and len(passages) > 1 else None
            for claim in claims:
                n_tok = next(claim_tokens)
                ranked = bm25.rank(claim) if bm25 is not None else list(range(len(passages)))
                if self.k is not None:
                    ranked = ranked[: self.k]
                result = ClaimNLI(passages_total=len(passages))
                try:
                    queue = [w for r in ranked for w in self._fit(passages[r], n_tok)]
                except InputError as exc:  # this claim only: the others of the batch are scored as usual
                    queue, result.error = [], str(exc)
                states.append(_ClaimState(item=i, claim=claim, queue=queue, result=result))
        round_no = 0
        while True:
            width = ROUNDS[round_no] if round_no < len(ROUNDS) else None
            pairs: list[tuple[str, str]] = []
            owners: list[tuple[_ClaimState, Passage]] = []
            for st in states:
                if st.done or not st.queue:
                    continue
                take = st.queue if width is None else st.queue[:width]
                st.queue = [] if width is None else st.queue[width:]
                for p in take:
                    pairs.append((p.text, st.claim))
                    owners.append((st, p))
            if not pairs:
                break
            probs = self.scorer.score(pairs)
            for (st, p), row in zip(owners, probs, strict=True):
                if st.done:
                    continue
                if not np.all(np.isfinite(row)):  # this claim only; never a score, never cached
                    st.result = ClaimNLI(
                        passages_total=st.result.passages_total,
                        error="the NLI model returned a non-finite probability for this claim",
                    )
                    st.done, st.queue = True, []
                    continue
                r = st.result
                r.passages_scored += 1
                if r.entailment_passage is None or row[ENTAILMENT] > r.entailment:
                    r.entailment, r.neutral, r.entailment_passage = float(row[ENTAILMENT]), float(row[NEUTRAL]), p
                if r.contradiction_passage is None or row[CONTRADICTION] > r.contradiction:
                    r.contradiction, r.contradiction_passage = float(row[CONTRADICTION]), p
            for st in states:
                if not st.done and self.early_exit is not None and st.result.entailment >= self.early_exit:
                    st.done = True
                    st.result.early_exit = bool(st.queue)
            round_no += 1
        out: list[list[ClaimNLI]] = [[] for _ in items]
        for st in states:
            out[st.item].append(st.result)
        return out


def score_claims(
    model: NLIModel,
    claims: Sequence[str],
    contexts: Sequence[Sequence[str]],
    *,
    k: int | None,
    passage_tokens: int,
    passage_overlap: int,
    cache: Any = None,
) -> list[ClaimNLI]:
    """Each claim's NLI result as the pipeline computes it under a verdict head: its sources cut into passages,
    BM25 top-``k``, every selected passage scored (no early exit), best entailment and contradiction. What
    calibrate and tune fit on; claims of one answer share its sources, which are cut once."""
    selector = EvidenceSelector(NLIScorer(model, cache), k=k, early_exit=None)
    cut: dict[tuple[str, ...], list[Passage]] = {}
    for ctx in contexts:
        if tuple(ctx) not in cut:
            cut[tuple(ctx)] = chunk_documents(list(ctx), model.tokenizer, passage_tokens, passage_overlap)
    items = [([claim], cut[tuple(ctx)]) for claim, ctx in zip(claims, contexts, strict=True)]
    return [res[0] for res in selector.check(items)]
