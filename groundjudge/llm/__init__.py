"""LLM access: one protocol, thin adapters, one core loop (cache, budget, retries, re-asks, provider limits)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from groundjudge.cache import Cache
from groundjudge.llm.accounting import Ledger, Price, load_prices, price_for, register_price
from groundjudge.llm.base import LLMRequest, LLMResponse, Provider
from groundjudge.llm.batch import BatchOutcome, BatchRunner
from groundjudge.llm.client import DeferredCall, LLMClient, RetryPolicy
from groundjudge.llm.limits import Limiter, LimiterStats, Limits
from groundjudge.llm.registry import ModelSpec, get_provider, parse_model, register_provider

__all__ = [
    "BatchOutcome",
    "BatchRunner",
    "DeferredCall",
    "LLMClient",
    "LLMRequest",
    "LLMResponse",
    "Ledger",
    "Limiter",
    "LimiterStats",
    "Limits",
    "ModelSpec",
    "Price",
    "Provider",
    "RetryPolicy",
    "get_provider",
    "load_prices",
    "make_client",
    "parse_model",
    "price_for",
    "register_price",
    "register_provider",
]


def make_client(
    model: str,
    *,
    base_url: str | None = None,
    timeout: float = 60.0,
    cache: Cache | None = None,
    ledger: Ledger | None = None,
    retry: RetryPolicy | None = None,
    price: Price | Mapping[Any, float] | None = None,
    limits: Limits | Limiter | None = None,
    **kwargs: object,
) -> LLMClient:
    """An :class:`LLMClient` for a model string such as ``openai/gpt-4o-mini``.

    ``price``: what this model costs, winning over the price table: a :class:`Price` or
    ``{"input_per_mtok": usd, "output_per_mtok": usd}`` (as ``Config.price`` holds it).
    ``limits``: the pace of its calls (concurrency, adaptive on 429s, rpm, tpm): :class:`Limits` gives the client
    a :class:`Limiter` of its own; pass one :class:`Limiter` to several clients to make them share it.
    """
    # a cache-only client sends nothing: it needs no API key (a miss stops it before any request)
    replay_only = cache is not None and cache.mode == "only"
    provider = get_provider(model, base_url=base_url, timeout=timeout, replay_only=replay_only)
    if price is not None and not isinstance(price, Price):
        price = Price(float(price["input_per_mtok"]), float(price["output_per_mtok"]))
    limiter = Limiter(limits) if isinstance(limits, Limits) else limits
    return LLMClient(provider, cache=cache, ledger=ledger, retry=retry, price=price, limiter=limiter, **kwargs)  # type: ignore[arg-type]
