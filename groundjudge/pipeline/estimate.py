"""The dry run: how many LLM calls scoring some rows needs, how many the cache holds, and the cost, in numbers and
in words.

Exact where the cache makes it knowable: the dry run drives the Evaluator's own stage steps (:class:`Stages`) on a
twin of it whose LLM client defers every cache miss instead of sending it (:meth:`LLMClient.deferring`) and whose
caches are read, never written (:class:`ReadOnlyCache`); NLI scores come from the cache alone (:class:`CachedScores`),
the model is never run. So a row whose claims are known (a claim row, or an answer whose claims call is cached) gets
its exact sources-side call, built by the judge stage from the claims, the NLI routing and the NLI hints, checked
against the cache; only where the claims or their NLI scores are not cached yet is that call an upper bound.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
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
from groundjudge.llm.client import DeferredCall
from groundjudge.models import Claim, Message, QAItem, Sample
from groundjudge.pipeline.work import Work
from groundjudge.stages.judge import SOURCE_CHARS, Source, judge_messages, select_sources

# Rows per step of the dry run: its stages read the cache and never call a model, so a batch only bounds memory.
DRY_BATCH = 64

Stage = Callable[[list[Work]], None]


@dataclass(frozen=True)
class Stages:
    """The Evaluator's stage steps, on a twin that reads the caches it is given and defers what they lack."""

    claims: Stage
    nli: Stage
    route: Stage
    verify: Stage
    second: Stage | None = None  # the second judge's calls (README "Second judge")


StagesFor = Callable[[LLMClient, Cache, Callable[[NLIModel], NLIScorer], LLMClient | None], Stages]
"""(LLM client, NLI cache, NLI scorer factory, second judge's client) -> the stage steps of an Evaluator twin
using them."""


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
    stages: StagesFor,
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
        stages: builds the Evaluator's stage steps on a dry client, a read-only cache, an NLI scorer and a dry
            second-judge client.
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
    dry: _DryRun | None = None
    for cut in batches(enumerate(rows, start=1), DRY_BATCH):
        works = []
        for n, _, parsed in cut:
            if isinstance(parsed, InputError):
                out["bad_rows"] += 1
            else:
                works.append(Work(sample=parsed, row=n))
        out["rows"] += len(works)
        if not llm or not works:
            continue
        assert client is not None
        dry = dry or _DryRun(client, cache, stages, second_client)
        dry.count(works, tally, config=config, qa_expected=qa_expected)
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
    """The Evaluator's stages on a client that defers its misses, over caches that are read, never written."""

    def __init__(self, client: LLMClient, cache: Cache, stages: StagesFor, second: LLMClient | None = None) -> None:
        self.client = client
        self.second = second
        self.dry_client = _dry_twin(client)
        self.dry_second = _dry_twin(second) if second is not None else None
        self.scorers: list[CachedScores] = []
        nli_cache = ReadOnlyCache(cache)

        def scorer(model: NLIModel) -> NLIScorer:
            made = CachedScores(model, nli_cache)
            self.scorers.append(made)
            return made

        self.stages = stages(self.dry_client, nli_cache, scorer, self.dry_second)

    def count(self, works: list[Work], tally: _Tally, *, config: Config, qa_expected: bool) -> None:
        """Add the calls of one batch of answers to ``tally``."""
        st = self.stages
        with self.dry_client.deferring() as deferred:
            st.claims(works)
            unextracted = {id(w) for w in works if w.deferred}  # their claims call is not cached: claims unknown
            known = [w for w in works if w.live and not w.deferred]
            with_claims = [w for w in known if w.claims]  # no claims, no sources-side call: no NLI needed
            for s in self.scorers:
                s.missing.clear()
            if with_claims:
                st.nli(with_claims)
                st.route(with_claims)
            missing = set().union(*(s.missing for s in self.scorers))
            # a claim without all its NLI scores cached: its routing and hints, so the sources-side call, unknown
            unscored = {id(w) for w in with_claims if w.live and any(cl.text in missing for cl in w.claims)}
            st.verify([w for w in known if w.live and id(w) not in unscored])
        calls = {call.key: call for call in deferred}
        batch = config.batch_api
        # the second judge: exact where the first judge's verdicts are known (cached, or none needed)
        first_keys = {id(w): len(w.deferred) for w in works}
        ruled = [w for w in known if w.live and id(w) not in unscored and not w.deferred]
        if self.dry_second is not None and self.stages.second is not None:
            with self.dry_second.deferring() as second_deferred:
                self.stages.second(ruled)
            calls.update({call.key: call for call in second_deferred})
            self._count_second(works, ruled, first_keys, tally, batch, calls)
        for w in works:
            tally.cached += w.usage.cached_calls - (w.second.usage.cached_calls if w.second is not None else 0)
            for key in w.deferred[: first_keys[id(w)]]:  # a miss: the exact request the run would send
                tally.exact += 1
                tally.cost += self.client.estimate_cost(_messages(calls[key]), batch=batch)
            if id(w) in unextracted:
                tally.bounded_rows["claims"] += 1
            elif id(w) in unscored:
                tally.bounded_rows["nli"] += 1
            else:
                continue
            tally.bounded += 1  # at most one sources-side call: an upper bound
            tally.cost += self.client.estimate_cost(_bound_messages(w, qa_expected), batch=batch)

    def _count_second(
        self,
        works: list[Work],
        ruled: list[Work],
        first_keys: dict[int, int],
        tally: _Tally,
        batch: bool,
        calls: dict[str, DeferredCall],
    ) -> None:
        """The second judge's calls of one batch: cached and exact for the answers whose first verdicts are known
        (``ruled``), one "up to" for each other answer that could be flagged (claims unknown, or some)."""
        assert self.second is not None and self.dry_second is not None
        known = {id(w) for w in ruled}
        for w in works:
            if id(w) in known:
                if w.second is None:
                    continue
                tally.second["cached"] += w.second.usage.cached_calls
                tally.cached += w.second.usage.cached_calls
                for key in w.deferred[first_keys[id(w)] :]:
                    tally.second["exact"] += 1
                    tally.exact += 1
                    tally.cost += self.second.estimate_cost(_messages(calls[key]), batch=batch)
            elif w.live:  # its claims, their NLI scores or the first judge's verdicts are not cached yet
                tally.second["upper_bound"] += 1
                tally.bounded += 1
                tally.cost += self.second.estimate_cost(_bound_messages(w, False), batch=batch)


def _dry_twin(client: LLMClient) -> LLMClient:
    """A client with ``client``'s provider and request settings, so the same cache keys, reading its cache without
    writing it; its own ledger: the dry run spends nothing."""
    return LLMClient(
        client.provider,
        cache=ReadOnlyCache(client.cache) if client.cache is not None else None,
        ledger=Ledger(),
        retry=client.retry,
        max_reasks=client.max_reasks,
        temperature=client.temperature,
        seed=client.seed,
        max_tokens=client.max_tokens,
        price=client.price,
    )


def _messages(call: DeferredCall) -> list[Message]:
    return list(call.request.messages)


def _bound_messages(w: Work, qa: bool) -> list[Message]:
    """A sources-side call at least as long as the real one: every claim (the answer itself when its claims are not
    known yet) and the whole sources up to the judge's character budget."""
    s = w.sample
    sources = select_sources(s.contexts, []) or [Source(1, 0, 0, "\n\n".join(s.contexts)[:SOURCE_CHARS])]
    claims = w.claims or [Claim(id="c1", text=s.answer or s.claim or "")]
    questions = (w.questions or [QAItem(question=s.answer or "", answer_from_answer="")]) if qa and s.answer else []
    return judge_messages(claims, sources, questions)


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
