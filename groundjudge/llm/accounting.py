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
    """USD per million input and output tokens."""

    input_per_mtok: float
    output_per_mtok: float

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input_per_mtok + output_tokens * self.output_per_mtok) / 1e6


# List prices in USD per million tokens. Keys are "provider/model"; the longest matching prefix wins, so dated
# snapshots ("gpt-4o-mini-2024-07-18") find their family. Extend with register_price() or $GROUNDJUDGE_PRICES.
PRICES: dict[str, Price] = {
    "openai/gpt-4o-mini": Price(0.15, 0.60),
    "openai/gpt-4o": Price(2.50, 10.00),
    "openai/gpt-4.1-nano": Price(0.10, 0.40),
    "openai/gpt-4.1-mini": Price(0.40, 1.60),
    "openai/gpt-4.1": Price(2.00, 8.00),
    "openai/gpt-5-nano": Price(0.05, 0.40),
    "openai/gpt-5-mini": Price(0.25, 2.00),
    "openai/gpt-5": Price(1.25, 10.00),
    "openai/o4-mini": Price(1.10, 4.40),
    "anthropic/claude-haiku-4-5": Price(1.00, 5.00),
    "anthropic/claude-3-5-haiku": Price(0.80, 4.00),
    "anthropic/claude-sonnet-4": Price(3.00, 15.00),
    "anthropic/claude-opus-4-5": Price(5.00, 25.00),
    "anthropic/claude-opus-4": Price(15.00, 75.00),
    # Self-hosted servers bill nothing per token.
    "openai-compatible/": Price(0.0, 0.0),
}

_prices_lock = threading.Lock()
_loaded_price_files: set[str] = set()


def register_price(model: str, input_per_mtok: float, output_per_mtok: float) -> None:
    """Add or replace the price of ``provider/model`` (USD per million tokens)."""
    with _prices_lock:
        PRICES[model] = Price(input_per_mtok, output_per_mtok)


def load_prices(path: str | Path) -> None:
    """Read ``{"provider/model": {"input": usd_per_mtok, "output": usd_per_mtok}}`` from a JSON file."""
    try:
        table = json.loads(Path(path).read_text())
        for model, p in table.items():
            register_price(model, float(p["input"]), float(p["output"]))
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
    :meth:`settle` then replaces the reservation by the real cost.
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
        self._lock = threading.Lock()

    def reserve(self, estimate_usd: float) -> None:
        """Hold ``estimate_usd`` and one call against the caps, or raise :class:`BudgetExceededError`."""
        with self._lock:
            calls = self.total.calls + self._reserved_calls
            if self.max_calls is not None and calls + 1 > self.max_calls:
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
                    + f"; the next call could cost up to ${estimate_usd:.4f} and pass it",
                    spent_usd=self.total.cost_usd,
                    calls=self.total.calls,
                )
            self._reserved_usd += estimate_usd
            self._reserved_calls += 1

    def settle(self, estimate_usd: float, usage: Usage) -> None:
        """Replace a reservation by what the call really cost (zero usage when it failed unbilled)."""
        with self._lock:
            self._reserved_usd -= estimate_usd
            self._reserved_calls -= 1
            self.total = self.total + usage

    def record_cached(self, usage: Usage) -> None:
        with self._lock:
            self.total = self.total + usage
