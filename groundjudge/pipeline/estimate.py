"""The dry run: how many LLM calls scoring some rows needs, how many the cache holds, and the cost, in numbers and
in words.

Exact where the cache makes it knowable: the dry run is the run's own flow (:func:`groundjudge.pipeline.flow.
stream`) over the run's steps (:class:`~groundjudge.pipeline.steps.Steps`) with LLM clients that defer every cache
miss instead of sending it (:meth:`LLMClient.deferring`) and caches that are read, never written
(:class:`ReadOnlyCache`); a deferred call parks its answer, and the dry run settles it by counting, never sending
(:class:`_DryRun`). NLI scores come from the cache alone (:class:`CachedScores`), the model is never run. So a row
whose claims are known (a claim row, or an answer whose claims call is cached) gets its exact sources-side call,
built by the judge step from the claims, the NLI routing and the NLI hints, checked against the cache; only where
the claims or their NLI scores are not cached yet is that call an upper bound.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

import diskcache
import numpy as np
from diskcache.core import DBNAME

from groundjudge.cache import Cache
from groundjudge.checker.nli import NLIModel, NLIScorer
from groundjudge.config import Config
from groundjudge.errors import InputError
from groundjudge.io.rows import batches
from groundjudge.llm import Ledger, LLMClient
from groundjudge.llm.base import REASONING_MAX_TOKENS, LLMRequest, reasoning_model
from groundjudge.llm.client import DeferredCall
from groundjudge.llm.packing import share_packed
from groundjudge.models import AnswerReport, Claim, QAItem, Sample, Usage
from groundjudge.pipeline.flow import stream
from groundjudge.pipeline.packing import packs
from groundjudge.pipeline.steps import StepContext, Steps
from groundjudge.pipeline.work import Work, error_report
from groundjudge.stages.judge import SOURCE_CHARS, JudgeReply, Source, VerifyReply, judge_messages, select_sources

# Rows per step of the dry run: its stages read the cache and never call a model, so a batch only bounds memory.
DRY_BATCH = 64

ContextFor = Callable[[LLMClient, LLMClient | None], StepContext]
"""(LLM client, second judge's client) -> the run's step context with these clients."""


class ReadOnlyCache(Cache):
    """A view of ``cache`` that reads its entries and writes nothing: ``set`` and ``clear`` do nothing, a directory
    that does not exist yet reads as empty (and is not made), a miss never raises (cache-only mode included: the dry
    run counts it), and the hit counters are the view's own."""

    def __init__(self, cache: Cache) -> None:
        super().__init__(cache.directory, mode="use" if cache.reads else "off")
        self.source = cache

    @property
    def store(self) -> diskcache.Cache:
        return self.source.store  # the one open store, never a second connection

    @property
    def writes(self) -> bool:
        return False

    @property
    def present(self) -> bool:
        """Whether the cache has been made (opening a store that does not exist would make it)."""
        return (self.directory / DBNAME).exists()

    def get(self, key: str, *, miss_ok: bool = False) -> Any | None:
        return super().get(key, miss_ok=True) if self.present else None

    def peek(self, key: str) -> bool:
        return self.present and super().peek(key)

    def set(self, key: str, value: Any) -> None:
        return None

    def clear(self, namespace: str | None = None) -> int:
        return 0

    def close(self) -> None:
        return None


class CachedScores(NLIScorer):
    """NLI scores from the cache alone, the model never run: a pair the cache lacks comes back as NaN (the evidence
    selector then marks that claim, as it marks a non-finite score) and its claim is remembered in ``missing``."""

    def __init__(self, model: NLIModel, cache: Cache) -> None:
        super().__init__(model, cache)
        self.missing: set[str] = set()  # claim texts (hypotheses) with a pair the cache lacks
        self._missing_lock = threading.Lock()

    def score(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        cache = self.cache
        unique = list(dict.fromkeys(pairs))
        known = [p for p in unique if cache is not None and cache.peek(self._key(*p))]
        if len(known) < len(unique):
            have = set(known)
            with self._missing_lock:
                self.missing |= {h for p, h in unique if (p, h) not in have}
        out = np.full((len(pairs), 3), np.nan, dtype=np.float32)
        if known:
            scores = dict(zip(known, super().score(known), strict=True))  # all cached: nothing is computed
            for i, pair in enumerate(pairs):
                if pair in scores:
                    out[i] = scores[pair]
        return out


@dataclass
class _Tally:
    """What the dry run found, call by call."""

    cached: int = 0  # answered by the cache: free
    exact: int = 0  # to send, known exactly (their messages and cache keys)
    bounded: int = 0  # may be sent: an upper bound (the claims or their NLI scores are not cached yet)
    cost: float = 0.0
    bounded_rows: dict[str, int] = field(default_factory=lambda: {"claims": 0, "nli": 0})
    # the second judge's calls, counted in the three above too
    second: dict[str, int] = field(default_factory=lambda: {"cached": 0, "exact": 0, "upper_bound": 0})


def estimate(
    rows: Iterable[Sample | dict[str, Any]],
    *,
    client: LLMClient | None,
    mode: str,
    config: Config,
    qa_expected: bool,
    cache: Cache,
    context: ContextFor,
    second_client: LLMClient | None = None,
) -> dict[str, Any]:
    """A dry run: the LLM calls scoring ``rows`` needs, how many the cache holds, the cost, and a ``note`` that says
    it in words ("all 12 calls are cached: this run is free").

    At most two calls per answer: one reads the answer (claims and QA questions), one reads the sources (verdicts
    and QA answers). The answer's call is known exactly. The sources' call is known exactly when the answer's claims
    are (a claim row; an answer whose claims call is cached) and their NLI scores are cached: the Evaluator's own
    stages build it from the cached claims, the NLI routing and hints, and its cache key is checked. Otherwise it
    is an upper bound: one call per answer, priced as if every claim went to the judge with the whole sources up to
    the judge's character budget.

    With a second judge (``second_client``), one more call for each answer it would look at: which answers the run
    flags is known only once the first judge has ruled, so where the first judge's verdicts are not cached (or the
    claims or their NLI scores are not), every answer that could be flagged counts as one second-judge call "up to"
    (an upper bound, priced as above at the second judge's price); where they are cached, the second judge's own
    call is built and checked against the cache as the first judge's is. Its calls are in every total, and apart
    under ``second_judge_calls``.

    Writes nothing: no cache entry (LLM or NLI; the caches are read through :class:`ReadOnlyCache`), no batch
    state, no output; sends nothing. Loads the NLI model (through the evaluator, which keeps it) only when some row
    has known claims, for its tokenizer and fingerprint; never runs it on a pair.

    Args:
        rows: the input rows.
        client: the LLM client (none, or ``mode`` "nli": no LLM calls).
        mode: the evaluation mode.
        config: the QA question count, the cache mode and whether calls go through the provider batch API.
        qa_expected: whether answers get the QA check.
        cache: the evaluator's cache (NLI scores; the client's own cache holds its replies).
        context: the run's step context with a dry client and a dry second-judge client (its NLI scorer is
            replaced by one that reads the cache alone).
        second_client: the second judge's client, if any.

    Returns:
        ``rows``, ``bad_rows``; ``cached_calls`` (free); ``exact_calls`` (to send, known exactly) and
        ``upper_bound_calls`` (may be sent), ``llm_calls_upper_bound`` (their sum: the most calls the run sends),
        ``upper_bound_rows`` (why: claims or NLI scores not cached yet); with a second judge
        ``second_judge_calls`` ({cached, exact, upper_bound}, inside the totals); ``estimated_cost_usd`` (None, with a
        ``cost`` note, for a model without a price: unknown, not 0); ``priced_as`` in batch mode; ``note``.
    """
    out: dict[str, Any] = {"rows": 0, "bad_rows": 0}
    tally = _Tally()
    llm = client is not None and mode != "nli"

    def cuts() -> Iterator[list[Work | AnswerReport]]:
        for cut in batches(enumerate(rows, start=1), DRY_BATCH):
            works: list[Work | AnswerReport] = []
            for n, _, parsed in cut:
                if isinstance(parsed, InputError):
                    out["bad_rows"] += 1
                else:
                    works.append(Work(sample=parsed, row=n))
            out["rows"] += len(works)
            if llm and works:
                yield works

    if llm:
        assert client is not None
        dry = _DryRun(client, cache, context, second_client, tally, qa_expected, config.batch_api, config.pack_answers)
        dry.count(cuts())
    else:
        for _ in cuts():
            pass
    to_send = tally.exact + tally.bounded
    out.update(
        {
            "llm_calls_upper_bound": to_send,
            "cached_calls": tally.cached,
            "exact_calls": tally.exact,
            "upper_bound_calls": tally.bounded,
            "upper_bound_rows": dict(tally.bounded_rows),
            "estimated_cost_usd": round(tally.cost, 6),
        }
    )
    if second_client is not None and llm:
        out["second_judge_calls"] = dict(tally.second)
    second_sends = tally.second["exact"] + tally.second["upper_bound"]
    if client is not None and client.price is None and to_send - second_sends:  # unknown, not 0
        out["estimated_cost_usd"] = None
        out["cost"] = (
            f"unknown: no price known for {client.model_id}; give one with --price IN,OUT (USD per million tokens "
            "input and output tokens) or price={'input_per_mtok': ..., 'output_per_mtok': ...} in Python"
        )
    elif second_client is not None and second_client.price is None and second_sends:
        out["estimated_cost_usd"] = None
        out["cost"] = (
            f"unknown: no price known for the second judge {second_client.model_id}; give one with "
            "second_judge_price={'input_per_mtok': ..., 'output_per_mtok': ...}"
        )
    if config.batch_api:
        out["priced_as"] = "provider batch API"
    out["note"] = _note(out, llm=llm, client=client, config=config)
    return out


class _DryRun:
    """The run's flow on clients that defer their misses, over caches that are read, never written: each parked
    answer is settled by counting its deferred calls (never sent), and each answer is tallied where the flow
    hands out its report (:class:`_DrySteps`)."""

    def __init__(
        self,
        client: LLMClient,
        cache: Cache,
        context: ContextFor,
        second: LLMClient | None,
        tally: _Tally,
        qa_expected: bool,
        batch: bool,
        pack: int = 1,
    ) -> None:
        self.client = client
        self.second = second
        self.dry_client = _dry_twin(client)
        self.dry_second = _dry_twin(second) if second is not None else None
        self.tally, self.qa_expected, self.batch = tally, qa_expected, batch
        self.parked: dict[int, str] = {}  # id(work) -> the step whose calls it holds deferred
        self.pack = pack  # answers per call (Config.pack_answers)
        self.packed: dict[str, Usage] = {}  # key of a call sent packed -> its share of the pack (calls, cost)
        self.deferred: list[list[DeferredCall]] = []
        self._calls: dict[str, DeferredCall] = {}
        nli_cache = ReadOnlyCache(cache)
        ctx = context(self.dry_client, self.dry_second)
        made: list[CachedScores] = []

        def scorer() -> CachedScores:
            if not made:  # when the NLI stage first runs: the model loads only then
                made.append(CachedScores(ctx.nli(), nli_cache))
            return made[0]

        self.steps = _DrySteps(dataclasses.replace(ctx, scorer=scorer), self)

    def count(self, cuts: Iterable[list[Work | AnswerReport]]) -> None:
        """Run the flow over ``cuts``, tallying every answer."""
        with ExitStack() as stack:
            clients = [c for c in (self.dry_client, self.dry_second) if c is not None]
            self.deferred = [stack.enter_context(c.deferring()) for c in clients]
            for _ in stream(cuts, self.steps, concurrency=self.steps.ctx.config.concurrency, parking=self):
                pass
        if self.steps.broke is not None:  # the NLI stage itself (the model would not load): no estimate
            raise self.steps.broke

    # -- the flow's Parking: count, never send ----------------------------------------------------------------

    def settle(self, step: str, works: list[Work]) -> list[Work]:
        for w in works:
            self.parked[id(w)] = step
        if self.pack > 1 and step in ("claims", "verify"):  # several answers per call: price the packs
            calls = list({key: self.call(key) for w in works for key in w.deferred}.values())
            for group in packs(calls, self.pack):
                if len(group) > 1:
                    packed = self.client.packed_request([c.request for c in group])
                    usage = Usage(calls=1, cost_usd=self.client.costs.estimate_cost(packed, batch=self.batch))
                    shares = share_packed(usage, [c.request for c in group])
                    self.packed.update((c.key, share) for c, share in zip(group, shares, strict=True))
        return []

    def again(self, step: Callable[[Work], None]) -> Callable[[Work], None]:
        return step  # never asked: nothing is settled to run again

    def call(self, key: str) -> DeferredCall:
        if key not in self._calls:
            for calls in self.deferred:
                self._calls.update((c.key, c) for c in calls)
        return self._calls[key]

    def tally_answer(self, w: Work, unscored: bool) -> None:
        """Add the calls of one answer to the tally: cached, exact (its deferred calls), and an upper bound for a
        sources-side call whose claims or NLI scores are not known; with a second judge, its call (exact or
        cached where the first judge's verdicts are known, else one "up to" for an answer that could be flagged)."""
        tally, batch = self.tally, self.batch
        parked = self.parked.get(id(w))
        second_cached = w.second.usage.cached_calls if w.second is not None else 0
        tally.cached += w.usage.cached_calls - second_cached
        first = w.deferred if parked in ("claims", "verify") else []
        ruled = parked in (None, "second") and not unscored and w.live  # the first judge's verdicts are known
        if self.dry_second is not None and self.second is not None:
            if ruled:
                tally.second["cached"] += second_cached
                tally.cached += second_cached
                for key in w.deferred if parked == "second" else []:
                    tally.second["exact"] += 1
                    tally.exact += 1
                    tally.cost += self.second.costs.estimate_cost(self.call(key).request, batch=batch)
            elif w.live:  # its claims, their NLI scores or the first judge's verdicts are not cached yet
                tally.second["upper_bound"] += 1
                tally.bounded += 1
                tally.cost += self.second.costs.estimate_cost(_bound_request(self.second, w, False), batch=batch)
        for key in first:  # a miss: the exact request the run would send (a packed one: its share of the pack)
            share = self.packed.get(key)
            if share is None:
                share = Usage(calls=1, cost_usd=self.client.costs.estimate_cost(self.call(key).request, batch=batch))
            tally.exact += share.calls
            tally.cost += share.cost_usd
        if parked == "claims":
            tally.bounded_rows["claims"] += 1
        elif unscored:
            tally.bounded_rows["nli"] += 1
        else:
            return
        tally.bounded += 1  # at most one sources-side call: an upper bound
        tally.cost += self.client.costs.estimate_cost(_bound_request(self.client, w, self.qa_expected), batch=batch)


class _DrySteps(Steps):
    """The run's steps for the dry run: the NLI stage only for answers with claims, noting those whose NLI scores
    the cache lacks (their routing, so their sources-side call and second look, are unknown: upper bounds); the
    report is the answer's tally."""

    def __init__(self, ctx: StepContext, dry: _DryRun) -> None:
        super().__init__(ctx)
        self.dry = dry
        self.unscored: set[int] = set()  # id(work): a claim without all its NLI scores cached
        self.broke: Exception | None = None  # what broke the NLI stage as a whole, raised once the flow is done

    def nli_stage(self, batch: list[Work]) -> None:
        with_claims = [w for w in batch if w.live and w.claims]  # no claims, no sources-side call: no NLI needed
        if not with_claims:
            return
        try:
            scorer = self.scorer
            assert isinstance(scorer, CachedScores)
            scorer.missing.clear()
            self._score_nli(with_claims)
            self._route(with_claims)
        except Exception as exc:
            self.broke = self.broke or exc
            raise
        missing = set(scorer.missing)
        self.unscored |= {id(w) for w in with_claims if w.live and any(cl.text in missing for cl in w.claims)}

    def needs_verify(self, w: Work) -> bool:
        return id(w) not in self.unscored and super().needs_verify(w)

    def needs_second(self, w: Work) -> bool:
        return id(w) not in self.unscored and super().needs_second(w)

    def report(self, w: Work) -> AnswerReport:
        self.dry.tally_answer(w, id(w) in self.unscored)
        return error_report("dry run: no report", w.row)


def _dry_twin(client: LLMClient) -> LLMClient:
    """A client with ``client``'s provider and request settings, so the same cache keys, reading its cache without
    writing it; its own ledger: the dry run spends nothing."""
    return client.twin(cache=ReadOnlyCache(client.cache) if client.cache is not None else None, ledger=Ledger())


def _bound_request(client: LLMClient, w: Work, qa: bool) -> LLMRequest:
    """A sources-side call at least as long as the real one, as ``client`` would send it (its schema included): every
    claim (the answer itself when its claims are not known yet) and the whole sources up to the judge's character
    budget."""
    s = w.sample
    sources = select_sources(s.contexts, []) or [Source(1, 0, 0, "\n\n".join(s.contexts)[:SOURCE_CHARS])]
    claims = w.claims or [Claim(id="c1", text=s.answer or s.claim or "")]
    questions = (w.questions or [QAItem(question=s.answer or "", answer_from_answer="")]) if qa and s.answer else []
    schema = VerifyReply if questions else JudgeReply
    return client.request_for(judge_messages(claims, sources, questions), schema)


def _calls(n: int) -> str:
    return f"{n} call{'s' if n != 1 else ''}"


def _usd(cost: float) -> str:
    return f"${cost:.4f}" if cost >= 0.0001 or cost == 0 else "less than $0.0001"


def _note(out: dict[str, Any], *, llm: bool, client: LLMClient | None, config: Config) -> str:
    """The estimate in words: what is free, what is to send, what it costs, and what is an upper bound."""
    cached, exact, bounded = out["cached_calls"], out["exact_calls"], out["upper_bound_calls"]
    to_send = exact + bounded
    total = cached + to_send
    if not llm:
        return "no LLM calls (nli mode): this run is free"
    if total == 0:
        return "no LLM calls needed: this run is free"
    if to_send == 0:
        return ("the one call is cached" if total == 1 else f"all {total} calls are cached") + ": this run is free"
    head = f"{cached} of {_calls(total)} {'is' if cached == 1 else 'are'} cached (free); "
    head += f"{'at most ' if bounded else ''}{_calls(to_send)} to send, "
    cost = out["estimated_cost_usd"]
    if cost is None:
        assert client is not None
        head += f"cost unknown (no price known for {client.model_id}: give one with --price IN,OUT)"
    else:
        head += f"about {_usd(cost)}" + (" at the batch API's price" if config.batch_api else "")
        assert client is not None
        if reasoning_model(client.provider.name, client.provider.model):  # its reasoning is billed, never seen
            head += (
                f" plus its reasoning: {client.model_id} reasons before it answers, and those tokens, billed as "
                f"output, are not in this estimate (up to {REASONING_MAX_TOKENS:,} a call with the reply; "
                "a --budget holds that much for each call in flight)"
            )
    second = out.get("second_judge_calls") or {"cached": 0, "exact": 0, "upper_bound": 0}
    first_exact, first_bounded = exact - second["exact"], bounded - second["upper_bound"]
    if first_bounded:
        rows = out["upper_bound_rows"]
        why = []
        if rows["claims"]:
            why.append(f"{rows['claims']} whose claims are not extracted yet")
        if rows["nli"]:
            why.append(f"{rows['nli']} whose NLI scores are not cached yet")
        head += (
            f"; {first_exact} exactly and up to {first_bounded} more: one sources-side call for each row "
            f"({' and '.join(why)}), counted as if every claim went to the judge"
        )
    if second["exact"] or second["upper_bound"]:
        head += f"; of these, second judge: {second['exact']} exactly"
        if second["upper_bound"]:
            head += (
                f" and up to {second['upper_bound']} more, one for each answer that could be flagged (which answers "
                "the run flags is known only once the first judge has ruled)"
            )
    if config.cache_mode == "only":
        head += "; in cache-only mode the run stops at the first call not cached"
    elif config.cache_mode in ("off", "refresh"):
        head += f"; the cache is not read (cache mode {config.cache_mode})"
    return head
