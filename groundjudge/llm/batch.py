"""The providers' batch APIs for offline runs: half price, results within a day, answered into the same cache.

Collect the calls a stage would make with :meth:`LLMClient.deferring`, then::

    outcome = BatchRunner(client, "out.jsonl.batches.json", progress=bar).run(deferred)

The runner writes the requests in the provider's batch format, with the same body the direct path sends
(OpenAI: a JSONL file uploaded with ``purpose="batch"``, then a batch on ``/v1/chat/completions`` with a 24 h
window; Anthropic: one Message Batch), and writes the batch ids and the cache keys they cover to ``state_path``
(atomically) before it polls. A rerun with the same calls finds them there and collects those batches instead of
submitting (and paying for) the same requests again.

Jobs may share one state file (the Python API's default is ``batches.json`` in the cache folder): each batch is
one entry, keyed by its id; every change is made under the file's lock on the file as it is then
(:mod:`groundjudge.llm.batch_state`), so no job erases another's entries. A job submits only keys that no batch in
the file covers (a key another job already sent is collected from that job's batch, paid once), and holds the lock
from that check until the new batch's id is written, so two jobs never send the same key.

A batch the provider created whose id never reached the file (the process died after ``create``, or the reply was
lost on the wire) is found again rather than paid twice: each entry is written before its create, with a tag (a
digest of the model identity and the keys); OpenAI batches carry the tag in their ``metadata``. A create that
fails without a clear refusal is looked for at the provider before it is tried again, and a run that finds an
entry with a tag and no id looks for it before submitting anything (OpenAI: the listed batches' metadata;
Anthropic, which has no metadata: an ended batch since then whose results hold exactly the entry's custom ids, or
the one running batch with as many requests). Found, it is adopted (``BatchOutcome.adopted``); not found, its
keys are submitted anew. Each result is parsed like a direct response, validated with
the call's schema and check, and cached under the call's key exactly as the direct path would; its usage is
counted in the client's ledger at the batch price. Failures (errored, expired, canceled, refused, invalid JSON,
failed check) are not cached; they are in :attr:`BatchOutcome.failures` for the caller to call directly.

A resumed batch may hold results for keys this run did not defer (an earlier run deferred more). Their schema and
check are unknown here, so they are not cached: their raw response bodies are kept in a side file beside the state
file (``<state>.results.jsonl``, rewritten atomically), and the state entry lists them under ``kept``. A later run
that defers one of those keys takes its result from there (validated, cached, counted in the ledger) instead of
asking (and paying) again.

A batch is counted once, by the run that submitted it: a run that stops before collecting its batch (still
running, polling failed, an interrupt) counts each of its requests at its worst case at the batch price, unsettled,
and notes that in the state entry (``counted``); the run that collects such a batch reports what it cost
(:attr:`BatchOutcome.counted_earlier`) but neither counts it in its ledger nor charges it to an answer.

Each provider's batch API is in its own file behind :class:`~groundjudge.llm.base.BatchApi`
(:mod:`groundjudge.llm.openai_batch`, :mod:`groundjudge.llm.anthropic_batch`), got from the provider's
``batch_api()``; this module keeps the planning, the state file, the polling and the taking of results.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from groundjudge import errors
from groundjudge.llm.base import BatchApi, BatchStatus, LLMResponse, shown_server
from groundjudge.llm.batch_state import BatchStateFile, StateTransaction
from groundjudge.llm.client import DeferredCall, LLMClient
from groundjudge.models import Usage

log = logging.getLogger(__name__)

CLOCK_SKEW_SECONDS = 600.0  # a lost batch is looked for among those created since its entry, less this
RESULT_READS = 5  # reads of an ended batch's results, a poll apart, before a fault there is raised


@dataclass
class BatchOutcome:
    """What a :meth:`BatchRunner.run` did, in requests (distinct cache keys).

    ``submitted``: sent in new batches by this run; ``resumed``: covered by batches in the state file (an earlier
    run's or another job's); ``adopted``: covered by a batch found again at the provider, whose create reply was
    lost (in this run or an earlier one); ``already_cached``: in the cache before the run, not sent. Of the rest,
    ``succeeded`` were cached, ``failed`` errored, were canceled, refused or invalid, and ``expired`` were not
    answered before the batch expired; every key not cached is in ``failures`` with the reason. ``usage`` is what
    the results cost, at the batch price (an answer for no request of this run's, a custom id the entry does not
    hold or a second answer for one request, too: the provider billed it); ``usage_by_key`` is the same split by
    cache key (each accepted or failed result that was billed; such stray answers are in no key), so that a caller
    can charge each answer its share. ``counted_earlier``: the
    part of ``usage`` from batches an earlier run submitted and counted when it stopped before collecting them (at
    their worst case, unsettled): not counted again in this client's ledger, nor in ``usage_by_key``.
    """

    submitted: int = 0
    succeeded: int = 0
    failed: int = 0
    expired: int = 0
    resumed: int = 0
    adopted: int = 0
    already_cached: int = 0
    usage: Usage = field(default_factory=Usage)
    usage_by_key: dict[str, Usage] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    batch_ids: list[str] = field(default_factory=list)
    counted_earlier: Usage = field(default_factory=Usage)


class BatchRunner:
    """Send deferred calls through the provider's batch API, resumably; see the module docstring.

    ``poll_seconds`` between status reads, through ``sleep``; ``progress(done, total)`` after each round of reads;
    after ``max_wait_seconds`` of waiting, :class:`~groundjudge.errors.BatchPendingError` (the batch keeps
    running and a rerun collects it). A create whose reply does not come back is looked for at the provider, then
    tried again, ``create_attempts`` times in all.
    """

    def __init__(
        self,
        client: LLMClient,
        state_path: str | Path,
        *,
        poll_seconds: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
        progress: Callable[[int, int], None] | None = None,
        max_wait_seconds: float = 24 * 3600,
        create_attempts: int = 3,
    ) -> None:
        self.client = client
        self.store = BatchStateFile(state_path)
        self.state_path = self.store.path
        self.results_path = self.store.results_path
        self.poll_seconds = poll_seconds
        self.sleep = sleep
        self.progress = progress
        self.max_wait_seconds = max_wait_seconds
        self.create_attempts = max(1, create_attempts)
        self._fresh: dict[str, list[DeferredCall]] = {}  # batches this run created (paid from its reservation)
        self._fresh_usage = Usage()  # what the fresh batches collected so far cost
        self._lost = Usage()  # creates whose reply was lost and whose batch was not found: each may be billed
        self._held = (0.0, 0)  # held beyond the first create of each chunk (for the creates after a lost one)
        self._cache_dir = str(Path(client.cache.directory).resolve()) if client.cache is not None else ""
        self._wanted: dict[str, set[str]] = {}  # per live batch, the keys this run takes from it
        find = getattr(client.provider, "batch_api", None)
        api: BatchApi | None = find() if callable(find) else None
        if api is None:
            raise errors.ConfigError(f"{client.model_id} has no batch API (only openai/ and anthropic/ models do)")
        self.api = api
        if client.cache is None or not client.cache.writes:
            raise errors.ConfigError("batch results are read into the cache: the client needs a writable cache")

    # -- the run --------------------------------------------------------------------------------------------

    def run(self, calls: Sequence[DeferredCall]) -> BatchOutcome:
        """Answer ``calls`` into the cache through batches; see :class:`BatchOutcome` for what is reported."""
        client, cache = self.client, self.client.cache
        assert cache is not None
        outcome = BatchOutcome()
        pending: dict[str, DeferredCall] = {}
        for call in calls:
            if call.key in pending:
                continue
            if cache.peek(call.key):
                outcome.already_cached += 1
                continue
            pending[call.key] = call
        identity = client.provider.identity()
        self._fresh, self._wanted, self._fresh_usage, self._lost, self._held = {}, {}, Usage(), Usage(), (0.0, 0)
        live: list[dict[str, Any]] = []
        reserved, n_new = 0.0, 0
        try:
            # Under the lock from planning to the last batch id written: no other job submits the same keys.
            with self.store.transaction() as tx:
                covered = self._plan(tx, pending, identity, outcome, live)
                new = [call for key, call in pending.items() if key not in covered]
                if new:
                    cost = sum(client.costs.worst_case_cost(call.request, batch=True) for call in new)
                    client.ledger.reserve(cost, calls=len(new))  # the whole batch's worst case, before submitting
                    reserved, n_new = cost, len(new)
                for chunk in _chunked(self.api, new):
                    entry = self._submit(tx, chunk, identity)
                    self._fresh[entry["id"]] = chunk
                    self._wanted[entry["id"]] = {call.key for call in chunk}
                    live.append(copy.deepcopy(entry))
                    if entry.get("adopted"):
                        outcome.adopted += len(chunk)
                    else:
                        outcome.submitted += len(chunk)
                    outcome.batch_ids.append(entry["id"])
            self._wait_and_collect(live, pending, outcome)
        finally:
            if n_new:
                spent = self._fresh_usage + self._uncollected(live) + self._lost
                client.ledger.settle(reserved + self._held[0], spent, calls=n_new + self._held[1])
        return outcome

    def _uncollected(self, live: list[dict[str, Any]]) -> Usage:
        """What the batches this run submitted and did not collect count (it stops: still running, polling failed,
        an interrupt): billed at the provider whether or not a later run collects them, so each of their requests
        at its worst case at the batch price, unsettled (:meth:`~groundjudge.llm.costs.CallCosts.unanswered`). The
        state entry notes it (``counted``): the run that collects the batch then counts it no more."""
        left = [e["id"] for e in live if e["id"] in self._fresh and not e.get("collected")]
        usage = Usage()
        for batch_id in left:
            counted = _worst_case(self.client, self._fresh[batch_id])
            log.warning(
                "%s: batch %s not collected; counted at %s", self.client.model_id, batch_id, counted.cost_text()
            )
            usage = usage + counted
        if left:
            _note_counted(self.store, left)
        return usage

    def _plan(
        self,
        tx: StateTransaction,
        pending: dict[str, DeferredCall],
        identity: dict[str, Any],
        outcome: BatchOutcome,
        live: list[dict[str, Any]],
    ) -> set[str]:
        """The pending keys that batches in the state cover (any job's); takes the results already collected and
        finds again the batches whose create reply was lost. Live batches go to ``live``."""
        covered: set[str] = set()
        ours = (stored_identity(identity), identity)  # as written now, or as an older groundjudge wrote it
        for entry in list(tx.entries):
            if entry.get("identity") not in ours or entry.get("cache", self._cache_dir) != self._cache_dir:
                continue  # another model's, or answered into another cache (which this run cannot read)
            keys = set(entry["custom_ids"].values()) & (set(pending) - covered)
            if not keys:
                continue
            if entry.get("id") is None:  # created (maybe) by a run that died before it learnt the batch id
                found = _find_lost(self.api, tx, entry)
                tx.dirty = True
                if found is None:
                    log.warning("batch tagged %s: not at the provider, so never created; submitting anew", entry["tag"])
                    tx.entries.remove(entry)
                    continue
                log.info("batch tagged %s: found again at the provider as %s", entry["tag"], found)
                entry["id"], entry["adopted"] = found, True
                tx.save()
                outcome.adopted += len(keys)
            else:
                outcome.resumed += len(keys)
            covered |= keys
            outcome.batch_ids.append(entry["id"])
            if entry.get("collected"):
                usage = self._take_kept(tx, entry, keys, pending, outcome)
                _count_earlier(self.client, entry, usage, keys, outcome)
                outcome.usage = outcome.usage + usage
            else:
                self._wanted[entry["id"]] = keys
                live.append(copy.deepcopy(entry))
        return covered

    def _take_kept(
        self,
        tx: StateTransaction,
        entry: dict[str, Any],
        keys: set[str],
        pending: dict[str, DeferredCall],
        outcome: BatchOutcome,
    ) -> Usage:
        """Answer ``keys`` of a batch that a run (this job's or another's) collected already: from the cache, from
        the kept results, else they failed there. Returns what the kept results cost."""
        cache = self.client.cache
        assert cache is not None
        usage = Usage()
        for key in sorted(keys):
            line = tx.kept.get(key)
            if cache.peek(key):  # another job took it meanwhile (and was billed for it)
                outcome.succeeded += 1
            elif key in entry.get("kept", ()) and line is not None and line.get("batch") == entry["id"]:
                # answered for a run that did not ask for it: take it now, already paid for
                usage = usage + self._take(entry, key, pending[key], line.get("body"), outcome)
            elif key in entry.get("kept", ()):
                _fail(
                    outcome, key, f"batch {entry['id']} answered it, but its kept result is not in {self.results_path}"
                )
            else:  # answered or failed in an earlier run; not cached now, so failed then
                why = entry.get("failures", {}).get(key, f"batch {entry['id']} answered it, but it is not cached")
                _fail(outcome, key, why)
            if key in entry.get("kept", ()):
                tx.kept.pop(key, None)
                entry["kept"] = [k for k in entry["kept"] if k != key]
                tx.dirty = True
        return usage

    def _submit(self, tx: StateTransaction, chunk: list[DeferredCall], identity: dict[str, Any]) -> dict[str, Any]:
        """Create one batch for ``chunk`` (or find the one a lost reply created) and write its id to the state.

        The entry goes to the state file first, with the batch's tag and no id: a run that dies before the id is
        written leaves it there, and the next run looks the tag up at the provider before it submits anything.
        """
        ids = {self.api.custom_id(call.key): call.key for call in chunk}
        tag = batch_tag(identity, ids.values())
        requests = [(self.api.custom_id(call.key), self.api.params(call.request)) for call in chunk]
        make = self.api.creator(requests, tag)  # uploads the input file first (OpenAI): nothing billed yet
        entry: dict[str, Any] = {
            "id": None,
            "tag": tag,
            "api": self.api.name,
            "identity": stored_identity(identity),
            "cache": self._cache_dir,
            "custom_ids": ids,
            "submitted_at": time.time(),
            "collected": False,
            "failures": {},
        }
        tx.entries.append(entry)
        tx.save()
        try:
            batch_id, adopted = self._create(tx, entry, make, chunk)
        except errors.GroundjudgeError as exc:
            if not exc.retryable and not entry.get("counted"):  # refused: the provider has no such batch
                tx.entries.remove(entry)
            tx.save()
            raise
        entry["id"] = batch_id
        if adopted:
            entry["adopted"] = True
        tx.save()  # before polling: a crash from here on resumes this batch
        log.info(
            "%s: %s batch %s with %d requests",
            self.client.model_id,
            "found" if adopted else "submitted",
            batch_id,
            len(chunk),
        )
        return entry

    def _create(
        self, tx: StateTransaction, entry: dict[str, Any], make: Callable[[], str], chunk: list[DeferredCall]
    ) -> tuple[str, bool]:
        """The batch id, and whether the batch was found again rather than created by this call.

        A create whose reply was lost (a timeout, a connection lost after sending) and whose batch is not found
        may have made a batch, billed: it counts, each request at its worst case at the batch price, unsettled, and
        the next create holds a worst case of its own first (:class:`~groundjudge.errors.BudgetExceededError` when
        the budget has no room for it). A run ending with such a create marks the entry ``counted``: the run that
        finds the batch again counts it no more."""
        last: errors.GroundjudgeError | None = None
        lost = 0
        try:
            for attempt in range(self.create_attempts):
                if lost:  # the hold this chunk had is the lost create's now
                    usd, calls = _hold(self.client, chunk)
                    self._held = (self._held[0] + usd, self._held[1] + calls)
                try:
                    return make(), False
                except errors.GroundjudgeError as exc:
                    if not exc.retryable:
                        raise
                    last = exc
                # The provider may have created it and the reply was lost: look before creating again.
                log.warning(
                    "batch create %d/%d: %s; looking for it at the provider", attempt + 1, self.create_attempts, last
                )
                self.sleep(min(self.poll_seconds, 10.0))
                found = _find_lost(self.api, tx, entry)
                if found is not None:
                    return found, True
                if isinstance(last, errors.LLMError) and last.maybe_billed:
                    lost += 1
                    self._lost = self._lost + _lost_create(self.client, chunk, entry["tag"])
            assert last is not None
            raise last
        except BaseException:
            if lost:
                entry["counted"] = True
            raise

    def _wait_and_collect(
        self,
        live: list[dict[str, Any]],
        pending: dict[str, DeferredCall],
        outcome: BatchOutcome,
    ) -> None:
        """Poll every live batch until all ended, collecting each as it ends (the fresh ones' usage adds up in
        ``_fresh_usage``)."""
        total = sum(len(entry["custom_ids"]) for entry in live)
        waited = 0.0
        faults: dict[str, int] = {}  # per batch, the reads of its results that failed
        while True:
            done, running = 0, []
            for entry in live:
                if entry.get("collected"):
                    done += len(entry["custom_ids"])
                    continue
                try:
                    status = self.api.status(entry["id"])
                except errors.GroundjudgeError as exc:
                    if not exc.retryable:
                        raise
                    log.warning("batch %s: status unknown (%s); polling again", entry["id"], exc)
                    running.append(entry)
                    continue
                if not status.ended:
                    done += status.done
                    running.append(entry)
                    continue
                try:
                    usage = self._collect(entry, status, pending, outcome)
                except errors.GroundjudgeError as exc:
                    faults[entry["id"]] = faults.get(entry["id"], 0) + 1
                    if not exc.retryable or faults[entry["id"]] >= RESULT_READS:
                        raise  # the entry stays uncollected: a later run reads its results again
                    # ended and paid for: a transient fault reading its results (read before anything is taken)
                    # is read again, never the whole batch failed
                    log.warning("batch %s: results unread (%s); reading them again", entry["id"], exc)
                    running.append(entry)
                    continue
                if entry["id"] in self._fresh:
                    self._fresh_usage = self._fresh_usage + usage
                else:
                    _count_earlier(self.client, entry, usage, self._wanted.get(entry["id"], ()), outcome)
                outcome.usage = outcome.usage + usage
                entry["collected"] = True
                done += len(entry["custom_ids"])
            if self.progress is not None:
                self.progress(done, total)
            if not running:
                return
            if waited >= self.max_wait_seconds:
                ids = [e["id"] for e in running]
                raise errors.BatchPendingError(
                    f"{self.client.model_id}: batch {', '.join(ids)} still running after {waited:g} s; it keeps "
                    f"running and the next run with the same state file ({self.state_path}) collects it",
                    batch_ids=ids,
                    state_path=str(self.state_path),
                )
            self.sleep(self.poll_seconds)
            waited += self.poll_seconds

    def _collect(
        self, entry: dict[str, Any], status: BatchStatus, pending: dict[str, DeferredCall], outcome: BatchOutcome
    ) -> Usage:
        """Read an ended batch's results into the cache; record failures in the outcome and in the state entry.

        The results are downloaded first; then, under the lock, the entry as the file holds it now: when another
        job collected it meanwhile, this run's keys come from what that job kept. Otherwise the keys this run waits
        for are taken (cached), the others kept in the side file for the run that asks for them.
        """
        # answers first: of two lines for one request (a provider's retry), an answer (billed) wins over a failure
        results = sorted(self.api.results(entry, status), key=lambda r: r[1] != "succeeded")
        wanted = self._wanted.get(entry["id"], set())
        cache = self.client.cache
        assert cache is not None
        with self.store.transaction() as tx:
            tx.dirty = True
            current = tx.entry(entry["id"])
            if current is None:  # the file lost it (replaced by hand): this run's copy goes back
                current = copy.deepcopy(entry)
                tx.entries.append(current)
            if current.get("collected"):
                return self._take_kept(tx, current, wanted, pending, outcome)
            usage = Usage()
            seen: set[str] = set()
            failures = current.setdefault("failures", {})

            def fail(key: str, why: str, expired: bool = False) -> None:
                failures[key] = why
                if key in wanted:  # a key not asked for is only noted, for the run that asks for it
                    _fail(outcome, key, why, expired=expired)

            for custom_id, kind, payload in results:
                key = current["custom_ids"].get(custom_id)
                if key is None or key in seen:  # billed all the same when answered: counted, never taken
                    usage = usage + _stray(self.client, self.api, current["id"], custom_id, payload, kind)
                    continue
                seen.add(key)
                if kind != "succeeded":
                    fail(key, str(payload), expired=kind == "expired")
                elif key in wanted:
                    usage = usage + self._take(current, key, pending[key], payload, outcome)
                elif not cache.peek(key):  # not asked for here: keep the body for the run that asks
                    body = payload.model_dump(mode="json") if hasattr(payload, "model_dump") else payload
                    tx.kept[key] = {"batch": current["id"], "custom_id": custom_id, "key": key, "body": body}
            label = status.label
            for key in set(current["custom_ids"].values()) - seen:
                fail(key, f"batch {current['id']} ended ({label}) without a result for it", expired=label == "expired")
            kept = sorted(k for k, line in tx.kept.items() if line.get("batch") == current["id"])
            if kept or "kept" in current:
                current["kept"] = kept
            current["collected"] = True  # written with the kept results, in one transaction
            return usage

    def _take(self, entry: dict[str, Any], key: str, call: DeferredCall, body: Any, outcome: BatchOutcome) -> Usage:
        """Parse, validate, check and cache one result for ``call``; what it cost (also in ``usage_by_key``)."""
        try:
            parsed: LLMResponse = self.api.parse(body)
        except (errors.GroundjudgeError, ValidationError) as exc:
            why = f"the result is not a valid response: {exc}"
            entry.setdefault("failures", {})[key] = why
            _fail(outcome, key, why)
            return Usage()
        usage, problem = self.client.accept_batch_result(call, parsed)
        outcome.usage_by_key[key] = outcome.usage_by_key.get(key, Usage()) + usage
        if problem is None:
            outcome.succeeded += 1
        else:
            entry.setdefault("failures", {})[key] = problem
            _fail(outcome, key, problem)
        return usage


def stored_identity(identity: dict[str, Any]) -> dict[str, Any]:
    """The model identity as the state file keeps it: the base URL without what may be a secret (a user and password,
    a query: :func:`~groundjudge.llm.base.shown_server`) and a digest of the whole URL, so two addresses that differ
    only there are still two identities. The state file sits beside the cache in plain text; an older groundjudge
    wrote the URL as given, and such an entry is still read (``_plan`` takes either form). The batch's tag is
    a digest of the identity as given (:func:`batch_tag`), as before."""
    url = identity.get("base_url")
    if not url:
        return identity
    digest = hashlib.sha256(str(url).encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return {**identity, "base_url": f"{shown_server(str(url))} #{digest}"}


def batch_tag(identity: dict[str, Any], keys: Iterable[str]) -> str:
    """The tag of a batch: a digest of the model identity and the set of cache keys it answers."""
    text = json.dumps({"identity": identity, "keys": sorted(keys)}, sort_keys=True)
    return "gj1-" + hashlib.sha256(text.encode()).hexdigest()[:40]


def _find_lost(api: BatchApi, tx: StateTransaction, entry: dict[str, Any]) -> str | None:
    """The provider's batch that a lost create made for ``entry``, or None when it has none: looked for among the
    batches created since the entry was written (less :data:`CLOCK_SKEW_SECONDS`) that no entry of the state holds
    (:meth:`~groundjudge.llm.base.BatchApi.find_lost`)."""
    known = {e.get("id") for e in tx.entries}
    since = float(entry.get("submitted_at", 0.0)) - CLOCK_SKEW_SECONDS
    return api.find_lost(entry, known, since)


def _fail(outcome: BatchOutcome, key: str, why: str, *, expired: bool = False) -> None:
    """Count ``key`` as failed (or expired) in ``outcome``, with why."""
    outcome.failures[key] = why
    if expired:
        outcome.expired += 1
    else:
        outcome.failed += 1


def _chunked(api: BatchApi, calls: list[DeferredCall]) -> Iterator[list[DeferredCall]]:
    """``calls`` cut into batches within the provider's limits (requests and bytes)."""
    max_n, max_bytes = api.max_requests, api.max_bytes
    chunk: list[DeferredCall] = []
    size = 0
    for call in calls:
        n = len(json.dumps(api.params(call.request)).encode()) + 200
        if chunk and (len(chunk) >= max_n or size + n > max_bytes):
            yield chunk
            chunk, size = [], 0
        chunk.append(call)
        size += n
    if chunk:
        yield chunk


def _worst_case(client: LLMClient, calls: Iterable[DeferredCall]) -> Usage:
    """What requests of a provider batch billed and never collected count: each at its worst case at the batch
    price, unsettled."""
    usage = Usage()
    for call in calls:
        usage = usage + client.costs.unanswered(call.request, batch=True)
    return usage


def _note_counted(store: BatchStateFile, batch_ids: Iterable[str]) -> None:
    """Note in the state that the run ending now counted these batches (``counted``), so the run that collects one
    counts it no more. A failure here is only logged: the collecting run then counts it again (over, never under)."""
    try:
        with store.transaction() as tx:
            for batch_id in batch_ids:
                current = tx.entry(batch_id)
                if current is not None and not current.get("collected"):
                    current["counted"] = True
                    tx.dirty = True
    except Exception:
        log.warning("could not note in %s that the batches were counted", store.path, exc_info=True)


def _count_earlier(
    client: LLMClient, entry: dict[str, Any], usage: Usage, keys: Iterable[str], outcome: BatchOutcome
) -> None:
    """Results of a batch taken from the state: counted in the client's ledger, unless the run that submitted it
    counted it already (at its worst case, when it stopped before collecting it); then only reported
    (``counted_earlier``) and charged to no answer."""
    if not entry.get("counted"):
        client.ledger.record(usage)  # paid when an earlier run submitted it
        return
    outcome.counted_earlier = outcome.counted_earlier + usage
    for key in keys:
        outcome.usage_by_key.pop(key, None)
    log.info("batch %s: %s, counted (at most) by the run that submitted it; not counted again", entry["id"], usage)


def _hold(client: LLMClient, chunk: list[DeferredCall]) -> tuple[float, int]:
    """Hold ``chunk``'s worst case at the batch price against the client's caps (USD, calls), as held."""
    cost = sum(client.costs.worst_case_cost(call.request, batch=True) for call in chunk)
    client.ledger.reserve(cost, calls=len(chunk))
    return cost, len(chunk)


def _lost_create(client: LLMClient, chunk: list[DeferredCall], tag: str) -> Usage:
    """What a create whose reply was lost, and whose batch the provider does not list, counts: it may have made the
    batch, billed, so :func:`_worst_case` of its requests."""
    counted = _worst_case(client, chunk)
    log.warning(
        "batch tagged %s: the create's reply was lost and the provider lists no such batch; if it made one, it is "
        "billed: counted at its worst case, %s",
        tag,
        counted.cost_text(),
    )
    return counted


def _stray(client: LLMClient, api: BatchApi, batch_id: str, custom_id: str, payload: Any, kind: str) -> Usage:
    """What a result line that answers no request of the entry costs (a custom id the entry does not hold: a batch
    adopted that was another's; or a second line for one request): an answer is billed, so its usage at the batch
    price; a failure, or a body that is not a response, nothing."""
    if kind != "succeeded":
        return Usage()
    try:
        usage = client.costs.usage_of(api.parse(payload), batch=True)
    except (errors.GroundjudgeError, ValidationError):
        return Usage()
    log.warning("batch %s: an answer for %s, not asked for here: counted, %s", batch_id, custom_id, usage.cost_text())
    return usage
