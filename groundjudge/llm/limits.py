"""How many LLM calls a client sends at once, and how fast: an adaptive concurrency gate, the server's Retry-After,
and token buckets for requests and tokens per minute.

Every billed send of an :class:`~groundjudge.llm.client.LLMClient` goes through its :class:`Limiter` (one per
client, so one limit shared by every stage that uses the client): :meth:`Limiter.acquire` before the send, which
waits until the send may start, :meth:`Limiter.release` after it with what happened. Cache hits never come here.

- Adaptive concurrency (AIMD, as TCP's congestion window): at most ``limit`` calls are in flight. A 429 (or an
  overloaded 529) shrinks the limit multiplicatively, once per round trip: the 429s of calls sent before the last
  shrink do not shrink it again, since they answer a load already cut. Without a Retry-After the limit is halved
  (``decrease``); with one it is trimmed (``paced_decrease``, 0.9), since the cooldown below already spaces the
  sends: a rate limit is a rate, and halving the calls in flight at every 429 of a run at the limit would idle
  (measured against the scripted server's 20 requests a second at 0.3 s a call: 75% of the limit when halved,
  85% trimmed, 89% for a client that floods it with 8 times the 429s). Each success of a call sent under the
  current limit grows it by ``1 / limit``, so a whole window of successes adds one call. Never above the
  configured ``concurrency``, never below 1.
- Retry-After: :meth:`Limiter.cool_down` (called by the client when it waits for a Retry-After) stops every new
  send, on every thread, until the server's time has passed, not only the call that was told.
- ``rpm`` / ``tpm``: token buckets that refill at the rate per second and hold at most ``burst_seconds`` of it (at
  least one request), so a run at the limit sends evenly instead of a minute's worth at once. A call takes one
  request and its expected tokens (input + expected output, the client's estimate) when it starts; the tokens are
  trued up to the reply's real usage when it ends. A call bigger than the bucket waits for a full bucket and goes
  into debt, so the rate still holds. A call that was never sent gives both back; a 429 gives its tokens back (the
  server processed none) but not its request.

Times come from ``clock`` (monotonic by default); with a ``sleep`` given, timed waits call it (tests pass a fake
clock's sleep), else they wait on a condition that a release wakes.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from groundjudge.errors import ConfigError

Outcome = Literal["ok", "rate_limited", "failed", "unsent"]
"""How a send ended: a reply ("ok", refusals included: billed), a 429 or 529 ("rate_limited"), another error after
the request went out ("failed"), or never sent ("unsent": the budget stopped it)."""


@dataclass(frozen=True)
class Limits:
    """What a :class:`Limiter` enforces.

    Attributes:
        concurrency: most calls in flight at once, the ceiling of the adaptive limit; None: no gate (and nothing to
            adapt).
        rpm: requests per minute; None: no cap.
        tpm: tokens (input + output) per minute; None: no cap.
        adaptive: shrink the concurrency limit on 429s and grow it back while calls succeed; False: it stays at
            ``concurrency`` (Retry-After and the buckets still hold).
        decrease: the factor a 429 without a Retry-After multiplies the limit by.
        paced_decrease: the factor a 429 with a Retry-After multiplies it by (the cooldown paces the sends).
        burst_seconds: how many seconds of the rpm / tpm rate may go at once.
    """

    concurrency: int | None = None
    rpm: float | None = None
    tpm: float | None = None
    adaptive: bool = True
    decrease: float = 0.5
    paced_decrease: float = 0.9
    burst_seconds: float = 1.0

    def __post_init__(self) -> None:
        if self.concurrency is not None and self.concurrency < 1:
            raise ConfigError(f"concurrency must be at least 1, not {self.concurrency}")
        for name in ("rpm", "tpm"):
            value = getattr(self, name)
            if value is not None and not (value > 0 and math.isfinite(value)):
                raise ConfigError(f"{name} must be a positive number (or None for no cap), not {value}")
        for name in ("decrease", "paced_decrease"):
            if not 0 < getattr(self, name) < 1:
                raise ConfigError(f"{name} must be between 0 and 1, not {getattr(self, name)}")
        if not (self.burst_seconds > 0 and math.isfinite(self.burst_seconds)):
            raise ConfigError(f"burst_seconds must be a positive number, not {self.burst_seconds}")


@dataclass
class Permit:
    """One granted send: what it took, when (``epoch``: the limit's generation), and how long it waited."""

    epoch: int
    tokens: float
    waited: float
    released: bool = field(default=False, compare=False)


@dataclass(frozen=True)
class LimiterStats:
    """A snapshot: calls in flight, the current concurrency limit (None: no gate) and its ceiling, rate-limit
    answers seen (429 / 529), sends granted, seconds all calls spent waiting in :meth:`Limiter.acquire`, and the
    seconds left of a Retry-After cooldown."""

    in_flight: int
    limit: int | None
    ceiling: int | None
    rate_limited: int
    sent: int
    waited_seconds: float
    cooldown_seconds: float


class _Bucket:
    """A token bucket: ``rate`` a second, at most ``capacity``; a cost above the capacity waits for a full bucket
    and leaves a debt."""

    def __init__(self, per_minute: float, burst_seconds: float, now: float) -> None:
        self.rate = per_minute / 60.0
        self.capacity = max(self.rate * burst_seconds, 1.0)
        self.level = self.capacity
        self.stamp = now

    def delay(self, cost: float, now: float) -> float:
        """Seconds until ``cost`` may be taken (0: now)."""
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
        self.stamp = now
        missing = min(cost, self.capacity) - self.level
        return 0.0 if missing <= 1e-9 else missing / self.rate

    def add(self, amount: float) -> None:
        """Give back (or, negative, take) ``amount``; never above the capacity."""
        self.level = min(self.capacity, self.level + amount)


class Limiter:
    """The gate every billed send of a client goes through (see the module's docstring); thread-safe.

    Args:
        limits: what to enforce; None: nothing but the Retry-After cooldown (and the counters).
        clock: seconds, monotonic.
        sleep: called for timed waits instead of waiting on the condition (a fake clock's sleep in tests).
    """

    def __init__(
        self,
        limits: Limits | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        self.limits = limits = limits or Limits()
        self._clock = clock
        self._sleep = sleep
        self._cond = threading.Condition()
        now = clock()
        self._limit = float(limits.concurrency) if limits.concurrency is not None else math.inf
        self._in_flight = 0
        self._epoch = 0
        self._cool_until = -math.inf
        self._requests = _Bucket(limits.rpm, limits.burst_seconds, now) if limits.rpm else None
        self._tokens = _Bucket(limits.tpm, limits.burst_seconds, now) if limits.tpm else None
        self._rate_limited = 0
        self._sent = 0
        self._waited = 0.0

    def _gate(self) -> float:
        return max(1, math.floor(self._limit + 1e-9)) if math.isfinite(self._limit) else math.inf

    def _delay(self, tokens: float, now: float) -> float:
        """Seconds until a send of ``tokens`` may start, the gate aside (0: now)."""
        delay = max(0.0, self._cool_until - now)
        if self._requests is not None:
            delay = max(delay, self._requests.delay(1.0, now))
        if self._tokens is not None:
            delay = max(delay, self._tokens.delay(tokens, now))
        return delay

    def acquire(self, tokens: float = 0.0) -> Permit:
        """Wait until a send of about ``tokens`` tokens may start, and take its place; hand the permit back to
        :meth:`release` whatever happens."""
        start = self._clock()
        while True:
            with self._cond:
                now = self._clock()
                delay: float | None = None  # None: waiting for a call in flight to end
                if self._in_flight < self._gate():
                    delay = self._delay(tokens, now)
                    if delay <= 0.0:
                        if self._requests is not None:
                            self._requests.add(-1.0)
                        if self._tokens is not None:
                            self._tokens.add(-tokens)
                        self._in_flight += 1
                        self._sent += 1
                        waited = max(0.0, now - start)
                        self._waited += waited
                        return Permit(epoch=self._epoch, tokens=tokens, waited=waited)
                if delay is None or self._sleep is None:
                    self._cond.wait(delay)
                    continue
            self._sleep(delay)

    def release(
        self, permit: Permit, outcome: Outcome, used_tokens: float | None = None, retry_after: float | None = None
    ) -> None:
        """End a send: ``outcome`` as :data:`Outcome` says; ``used_tokens`` (input + output of the reply) trues
        up the token bucket; ``retry_after``: the wait a 429 asked for, if any. Releasing a permit twice does
        nothing the second time."""
        with self._cond:
            if permit.released:
                return
            permit.released = True
            self._in_flight -= 1
            adaptive = self.limits.adaptive and math.isfinite(self._limit)
            if outcome == "unsent":
                self._sent -= 1
                if self._requests is not None:
                    self._requests.add(1.0)
                if self._tokens is not None:
                    self._tokens.add(permit.tokens)
            elif outcome == "ok":
                if self._tokens is not None and used_tokens is not None:
                    self._tokens.add(permit.tokens - used_tokens)
                if adaptive and permit.epoch == self._epoch:  # a call sent under an older limit: not a sign
                    self._limit = min(float(self.limits.concurrency or 1), self._limit + 1.0 / self._limit)
            elif outcome == "rate_limited":
                self._rate_limited += 1
                if self._tokens is not None:
                    self._tokens.add(permit.tokens)
                if adaptive and permit.epoch == self._epoch:  # once per round trip, not once per 429 of a burst
                    factor = self.limits.decrease if retry_after is None else self.limits.paced_decrease
                    self._limit = max(1.0, self._limit * factor)
                    self._epoch += 1
            self._cond.notify_all()

    def cool_down(self, seconds: float) -> None:
        """No send starts, on any thread, for ``seconds`` from now (a later end already set stays)."""
        with self._cond:
            self._cool_until = max(self._cool_until, self._clock() + max(0.0, seconds))

    @property
    def limit(self) -> int | None:
        """The current concurrency limit (None: no gate)."""
        with self._cond:
            gate = self._gate()
        return None if math.isinf(gate) else int(gate)

    def stats(self) -> LimiterStats:
        with self._cond:
            gate = self._gate()
            return LimiterStats(
                in_flight=self._in_flight,
                limit=None if math.isinf(gate) else int(gate),
                ceiling=self.limits.concurrency,
                rate_limited=self._rate_limited,
                sent=self._sent,
                waited_seconds=self._waited,
                cooldown_seconds=max(0.0, self._cool_until - self._clock()),
            )
