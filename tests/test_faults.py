"""The fault matrix: every injected fault x every provider kind, through the real SDKs over real HTTP.

Each cell asserts how the call ends (the value, or the typed error), how many requests reached the server, how
many replies were billed and counted (in the returned or raised usage and in the ledger), the waits, and that only
an accepted reply is cached. README's "What happens when things go wrong" table is this file in prose.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from pydantic import BaseModel

from groundjudge import errors
from groundjudge.cache import Cache
from groundjudge.llm import RetryPolicy
from groundjudge.models import Message, PromptRef, Usage
from groundjudge.testing import Reply, ScriptedLLMServer
from tests.conftest import make_test_client

PROVIDERS = {
    "openai": "openai/gpt-4o-mini",
    "anthropic": "anthropic/claude-haiku-4-5",
    "openai-compatible": "openai-compatible/qwen2.5:7b",
}
ASK = [Message(role="system", content="You grade claims."), Message(role="user", content="Is the sky blue?")]
PROMPT = PromptRef(name="faults", version="1")
POLICY = RetryPolicy(max_attempts=3, max_total_seconds=60, initial_wait=0.01, max_wait=0.02, jitter=0.001)
TIMEOUT = 0.5  # the client's; a slow reply takes longer (0.25 timed out good replies on a loaded 2-core machine)


class Verdict(BaseModel):
    label: str
    claim_ids: list[str]


GOOD = {"label": "SUPPORTED", "claim_ids": ["c1", "c2"]}
INCOMPLETE = {"label": "SUPPORTED", "claim_ids": ["c1"]}


def every_claim(value: Verdict) -> str | None:
    missing = sorted({"c1", "c2"} - set(value.claim_ids))
    return f"no verdict for claim ids {', '.join(missing)}" if missing else None


@dataclass(frozen=True)
class Expect:
    """How a cell ends: ``error`` None means the good value came back (and was cached)."""

    error: type[errors.GroundjudgeError] | None
    requests: int
    billed: int
    sleeps: int | None = None  # retry waits, when the cell pins them
    unsettled: int = 0  # calls sent with no reply: counted as calls at their worst case (the provider may bill them)


@dataclass(frozen=True)
class Fault:
    """What the server does, and the expected outcome per provider (``default`` unless overridden)."""

    replies: Callable[[], list[Reply]]
    default: Expect
    per_provider: dict[str, Expect] = field(default_factory=dict)
    refuse_json_schema: bool = False
    check: bool = False

    def expect(self, provider: str) -> Expect:
        return self.per_provider.get(provider, self.default)


def _good() -> Reply:
    return Reply.json(GOOD)


FAULTS: dict[str, Fault] = {
    # transient HTTP faults: retried with backoff (Retry-After when sent), never billed
    "429 Retry-After": Fault(lambda: [Reply.error(429, retry_after=0.02), _good()], Expect(None, 2, 1, sleeps=1)),
    "429 Retry-After past the retry budget": Fault(
        lambda: [Reply.error(429, retry_after=3600), _good()], Expect(errors.RateLimitError, 1, 0, sleeps=0)
    ),
    "429 every time": Fault(lambda: [Reply.error(429)] * 3, Expect(errors.RateLimitError, 3, 0, sleeps=2)),
    "500 once": Fault(lambda: [Reply.error(500), _good()], Expect(None, 2, 1, sleeps=1)),
    "503 twice": Fault(lambda: [Reply.error(503), Reply.error(503), _good()], Expect(None, 3, 1, sleeps=2)),
    "503 every time": Fault(lambda: [Reply.error(503)] * 3, Expect(errors.ServerError, 3, 0, sleeps=2)),
    # sent, no reply: retried, and counted as a call at its worst case (a provider bills what it answered)
    "timeout once": Fault(lambda: [Reply.slow(1.5), _good()], Expect(None, 2, 1, sleeps=1, unsettled=1)),
    "timeout every time": Fault(
        lambda: [Reply.slow(1.5)] * 3, Expect(errors.LLMTimeoutError, 3, 0, sleeps=2, unsettled=3)
    ),
    "connection lost after sending once": Fault(
        lambda: [Reply.dropped(), _good()], Expect(None, 2, 1, sleeps=1, unsettled=1)
    ),
    "connection lost after sending every time": Fault(
        lambda: [Reply.dropped()] * 3, Expect(errors.LLMConnectionError, 3, 0, sleeps=2, unsettled=3)
    ),
    "HTTP 200 body not JSON": Fault(lambda: [Reply.malformed_body(), _good()], Expect(None, 2, 1, sleeps=1)),
    # bad replies: billed, re-asked with the problem named, never cached
    "truncated JSON once": Fault(lambda: [Reply.truncated('{"label": "SUPP'), _good()], Expect(None, 2, 2)),
    "truncated JSON every time": Fault(
        lambda: [Reply.truncated('{"label": "SUPP')] * 3, Expect(errors.InvalidOutputError, 3, 3)
    ),
    "invalid JSON once": Fault(lambda: [Reply.text("Sure! It is SUPPORTED."), _good()], Expect(None, 2, 2)),
    "invalid JSON every time": Fault(lambda: [Reply.text("Sure!")] * 3, Expect(errors.InvalidOutputError, 3, 3)),
    "JSON off the schema once": Fault(lambda: [Reply.json({"label": 3}), _good()], Expect(None, 2, 2)),
    "answer fails the caller's check once": Fault(
        lambda: [Reply.json(INCOMPLETE), _good()], Expect(None, 2, 2), check=True
    ),
    "answer fails the caller's check every time": Fault(
        lambda: [Reply.json(INCOMPLETE)] * 3, Expect(errors.InvalidOutputError, 3, 3), check=True
    ),
    # refusals: billed and counted, not retried, not cached
    "refusal": Fault(lambda: [Reply.refusal("I won't."), _good()], Expect(errors.RefusalError, 1, 1, sleeps=0)),
    "content filter": Fault(lambda: [Reply.content_filtered(), _good()], Expect(errors.RefusalError, 1, 1)),
    # a server without structured outputs: OpenAI itself would be misconfigured (400, not retried);
    # openai-compatible falls back to json_object; Anthropic uses a forced tool call and never sends json_schema
    "json_schema refused (HTTP 400)": Fault(
        lambda: [_good()],
        Expect(None, 2, 1),
        per_provider={
            "openai": Expect(errors.BadRequestError, 1, 0, sleeps=0),
            "anthropic": Expect(None, 1, 1),
        },
        refuse_json_schema=True,
    ),
}


@pytest.mark.parametrize("provider", list(PROVIDERS))
@pytest.mark.parametrize("fault", list(FAULTS))
def test_fault_matrix(server: ScriptedLLMServer, cache: Cache, fault: str, provider: str) -> None:
    spec = FAULTS[fault]
    want = spec.expect(provider)
    server.refuse_json_schema = spec.refuse_json_schema
    server.push(*spec.replies())
    sleeps: list[float] = []
    client = make_test_client(
        server, provider, model=PROVIDERS[provider], cache=cache, retry=POLICY, sleeps=sleeps, timeout=TIMEOUT
    )
    check = every_claim if spec.check else None

    usage: Usage | None
    if want.error is None:
        value, usage = client.complete_json(ASK, Verdict, prompt=PROMPT, check=check)
        assert value == Verdict(**GOOD)
    else:
        with pytest.raises(want.error) as info:
            client.complete_json(ASK, Verdict, prompt=PROMPT, check=check)
        exc = info.value
        assert isinstance(exc, errors.LLMError)
        usage = exc.usage
        if isinstance(exc, errors.InvalidOutputError):
            assert len(exc.errors) == want.requests
            assert (exc.partial is not None) == spec.check
        if isinstance(exc, errors.ProviderError) and exc.retry_after and exc.retry_after > POLICY.max_total_seconds:
            assert exc.retry_at is not None and "UTC" in str(exc)

    assert len(server.requests) == want.requests, [r.api for r in server.requests]
    # every billed reply and every call sent with no reply is counted, in what the caller gets and in the ledger
    calls = want.billed + want.unsettled
    assert usage is not None and usage.calls == calls and usage.unsettled_calls == want.unsettled
    assert client.ledger.total == usage
    if want.billed:
        assert usage.input_tokens > 0 and usage.output_tokens > 0
    unpriced = provider == "openai-compatible"  # no price is known: the cost is unknown, not $0
    assert usage.unpriced_calls == (calls if unpriced else 0)
    if calls:
        assert (usage.cost_usd > 0) != unpriced
    # a call with no reply is held at its worst case, the part of the cost that is not a billed figure
    worst = client.costs.worst_case_cost(client.request_for(ASK, Verdict))
    assert usage.unsettled_cost_usd == pytest.approx(want.unsettled * worst)
    if want.sleeps is not None:
        assert len(sleeps) == want.sleeps
    assert all(s <= POLICY.max_total_seconds for s in sleeps)
    # only an accepted reply is cached
    assert cache.peek(client.cache_key(ASK, Verdict, PROMPT)) == (want.error is None)
    if want.error is not None and want.billed:  # a failed reply is asked again next time, not served
        server.push(_good(), _good())
        value, again = client.complete_json(ASK, Verdict, prompt=PROMPT, check=check)
        assert value == Verdict(**GOOD) and again.calls >= 1
