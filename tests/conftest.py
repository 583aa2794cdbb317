from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from groundjudge.cache import Cache
from groundjudge.llm import Ledger, LLMClient, RetryPolicy, get_provider
from groundjudge.testing import ScriptedLLMServer

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
SHARED_MODEL = SHARED / "models" / "gj-nli-minilm-l6"
FIXTURES = ROOT / "fixtures"

# Nothing here may reach a model hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

FAST_RETRY = RetryPolicy(max_attempts=4, max_total_seconds=30, initial_wait=0.01, max_wait=0.05, jitter=0.01)


@pytest.fixture(autouse=True)
def _keys(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-SECRET-openai-0123456789")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-SECRET-anthropic-0123456789")
    monkeypatch.setenv("GROUNDJUDGE_CACHE_DIR", str(tmp_path / "default-cache"))
    monkeypatch.delenv("GROUNDJUDGE_PRICES", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)


@pytest.fixture
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer() as s:
        yield s


@pytest.fixture
def cache(tmp_path: Path) -> Iterator[Cache]:
    c = Cache(tmp_path / "cache")
    yield c
    c.close()


MODELS = {"openai": "openai/gpt-4o-mini", "anthropic": "anthropic/claude-haiku-4-5"}


def base_url_for(server: ScriptedLLMServer, provider: str) -> str:
    return server.anthropic_base_url if provider == "anthropic" else server.openai_base_url


def make_test_client(
    server: ScriptedLLMServer,
    provider: str = "openai",
    *,
    model: str | None = None,
    cache: Cache | None = None,
    ledger: Ledger | None = None,
    timeout: float = 5.0,
    retry: RetryPolicy = FAST_RETRY,
    sleeps: list[float] | None = None,
    **kw: object,
) -> LLMClient:
    """A real client (real SDK, real HTTP) pointed at the scripted server."""
    prov = get_provider(model or MODELS[provider], base_url=base_url_for(server, provider), timeout=timeout)
    sleep = sleeps.append if sleeps is not None else (lambda s: None)
    return LLMClient(prov, cache=cache, ledger=ledger, retry=retry, sleep=sleep, **kw)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def shared_nli():  # type: ignore[no-untyped-def]
    """The project's shared NLI model, loaded once for the whole session."""
    from groundjudge.checker.nli import NLIModel

    assert SHARED_MODEL.is_dir(), f"the shared NLI model is missing at {SHARED_MODEL} (see ../shared/models/README.md)"
    return NLIModel.shared(str(SHARED_MODEL))
