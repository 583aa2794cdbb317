"""Provider prompt caching, counted: through the real SDKs against the scripted server's cache emulation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import BaseModel

from groundjudge import errors
from groundjudge.llm import Ledger, load_prices, price_for, register_price
from groundjudge.llm.accounting import Price
from groundjudge.models import Message, Usage
from groundjudge.testing import Reply, ScriptedLLMServer
from tests.conftest import make_test_client


class Answer(BaseModel):
    verdict: str


OK = {"verdict": "SUPPORTED"}
# ~2,000 tokens of stable instructions at the server's 4 characters a token.
STATIC = "You grade claims against sources. " * 240


def ask(user: str, system: str = STATIC, cache_upto: int | None = None) -> list[Message]:
    return [Message(role="system", content=system), Message(role="user", content=user, cache_upto=cache_upto)]


def test_openai_warm_second_call_reads_the_prefix_and_is_priced_at_the_cached_rate(server: ScriptedLLMServer) -> None:
    server.push(Reply.json(OK), Reply.json(OK))
    client = make_test_client(server, "openai")
    _, cold = client.complete_json(ask("Claim one."), Answer)
    _, warm = client.complete_json(ask("Claim two, a different one."), Answer)
    assert cold.cached_input_tokens == 0
    # The shared prefix (the system prompt) is over 1024 tokens; cached in 128-token steps from 1024.
    shared_tokens = len(server.requests[1].messages[0]["content"]) // 4
    assert warm.cached_input_tokens > 1024
    assert (warm.cached_input_tokens - 1024) % 128 == 0
    assert shared_tokens - 128 < warm.cached_input_tokens <= shared_tokens
    price = price_for("openai/gpt-4o-mini")
    assert price is not None and price.cached_input_per_mtok == pytest.approx(0.075)  # 50% of input
    plain = warm.input_tokens - warm.cached_input_tokens
    expected = (plain * 0.15 + warm.cached_input_tokens * 0.075 + warm.output_tokens * 0.60) / 1e6
    assert warm.cost_usd == pytest.approx(expected)
    assert warm.cost_usd < cold.cost_usd
    # The ledger carries the cached tokens too.
    assert client.ledger.total.cached_input_tokens == warm.cached_input_tokens
    # A prompt cache key routes calls with the same static prefix together; it is not in the cache key.
    assert server.requests[0].body["prompt_cache_key"] == server.requests[1].body["prompt_cache_key"]


def test_openai_prefix_below_the_minimum_is_not_cached_and_the_minimum_is_settable(server: ScriptedLLMServer) -> None:
    short = "Short instructions. " * 20  # ~100 tokens
    server.push(*[Reply.json(OK)] * 4)
    client = make_test_client(server, "openai")
    client.complete_json(ask("a", system=short), Answer)
    _, usage = client.complete_json(ask("b", system=short), Answer)
    assert usage.cached_input_tokens == 0
    server.min_cached_prefix_tokens = 16
    client.complete_json(ask("c", system=short + "x"), Answer)
    _, usage = client.complete_json(ask("d", system=short + "x"), Answer)
    assert usage.cached_input_tokens > 0 and (usage.cached_input_tokens - 16) % 128 == 0


def test_anthropic_request_marks_the_system_block_and_the_stable_prefix(server: ScriptedLLMServer) -> None:
    server.push(Reply.json(OK))
    sources = "SOURCE: The tower is 330 metres tall. " * 10
    user = sources + "CLAIM: It is 500 metres tall."
    make_test_client(server, "anthropic").complete_json(ask(user, cache_upto=len(sources)), Answer)
    body = server.requests[0].body
    (system,) = body["system"]
    assert system["type"] == "text" and system["cache_control"] == {"type": "ephemeral"}
    assert system["text"].startswith(STATIC)
    head, tail = body["messages"][0]["content"]
    assert head == {"type": "text", "text": sources, "cache_control": {"type": "ephemeral"}}
    assert tail == {"type": "text", "text": "CLAIM: It is 500 metres tall."}


def test_anthropic_message_without_cache_upto_stays_plain_text(server: ScriptedLLMServer) -> None:
    server.push(Reply.json(OK))
    make_test_client(server, "anthropic").complete_json(ask("Just a claim."), Answer)
    assert server.requests[0].body["messages"][0]["content"] == "Just a claim."


def test_anthropic_cold_call_writes_and_warm_call_reads_priced_apart(server: ScriptedLLMServer) -> None:
    server.push(Reply.json(OK), Reply.json(OK))
    client = make_test_client(server, "anthropic")
    _, cold = client.complete_json(ask("Claim one."), Answer)
    _, warm = client.complete_json(ask("Claim two, a different one."), Answer)
    system_tokens = len(server.requests[0].messages[0]["content"]) // 4
    assert cold.cache_write_tokens == system_tokens and cold.cached_input_tokens == 0
    assert warm.cached_input_tokens == system_tokens and warm.cache_write_tokens == 0
    # input_tokens is all the input (Anthropic reports the uncached part apart from reads and writes).
    for req, usage in zip(server.requests, (cold, warm), strict=True):
        assert usage.input_tokens == len(req.text) // 4
    price = price_for("anthropic/claude-haiku-4-5")
    assert price is not None
    assert (price.cached_input_per_mtok, price.cache_write_per_mtok) == (pytest.approx(0.10), pytest.approx(1.25))
    cold_plain = cold.input_tokens - cold.cache_write_tokens
    assert cold.cost_usd == pytest.approx(
        (cold_plain * 1.0 + cold.cache_write_tokens * 1.25 + cold.output_tokens * 5.0) / 1e6
    )
    warm_plain = warm.input_tokens - warm.cached_input_tokens
    assert warm.cost_usd == pytest.approx(
        (warm_plain * 1.0 + warm.cached_input_tokens * 0.10 + warm.output_tokens * 5.0) / 1e6
    )
    assert warm.cost_usd < cold.cost_usd / 3
    total = client.ledger.total
    assert (total.cached_input_tokens, total.cache_write_tokens) == (system_tokens, system_tokens)


def test_anthropic_second_breakpoint_reads_the_system_and_writes_the_shared_sources(server: ScriptedLLMServer) -> None:
    server.anthropic_min_cache_tokens = 64
    sources = "SOURCE: The tower is 330 metres tall and was completed in 1889. " * 40
    server.push(*[Reply.json(OK)] * 3)
    client = make_test_client(server, "anthropic")
    client.complete_json(ask("warm the system prompt"), Answer)
    _, first = client.complete_json(ask(sources + "CLAIM: one", cache_upto=len(sources)), Answer)
    _, second = client.complete_json(ask(sources + "CLAIM: two", cache_upto=len(sources)), Answer)
    system_tokens = len(server.requests[0].messages[0]["content"]) // 4
    upto_sources = (len(server.requests[1].messages[0]["content"]) + 1 + len(sources)) // 4
    assert first.cached_input_tokens == system_tokens
    assert first.cache_write_tokens == upto_sources - system_tokens
    assert second.cached_input_tokens == upto_sources and second.cache_write_tokens == 0


def test_usage_arithmetic_carries_cache_counts() -> None:
    a = Usage(calls=1, input_tokens=100, cached_input_tokens=60, cache_write_tokens=10, cost_usd=1.0)
    b = Usage(calls=2, input_tokens=50, cached_input_tokens=5, cache_write_tokens=7, cost_usd=0.5)
    assert (a + b).cached_input_tokens == 65 and (a + b).cache_write_tokens == 17
    assert (a - b).cached_input_tokens == 55 and (a - b).cache_write_tokens == 3


def test_price_cost_rates_and_batch_factor() -> None:
    price = Price(1.0, 2.0, cached_input_per_mtok=0.1, cache_write_per_mtok=1.25)
    usd = price.cost(1_000_000, 1_000_000, cached_input_tokens=400_000, cache_write_tokens=100_000)
    assert usd == pytest.approx(0.5 + 0.04 + 0.125 + 2.0)
    assert price.cost(1_000_000, 0, batch=True) == pytest.approx(0.5)
    assert Price(1.0, 2.0).cost(10, 0, cached_input_tokens=10) == Price(1.0, 2.0).cost(10, 0)


def test_price_file_takes_optional_cache_rates(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    path.write_text(
        json.dumps(
            {
                "openai/cache-priced": {"input": 2.0, "output": 4.0, "cached_input": 0.5},
                "anthropic/cache-priced": {"input": 2.0, "output": 4.0, "cached_input": 0.2, "cache_write": 2.5},
            }
        )
    )
    load_prices(path)
    oa, an = price_for("openai/cache-priced"), price_for("anthropic/cache-priced")
    assert oa is not None and an is not None
    assert (oa.cached_input_per_mtok, oa.cache_write_per_mtok) == (0.5, None)
    assert oa.write_rate == 2.0
    assert (an.cached_input_per_mtok, an.cache_write_per_mtok) == (0.2, 2.5)


def test_budget_holds_cache_writes_at_their_dearer_rate(server: ScriptedLLMServer) -> None:
    # Cache writes cost 100x plain input here: a reservation at the plain input rate would let this call through
    # and the cache write would pass the cap.
    register_price("anthropic/dear-writes", 1.0, 0.0, cached_input_per_mtok=0.1, cache_write_per_mtok=100.0)
    register_price("anthropic/plain-writes", 1.0, 0.0)
    server.push(Reply.json(OK))
    plain = make_test_client(server, "anthropic", model="anthropic/plain-writes")
    input_bound = plain.costs.worst_case_cost(plain._request(ask("claim"), Answer))  # all input at the plain rate
    budget = input_bound * 3  # fits the plain-rate bound, not the cache-write bound
    client = make_test_client(server, "anthropic", model="anthropic/dear-writes", ledger=Ledger(budget_usd=budget))
    with pytest.raises(errors.BudgetExceededError):
        client.complete_json(ask("claim"), Answer)
    assert server.requests == []


def test_estimate_cost_at_batch_price(server: ScriptedLLMServer) -> None:
    client = make_test_client(server, "openai")
    direct = client.costs.estimate_cost(ask("claim"))
    assert direct > 0 and client.costs.estimate_cost(ask("claim"), batch=True) == pytest.approx(direct * 0.5)
