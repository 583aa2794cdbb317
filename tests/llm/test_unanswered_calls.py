"""A call sent with no reply (a timeout, a connection lost after sending) may be billed by the provider: it counts
against ``max_calls`` and is held against the USD budget at its worst case, marked unsettled; a call the provider
answered with an error status, or one never sent (no connection), was not billed and costs nothing. Real SDKs over
real HTTP against ScriptedLLMServer."""

from __future__ import annotations

import contextlib
import signal
import time

import httpx2
import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from groundjudge import errors
from groundjudge.llm import Ledger, LLMClient, Price, RetryPolicy, get_provider
from groundjudge.llm.base import map_sdk_error
from groundjudge.models import Message, Usage
from groundjudge.testing import Reply, ScriptedLLMServer
from tests.conftest import make_test_client

PROVIDERS = ["openai", "anthropic"]
ASK = [Message(role="system", content="You grade claims."), Message(role="user", content="Is the sky blue?")]
PRICE = Price(1.0, 2.0)
TIMEOUT = 0.5  # the client's; a slow reply takes longer (0.25 timed out good replies on a loaded 2-core machine)
MANY = RetryPolicy(max_attempts=12, max_total_seconds=60, initial_wait=0.001, max_wait=0.002, jitter=0.001)
FEW = RetryPolicy(max_attempts=3, max_total_seconds=60, initial_wait=0.001, max_wait=0.002, jitter=0.001)
NO_REPLY = {"timeout": lambda: Reply.slow(1.0), "connection lost": lambda: Reply.dropped()}


class Verdict(BaseModel):
    label: str


def client(server: ScriptedLLMServer, provider: str, ledger: Ledger) -> LLMClient:
    return make_test_client(server, provider, ledger=ledger, retry=MANY, timeout=TIMEOUT, price=PRICE)


def billed_by_server(server: ScriptedLLMServer, answered: int) -> float:
    """USD the server billed at PRICE, once it has answered ``answered`` requests (a slow reply is answered, and
    billed, after the client gave up on it)."""
    deadline = time.monotonic() + 10
    while server.billed < answered and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.billed == answered
    usd = 0.0
    for req in server.requests:
        u = req.reply_usage or {}
        inp = u.get("prompt_tokens", u.get("input_tokens", 0)) + u.get("cache_read_input_tokens", 0)
        inp += u.get("cache_creation_input_tokens", 0)
        out = u.get("completion_tokens", u.get("output_tokens", 0))
        usd += PRICE.cost(inp, out)
    return usd


@pytest.mark.parametrize("fault", list(NO_REPLY))
@pytest.mark.parametrize("provider", PROVIDERS)
def test_calls_with_no_reply_count_against_max_calls(server: ScriptedLLMServer, provider: str, fault: str) -> None:
    server.script = lambda req: NO_REPLY[fault]()
    c = client(server, provider, Ledger(max_calls=3))
    with pytest.raises(errors.BudgetExceededError):
        c.complete_json(ASK, Verdict)
    assert len(server.requests) == 3  # the cap, not the 12 attempts the retry policy allows
    worst = c.costs.worst_case_cost(c.request_for(ASK, Verdict))
    total = c.ledger.total
    assert total.calls == total.unsettled_calls == 3 and total.input_tokens == total.output_tokens == 0
    assert total.cost_usd == total.unsettled_cost_usd == pytest.approx(3 * worst)
    assert "at most" in total.cost_text() and "3 calls sent with no reply" in total.cost_text()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_usd_budget_holds_against_what_the_provider_billed(server: ScriptedLLMServer, provider: str) -> None:
    # the provider answers (and bills) every request in full after the client timed out: the budget must hold
    server.script = lambda req: Reply.slow(1.0, Reply.json({"label": "x" * 40}, output_tokens=600))
    probe = client(server, provider, Ledger())
    worst = probe.costs.worst_case_cost(probe.request_for(ASK, Verdict))
    c = client(server, provider, Ledger(budget_usd=2.5 * worst))
    with pytest.raises(errors.BudgetExceededError):
        c.complete_json(ASK, Verdict)
    assert len(server.requests) == 2
    assert billed_by_server(server, 2) <= c.ledger.total.cost_usd <= 2.5 * worst


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_retried_timeout_is_in_the_callers_usage_and_the_ledger(server: ScriptedLLMServer, provider: str) -> None:
    server.push(Reply.slow(1.0), Reply.dropped(), Reply.json({"label": "SUPPORTED"}))
    c = client(server, provider, Ledger())
    value, usage = c.complete_json(ASK, Verdict)
    assert value.label == "SUPPORTED" and len(server.requests) == 3
    assert usage == c.ledger.total  # what a row's report counts is what the run's ledger counts
    assert usage.calls == 3 and usage.unsettled_calls == 2 and usage.input_tokens > 0
    assert usage.unsettled_cost_usd == pytest.approx(2 * c.costs.worst_case_cost(c.request_for(ASK, Verdict)))


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


@pytest.mark.parametrize("provider", PROVIDERS)
def test_ctrl_c_during_a_send_counts_it_at_its_worst_case(server: ScriptedLLMServer, provider: str) -> None:
    # Ctrl-C while the request is on the wire: the provider may answer (and bill) it all the same
    server.script = lambda req: Reply.slow(1.0)
    c = make_test_client(server, provider, ledger=Ledger(), retry=MANY, timeout=5.0, price=PRICE)
    before = signal.signal(signal.SIGALRM, _interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        with pytest.raises(KeyboardInterrupt):
            c.complete_json(ASK, Verdict)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)
    assert len(server.requests) == 1  # it left: the server has it
    worst = c.costs.worst_case_cost(c.request_for(ASK, Verdict))
    total = c.ledger.total
    assert total.calls == total.unsettled_calls == 1 and total.cost_usd == pytest.approx(worst)
    assert c.ledger._reserved_calls == 0 and c.ledger._reserved_usd == pytest.approx(0.0)


@pytest.mark.parametrize("status", [400, 429, 500])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_error_status_is_not_billed(server: ScriptedLLMServer, provider: str, status: int) -> None:
    server.script = lambda req: Reply.error(status, retry_after=0.001 if status == 429 else None)
    c = make_test_client(server, provider, ledger=Ledger(max_calls=1), retry=FEW)
    with pytest.raises(errors.ProviderError):
        c.complete_json(ASK, Verdict)
    assert len(server.requests) == (1 if status == 400 else 3)  # never a call against the cap
    assert c.ledger.total == Usage()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_connection_never_made_is_not_billed(provider: str) -> None:
    with ScriptedLLMServer() as s:
        dead = s.openai_base_url if provider == "openai" else s.anthropic_base_url
    model = "openai/gpt-4o-mini" if provider == "openai" else "anthropic/claude-haiku-4-5"
    c = LLMClient(
        get_provider(model, base_url=dead, timeout=1),
        ledger=Ledger(max_calls=1),
        retry=RetryPolicy(max_attempts=3, initial_wait=0.001, max_wait=0.002),
        sleep=lambda s: None,
    )
    with pytest.raises(errors.LLMConnectionError) as info:
        c.complete_json(ASK, Verdict)
    assert info.value.attempts == 3 and not info.value.maybe_billed
    assert c.ledger.total == Usage()


@pytest.mark.parametrize(
    "cause,billed",
    [
        (httpx2.ConnectError("refused"), False),
        (httpx2.ConnectTimeout("connect"), False),
        (httpx2.PoolTimeout("pool"), False),
        (httpx2.ReadTimeout("read"), True),
        (httpx2.WriteTimeout("write"), True),
        (httpx2.ReadError("reset"), True),
        (httpx2.RemoteProtocolError("closed"), True),
        (RuntimeError("not the HTTP client's"), True),
    ],
)
def test_what_an_sdk_error_may_have_billed(cause: Exception, billed: bool) -> None:
    """The SDKs raise APITimeoutError for every timeout and APIConnectionError for a connection never made and one
    lost after sending alike; the HTTP client's error they wrap tells them apart."""
    request = httpx2.Request("POST", "http://127.0.0.1/v1/chat/completions")
    kind = openai.APITimeoutError if isinstance(cause, httpx2.TimeoutException) else openai.APIConnectionError
    try:
        try:
            raise cause
        except Exception as err:
            raise kind(request=request) from err
    except openai.APIConnectionError as exc:
        mapped = map_sdk_error(exc, openai, "openai")
    assert isinstance(mapped, errors.LLMTimeoutError if kind is openai.APITimeoutError else errors.LLMConnectionError)
    assert mapped.maybe_billed is billed


FAULTS = {
    "good": lambda: Reply.json({"label": "SUPPORTED"}),
    "timeout": lambda: Reply.slow(1.0),
    "dropped": lambda: Reply.dropped(),
    "500": lambda: Reply.error(500),
    "429": lambda: Reply.error(429, retry_after=0.001),
}


@settings(max_examples=10, deadline=None)
@given(
    replies=st.lists(st.sampled_from(list(FAULTS)), min_size=1, max_size=6),
    cap=st.integers(0, 4),
    provider=st.sampled_from(PROVIDERS),
)
def test_no_mix_of_faults_passes_the_call_cap(replies: list[str], cap: int, provider: str) -> None:
    """Whatever the server does, the requests that may have been billed (answered, timed out, dropped) never pass
    ``max_calls``, the ledger counts each of them, and no failure raises anything but a typed error."""
    with ScriptedLLMServer(lambda req: Reply.json({"label": "SUPPORTED"})) as server:
        server.push(*(FAULTS[r]() for r in replies))
        c = make_test_client(
            server, provider, ledger=Ledger(max_calls=cap), retry=MANY, timeout=TIMEOUT, price=PRICE, max_reasks=0
        )
        with contextlib.suppress(errors.GroundjudgeError):  # how the call ends is not the question here
            c.complete_json(ASK, Verdict)
    kinds = [replies[i] if i < len(replies) else "good" for i in range(len(server.requests))]
    may_be_billed = sum(k in ("good", "timeout", "dropped") for k in kinds)
    assert may_be_billed <= cap
    assert c.ledger.total.calls == may_be_billed
    # a good reply slower than the timeout on a loaded machine is one with no reply too
    assert sum(k in ("timeout", "dropped") for k in kinds) <= c.ledger.total.unsettled_calls <= may_be_billed


def test_the_calls_a_ledger_holds_count_at_their_worst_case_when_no_one_settles_them() -> None:
    # what the Ray engine bills for the calls a killed actor had in flight (Ledger.in_flight): each at the worst
    # case it was held at, unsettled; held at $0 (no price), their cost unknown, never a known $0
    ledger = Ledger()
    assert ledger.in_flight() == Usage()
    ledger.reserve(0.25)
    ledger.reserve(0.0)  # a model without a price
    ledger.reserve(0.5)
    ledger.settle(0.5, Usage(calls=1, cost_usd=0.1))
    held = ledger.in_flight()
    assert (held.calls, held.unsettled_calls, held.unpriced_calls) == (2, 2, 1)
    assert held.cost_usd == held.unsettled_cost_usd == pytest.approx(0.25)
    ledger.settle(0.25, Usage())
    ledger.settle(0.0, Usage())
    assert ledger.in_flight() == Usage()
