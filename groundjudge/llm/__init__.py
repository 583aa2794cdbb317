"""LLM access: one protocol, thin adapters, one core loop (cache, budget, retries, re-asks)."""

from __future__ import annotations

from groundjudge.cache import Cache
from groundjudge.llm.accounting import Ledger, Price, load_prices, price_for, register_price
from groundjudge.llm.base import LLMRequest, LLMResponse, Provider
from groundjudge.llm.batch import BatchOutcome, BatchRunner
from groundjudge.llm.client import DeferredCall, LLMClient, RetryPolicy
from groundjudge.llm.registry import ModelSpec, get_provider, parse_model, register_provider

__all__ = [
    "BatchOutcome",
    "BatchRunner",
    "DeferredCall",
    "LLMClient",
    "LLMRequest",
    "LLMResponse",
    "Ledger",
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
    **kwargs: object,
) -> LLMClient:
    """An :class:`LLMClient` for a model string such as ``openai/gpt-4o-mini``."""
    provider = get_provider(model, base_url=base_url, timeout=timeout)
    return LLMClient(provider, cache=cache, ledger=ledger, retry=retry, **kwargs)  # type: ignore[arg-type]
