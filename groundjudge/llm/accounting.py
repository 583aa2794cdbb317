"""Prices per model, and the ledger that counts usage and enforces the budget cap."""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from groundjudge.errors import BudgetExceededError, ConfigError
from groundjudge.models import Usage


@dataclass(frozen=True)
class Price:
    """USD per million tokens: input, output, and the provider prompt cache's read and write rates.

    ``cached_input_per_mtok`` prices input tokens read from the provider's prompt cache and
    ``cache_write_per_mtok`` input tokens written to it (Anthropic cache creation); None means the plain input
    rate. ``batch_factor`` multiplies the whole cost of a call made through a batch API (0.5: half price).
    """

    input_per_mtok: float
    output_per_mtok: float
    cached_input_per_mtok: float | None = None
    cache_write_per_mtok: float | None = None
    batch_factor: float = 0.5

    @property
    def cached_rate(self) -> float:
        return self.input_per_mtok if self.cached_input_per_mtok is None else self.cached_input_per_mtok

    @property
    def write_rate(self) -> float:
        return self.input_per_mtok if self.cache_write_per_mtok is None else self.cache_write_per_mtok

    @property
    def max_input_rate(self) -> float:
        """The dearest rate an input token can be billed at (what a worst-case estimate must use)."""
        return max(self.input_per_mtok, self.cached_rate, self.write_rate)

    def cost(
        self,
        input_tokens: int,
        output_tokens: int,
        *,
        cached_input_tokens: int = 0,
        cache_write_tokens: int = 0,
        batch: bool = False,
    ) -> float:
        """USD of one call; ``input_tokens`` is all input, of which some were read from or written to the cache."""
        cached = max(0, min(cached_input_tokens, input_tokens))
        written = max(0, min(cache_write_tokens, input_tokens - cached))
        plain = input_tokens - cached - written
        usd = (
            plain * self.input_per_mtok
            + cached * self.cached_rate
            + written * self.write_rate
            + output_tokens * self.output_per_mtok
        ) / 1e6
        return usd * self.batch_factor if batch else usd


def _openai(input_per_mtok: float, output_per_mtok: float, cached_share: float | None) -> Price:
    """An OpenAI price: cached input at ``cached_share`` of input; no write premium (caching is automatic)."""
    cached = None if cached_share is None else round(input_per_mtok * cached_share, 6)
    return Price(input_per_mtok, output_per_mtok, cached_input_per_mtok=cached)


def _anthropic(input_per_mtok: float, output_per_mtok: float) -> Price:
    """An Anthropic price: cache reads at 10% of input, 5-minute cache writes at 125%."""
    return Price(
        input_per_mtok,
        output_per_mtok,
        cached_input_per_mtok=round(input_per_mtok * 0.10, 6),
        cache_write_per_mtok=round(input_per_mtok * 1.25, 6),
    )


# List prices in USD per million tokens. Keys are "provider/model"; the longest matching prefix wins, so dated
# snapshots ("gpt-4o-mini-2024-07-18") find their family. Extend with register_price() or $GROUNDJUDGE_PRICES; a
# price given to the client (LLMClient/make_client ``price=``, Config ``price``, ``--price``) wins over this table.
# Cached input: OpenAI gpt-4o family 50% of input, gpt-4.1 family 25%, gpt-5 family 10%; Anthropic cache reads
# 10% and 5-minute cache writes 125% of input. Both batch APIs bill half of the direct price (batch_factor 0.5).
# A model whose cached rate is not known here (o4-mini) is priced at the full input rate: never under-counted.
PRICES: dict[str, Price] = {
    "openai/gpt-4o-mini": _openai(0.15, 0.60, 0.50),
    "openai/gpt-4o": _openai(2.50, 10.00, 0.50),
    "openai/gpt-4.1-nano": _openai(0.10, 0.40, 0.25),
    "openai/gpt-4.1-mini": _openai(0.40, 1.60, 0.25),
    "openai/gpt-4.1": _openai(2.00, 8.00, 0.25),
    "openai/gpt-5-nano": _openai(0.05, 0.40, 0.10),
    "openai/gpt-5-mini": _openai(0.25, 2.00, 0.10),
    "openai/gpt-5": _openai(1.25, 10.00, 0.10),
    "openai/o4-mini": _openai(1.10, 4.40, None),
    "anthropic/claude-haiku-4-5": _anthropic(1.00, 5.00),
    "anthropic/claude-3-5-haiku": _anthropic(0.80, 4.00),
    "anthropic/claude-sonnet-4": _anthropic(3.00, 15.00),
    "anthropic/claude-opus-4-5": _anthropic(5.00, 25.00),
    "anthropic/claude-opus-4": _anthropic(15.00, 75.00),
    # No "openai-compatible/" entry: such a server may be local and free or hosted and paid, and an unknown price
    # is not 0. Its calls are counted as unpriced (Usage.unpriced_calls) unless a price is given (--price, Config
    # price, register_price, $GROUNDJUDGE_PRICES), and a USD budget on it is refused until one is.
}

_prices_lock = threading.Lock()
_loaded_price_files: set[str] = set()


def register_price(
    model: str,
    input_per_mtok: float,
    output_per_mtok: float,
    *,
    cached_input_per_mtok: float | None = None,
    cache_write_per_mtok: float | None = None,
    batch_factor: float = 0.5,
) -> None:
    """Add or replace the price of ``provider/model`` (USD per million tokens).

    Cache rates left out are the plain input rate; ``batch_factor`` is what a batch-API call costs relative to a
    direct one.
    """
    with _prices_lock:
        PRICES[model] = Price(
            input_per_mtok,
            output_per_mtok,
            cached_input_per_mtok=cached_input_per_mtok,
            cache_write_per_mtok=cache_write_per_mtok,
            batch_factor=batch_factor,
        )


def load_prices(path: str | Path) -> None:
    """Read ``{"provider/model": {"input": usd, "output": usd, "cached_input": usd, "cache_write": usd}}``.

    USD per million tokens; "cached_input" and "cache_write" are optional (default: the input rate).
    """
    try:
        table = json.loads(Path(path).read_text())
        for model, p in table.items():
            cached, write = p.get("cached_input"), p.get("cache_write")
            register_price(
                model,
                float(p["input"]),
                float(p["output"]),
                cached_input_per_mtok=None if cached is None else float(cached),
                cache_write_per_mtok=None if write is None else float(write),
            )
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(f"price file {path}: {exc}") from exc


def price_for(model: str) -> Price | None:
    """The price of ``provider/model`` by longest prefix, or None if unknown."""
    env = os.environ.get("GROUNDJUDGE_PRICES")
    if env and env not in _loaded_price_files:
        load_prices(env)
        _loaded_price_files.add(env)
    with _prices_lock:
        matches = [k for k in PRICES if model.startswith(k)]
        return PRICES[max(matches, key=len)] if matches else None


class Ledger:
    """Thread-safe running totals and the budget cap (USD and/or billed calls).

    Before each call, :meth:`reserve` checks that spending so far plus the reservations of calls in flight plus
    this call's reservation stays within the cap, and raises :class:`BudgetExceededError` instead of making the
    call that could pass it. :class:`~groundjudge.llm.client.LLMClient` reserves a call's worst case (its input
    bounded from above, and a reply of max_tokens), so that however many threads run, the cap is never passed;
    :meth:`settle` then replaces the reservation by the real cost, or, for a call sent that got no reply (a timeout,
    a connection lost after sending: the provider may have billed it in full), by that same worst case, marked
    unsettled (:meth:`CallCosts.unanswered <groundjudge.llm.costs.CallCosts.unanswered>`).
    """

    def __init__(self, budget_usd: float | None = None, max_calls: int | None = None) -> None:
        if budget_usd is not None and budget_usd < 0:
            raise ConfigError("budget_usd must be >= 0")
        if max_calls is not None and max_calls < 0:
            raise ConfigError("max_calls must be >= 0")
        self.budget_usd = budget_usd
        self.max_calls = max_calls
        self.total = Usage()
        self._reserved_usd = 0.0
        self._reserved_calls = 0
        self._reserved_unpriced = 0  # of the calls held, those held at $0: no price, their cost unknown
        self._lock = threading.Lock()

    def reserve(self, estimate_usd: float, calls: int = 1) -> None:
        """Hold ``estimate_usd`` and ``calls`` calls against the caps, or raise :class:`BudgetExceededError`.

        A batch reserves all its requests at once (their worst case at the batch price).
        """
        n_calls = calls
        with self._lock:
            held = self.total.calls + self._reserved_calls
            if self.max_calls is not None and held + n_calls > self.max_calls:
                raise BudgetExceededError(
                    f"call budget reached: {self.total.calls} of {self.max_calls} calls made",
                    spent_usd=self.total.cost_usd,
                    calls=self.total.calls,
                )
            spent = self.total.cost_usd + self._reserved_usd
            if self.budget_usd is not None and spent + estimate_usd > self.budget_usd:
                raise BudgetExceededError(
                    f"budget reached: ${self.total.cost_usd:.4f} spent of ${self.budget_usd:.4f}"
                    + (f", ${self._reserved_usd:.4f} held for calls in flight" if self._reserved_usd else "")
                    + f"; the next {'call' if n_calls == 1 else f'{n_calls} calls'} could cost up to "
                    + f"${estimate_usd:.4f} and pass it",
                    spent_usd=self.total.cost_usd,
                    calls=self.total.calls,
                )
            self._reserved_usd += estimate_usd
            self._reserved_calls += n_calls
            self._reserved_unpriced += n_calls if estimate_usd == 0 else 0

    def settle(self, estimate_usd: float, usage: Usage, calls: int = 1) -> None:
        """Replace a reservation by what the call (or ``calls`` calls) really cost (zero usage when unbilled)."""
        with self._lock:
            self._reserved_usd -= estimate_usd
            self._reserved_calls -= calls
            self._reserved_unpriced -= calls if estimate_usd == 0 else 0
            self.total = self.total + usage

    def in_flight(self) -> Usage:
        """What the calls held now (reserved, not settled) count when no caller is left to settle them (a Ray actor
        killed with calls in flight): sent with no reply, each at the worst case it is held at, unsettled, as
        :meth:`CallCosts.unanswered <groundjudge.llm.costs.CallCosts.unanswered>` counts one; those held at $0
        unpriced (their cost unknown, never a known $0)."""
        with self._lock:
            calls, usd, unpriced = self._reserved_calls, max(0.0, self._reserved_usd), self._reserved_unpriced
        if calls <= 0:
            return Usage()
        return Usage(
            calls=calls, cost_usd=usd, unsettled_calls=calls, unsettled_cost_usd=usd, unpriced_calls=max(0, unpriced)
        )

    def record(self, usage: Usage) -> None:
        """Count usage that held no reservation: cache hits, and results of a batch submitted by an earlier run
        (already paid for when it ran)."""
        with self._lock:
            self.total = self.total + usage

    record_cached = record
