"""Model strings ("provider/model[@base_url]") to provider adapters."""

from __future__ import annotations

import os
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from groundjudge.errors import ConfigError, MissingAPIKeyError
from groundjudge.llm.base import Provider

ProviderFactory = Callable[["ModelSpec", float], Provider]

_REPLAY_ONLY: ContextVar[bool] = ContextVar("groundjudge_replay_only", default=False)
"""Set while :func:`get_provider` builds an adapter that will only replay the cache (it sends nothing): no key."""

REPLAY_KEY = "groundjudge-cache-only-replay"
"""The key an adapter built for a cache-only replay carries when its provider's key variable is not set."""


@dataclass(frozen=True)
class ModelSpec:
    """A parsed model string."""

    provider: str
    model: str
    base_url: str | None = None


def parse_model(spec: str, base_url: str | None = None) -> ModelSpec:
    """Parse ``openai/gpt-4o-mini``, ``anthropic/claude-sonnet-4-5`` or ``openai-compatible/qwen2.5:7b@URL``.

    An explicit ``base_url`` wins over one written after ``@``.
    """
    provider, sep, rest = spec.partition("/")
    if not sep or not provider or not rest:
        raise ConfigError(f"model {spec!r} is not 'provider/model' (e.g. openai/gpt-4o-mini)")
    model, at, url = rest.rpartition("@")
    if at and url.startswith(("http://", "https://")):
        rest = model
    else:
        url = ""
    if not rest:
        raise ConfigError(f"model {spec!r} names no model after the provider")
    return ModelSpec(provider=provider, model=rest, base_url=base_url or url or None)


def _api_key(provider: str, variable: str, required: bool = True) -> str:
    key = os.environ.get(variable)
    if key:
        return key
    if _REPLAY_ONLY.get():  # a cache-only replay sends nothing (keys are not part of cache keys)
        return REPLAY_KEY
    if required:
        raise MissingAPIKeyError(provider, variable)
    return "not-needed"


HOSTED = ("openai", "anthropic")
"""The providers whose server may come from ``<PROVIDER>_BASE_URL`` in the environment (:func:`server_for`)."""


def server_for(spec: str, base_url: str | None = None) -> str | None:
    """The base URL a model string's requests go to: ``base_url``, else the one after ``@``, else, for a hosted
    provider, ``<PROVIDER>_BASE_URL`` in this process's environment; None: the SDK's own. A Ray driver pins it so
    that workers on other machines, with other environments, ask the server the driver would."""
    parsed = parse_model(spec, base_url)
    return _server(parsed.provider, parsed.base_url)


def _server(provider: str, base_url: str | None) -> str | None:
    """:func:`server_for` of a parsed model string: its base URL, else a hosted provider's from the environment."""
    if base_url or provider not in HOSTED:
        return base_url
    return os.environ.get(f"{provider.upper()}_BASE_URL") or None


def _hosted(
    adapter: Callable[..., Provider], provider: str, spec: ModelSpec, timeout: float, **options: Any
) -> Provider:
    """A provider's own hosted API: its key from ``<PROVIDER>_API_KEY``, its server from the spec, else
    ``<PROVIDER>_BASE_URL`` (:func:`server_for`), else the SDK's default."""
    return adapter(
        spec.model,
        api_key=_api_key(provider, f"{provider.upper()}_API_KEY"),
        base_url=_server(provider, spec.base_url),
        timeout=timeout,
        **options,
    )


def _openai(spec: ModelSpec, timeout: float) -> Provider:
    from groundjudge.llm.openai import OpenAIProvider

    return _hosted(OpenAIProvider, "openai", spec, timeout, json_mode="schema")


def _openai_compatible(spec: ModelSpec, timeout: float) -> Provider:
    from groundjudge.llm.openai import OpenAIProvider

    if not spec.base_url:
        raise ConfigError(
            f"openai-compatible/{spec.model} needs a server address: write it after '@' "
            "(openai-compatible/qwen2.5:7b@http://127.0.0.1:11434/v1), or give it on the command line with "
            "--base-url URL (--second-judge-base-url URL for the second judge), in Python with base_url= "
            "(Config's second_judge_base_url= for the second judge)"
        )
    return OpenAIProvider(
        spec.model,
        # Local servers usually take any key; a hosted one reads $OPENAI_COMPATIBLE_API_KEY.
        api_key=_api_key("openai-compatible", "OPENAI_COMPATIBLE_API_KEY", required=False),
        base_url=spec.base_url,
        timeout=timeout,
        json_mode="auto",
        name="openai-compatible",
    )


def _anthropic(spec: ModelSpec, timeout: float) -> Provider:
    from groundjudge.llm.anthropic import AnthropicProvider

    return _hosted(AnthropicProvider, "anthropic", spec, timeout)


PROVIDERS: dict[str, ProviderFactory] = {
    "openai": _openai,
    "openai-compatible": _openai_compatible,
    "anthropic": _anthropic,
}


def register_provider(name: str, factory: ProviderFactory) -> None:
    """Make ``name/<model>`` strings build providers with ``factory(spec, timeout)``."""
    PROVIDERS[name] = factory


def get_provider(
    spec: str, *, base_url: str | None = None, timeout: float = 60.0, replay_only: bool = False
) -> Provider:
    """Build the adapter for a model string; a missing key is a :class:`MissingAPIKeyError`, unless ``replay_only``:
    the adapter of a cache-only client, which sends nothing, is built without one (CI replays with no key)."""
    parsed = parse_model(spec, base_url)
    factory = PROVIDERS.get(parsed.provider)
    if factory is None:
        raise ConfigError(f"unknown provider {parsed.provider!r}; known: {', '.join(sorted(PROVIDERS))}")
    token = _REPLAY_ONLY.set(replay_only)
    try:
        return factory(parsed, timeout)
    finally:
        _REPLAY_ONLY.reset(token)
