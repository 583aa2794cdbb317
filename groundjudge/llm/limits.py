"""How many LLM calls a client sends at once, and how fast: an adaptive concurrency gate, the server's Retry-After,
and token buckets for requests and tokens per minute.

Every billed send of an :class:`~groundjudge.llm.client.LLMClient` goes through its :class:`Limiter` (one per
client, so one limit shared by every stage that uses the client): :meth:`Limiter.acquire` before the send, which
waits until the send may start, :meth:`Limiter.release` after it with what happened. Cache hits never come here.

- Adaptive concurrency (AIMD, as TCP's congestion window): at most ``limit`` calls are in flight. A 429 (or an
  overloaded 529) without a Retry-After halves the limit (``decrease``), once per round trip: the 429s of calls sent
  before the last cut do not cut it again, since they answer a load already cut. Each success of a call sent under
  the current limit grows it by ``1 / limit``, so a whole window of successes adds one call. Never above the
  configured ``concurrency``, never below 1.
- A learned send rate, for 429s that come with a Retry-After (a rate limit says when there is room again): a rate
  limit is a rate, so it is met with a rate, not fewer calls in flight (cutting the calls in flight by 0.9 at each
  such 429 kept a run at 75-80% of a 4 requests/s limit at 1 s a reply: the calls in flight a rate needs grow with
  the reply time). The first such 429 starts a token bucket at ``rate_decrease`` (0.9) times the sends the server
  can have counted when it refused (those of the second before the refused send, up to the 429: see
  ``Limiter._cut_rate``; none: nothing is learned, the cooldown alone holds); a later one cuts it to that share
  of the lower of it and those sends; while the bucket holds sends back it grows by ``rate_growth`` (1%) with each
  send it held, so the run finds the limit again after about ten sends and keeps close under it, at any rate (a
  simulated sliding window from 2 to 60 requests/s, requests taking up to 50 ms to arrive, in
  tests/llm/test_limits.py: at least 85%; the scripted server at 4 requests/s and 1 s replies: 96%). A refused send
  gives its place in the pace back (the server counted none of it). The calls in flight are not cut.
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
from collections import deque
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
        decrease: the factor a 429 without a Retry-After multiplies the concurrency limit by.
        rate_decrease: the share of the last second's sends a 429 with a Retry-After sets the learned rate to.
        rate_growth: how much the learned rate grows with each send it held back.
        burst_seconds: how many seconds of the rpm / tpm rate may go at once.
    """

    concurrency: int | None = None
    rpm: float | None = None
    tpm: float | None = None
    adaptive: bool = True
    decrease: float = 0.5
    rate_decrease: float = 0.9
    rate_growth: float = 0.01
    burst_seconds: float = 1.0

    def __post_init__(self) -> None:
        if self.concurrency is not None and self.concurrency < 1:
            raise ConfigError(f"concurrency must be at least 1, not {self.concurrency}")
        for name in ("rpm", "tpm"):
            value = getattr(self, name)
            if value is not None and not (value > 0 and math.isfinite(value)):
                raise ConfigError(f"{name} must be a positive number (or None for no cap), not {value}")
        for name in ("decrease", "rate_decrease"):
            if not 0 < getattr(self, name) < 1:
                raise ConfigError(f"{name} must be between 0 and 1, not {getattr(self, name)}")
        if not (self.rate_growth >= 0 and math.isfinite(self.rate_growth)):
            raise ConfigError(f"rate_growth must be a non-negative number, not {self.rate_growth}")
        if not (self.burst_seconds > 0 and math.isfinite(self.burst_seconds)):
            raise ConfigError(f"burst_seconds must be a positive number, not {self.burst_seconds}")


@dataclass
class Permit:
    """One granted send: what it took, when (``epoch``: the limit's generation; ``at``: the clock), and how long it
    waited."""

    epoch: int
    tokens: float
    waited: float
    at: float = 0.0
    released: bool = field(default=False, compare=False)


@dataclass(frozen=True)
class LimiterStats:
    """A snapshot: calls in flight, the current concurrency limit (None: no gate) and its ceiling, rate-limit
    answers seen (429 / 529), sends granted, seconds all calls spent waiting in :meth:`Limiter.acquire`, the
    seconds left of a Retry-After cooldown, and the learned send rate a second (None: no rate limit met yet)."""

    in_flight: int
    limit: int | None
    ceiling: int | None
    rate_limited: int
    sent: int
    waited_seconds: float
    cooldown_seconds: float
    send_rate: float | None = None


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

    def set_rate(self, per_second: float, burst_seconds: float) -> None:
        """A new rate (the level is kept, never above the new capacity)."""
        self.rate = per_second
        self.capacity = max(per_second * burst_seconds, 1.0)
        self.level = min(self.level, self.capacity)


_MIN_RATE = 1.0 / 60.0  # the learned rate never goes below one send a minute
_HORIZON = 1.0  # seconds of sends the learned rate is measured on
_SLACK = 0.1  # ... and a little more: a send's way to the server takes time, and the burst of a run's start more
_KEPT = 4 * _HORIZON  # seconds of sends kept: a 429 may come back after its send's horizon has passed


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
        self._learned: _Bucket | None = None  # the send rate learned from 429s with a Retry-After
        self._sends: deque[float] = deque()  # when the sends of the last _KEPT seconds were granted

    def _gate(self) -> float:
        return max(1, math.floor(self._limit + 1e-9)) if math.isfinite(self._limit) else math.inf

    def _delay(self, tokens: float, now: float) -> tuple[float, bool]:
        """Seconds until a send of ``tokens`` may start, the gate aside (0: now), and whether the learned rate holds
        it back."""
        delay = max(0.0, self._cool_until - now)
        if self._requests is not None:
            delay = max(delay, self._requests.delay(1.0, now))
        if self._tokens is not None:
            delay = max(delay, self._tokens.delay(tokens, now))
        learned = self._learned.delay(1.0, now) if self._learned is not None else 0.0
        return max(delay, learned), learned > 0.0

    def _grow(self, held: bool) -> None:
        """Grow the learned rate by one step if it held this send back (an idle run does not earn a higher rate)."""
        if self._learned is not None and held and self.limits.adaptive:
            self._learned.set_rate(self._learned.rate * (1.0 + self.limits.rate_growth), 0.0)

    def _cut_rate(self, now: float, sent_at: float) -> None:
        """A 429 with a Retry-After for a send granted at ``sent_at``: the learned rate to ``rate_decrease`` of the
        lower of it and the sends the server can have counted when it refused it: those from a second (and
        ``_SLACK``) before that send up to now, less those already refused (none: nothing is learned). A send takes
        time to reach the server, so its second is not the client's: counted on the second before the 429 came
        back, a send still in the server's window was missed now and then, the rate was cut to a fraction of the
        limit and took minutes to grow back (53-64% of a 2 requests/s limit when requests took up to 20 ms to
        arrive, in tests/llm/test_limits.py; 0.82-0.87 of a 4 requests/s limit against the scripted server, against
        0.96 this way). Counting one send too many costs one more 429 and cut; one too few, a minute at a lower
        rate. The bucket holds one send: when the cooldown ends the send the server made room for goes at once, the
        others paced after it, never a burst. (Emptying it, so that the first send also waited a pace, measured
        0.83-0.85 of a 4 requests/s limit at 1 s a reply against 0.87 this way.)"""
        measured = sum(1 for t in self._sends if t > sent_at - _HORIZON - _SLACK) / _HORIZON
        if not measured:  # no send of the last second went through: it says nothing of a rate (the cooldown holds)
            return
        current = self._learned.rate if self._learned is not None else math.inf
        rate = max(_MIN_RATE, self.limits.rate_decrease * min(current, measured))
        if self._learned is None:
            self._learned = _Bucket(rate * 60.0, 0.0, now)
        self._learned.delay(0.0, now)  # refill up to now at the old rate
        self._learned.set_rate(rate, 0.0)  # one send at a time, evenly spaced: no burst past the limit

    def acquire(self, tokens: float = 0.0) -> Permit:
        """Wait until a send of about ``tokens`` tokens may start, and take its place; hand the permit back to
        :meth:`release` whatever happens."""
        start = self._clock()
        held = False  # the learned rate held this send back
        while True:
            with self._cond:
                now = self._clock()
                delay: float | None = None  # None: waiting for a call in flight to end
                if self._in_flight < self._gate():
                    delay, by_rate = self._delay(tokens, now)
                    held = held or by_rate
                    if delay <= 0.0:
                        if self._requests is not None:
                            self._requests.add(-1.0)
                        if self._tokens is not None:
                            self._tokens.add(-tokens)
                        self._grow(held)
                        if self._learned is not None:
                            self._learned.add(-1.0)
                        self._sends.append(now)
                        while self._sends[0] <= now - _KEPT:
                            self._sends.popleft()
                        self._in_flight += 1
                        self._sent += 1
                        waited = max(0.0, now - start)
                        self._waited += waited
                        return Permit(epoch=self._epoch, tokens=tokens, waited=waited, at=now)
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
            now = self._clock()
            if outcome == "unsent":
                self._sent -= 1
                if self._requests is not None:
                    self._requests.add(1.0)
                if self._tokens is not None:
                    self._tokens.add(permit.tokens)
                if self._learned is not None:
                    self._learned.add(1.0)
            elif outcome == "ok":
                if self._tokens is not None and used_tokens is not None:
                    self._tokens.add(permit.tokens - used_tokens)
                if adaptive and permit.epoch == self._epoch:  # a call sent under an older limit: not a sign
                    self._limit = min(float(self.limits.concurrency or 1), self._limit + 1.0 / self._limit)
            elif outcome == "rate_limited":
                self._rate_limited += 1
                if permit.at in self._sends:  # refused: not a send the server took
                    self._sends.remove(permit.at)
                if self._tokens is not None:
                    self._tokens.add(permit.tokens)
                if self._learned is not None:  # nor a send of the pace: the send the cooldown's end allows goes at once
                    self._learned.add(1.0)
                if self.limits.adaptive and permit.epoch == self._epoch:  # once a round trip, not once a 429
                    if retry_after is not None:  # a rate limit that says when: a rate (see the module docstring)
                        self._cut_rate(now, permit.at)
                    elif adaptive:
                        self._limit = max(1.0, self._limit * self.limits.decrease)
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
                send_rate=self._learned.rate if self._learned is not None else None,
            )
