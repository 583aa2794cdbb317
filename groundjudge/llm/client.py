"""The provider-neutral core: cache, budget, retries with backoff, JSON validation and re-asks."""

from __future__ import annotations

import json
import logging
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import tenacity
from pydantic import BaseModel, ValidationError

from groundjudge import errors
from groundjudge.cache import Cache, make_key
from groundjudge.llm.accounting import Ledger, Price, price_for
from groundjudge.llm.base import (
    LLMRequest,
    LLMResponse,
    Provider,
    checked_reasoning_effort,
    default_max_tokens,
    json_instruction,
    model_schema,
)
from groundjudge.llm.costs import CallCosts
from groundjudge.llm.limits import Limiter, Outcome
from groundjudge.llm.packing import share_packed
from groundjudge.llm.replies import judge_reply, parse_json_reply, reask
from groundjudge.llm.retries import RetryPolicy, rate_limited, retrying
from groundjudge.models import Message, PromptRef, Usage

__all__ = [
    "DeferredCall",
    "LLMClient",
    "RetryPolicy",
    "json_instruction",
    "parse_json_reply",
    "unpriced_budget_message",
]

T = TypeVar("T", bound=BaseModel)
log = logging.getLogger(__name__)

# LLMClient methods that moved to LLMClient.costs: the old names still answer, with a DeprecationWarning
_MOVED_TO_COSTS = frozenset({"worst_case_cost", "expected_tokens", "estimate_cost", "usage_of"})

# What makes a client's requests, replies and their prices what they are (besides its provider): a twin keeps them.
DEFAULT_TEMPERATURE, DEFAULT_SEED = 0.0, 0  # what a client sends unless told otherwise (where the model takes them)
_REQUEST_SETTINGS = ("retry", "max_reasks", "temperature", "seed", "max_tokens", "price", "reasoning_effort")


@dataclass(frozen=True)
class DeferredCall:
    """A cache miss recorded inside :meth:`LLMClient.deferring` instead of sent: what a batch needs to make it.

    ``key`` is the cache key the answer will be stored under, ``request`` the exact request the direct path would
    send, ``schema`` and ``check`` what the answer must pass before it is cached. A packed call
    (:meth:`LLMClient.packed_call`) holds the single calls it answers in ``members``: once its reply is accepted,
    each member's part is taken as that call's own reply would be.
    """

    key: str
    request: LLMRequest
    schema: type[BaseModel]
    prompt: PromptRef | None = None
    check: Callable[[Any], str | None] | None = None
    members: tuple[DeferredCall, ...] = ()


class _PaidKeys:
    """Cache keys a provider batch of this run answered and charged (:meth:`LLMClient.accept_batch_result`): the
    step's read of such a key is the call the batch paid for, not a call taken from the cache; once (a second read
    of the key is a reuse)."""

    def __init__(self) -> None:
        self._keys: set[str] = set()
        self._lock = threading.Lock()

    def add(self, *keys: str) -> None:
        with self._lock:
            self._keys.update(keys)

    def take(self, key: str) -> bool:
        """Whether ``key`` was paid by a batch and not read since (it is not, from now on)."""
        with self._lock:
            paid = key in self._keys
            self._keys.discard(key)
            return paid


class LLMClient:
    """``complete_json(messages, schema) -> (validated object, Usage)`` for any provider.

    One policy for everything that is not the wire format: a disk-cache lookup first (hits are free), the budget
    checked before every billed call (each call in flight holds its worst case, so the cap is never passed), retries
    of retryable errors (429, 5xx, timeouts, connection errors; backoff or the server's Retry-After within
    :class:`RetryPolicy`), and up to ``max_reasks`` re-asks that show the model its validation error or the
    caller's ``check`` problem. Temperature 0 and a fixed seed by default.

    Pace: with a ``limiter`` (:class:`~groundjudge.llm.limits.Limiter`), every billed send (each retry and re-ask
    too) first waits for its place there: the adaptive concurrency limit, a Retry-After cooldown that holds every
    thread, and the rpm / tpm buckets; time spent waiting there does not count against the retry budget. Cache
    hits never wait. Without one, calls go as soon as they are made.

    Cost: at ``price`` when one is given (it wins over the price table), else at the table's price for the model
    (:func:`~groundjudge.llm.accounting.price_for`). A model with neither has no price: its billed calls are
    counted in ``Usage.unpriced_calls`` (the cost is unknown, never a known $0), and a USD budget is refused
    (:class:`~groundjudge.errors.ConfigError`), since it could not be enforced; ``max_calls`` still is.

    What is counted and cached: every billed reply is counted in the returned or raised ``usage`` and in the
    ledger, including replies that were re-asked and refusals. Only an accepted value is cached; an invalid,
    truncated, check-failing or refused reply never is. One key is asked once over a cache folder, by the
    processes that share it as by the threads of one (:meth:`Cache.filling <groundjudge.cache.Cache.filling>`): a
    caller missing it meanwhile reads the reply as a cached call, free.

    Refusals (OpenAI ``message.refusal`` or ``finish_reason: content_filter``, Anthropic ``stop_reason:
    refusal``) raise :class:`~groundjudge.errors.RefusalError` at once and are not retried: at temperature 0 the
    same request would most likely be refused again, and each try is billed. Since nothing is cached, a later run
    asks again.
    """

    def __init__(
        self,
        provider: Provider,
        *,
        cache: Cache | None = None,
        ledger: Ledger | None = None,
        retry: RetryPolicy | None = None,
        max_reasks: int = 2,
        temperature: float = DEFAULT_TEMPERATURE,
        seed: int | None = DEFAULT_SEED,
        max_tokens: int | None = None,
        sleep: Callable[[float], None] = time.sleep,
        price: Price | None = None,
        limiter: Limiter | None = None,
        reasoning_effort: str | None = None,
    ) -> None:
        self.provider = provider
        self.limiter = limiter
        self.cache = cache
        self.ledger = ledger if ledger is not None else Ledger()
        self.retry = retry or RetryPolicy()
        self.max_reasks = max_reasks
        self.temperature = temperature
        self.seed = seed
        # the output cap sent: a reasoning model's reasoning counts against it (llm.base.default_max_tokens)
        self.max_tokens = max_tokens if max_tokens is not None else default_max_tokens(provider.name, provider.model)
        self.reasoning_effort = checked_reasoning_effort(provider.name, provider.model, reasoning_effort)
        self._sleep = sleep
        self.price: Price | None = price if price is not None else price_for(self.model_id)
        if self.price is None and self.ledger.budget_usd is not None:
            raise errors.ConfigError(unpriced_budget_message(self.model_id))
        self.costs = CallCosts(provider, self.price, self.max_tokens)
        self._lock = threading.Lock()
        self._deferred: list[DeferredCall] | None = None
        self._deferred_keys: set[str] = set()
        self._batch_paid = _PaidKeys()  # what this run's provider batches answered and charged
        self._sending = threading.local()  # per thread: send even while deferring (see sending())

    def __getattr__(self, name: str) -> Any:
        """The cost methods' old names (moved to :attr:`costs`, a :class:`~groundjudge.llm.costs.CallCosts`), with a
        DeprecationWarning."""
        if name in _MOVED_TO_COSTS:
            warnings.warn(f"LLMClient.{name} is LLMClient.costs.{name} now", DeprecationWarning, stacklevel=2)
            return getattr(self.costs, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def model_id(self) -> str:
        return f"{self.provider.name}/{self.provider.model}"

    def twin(self, *, cache: Cache | None, ledger: Ledger) -> LLMClient:
        """A client with this one's provider and request settings (the same requests, cache keys and prices) over
        ``cache`` and ``ledger``, with no limiter: what a dry run asks with."""
        settings = {name: getattr(self, name) for name in _REQUEST_SETTINGS}
        return LLMClient(self.provider, cache=cache, ledger=ledger, **settings)

    # -- keys and estimates -------------------------------------------------------------------------------

    def request_for(self, messages: Sequence[Message], schema: type[BaseModel]) -> LLMRequest:
        """The request the direct path sends for ``messages`` and ``schema`` (its settings; the schema is sent once,
        by the adapter): what :meth:`~groundjudge.llm.costs.CallCosts.estimate_cost` prices as sent."""
        return self._request(messages, schema)

    def _request(self, messages: Sequence[Message], schema: type[BaseModel]) -> LLMRequest:
        return LLMRequest(  # the schema is sent once, by the adapter (issue 34)
            messages=tuple(messages),
            schema=model_schema(schema),
            schema_name=schema.__name__,
            temperature=self.temperature,
            seed=self.seed,
            max_tokens=self.max_tokens,
            reasoning_effort=self.reasoning_effort,
        )

    def _key(self, request: LLMRequest, prompt: PromptRef | None) -> str:
        """Hash of provider, model, base_url, prompt name+version, messages, output-changing params, schema.

        Only what changes the answer: retry and re-ask settings decide whether an answer is got, not which one.
        """
        settings: dict[str, Any] = {
            **self.provider.identity(),
            "prompt": prompt.model_dump() if prompt else None,
            "messages": [m.model_dump() for m in request.messages],
            "schema": request.schema,
            # a sampling setting the adapter never sends changes no reply: keyed at its default, so changing it
            # re-pays nothing, and the replies cached at the defaults keep their keys
            "temperature": request.temperature if self.provider.takes("temperature") else DEFAULT_TEMPERATURE,
            "seed": request.seed if self.provider.takes("seed") else DEFAULT_SEED,
            "max_tokens": request.max_tokens,
        }
        if request.reasoning_effort is not None:  # only when sent: every other request keeps its key
            settings["reasoning_effort"] = request.reasoning_effort
        return make_key("llm", settings)

    def cache_key(self, messages: Sequence[Message], schema: type[BaseModel], prompt: PromptRef | None) -> str:
        return self._key(self._request(messages, schema), prompt)

    def is_cached(self, messages: Sequence[Message], schema: type[BaseModel], prompt: PromptRef | None) -> bool:
        return self.cache is not None and self.cache.peek(self.cache_key(messages, schema, prompt))

    # -- deferring cache misses to a batch -------------------------------------------------------------------

    @contextmanager
    def deferring(self) -> Iterator[list[DeferredCall]]:
        """Inside, a :meth:`complete_json` call that misses the cache is not sent: it is recorded in the yielded
        list (once per key) and raises :class:`~groundjudge.errors.DeferredCallError`. Thread-safe: calls from
        every thread are recorded while the block runs. Hand the list to
        :class:`groundjudge.llm.batch.BatchRunner`, which answers them into the cache.
        """
        with self._lock:
            if self._deferred is not None:
                raise errors.ConfigError("LLMClient.deferring() is already active on this client")
            deferred: list[DeferredCall] = []
            self._deferred, self._deferred_keys = deferred, set()
        try:
            yield deferred
        finally:
            with self._lock:
                self._deferred, self._deferred_keys = None, set()

    @contextmanager
    def sending(self) -> Iterator[None]:
        """Inside, on this thread only, a call that misses the cache is sent even while :meth:`deferring` is on: a
        step run again once its provider batch has answered (a request that failed there is made directly)."""
        before = getattr(self._sending, "on", False)
        self._sending.on = True
        try:
            yield
        finally:
            self._sending.on = before

    def _defer(self, call: DeferredCall) -> bool:
        """Record ``call`` if deferring (once per key); False when not deferring."""
        with self._lock:
            if self._deferred is None or getattr(self._sending, "on", False):
                return False
            if call.key not in self._deferred_keys:
                self._deferred_keys.add(call.key)
                self._deferred.append(call)
            return True

    def accept_batch_result(self, call: DeferredCall, response: LLMResponse) -> tuple[Usage, str | None]:
        """Take one batch result: what it cost at the batch price, and None when it was accepted and cached under
        the call's key exactly as the direct path would cache it, else the problem (refusal, invalid JSON, schema
        error, failed check), in which case nothing is cached.

        The ledger is left to the caller (:class:`~groundjudge.llm.batch.BatchRunner` settles its reservation).
        """
        usage = self.costs.usage_of(response, batch=True)
        self.costs.saw_output(call.request, response)
        if response.refusal is not None:
            return usage, f"the model refused: {response.refusal}"
        value, problem, _ = judge_reply(response, call.schema, call.check)
        if value is None:
            return usage, problem
        if self.cache is not None:
            self.cache.set(call.key, {"output": value.model_dump(mode="json"), "raw": response.text})
        parts = self._take_parts(call.members, value.model_dump(mode="json"), response) if call.members else {}
        self._batch_paid.add(call.key, *(key for key, why in parts.items() if why is None))
        return usage, None

    # -- several answers' calls in one request ----------------------------------------------------------------

    def packed_request(self, requests: Sequence[LLMRequest]) -> LLMRequest:
        """The one request this client sends for the single-answer ``requests`` (of one
        :func:`~groundjudge.llm.packing.pack_key`): :func:`~groundjudge.llm.packing.pack_request`, its output
        budget the sum of theirs up to the model's :func:`~groundjudge.llm.packing.output_limit`. What
        :meth:`complete_packed` and :meth:`packed_call` send and the dry run prices."""
        from groundjudge.llm.packing import output_limit, pack_request

        return pack_request(requests, limit=output_limit(self.model_id))

    def packed_call(self, calls: Sequence[DeferredCall]) -> DeferredCall:
        """The one call that answers the single ``calls`` (of one :func:`~groundjudge.llm.packing.pack_key`) in a
        packed request, for a provider batch: its reply is cached under its own key, and each member's part under
        that member's key (:meth:`accept_batch_result`)."""
        from groundjudge.llm.packing import PackedReply

        request = self.packed_request([c.request for c in calls])
        return DeferredCall(self._key(request, None), request, PackedReply, members=tuple(calls))

    def _take_parts(self, calls: Sequence[DeferredCall], value: Any, response: LLMResponse) -> dict[str, str | None]:
        """Each call's part of a packed reply (parsed JSON) taken as its own reply would be: validated, checked and
        cached under its key. By key: None when taken, else the problem."""
        from groundjudge.llm.packing import pack_ids, split_reply

        parts = split_reply(value, len(calls))
        out: dict[str, str | None] = {}
        for pid, call in zip(pack_ids(len(calls)), calls, strict=True):
            if pid not in parts:
                out[call.key] = f"the packed reply has no single reply for {pid}"
                continue
            text = json.dumps(parts[pid], ensure_ascii=False)
            taken, why, _ = judge_reply(replace(response, text=text, truncated=False), call.schema, call.check)
            if taken is not None and self.cache is not None:
                self.cache.set(call.key, {"output": taken.model_dump(mode="json"), "raw": text})
            out[call.key] = None if taken is not None else why
        return out

    def complete_packed(self, calls: Sequence[DeferredCall]) -> dict[str, tuple[Usage, str | None]]:
        """Send the deferred single-answer ``calls`` (of one :func:`~groundjudge.llm.packing.pack_key`) as one
        request (:meth:`packed_request`), with the budget, the pace and the retries of any call and no re-ask; split
        the reply by id and take each part exactly as the call's own reply would be taken (validated, the call's
        check, cached under its key). Returns, by key, that answer's share of the usage (by the length of its block:
        :func:`~groundjudge.llm.packing.share_packed`) and None when its part was accepted, else the problem: that
        call is then not cached, so its step asks it alone. A run stop raises; any other failure of the packed call
        is every call's problem (nothing billed stays uncounted: its usage is shared)."""
        request = self.packed_request([c.request for c in calls])
        try:
            response, usage = self._send_with_retries(request)
        except (errors.BudgetExceededError, errors.CacheMissError):
            raise
        except errors.GroundjudgeError as exc:
            spent = exc.usage if isinstance(exc, errors.LLMError) and exc.usage is not None else Usage()
            shares = share_packed(spent, [c.request for c in calls])
            return {c.key: (u, f"the packed call failed: {exc}") for c, u in zip(calls, shares, strict=True)}
        shares = share_packed(usage, [c.request for c in calls])
        problem = ""
        value: Any = None
        if response.refusal is not None:
            problem = f"the model refused: {response.refusal}"
        elif response.truncated:  # the part of the last answer it reached may be cut short: no part is trusted
            problem = "the packed reply was cut off at the token limit"
        else:
            try:
                value = parse_json_reply(response.text)
            except json.JSONDecodeError as exc:
                problem = f"the packed reply is not valid JSON: {exc}"
        taken = self._take_parts(calls, value, response) if not problem else {c.key: problem for c in calls}
        return {c.key: (share, taken[c.key]) for c, share in zip(calls, shares, strict=True)}

    # -- the call -----------------------------------------------------------------------------------------

    def complete_json(
        self,
        messages: Sequence[Message],
        schema: type[T],
        *,
        prompt: PromptRef | None = None,
        check: Callable[[T], str | None] | None = None,
    ) -> tuple[T, Usage]:
        """Ask for a JSON object valid for ``schema``; returns it and what it cost (cached: zero).

        ``check`` is the caller's semantic test of a schema-valid value: None accepts it, a string names what is
        wrong ("no verdict for claim ids c2, c3"). A value that fails it is re-asked like a schema error (naming the
        problem, so the re-ask is a different request), never cached, and a cached value that fails it is not
        served. When the re-asks run out, :class:`InvalidOutputError` carries the last schema-valid value in
        ``partial``.
        """
        request = self._request(messages, schema)
        key = self._key(request, prompt)
        while True:
            if (hit := self._cached(key, schema, prompt, check)) is not None:
                return hit
            if self._defer(DeferredCall(key, request, schema, prompt, check)):
                raise errors.DeferredCallError(f"{self.model_id}: deferred to a batch (cache key {key})", key=key)
            turn = self.cache.filling(key) if self.cache is not None else nullcontext(True)
            with turn as mine:  # one caller of this process asks for the key; the others read its reply
                if not mine:
                    continue  # another caller filled the key: look again (after its failure mine is True: ask)
                hit = self._cached(key, schema, prompt, check) if self.cache and self.cache.peek(key) else None
                if hit is not None:
                    return hit  # filled between the look above and this turn
                return self._ask(request, key, schema, check)

    def _cached(
        self, key: str, schema: type[T], prompt: PromptRef | None, check: Callable[[T], str | None] | None
    ) -> tuple[T, Usage] | None:
        """The cached value of ``key`` (:func:`cached_value`), counted as a cached call; None when there is none."""
        what = f"the {prompt.name} call" if prompt is not None else "a call"
        value = cached_value(self.cache, key, schema, check, f"{what} to {self.model_id}") if self.cache else None
        if value is None:
            return None
        if self._batch_paid.take(key):  # answered by this run's provider batch, charged there: no cached call
            return value, Usage()
        usage = Usage(cached_calls=1)
        self.ledger.record_cached(usage)
        return value, usage

    def _ask(
        self, request: LLMRequest, key: str, schema: type[T], check: Callable[[T], str | None] | None
    ) -> tuple[T, Usage]:
        """Send ``request`` (billed), re-asking a rejected reply, and cache the accepted value under ``key``."""
        usage = Usage()
        problems: list[str] = []
        raw = ""
        partial: T | None = None
        for _ in range(self.max_reasks + 1):
            try:
                response, call_usage = self._send_with_retries(request)
            except errors.GroundjudgeError as exc:
                if isinstance(exc, errors.LLMError):
                    exc.usage = usage + exc.usage if exc.usage is not None else usage
                raise
            usage = usage + call_usage
            raw = response.text
            accepted, problem, rejected_value = judge_reply(response, schema, check)
            if accepted is not None:
                if self.cache is not None:
                    self.cache.set(key, {"output": accepted.model_dump(mode="json"), "raw": raw})
                return accepted, usage
            if rejected_value is not None:
                partial = rejected_value
            problems.append(problem)
            log.info("%s: rejected reply (%s); re-asking", self.model_id, problem)
            request = replace(request, messages=(*request.messages, *reask(response, problem)))
        err = errors.InvalidOutputError(
            f"{self.model_id}: no acceptable JSON after {self.max_reasks + 1} tries: {problems[-1]}",
            raw=raw,
            errors=problems,
            partial=partial,
        )
        err.usage = usage
        raise err

    def _send_once(self, request: LLMRequest, waited: list[float] | None = None) -> tuple[LLMResponse, Usage]:
        """One billed call: wait for its place at the limiter (adding the wait to ``waited[0]``), reserve its worst
        case, send, settle to the real cost (a failure: ``costs.failed_send``), tell the limiter; a refusal raises."""
        permit = None
        if self.limiter is not None:
            permit = self.limiter.acquire(sum(self.costs.expected_tokens(request)))
            if waited is not None:
                waited[0] += permit.waited
        outcome: Outcome = "unsent"
        retry_after: float | None = None
        try:
            reserved = self.costs.worst_case_cost(request)
            self.ledger.reserve(reserved)  # BudgetExceededError is not retryable: it ends the loop
            outcome = "failed"
            try:
                response = self.provider.send(request)
            except BaseException as exc:
                spent = self.costs.failed_send(request, exc)  # sent with no reply: its worst case; else nothing
                self.ledger.settle(reserved, spent)
                if rate_limited(exc):
                    outcome, retry_after = "rate_limited", getattr(exc, "retry_after", None)
                raise
            outcome = "ok"
        finally:
            if permit is not None and self.limiter is not None and outcome != "ok":
                self.limiter.release(permit, outcome, retry_after=retry_after)
        if permit is not None and self.limiter is not None:
            self.limiter.release(permit, "ok", used_tokens=response.input_tokens + response.output_tokens)
        usage = self.costs.usage_of(response)
        if usage.cost_usd > reserved + 1e-12:
            log.warning(
                "%s: a call cost $%.6f, more than the $%.6f reserved for it", self.model_id, usage.cost_usd, reserved
            )
        self.ledger.settle(reserved, usage)
        self.costs.saw_output(request, response)
        if response.refusal is not None:
            refusal = errors.RefusalError(
                f"{self.model_id}: the model refused: {response.refusal}", refusal=response.refusal
            )
            refusal.usage = usage
            raise refusal
        return response, usage

    def _send_with_retries(self, request: LLMRequest) -> tuple[LLMResponse, Usage]:
        """Send, retrying retryable errors with backoff (or the server's Retry-After) within the policy's bounds.

        Retry-After is honoured however long, as long as it fits in what is left of ``max_total_seconds``; when it
        does not, the error is raised at once (no sleep) with ``retry_at`` and a message saying when to retry.
        A Retry-After that is waited for also holds every other thread's new sends (:meth:`Limiter.cool_down`).
        Time spent waiting for the limiter does not count against ``max_total_seconds``.
        """
        waited = [0.0]  # seconds spent in the limiter's queue by this call's attempts
        loop = retrying(self.retry, sleep=self._sleep, limiter=self.limiter, model_id=self.model_id, waited=waited)
        return counting_failures(loop, self._send_once, request, waited)


def counting_failures(
    loop: tenacity.Retrying,
    send: Callable[[LLMRequest, list[float]], tuple[LLMResponse, Usage]],
    request: LLMRequest,
    waited: list[float],
) -> tuple[LLMResponse, Usage]:
    """``loop`` over ``send(request, waited)``, with what every attempt counted in the ledger (a failed one's too:
    a call sent with no reply at its worst case, a refusal's reply) in the usage returned or the raised error's."""
    failed = Usage()

    def attempt(request: LLMRequest, waited: list[float]) -> tuple[LLMResponse, Usage]:
        nonlocal failed
        try:
            return send(request, waited)
        except errors.LLMError as exc:
            failed = exc.usage = failed + (exc.usage or Usage())
            raise

    response, usage = loop(attempt, request, waited)
    return response, failed + usage


def cached_value(
    cache: Cache, key: str, schema: type[T], check: Callable[[T], str | None] | None, what: str = "a call"
) -> T | None:
    """The reply cached under ``key``, valid for ``schema`` and accepted by ``check``; None when there is none (an
    entry that no longer validates or fails the check is logged and not served).

    Raises:
        CacheMissError: in cache-only mode, instead of None (naming ``what`` was asked: "the judge call to ...").
    """
    try:
        cached = cache.get(key)  # raises CacheMissError in cache-only mode
    except errors.CacheMissError as exc:
        why = (
            "its entry is damaged"
            if exc.damaged
            else "the prompt, the model or the input changed since the cache was filled"
        )
        raise errors.CacheMissError(
            f"no cached reply for {what} (cache-only: nothing was sent; {why}); run once with --cache-mode use "
            f"(Python: cache_mode='use') to fill it [key {key[:12]}]"
        ) from exc
    if cached is None:
        return None
    try:
        value = schema.model_validate(cached["output"])
    except (ValidationError, KeyError, TypeError) as exc:
        log.warning("ignoring a cached entry that no longer validates: %s", key)
        if cache.mode == "only":
            raise errors.CacheMissError(
                f"cache-only mode: the cached entry for key {key} no longer validates ({type(exc).__name__})"
            ) from exc
        return None
    rejected = check(value) if check is not None else None
    if rejected is None:
        return value
    log.warning("ignoring a cached entry that fails the caller's check (%s): %s", rejected, key)
    if cache.mode == "only":
        raise errors.CacheMissError(f"cache-only mode: the cached entry for key {key} fails the check ({rejected})")
    return None


def unpriced_budget_message(model_id: str) -> str:
    """Why a USD budget on a model without a price is refused, and how to give the price."""
    return (
        f"no price known for {model_id}, so a USD budget cannot be enforced: give its price in USD per million "
        "input and output tokens, with --price IN,OUT on the command line (--price 0.5,1.5) or, in Python, "
        "price={'input_per_mtok': 0.5, 'output_per_mtok': 1.5} in the Config (or Evaluator(..., price=...)); "
        f"or register it once with groundjudge.llm.register_price({model_id!r}, 0.5, 1.5) or a "
        "$GROUNDJUDGE_PRICES JSON file; or cap the calls with --max-calls instead"
    )
