"""Retries of one LLM call: the policy (backoff with jitter, the server's Retry-After) and its tenacity loop.

:class:`~groundjudge.llm.client.LLMClient` sends every billed call through :func:`retrying`; only what decides
whether and when to try again lives here, never what a call costs or how its reply is judged.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import tenacity

from groundjudge import errors
from groundjudge.llm.limits import Limiter

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter for retryable errors; Retry-After wins when the server sends it.

    ``max_wait`` caps the backoff only. A Retry-After is honoured in full when it fits in what is left of
    ``max_total_seconds`` (the whole time spent retrying one call); when it does not, the call fails at once.
    """

    max_attempts: int = 6
    max_total_seconds: float = 120.0
    initial_wait: float = 1.0
    max_wait: float = 30.0
    jitter: float = 1.0


def retrying(
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], None],
    limiter: Limiter | None,
    model_id: str,
    waited: list[float],
) -> tenacity.Retrying:
    """The retry loop of one call: retryable errors with backoff (or the server's Retry-After) within ``policy``.

    Retry-After is honoured however long, as long as it fits in what is left of ``max_total_seconds``; when it
    does not, the error is raised at once (no sleep) with ``retry_at`` and a message saying when to retry.
    A Retry-After that is waited for also holds every other thread's new sends (:meth:`Limiter.cool_down`).
    ``waited[0]``: seconds the call's attempts spent in the limiter's queue, which do not count against
    ``max_total_seconds``.
    """

    def left(state: tenacity.RetryCallState) -> float:
        # Slept time counts even when the sleep function does not really sleep (tests).
        spent = max((state.seconds_since_start or 0.0) - waited[0], state.idle_for)
        return policy.max_total_seconds - spent

    def retry(state: tenacity.RetryCallState) -> bool:
        exc = state.outcome.exception() if state.outcome else None
        if not isinstance(exc, errors.GroundjudgeError):
            return False
        if isinstance(exc, errors.LLMError):
            exc.attempts = state.attempt_number
        if not exc.retryable:
            return False
        retry_after, budget = getattr(exc, "retry_after", None), left(state)
        if retry_after is not None and retry_after > budget and isinstance(exc, errors.ProviderError):
            say_when_to_retry(exc, retry_after, budget, policy.max_total_seconds)
            return False  # fail at once: the server's wait does not fit in what is left
        if retry_after is not None and limiter is not None:
            limiter.cool_down(retry_after)  # the server's wait holds every thread, not only this call
        return True

    def wait(state: tenacity.RetryCallState) -> float:
        retry_after = getattr(state.outcome.exception() if state.outcome else None, "retry_after", None)
        if retry_after is not None:
            return float(retry_after)
        backoff = policy.initial_wait * 2 ** (state.attempt_number - 1)
        return min(policy.max_wait, backoff + random.uniform(0, policy.jitter))

    return tenacity.Retrying(
        retry=retry,
        wait=wait,
        stop=lambda s: s.attempt_number >= policy.max_attempts or s.upcoming_sleep > left(s),
        sleep=sleep,
        reraise=True,
        before_sleep=lambda s: log.info(
            "%s: attempt %d failed (%s); retrying in %.2f s",
            model_id,
            s.attempt_number,
            s.outcome.exception() if s.outcome else None,
            s.upcoming_sleep,
        ),
    )


def rate_limited(exc: BaseException) -> bool:
    """A 429, or a 529 (Anthropic: overloaded): what shrinks the adaptive concurrency limit."""
    return isinstance(exc, errors.RateLimitError) or (isinstance(exc, errors.ProviderError) and exc.status == 529)


def say_when_to_retry(exc: errors.ProviderError, retry_after: float, left: float, total: float) -> None:
    """Mark an error whose Retry-After does not fit in the retry budget with when to try again."""
    exc.retry_at = datetime.now(timezone.utc) + timedelta(seconds=retry_after)
    exc.args = (
        f"{exc.args[0] if exc.args else exc}; the server asks to wait {retry_after:g} s, more than the "
        f"{max(left, 0.0):.1f} s left of the retry budget (RetryPolicy.max_total_seconds={total:g}): "
        f"retry after {exc.retry_at:%Y-%m-%d %H:%M:%S} UTC",
    )
