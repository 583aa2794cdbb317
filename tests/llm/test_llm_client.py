"""The LLM client against the scripted server, through the real openai and anthropic SDKs."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import BaseModel, Field

from groundjudge import errors
from groundjudge.cache import Cache
from groundjudge.llm import Ledger, Price, RetryPolicy, make_client, register_price
from groundjudge.models import Message, PromptRef
from groundjudge.testing import Reply, ScriptedLLMServer
from tests.conftest import FAST_RETRY, make_test_client

PROVIDERS = ["openai", "anthropic"]
ASK = [Message(role="system", content="You grade claims."), Message(role="user", content="Is the sky blue?")]
PROMPT = PromptRef(name="judge", version="1")


class Verdict(BaseModel):
    label: str = Field(pattern="^(SUPPORTED|UNSUPPORTED|CONTRADICTED)$")
    quotes: list[str]


GOOD = {"label": "SUPPORTED", "quotes": ["the sky is blue"]}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_both_providers_parse_the_same_schema(server: ScriptedLLMServer, provider: str) -> None:
    server.push(Reply.json(GOOD))
    value, usage = make_test_client(server, provider).complete_json(ASK, Verdict, prompt=PROMPT)
    assert value == Verdict(**GOOD)
    assert usage.calls == 1 and usage.input_tokens > 0 and usage.output_tokens > 0 and usage.cost_usd > 0
    (req,) = server.requests
    assert req.api == provider
    # The schema reached the wire: json_schema response format for OpenAI, a forced tool for Anthropic.
    if provider == "openai":
        fmt = req.body["response_format"]
        assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
        assert fmt["json_schema"]["schema"]["additionalProperties"] is False
        assert req.body["temperature"] == 0 and req.body["seed"] == 0
    else:
        assert req.body["tool_choice"] == {"type": "tool", "name": "Verdict"}
        assert req.body["tools"][0]["input_schema"]["required"] == ["label", "quotes"]
        assert "temperature" not in req.body
        (system,) = req.body["system"]  # one text block, marked for the provider's prompt cache
        assert system["text"].startswith("You grade claims.") and system["cache_control"] == {"type": "ephemeral"}


@pytest.mark.parametrize("model", ["openai/gpt-5-mini", "openai/o4-mini", "openai/gpt-4o-mini"])
def test_openai_reasoning_models_are_sent_no_temperature(server: ScriptedLLMServer, model: str) -> None:
    # they answer any temperature but their default with HTTP 400: every call of a run failed
    server.push(Reply.json(GOOD))
    value, usage = make_test_client(server, model=model).complete_json(ASK, Verdict)
    assert value.label == "SUPPORTED" and usage.calls == 1 and len(server.requests) == 1
    assert ("temperature" in server.requests[0].body) == (model == "openai/gpt-4o-mini")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_429_is_retried_honouring_retry_after(server: ScriptedLLMServer, provider: str) -> None:
    sleeps: list[float] = []
    server.push(Reply.error(429, retry_after=0.04), Reply.json(GOOD))
    value, usage = make_test_client(server, provider, sleeps=sleeps).complete_json(ASK, Verdict)
    assert value.label == "SUPPORTED"
    assert len(server.requests) == 2
    assert sleeps == [pytest.approx(0.04)]
    assert usage.calls == 1  # the 429 was not billed


@pytest.mark.parametrize("status", [500, 503, 529])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_5xx_is_retried_with_backoff(server: ScriptedLLMServer, provider: str, status: int) -> None:
    sleeps: list[float] = []
    server.push(Reply.error(status), Reply.error(status), Reply.json(GOOD))
    value, _ = make_test_client(server, provider, sleeps=sleeps).complete_json(ASK, Verdict)
    assert value.label == "SUPPORTED"
    assert len(server.requests) == 3
    assert len(sleeps) == 2 and all(0 < s <= 0.05 + 1e-9 for s in sleeps)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_retries_are_bounded_and_end_in_the_typed_error(server: ScriptedLLMServer, provider: str) -> None:
    server.push(*[Reply.error(429, retry_after=0.01)] * 10)
    client = make_test_client(server, provider, retry=RetryPolicy(max_attempts=3, initial_wait=0.01, max_wait=0.01))
    with pytest.raises(errors.RateLimitError) as info:
        client.complete_json(ASK, Verdict)
    assert info.value.attempts == 3 and info.value.status == 429
    assert len(server.requests) == 3


def test_total_retry_time_is_bounded(server: ScriptedLLMServer) -> None:
    server.push(*[Reply.error(503, retry_after=5)] * 10)
    sleeps: list[float] = []
    policy = RetryPolicy(max_attempts=10, max_total_seconds=1.0, initial_wait=1, max_wait=10)
    with pytest.raises(errors.ServerError):
        make_test_client(server, retry=policy, sleeps=sleeps).complete_json(ASK, Verdict)
    # The first wait (5 s) would already pass the 1 s bound, so no retry happens.
    assert sleeps == [] and len(server.requests) == 1


@pytest.mark.parametrize(
    "status,error",
    [
        (400, errors.BadRequestError),
        (401, errors.AuthenticationError),
        (403, errors.AuthenticationError),
        (404, errors.BadRequestError),
    ],
)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_client_errors_are_not_retried(
    server: ScriptedLLMServer, provider: str, status: int, error: type[Exception]
) -> None:
    server.push(Reply.error(status), Reply.json(GOOD))
    with pytest.raises(error) as info:
        make_test_client(server, provider).complete_json(ASK, Verdict)
    assert len(server.requests) == 1
    assert getattr(info.value, "status", None) == status and not info.value.retryable  # type: ignore[attr-defined]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_timeout_is_retried_then_succeeds(server: ScriptedLLMServer, provider: str) -> None:
    server.push(Reply.slow(2.0), Reply.json(GOOD))
    value, _ = make_test_client(server, provider, timeout=0.3).complete_json(ASK, Verdict)
    assert value.label == "SUPPORTED"
    assert len(server.requests) == 2


def test_timeouts_exhaust_into_timeout_error(server: ScriptedLLMServer) -> None:
    server.push(*[Reply.slow(2.0)] * 3)
    client = make_test_client(server, timeout=0.2, retry=RetryPolicy(max_attempts=2, initial_wait=0.01, max_wait=0.01))
    with pytest.raises(errors.LLMTimeoutError) as info:
        client.complete_json(ASK, Verdict)
    assert info.value.attempts == 2


def test_connection_refused_is_a_connection_error() -> None:
    with ScriptedLLMServer() as s:
        dead = s.openai_base_url
    from groundjudge.llm import LLMClient, get_provider

    client = LLMClient(
        get_provider("openai/gpt-4o-mini", base_url=dead, timeout=1),
        retry=RetryPolicy(max_attempts=2, initial_wait=0.01, max_wait=0.01),
        sleep=lambda s: None,
    )
    with pytest.raises(errors.LLMConnectionError) as info:
        client.complete_json(ASK, Verdict)
    assert info.value.attempts == 2


@pytest.mark.parametrize("provider", PROVIDERS)
def test_malformed_http_body_is_retried(server: ScriptedLLMServer, provider: str) -> None:
    server.push(Reply.malformed_body(), Reply.json(GOOD))
    value, _ = make_test_client(server, provider).complete_json(ASK, Verdict)
    assert value.label == "SUPPORTED" and len(server.requests) == 2


NOT_THE_API = {
    "other JSON": ('{"foo": 1}', "application/json"),
    "no usage": ('{"content": [{"type": "tool_use"}], "choices": [{}], "usage": null}', "application/json"),
    "a string": ('"hello"', "application/json"),
    "null": ("null", "application/json"),
    "an HTML page": ("<html><body>502 Bad Gateway</body></html>", "text/html"),
}


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("body", NOT_THE_API.values(), ids=list(NOT_THE_API))
def test_a_200_body_that_is_not_the_apis_is_a_server_fault(
    server: ScriptedLLMServer, provider: str, body: tuple[str, str]
) -> None:
    # a proxy or gateway answering 200 with its own page is retried like a 5xx, and fails typed when it lasts
    server.push(Reply.malformed_body(*body), Reply.json(GOOD))
    value, usage = make_test_client(server, provider).complete_json(ASK, Verdict)
    assert value.label == "SUPPORTED" and len(server.requests) == 2 and usage.calls == 1
    server.push(*[Reply.malformed_body(*body)] * 2)
    client = make_test_client(server, provider, retry=RetryPolicy(max_attempts=2, initial_wait=0, jitter=0))
    with pytest.raises(errors.ServerError, match="format") as info:
        client.complete_json(ASK, Verdict)
    assert info.value.retryable and info.value.attempts == 2


@pytest.mark.parametrize("provider", PROVIDERS)
def test_reask_fixes_an_invalid_first_answer(server: ScriptedLLMServer, provider: str) -> None:
    server.push(Reply.text("Sure! The label is SUPPORTED."), Reply.json(GOOD))
    value, usage = make_test_client(server, provider).complete_json(ASK, Verdict)
    assert value.label == "SUPPORTED"
    assert usage.calls == 2  # the re-ask is billed too
    second = server.requests[1]
    assert second.messages[-2] == {"role": "assistant", "content": "Sure! The label is SUPPORTED."}
    assert "not valid JSON" in second.last_user


@pytest.mark.parametrize("provider", PROVIDERS)
def test_reask_names_the_schema_error(server: ScriptedLLMServer, provider: str) -> None:
    server.push(Reply.json({"label": "MAYBE", "quotes": []}), Reply.json(GOOD))
    value, _ = make_test_client(server, provider).complete_json(ASK, Verdict)
    assert value.label == "SUPPORTED"
    assert "label" in server.requests[1].last_user and "schema" in server.requests[1].last_user


@pytest.mark.parametrize("provider", PROVIDERS)
def test_truncated_json_ends_in_invalid_output_with_raw_text(server: ScriptedLLMServer, provider: str) -> None:
    server.push(*[Reply.truncated('{"label": "SUPPO')] * 3)
    with pytest.raises(errors.InvalidOutputError) as info:
        make_test_client(server, provider, max_reasks=2).complete_json(ASK, Verdict)
    assert info.value.raw == '{"label": "SUPPO'
    assert len(info.value.errors) == 3 and "token limit" in info.value.errors[0]
    assert info.value.usage is not None and info.value.usage.calls == 3
    assert len(server.requests) == 3
    assert "shorter" in server.requests[1].last_user


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_cut_off_reply_is_never_taken_even_when_it_validates(
    server: ScriptedLLMServer, provider: str, tmp_path: Path
) -> None:
    # Anthropic hands over what of a cut-off tool call's input was written: valid, but a list without its last items
    cut = {"label": "SUPPORTED", "quotes": []}
    server.push(Reply.json(cut, finish="length"), Reply.json(GOOD))
    cache = Cache(tmp_path / "c")
    value, usage = make_test_client(server, provider, cache=cache).complete_json(ASK, Verdict, prompt=PROMPT)
    assert value == Verdict(**GOOD) and usage.calls == 2
    assert "token limit" in server.requests[1].last_user and "shorter" in server.requests[1].last_user
    server.push(*[Reply.json(cut, finish="length")] * 3)
    with pytest.raises(errors.InvalidOutputError) as info:
        make_test_client(server, provider, cache=cache).complete_json(ASK, Verdict)
    assert info.value.partial is None and all("token limit" in e for e in info.value.errors)
    assert not cache.peek(make_test_client(server, provider).cache_key(ASK, Verdict, None))


def test_code_fenced_json_is_accepted(server: ScriptedLLMServer) -> None:
    server.push(Reply.text("```json\n" + json.dumps(GOOD) + "\n```"))
    value, usage = make_test_client(server).complete_json(ASK, Verdict)
    assert value.label == "SUPPORTED" and usage.calls == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_refusal_is_a_typed_error_and_not_retried(server: ScriptedLLMServer, provider: str) -> None:
    server.push(Reply.refusal("I won't grade that."), Reply.json(GOOD))
    with pytest.raises(errors.RefusalError) as info:
        make_test_client(server, provider).complete_json(ASK, Verdict)
    assert "won't grade" in info.value.refusal
    assert len(server.requests) == 1


# -- cache ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_second_identical_call_hits_the_cache(server: ScriptedLLMServer, provider: str, cache: Cache) -> None:
    server.push(Reply.json(GOOD))
    client = make_test_client(server, provider, cache=cache)
    first, u1 = client.complete_json(ASK, Verdict, prompt=PROMPT)
    second, u2 = client.complete_json(ASK, Verdict, prompt=PROMPT)
    assert first == second
    assert len(server.requests) == 1
    assert u1.calls == 1 and u1.cached_calls == 0
    assert u2.calls == 0 and u2.cached_calls == 1 and u2.cost_usd == 0 and u2.input_tokens == 0
    assert client.ledger.total.calls == 1 and client.ledger.total.cached_calls == 1


def test_a_twin_asks_the_same_questions_over_its_own_cache_and_ledger(
    server: ScriptedLLMServer, cache: Cache, tmp_path: Path
) -> None:
    """LLMClient.twin (the dry run's client): same request settings, so the same requests, cache keys and prices;
    the cache and ledger given, no limiter."""
    client = make_test_client(
        server, cache=cache, temperature=0.3, seed=7, max_tokens=99, max_reasks=0, price=Price(1.0, 2.0)
    )
    other, ledger = Cache(tmp_path / "other"), Ledger()
    twin = client.twin(cache=other, ledger=ledger)
    assert twin.cache is other and twin.ledger is ledger and twin.limiter is None
    assert twin.provider is client.provider and twin.retry is client.retry and twin.price == client.price
    assert (twin.temperature, twin.seed, twin.max_tokens, twin.max_reasks) == (0.3, 7, 99, 0)
    assert twin.cache_key(ASK, Verdict, PROMPT) == client.cache_key(ASK, Verdict, PROMPT)
    assert twin._request(ASK, Verdict) == client._request(ASK, Verdict)
    other.close()


def test_cache_survives_a_new_process_view(server: ScriptedLLMServer, tmp_path: Path) -> None:
    server.push(Reply.json(GOOD))
    make_test_client(server, cache=Cache(tmp_path / "c")).complete_json(ASK, Verdict, prompt=PROMPT)
    value, usage = make_test_client(server, cache=Cache(tmp_path / "c")).complete_json(ASK, Verdict, prompt=PROMPT)
    assert value.label == "SUPPORTED" and usage.cached_calls == 1 and len(server.requests) == 1


def test_changed_prompt_version_model_or_schema_misses(server: ScriptedLLMServer, cache: Cache) -> None:
    server.script = lambda req: Reply.json(GOOD)
    client = make_test_client(server, cache=cache)
    client.complete_json(ASK, Verdict, prompt=PROMPT)
    client.complete_json(ASK, Verdict, prompt=PromptRef(name="judge", version="2"))
    assert len(server.requests) == 2
    make_test_client(server, model="openai/gpt-4o", cache=cache).complete_json(ASK, Verdict, prompt=PROMPT)
    assert len(server.requests) == 3

    class Verdict2(Verdict):
        reason: str = ""

    server.script = lambda req: Reply.json({**GOOD, "reason": "r"})
    client.complete_json(ASK, Verdict2, prompt=PROMPT)
    assert len(server.requests) == 4
    # a changed message misses as well; the original still hits
    client.complete_json([*ASK[:1], Message(role="user", content="Is grass green?")], Verdict, prompt=PROMPT)
    client.complete_json(ASK, Verdict, prompt=PROMPT)
    assert len(server.requests) == 5
    # settings that decide whether an answer is got, not which one, still hit
    patient = make_test_client(server, cache=cache, max_reasks=5, retry=RetryPolicy(max_attempts=9))
    assert patient.complete_json(ASK, Verdict, prompt=PROMPT)[1].cached_calls == 1
    assert len(server.requests) == 5


def test_api_key_never_reaches_the_cache_files(server: ScriptedLLMServer, tmp_path: Path) -> None:
    server.script = lambda req: Reply.json(GOOD)
    cache = Cache(tmp_path / "c")
    for provider in PROVIDERS:
        make_test_client(server, provider, cache=cache).complete_json(ASK, Verdict, prompt=PROMPT)
    cache.close()
    files = [p for p in (tmp_path / "c").rglob("*") if p.is_file()]
    assert files
    blob = b"".join(p.read_bytes() for p in files)
    assert b"SUPPORTED" in blob  # the cache really holds the answers, as text
    assert b"SECRET" not in blob


def test_cache_only_mode_fails_clearly_on_a_miss(server: ScriptedLLMServer, tmp_path: Path) -> None:
    server.push(Reply.json(GOOD))
    make_test_client(server, cache=Cache(tmp_path / "c")).complete_json(ASK, Verdict, prompt=PROMPT)
    replay = make_test_client(server, cache=Cache(tmp_path / "c", mode="only"))
    assert replay.complete_json(ASK, Verdict, prompt=PROMPT)[1].cached_calls == 1
    with pytest.raises(errors.CacheMissError):
        replay.complete_json(ASK, Verdict, prompt=PromptRef(name="judge", version="9"))
    assert len(server.requests) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_cache_only_mode_never_sends_for_a_corrupt_cached_entry(
    server: ScriptedLLMServer, provider: str, tmp_path: Path
) -> None:
    server.script = lambda req: Reply.json(GOOD)
    writer = make_test_client(server, provider, cache=Cache(tmp_path / "c"))
    key = writer.cache_key(ASK, Verdict, PROMPT)
    assert writer.cache is not None
    writer.cache.set(key, {"output": {"label": "MAYBE"}, "raw": "corrupt"})  # fails Verdict's validation
    replay = make_test_client(server, provider, cache=Cache(tmp_path / "c", mode="only"))
    with pytest.raises(errors.CacheMissError, match="no longer validates"):
        replay.complete_json(ASK, Verdict, prompt=PROMPT)
    assert server.requests == [] and replay.ledger.total.calls == 0


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_damaged_cache_entry_is_asked_again_not_a_failed_row(
    server: ScriptedLLMServer, provider: str, tmp_path: Path
) -> None:
    """A cached value that is not JSON (cut short on disk) raised JSONDecodeError out of the call: the row was an
    ERROR on every rerun (the damaged entry was never replaced), and an NLI score so damaged failed its claim."""
    server.script = lambda req: Reply.json(GOOD)
    client = make_test_client(server, provider, cache=Cache(tmp_path / "c"))
    key = client.cache_key(ASK, Verdict, PROMPT)
    assert client.cache is not None
    client.cache.store.set(key, '{"output": {"label": "SUPP')  # a value cut short
    value, usage = client.complete_json(ASK, Verdict, prompt=PROMPT)
    assert value.label == "SUPPORTED" and usage.calls == 1 and len(server.requests) == 1  # asked again, billed once
    assert client.complete_json(ASK, Verdict, prompt=PROMPT)[1].cached_calls == 1  # the answer replaced it
    client.cache.store.set(key, b"\xff\xfe not text")
    replay = make_test_client(server, provider, cache=Cache(tmp_path / "c", mode="only"))
    with pytest.raises(errors.CacheMissError, match="its entry is damaged"):
        replay.complete_json(ASK, Verdict, prompt=PROMPT)
    assert len(server.requests) == 1
    assert client.cache.get(key, miss_ok=True) is None  # the NLI scores' lookup: a miss, scored again


def test_cache_off_and_refresh_modes(server: ScriptedLLMServer, tmp_path: Path) -> None:
    server.script = lambda req: Reply.json(GOOD)
    off = make_test_client(server, cache=Cache(tmp_path / "c", mode="off"))
    off.complete_json(ASK, Verdict)
    off.complete_json(ASK, Verdict)
    assert len(server.requests) == 2
    refresh = make_test_client(server, cache=Cache(tmp_path / "c", mode="refresh"))
    refresh.complete_json(ASK, Verdict)
    assert len(server.requests) == 3
    use = make_test_client(server, cache=Cache(tmp_path / "c"))
    assert use.complete_json(ASK, Verdict)[1].cached_calls == 1
    assert len(server.requests) == 3


# -- budget --------------------------------------------------------------------------------------------------


def test_call_budget_stops_before_the_call_that_would_exceed_it(server: ScriptedLLMServer) -> None:
    server.script = lambda req: Reply.json(GOOD)
    client = make_test_client(server, ledger=Ledger(max_calls=2))
    client.complete_json(ASK, Verdict, prompt=PromptRef(name="a", version="1"))
    client.complete_json(ASK, Verdict, prompt=PromptRef(name="b", version="1"))
    with pytest.raises(errors.BudgetExceededError) as info:
        client.complete_json(ASK, Verdict, prompt=PromptRef(name="c", version="1"))
    assert info.value.calls == 2
    assert len(server.requests) == 2


def test_usd_budget_stops_at_the_right_call(server: ScriptedLLMServer) -> None:
    # $0.01 per output token, inputs free: each reply (100 output tokens) costs exactly $1.
    register_price("openai/priced-model", input_per_mtok=0.0, output_per_mtok=10_000.0)
    server.script = lambda req: Reply.json(GOOD, output_tokens=100)
    # max_tokens=100: a call can cost at most $1, which is what the budget holds while it is in flight
    client = make_test_client(server, model="openai/priced-model", ledger=Ledger(budget_usd=3.5), max_tokens=100)
    for i in range(3):
        client.complete_json(ASK, Verdict, prompt=PromptRef(name=f"p{i}", version="1"))
    assert client.ledger.total.cost_usd == pytest.approx(3.0)
    with pytest.raises(errors.BudgetExceededError) as info:  # $3 spent + up to $1 next > $3.5
        client.complete_json(ASK, Verdict, prompt=PromptRef(name="p3", version="1"))
    assert info.value.spent_usd == pytest.approx(3.0)
    assert len(server.requests) == 3


def test_cached_calls_cost_nothing_against_the_budget(server: ScriptedLLMServer, cache: Cache) -> None:
    server.script = lambda req: Reply.json(GOOD)
    make_test_client(server, cache=cache).complete_json(ASK, Verdict)
    client = make_test_client(server, cache=cache, ledger=Ledger(max_calls=0))
    assert client.complete_json(ASK, Verdict)[1].cached_calls == 1


def test_usd_budget_needs_a_known_price(server: ScriptedLLMServer) -> None:
    with pytest.raises(errors.ConfigError, match="no price known for openai/unpriced-model-x") as info:
        make_test_client(server, model="openai/unpriced-model-x", ledger=Ledger(budget_usd=1))
    said = str(info.value)  # how to give one, on the command line and in Python
    assert "--price IN,OUT" in said and "price={'input_per_mtok'" in said and "register_price" in said
    # a call cap needs no price
    make_test_client(server, model="openai/unpriced-model-x", ledger=Ledger(max_calls=1))


def test_a_price_given_to_the_client_wins_over_the_table(server: ScriptedLLMServer) -> None:
    # 1,000 output tokens: within the request's cap (the server cuts a reply past it, as a provider does)
    server.script = lambda req: Reply.json(GOOD, input_tokens=1_000_000, output_tokens=1_000)
    client = make_client(
        "openai/gpt-4o-mini", base_url=server.openai_base_url, price={"input_per_mtok": 1.0, "output_per_mtok": 2.0}
    )
    assert client.price == Price(1.0, 2.0)
    assert client.complete_json(ASK, Verdict)[1].cost_usd == pytest.approx(1.002)  # not gpt-4o-mini's $0.1506
    # and makes a budget on a model the table does not know possible
    compatible = f"openai-compatible/paid-model@{server.openai_base_url}"
    budgeted = make_client(compatible, price=Price(1.0, 2.0), ledger=Ledger(budget_usd=10))
    _, usage = budgeted.complete_json(ASK, Verdict, prompt=PROMPT)
    assert (usage.cost_usd, usage.unpriced_calls) == (pytest.approx(1.002), 0)


def test_price_file_from_environment(
    server: ScriptedLLMServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"openai/my-finetune": {"input": 1.0, "output": 2.0}}))
    monkeypatch.setenv("GROUNDJUDGE_PRICES", str(prices))
    server.push(Reply.json(GOOD, input_tokens=1_000_000, output_tokens=1_000))  # within the request's cap
    _, usage = make_test_client(server, model="openai/my-finetune").complete_json(ASK, Verdict)
    assert usage.cost_usd == pytest.approx(1.002)


# -- OpenAI-compatible servers -------------------------------------------------------------------------------


def test_openai_compatible_falls_back_to_json_object(server: ScriptedLLMServer) -> None:
    server.push(Reply.error(400, message="response_format json_schema is not supported"), Reply.json(GOOD))
    server.script = lambda req: Reply.json(GOOD)
    from groundjudge.llm import LLMClient, get_provider

    provider = get_provider(f"openai-compatible/qwen2.5:7b@{server.openai_base_url}")
    client = LLMClient(provider, sleep=lambda s: None)
    assert client.complete_json(ASK, Verdict)[0].label == "SUPPORTED"
    client.complete_json(ASK, Verdict)
    formats = [r.body["response_format"]["type"] for r in server.requests]
    assert formats == ["json_schema", "json_object", "json_object"]  # remembered after the first refusal
    assert server.requests[0].model == "qwen2.5:7b"
    assert "max_tokens" in server.requests[0].body and "JSON Schema" in server.requests[1].messages[0]["content"]
    # no price is known for any openai-compatible model: its cost is unknown, counted, never a known $0
    assert client.price is None
    assert client.ledger.total.unpriced_calls == client.ledger.total.calls == 2  # the refused request is not billed


# -- the caller's semantic check ------------------------------------------------------------------------------


class Item(BaseModel):
    id: str
    label: str


class Items(BaseModel):
    items: list[Item]


WANTED = ("c1", "c2", "c3")
ALL_IDS = {"items": [{"id": i, "label": "SUPPORTED"} for i in WANTED]}
MISSING_C3 = {"items": [{"id": i, "label": "SUPPORTED"} for i in WANTED[:2]]}


def every_id(value: Items) -> str | None:
    missing = [i for i in WANTED if i not in {it.id for it in value.items}]
    return f"you gave no verdict for claim ids {', '.join(missing)}" if missing else None


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_reply_failing_the_check_is_reasked_and_never_cached(
    server: ScriptedLLMServer, provider: str, tmp_path: Path
) -> None:
    server.push(Reply.json(MISSING_C3), Reply.json(ALL_IDS))
    client = make_test_client(server, provider, cache=Cache(tmp_path / "c"))
    value, usage = client.complete_json(ASK, Items, prompt=PROMPT, check=every_id)
    assert [it.id for it in value.items] == list(WANTED)
    assert usage.calls == 2 and len(server.requests) == 2
    first, second = server.requests
    assert second.messages != first.messages  # the re-ask is not byte-identical: it cannot hit a poisoned entry
    assert "claim ids c3" in second.last_user
    # a later run, fresh client and cache handle: the good reply is served, no request made
    server.script = lambda req: Reply.json(MISSING_C3)
    again, usage2 = make_test_client(server, provider, cache=Cache(tmp_path / "c")).complete_json(
        ASK, Items, prompt=PROMPT, check=every_id
    )
    assert again == value and usage2.cached_calls == 1 and len(server.requests) == 2


def test_a_cached_value_failing_the_check_is_not_served(server: ScriptedLLMServer, tmp_path: Path) -> None:
    # a cache written before the check existed (or by a caller without it) holds an incomplete reply
    server.push(Reply.json(MISSING_C3))
    make_test_client(server, cache=Cache(tmp_path / "c")).complete_json(ASK, Items, prompt=PROMPT)
    assert len(server.requests) == 1
    server.push(Reply.json(ALL_IDS))
    checked = make_test_client(server, cache=Cache(tmp_path / "c"))
    value, usage = checked.complete_json(ASK, Items, prompt=PROMPT, check=every_id)
    assert every_id(value) is None and usage.calls == 1 and usage.cached_calls == 0
    assert len(server.requests) == 2
    # the good reply overwrote the poisoned entry
    value3, usage3 = make_test_client(server, cache=Cache(tmp_path / "c")).complete_json(
        ASK, Items, prompt=PROMPT, check=every_id
    )
    assert value3 == value and usage3.cached_calls == 1 and len(server.requests) == 2
    # cache-only replay of an entry failing the check is a miss, not a spend
    server.push(Reply.json(MISSING_C3))
    make_test_client(server, cache=Cache(tmp_path / "c2")).complete_json(ASK, Items, prompt=PROMPT)
    replay = make_test_client(server, cache=Cache(tmp_path / "c2", mode="only"))
    with pytest.raises(errors.CacheMissError):
        replay.complete_json(ASK, Items, prompt=PROMPT, check=every_id)
    assert len(server.requests) == 3


def test_check_failing_after_every_reask_raises_with_the_partial_value(server: ScriptedLLMServer, cache: Cache) -> None:
    server.script = lambda req: Reply.json(MISSING_C3)
    client = make_test_client(server, cache=cache, max_reasks=2)
    with pytest.raises(errors.InvalidOutputError) as info:
        client.complete_json(ASK, Items, prompt=PROMPT, check=every_id)
    assert isinstance(info.value.partial, Items) and len(info.value.partial.items) == 2
    assert info.value.usage is not None and info.value.usage.calls == 3
    assert all("claim ids c3" in e for e in info.value.errors)
    assert not cache.peek(client.cache_key(ASK, Items, PROMPT))
    # without any schema-valid reply there is no partial value
    server.script = lambda req: Reply.text("no JSON here")
    with pytest.raises(errors.InvalidOutputError) as info2:
        client.complete_json(ASK, Items, prompt=PromptRef(name="judge", version="2"), check=every_id)
    assert info2.value.partial is None


def test_json_schema_fallback_is_race_free_at_concurrency_8(server: ScriptedLLMServer) -> None:
    # The refusals come back slowly, so that many schema-mode requests are in flight when the first one switches.
    from concurrent.futures import ThreadPoolExecutor

    from groundjudge.llm import LLMClient, get_provider

    server.refuse_json_schema, server.refusal_delay = True, 0.1
    server.script = lambda req: Reply.json(GOOD)
    client = LLMClient(
        get_provider(f"openai-compatible/qwen2.5:7b@{server.openai_base_url}"), retry=FAST_RETRY, sleep=lambda s: None
    )

    def one(i: int) -> str:
        return client.complete_json([Message(role="user", content=f"question {i}")], Verdict)[0].label

    with ThreadPoolExecutor(8) as pool:
        labels = list(pool.map(one, range(40)))
    assert labels == ["SUPPORTED"] * 40
    formats = [r.body["response_format"]["type"] for r in server.requests]
    assert formats.count("json_object") == 40
    assert 2 <= formats.count("json_schema") <= 8  # the ones in flight before the switch; none after


def test_usd_budget_is_never_passed_under_concurrency(server: ScriptedLLMServer) -> None:
    # Long replies: every call uses its whole max_tokens (1000 output tokens = $1). Calls in flight must hold
    # their worst case; holding the mean (256 tokens) let 8 threads spend $8 against a $5.5 cap.
    from concurrent.futures import ThreadPoolExecutor

    register_price("openai/long-replies", input_per_mtok=0.0, output_per_mtok=1000.0)
    server.script = lambda req: Reply.json(GOOD, output_tokens=1000, delay=0.05)
    ledger = Ledger(budget_usd=5.5)
    client = make_test_client(server, model="openai/long-replies", ledger=ledger, max_tokens=1000)

    def one(i: int) -> str:
        try:
            client.complete_json([Message(role="user", content=f"question {i}")], Verdict)
        except errors.BudgetExceededError as exc:
            assert "budget reached" in str(exc)
            return "stopped"
        return "ok"

    with ThreadPoolExecutor(8) as pool:
        outcomes = list(pool.map(one, range(20)))
    assert ledger.total.cost_usd <= 5.5
    assert outcomes.count("ok") == 5 and outcomes.count("stopped") == 15
    assert ledger.total.calls == len(server.requests) == 5
    # the dry-run estimate stays realistic: the mean output seen (1000 tokens here), not a worst case
    assert client.costs.estimate_cost(ASK) == pytest.approx(1.0)


def test_worst_case_reservation_covers_non_ascii_input(server: ScriptedLLMServer) -> None:
    # A tokenizer can make a token of every byte: the reservation counts UTF-8 bytes, not characters / 4.
    register_price("openai/input-priced", input_per_mtok=1_000_000.0, output_per_mtok=0.0)
    cjk = [Message(role="user", content="東京" * 500)]
    client = make_test_client(server, model="openai/input-priced", max_tokens=10)
    request = client._request(cjk, Verdict)
    assert client.costs.worst_case_cost(request) >= len("東京".encode()) * 500
    assert client.costs.estimate_cost(cjk) < client.costs.worst_case_cost(request) / 4


# -- Retry-After -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_retry_after_longer_than_max_wait_is_honoured(server: ScriptedLLMServer, provider: str) -> None:
    sleeps: list[float] = []
    server.push(Reply.error(429, retry_after=45), Reply.json(GOOD))
    policy = RetryPolicy(max_attempts=4, max_total_seconds=120, initial_wait=0.01, max_wait=0.05)
    value, _ = make_test_client(server, provider, sleeps=sleeps, retry=policy).complete_json(ASK, Verdict)
    assert value.label == "SUPPORTED" and sleeps == [pytest.approx(45)] and len(server.requests) == 2


@pytest.mark.parametrize("provider", PROVIDERS)
def test_retry_after_past_the_retry_budget_fails_at_once_saying_when(server: ScriptedLLMServer, provider: str) -> None:
    from datetime import datetime, timedelta, timezone

    sleeps: list[float] = []
    server.push(Reply.error(429, retry_after=300), Reply.json(GOOD))
    policy = RetryPolicy(max_attempts=4, max_total_seconds=120, initial_wait=0.01, max_wait=0.05)
    before = datetime.now(timezone.utc)
    with pytest.raises(errors.RateLimitError) as info:
        make_test_client(server, provider, sleeps=sleeps, retry=policy).complete_json(ASK, Verdict)
    assert sleeps == [] and len(server.requests) == 1
    exc = info.value
    assert exc.retry_after == pytest.approx(300) and exc.retry_at is not None
    assert before + timedelta(seconds=299) <= exc.retry_at <= datetime.now(timezone.utc) + timedelta(seconds=301)
    assert "300 s" in str(exc) and f"{exc.retry_at:%Y-%m-%d %H:%M:%S} UTC" in str(exc)
    assert exc.usage is not None and exc.usage.calls == 0


def test_retry_after_is_measured_against_what_is_left(server: ScriptedLLMServer) -> None:
    sleeps: list[float] = []
    server.push(*[Reply.error(503, retry_after=50)] * 3, Reply.json(GOOD))
    policy = RetryPolicy(max_attempts=6, max_total_seconds=120, initial_wait=0.01, max_wait=0.05)
    with pytest.raises(errors.ServerError) as info:
        make_test_client(server, sleeps=sleeps, retry=policy).complete_json(ASK, Verdict)
    # 50 s fits twice in 120 s; the third wait would leave only 20 s, so it fails at once
    assert sleeps == [50, 50] and len(server.requests) == 3
    assert info.value.retry_at is not None and info.value.attempts == 3 and "20.0 s left" in str(info.value)


# -- refusals ----------------------------------------------------------------------------------------------------


REFUSALS = [("openai", Reply.refusal), ("anthropic", Reply.refusal), ("openai", Reply.content_filtered)]


@pytest.mark.parametrize("provider,refuse", REFUSALS, ids=["openai-refusal", "anthropic-refusal", "content-filter"])
def test_refusal_is_billed_counted_and_never_cached(
    server: ScriptedLLMServer, provider: str, refuse: Callable[..., Reply], cache: Cache
) -> None:
    server.push(refuse(output_tokens=7), refuse(output_tokens=7))
    client = make_test_client(server, provider, cache=cache)
    with pytest.raises(errors.RefusalError) as info:
        client.complete_json(ASK, Verdict, prompt=PROMPT)
    usage = info.value.usage
    assert usage is not None and usage.calls == 1 and usage.output_tokens == 7 and usage.cost_usd > 0
    assert client.ledger.total == usage
    assert len(server.requests) == 1  # not retried
    assert not cache.peek(client.cache_key(ASK, Verdict, PROMPT))
    with pytest.raises(errors.RefusalError):  # a later run asks again
        client.complete_json(ASK, Verdict, prompt=PROMPT)
    assert len(server.requests) == 2 and client.ledger.total.calls == 2


def test_refusal_after_a_reask_carries_the_usage_of_both(server: ScriptedLLMServer) -> None:
    server.push(Reply.text("not JSON", output_tokens=5), Reply.refusal(output_tokens=7))
    client = make_test_client(server)
    with pytest.raises(errors.RefusalError) as info:
        client.complete_json(ASK, Verdict)
    assert info.value.usage is not None and info.value.usage.calls == 2 and info.value.usage.output_tokens == 12
    assert client.ledger.total.calls == 2


def test_the_cost_methods_old_names_still_answer_with_a_deprecation_warning(server: ScriptedLLMServer) -> None:
    # worst_case_cost, expected_tokens, estimate_cost and usage_of moved from LLMClient to LLMClient.costs
    client = make_test_client(server, model="openai/gpt-4o-mini")
    request = client.request_for(ASK, Verdict)
    for name, args in (("worst_case_cost", (request,)), ("expected_tokens", (request,)), ("estimate_cost", (ASK,))):
        with pytest.warns(DeprecationWarning, match=f"LLMClient.costs.{name}"):
            assert getattr(client, name)(*args) == getattr(client.costs, name)(*args)
    with pytest.warns(DeprecationWarning):
        assert client.usage_of == client.costs.usage_of
    with pytest.raises(AttributeError):
        _ = client.no_such_thing
