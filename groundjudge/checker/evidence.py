"""Evidence selection: which passages each claim is scored against, and the per-claim NLI result.

Passages are ranked for each claim by BM25; the top ``k`` (or all) are scored, with windows centred on the claim's
best-matching sentences (``checker.windows``), in rounds batched across every claim of every sample in the call:
the best sentence alone, then the best passage; the other passages (one round each, then the rest) and last the
sentence with its neighbours only for a claim whose best entailment so far lies at or just below a decision line
(``lines``, ``margin``): far below every line, more evidence rarely moves a claim across one, and above the
highest it cannot. A claim that any of its pieces disagrees with on a number or a month (``signals.conflict_of``)
gets every piece where the conflict check reads it (``conflicts``): the check reads the pieces with the best
entailment and the best contradiction, which a skipped piece could have been. A claim stops once a passage entails
it at ``early_exit`` or above. A claim too long to fit next to a passage gets that passage cut into smaller windows,
so that nothing is truncated; a claim too long for the model's window at all comes back unscored with ``error``
set.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from groundjudge.checker.bm25 import BM25
from groundjudge.checker.nli import CONTRADICTION, ENTAILMENT, NEUTRAL, NLIModel, NLIScorer
from groundjudge.checker.signals import conflict_of
from groundjudge.checker.windows import SHAPES, SentenceIndex
from groundjudge.chunking import chunk_document, chunk_documents
from groundjudge.errors import ArgumentError, InputError
from groundjudge.models import ClaimNLI, Passage

SENTENCES = 1  # best-matching sentences per claim whose centred windows are scored beside the passages
# pieces of the queue scored in round 1 (the sentence alone), round 2 (the best passage), round 3 (the next); every
# later round takes the rest: a claim one of them entails stops before the next, and each round is one batch
ROUNDS = (1, 1, 1)
# after the sentence alone and the best passage, a claim gets more evidence only while its best entailment is at or
# within this below a decision line: chosen by claim-disjoint cross-validation on the dev files (WiCE and
# Factcheck-GPT, nli mode; docs/explanation/checker-reading.md has the numbers)
MARGIN = 0.3


def stopped_hints(
    found: Sequence[tuple[str, ClaimNLI]],
    passages: Sequence[Passage],
    rank: Callable[[str], list[int]] | None = None,
) -> list[Passage]:
    """For each (claim text, result) whose scoring stopped early (``stages.route.settled_at``), the best BM25 passage
    of ``passages``: the piece the early exit left unscored, for the judge to read (no model pair is scored for it),
    so that what the judge reads does not depend on where the local scores stopped. ``rank``: a BM25 ranking of
    ``passages`` already built (else one is built here)."""
    stopped = [text for text, r in found if r.early_exit and r.passages_scored]
    if not stopped or not passages:
        return []
    rank = rank or BM25([p.text for p in passages]).rank
    return [passages[rank(text)[0]] for text in stopped]


@dataclass(frozen=True)
class ClaimPlan:
    """What one claim can be scored against (:meth:`EvidenceSelector.plan`), whatever its scores turn out to be."""

    item: int  # the (claims, passages) item it belongs to
    claim: str
    total: int  # the evidence it has: passages and windows (``ClaimNLI.passages_total``)
    pieces: tuple[Passage, ...]  # the pieces it can be scored against, in order
    free: int  # the first pieces, scored whatever the scores (the sentence alone, the best passage)
    error: str | None = None  # why it cannot be scored at all (a claim too long for the model's window)


@dataclass
class _ClaimState:
    item: int
    claim: str
    queue: list[Passage]  # passages still to score, in order
    free: int = 0  # the first pieces of the queue, scored whatever the scores (the sentence alone, the best passage)
    pieces: list[Passage] = field(default_factory=list)  # every piece the claim could be scored against
    conflicted: bool | None = None  # whether one of them conflicts with the claim (asked once, when it matters)
    result: ClaimNLI = field(default_factory=ClaimNLI)
    done: bool = False


class EvidenceSelector:
    """Scores claims against their most relevant passages.

    Args:
        scorer: the cached NLI scorer.
        k: passages per claim, best BM25 first; None scores every passage.
        early_exit: stop a claim once a passage entails it at this probability (None: never stop early).
        sentences: best-matching sentences per claim that get windows (default ``SENTENCES``; 0: passages alone).
        shapes: window shapes (``checker.windows``); the first is scored before the passages, the others after them.
        lines: the entailment levels at which a verdict changes (the thresholds in force). After the first shape's
            windows and the best passage, a claim's other passages and windows are scored only while its best
            entailment is at or within ``margin`` below one of them. None: every piece is scored, up to the early
            exit (a verdict head or a local contradiction call reads every score; ``benchmarks/savings.py`` compares
            the rule with it). Default (``"early exit"``): ``early_exit``'s level when it is set, else None.
        margin: how far below a line more evidence is still scored (default ``MARGIN``).
        conflicts: whether the number/month conflict check reads the results (``stages.route``'s
            ``conflict_check``, the head's ``conflict`` feature): True (every claim), False (the check is off), or
            whether it reads a claim at a best entailment (``stages.route.reads_conflict``: a claim decided locally;
            an escalated one carries no conflict). A claim it reads that one of its pieces conflicts with
            (``signals.conflict_of``) is scored on every piece, so that its best entailment's and best
            contradiction's pieces, which the check reads, are those scoring everything finds; a claim that none
            conflicts with has no conflict whichever pieces are scored, and keeps the savings.
    """

    def __init__(
        self,
        scorer: NLIScorer,
        k: int | None = 4,
        early_exit: float | None = 0.9,
        sentences: int | None = None,
        shapes: Sequence[str] = SHAPES,
        lines: Sequence[float] | Literal["early exit"] | None = "early exit",
        margin: float | None = None,
        conflicts: bool | Callable[[float], bool] = True,
    ) -> None:
        if k is not None and k < 1:
            raise ArgumentError("k must be >= 1 or None (all passages)")
        sentences = SENTENCES if sentences is None else sentences
        if sentences < 0:
            raise ArgumentError("sentences must be >= 0")
        self.scorer = scorer
        self.k = k
        self.early_exit = early_exit
        self.sentences = sentences
        self.shapes = tuple(shapes)
        self.margin = MARGIN if margin is None else margin
        if self.margin < 0:
            raise ArgumentError("margin must be >= 0")
        if lines == "early exit":
            lines = None if early_exit is None else (early_exit,)
        self.lines: tuple[float, ...] | None = None if lines is None else tuple(lines)
        self.conflicts = conflicts

    def _unclear(self, entailment: float) -> bool:
        """Whether more evidence could still move the claim across a decision line: its best entailment so far is at
        or within ``margin`` below one (more evidence only ever raises the best entailment)."""
        if self.lines is None:
            return True
        return any(line - self.margin <= entailment <= line for line in self.lines)

    def _reads_all(self, st: _ClaimState) -> bool:
        """Whether the claim gets every piece whatever its scores: the conflict check reads it at its best
        entailment and one of its pieces conflicts with it (then a piece left unscored could have been the one the
        check reads). Asked where the rule would stop the claim: its verdict stays where it stands (more evidence
        rarely moves it across a line), so does whether the check reads it."""
        if self.conflicts is False or (callable(self.conflicts) and not self.conflicts(st.result.entailment)):
            return False
        if st.conflicted is None:
            st.conflicted = any(conflict_of(st.claim, p.text) is not None for p in st.pieces)
        return st.conflicted

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
        return self.run(self.plan(items), len(items))

    def plan(self, items: Sequence[tuple[Sequence[str], Sequence[Passage]]]) -> list[ClaimPlan]:
        """Every piece each claim of ``items`` could be scored against, in the order :meth:`run` scores them. It
        reads no score, nor ``early_exit``, ``lines``, ``margin`` or ``conflicts``: one plan can be run under any of
        them (``benchmarks/accuracy.py --threshold-cv`` replays stored scores this way)."""
        plans: list[ClaimPlan] = []
        all_claims = [c for claims, _ in items for c in claims]
        claim_tokens = iter(self.scorer.model.count_tokens(all_claims))
        drafts: list[tuple[int, str, int, int, list[Passage], list[tuple[str, Passage]]]] = []
        for i, (claims, passages) in enumerate(items):
            bm25 = BM25([p.text for p in passages]) if claims and len(passages) > 1 else None
            index = SentenceIndex(passages) if claims and self.sentences else None
            for claim in claims:
                ranked = bm25.rank(claim) if bm25 is not None else list(range(len(passages)))
                if self.k is not None:
                    ranked = ranked[: self.k]
                centred = index.shaped(claim, self.sentences, self.shapes) if index is not None else []
                # the windows count as evidence beside the passages: "passages scored 3 of 19" never reads 3 of 17
                total = len(passages) + len(centred)
                drafts.append((i, claim, total, next(claim_tokens), [passages[r] for r in ranked], centred))
        # the centred windows' own token counts, in one call (a window that fits next to its claim is never cut)
        counts = iter(self.scorer.model.count_tokens([w.text for *_, centred in drafts for _, w in centred]))
        for i, claim, total, n_tok, ranked_passages, centred in drafts:
            shaped = [(shape, w.model_copy(update={"n_tokens": next(counts)})) for shape, w in centred]
            # the best sentence's window first (short: a claim it entails stops early), then the passages, then the
            # other windows; after the best passage, only while the claim is unclear
            first = [w for shape, w in shaped if shape == self.shapes[0]]
            rest = [w for shape, w in shaped if shape != self.shapes[0]]
            try:
                free = [w for p in [*first, *ranked_passages[:1]] for w in self._fit(p, n_tok)]
                pieces = free + [w for p in [*ranked_passages[1:], *rest] for w in self._fit(p, n_tok)]
                plans.append(ClaimPlan(i, claim, total, tuple(pieces), len(free)))
            except InputError as exc:  # this claim only: the others of the batch are scored as usual
                plans.append(ClaimPlan(i, claim, total, (), 0, str(exc)))
        return plans

    def run(self, plans: Sequence[ClaimPlan], n_items: int) -> list[list[ClaimNLI]]:
        """Score planned claims (:meth:`plan`) in rounds under this selector's early exit, lines, margin and
        conflict rule: for each of ``n_items`` items, one :class:`ClaimNLI` per claim, in order.

        Raises:
            ArgumentError: a plan belongs to no item below ``n_items``.
        """
        if any(not 0 <= pl.item < n_items for pl in plans):
            raise ArgumentError(f"a plan's item is outside the {n_items} items run")
        states = [
            _ClaimState(
                item=pl.item,
                claim=pl.claim,
                queue=list(pl.pieces),
                free=pl.free,
                pieces=list(pl.pieces),
                result=ClaimNLI(passages_total=pl.total),
            )
            for pl in plans
        ]
        for st, pl in zip(states, plans, strict=True):
            if pl.error is not None:
                st.result.error = pl.error
        round_no = 0
        while True:
            width = ROUNDS[round_no] if round_no < len(ROUNDS) else None
            pairs: list[tuple[str, str]] = []
            owners: list[tuple[_ClaimState, Passage]] = []
            for st in states:
                if st.done or not st.queue:
                    continue
                if st.free <= 0 and not self._unclear(st.result.entailment) and not self._reads_all(st):
                    st.queue = []  # no more evidence can move this claim across a line, nor change its conflict
                    continue
                n = len(st.queue) if width is None else width
                if st.free > 0:  # the unconditional pieces never share a round with those the gate decides
                    n = min(n, st.free)
                take, st.queue = st.queue[:n], st.queue[n:]
                st.free -= len(take)
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
        out: list[list[ClaimNLI]] = [[] for _ in range(n_items)]
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
