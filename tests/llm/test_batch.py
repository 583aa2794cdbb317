"""The batch APIs for offline runs, through the real SDKs against the scripted server's batch endpoints."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from pydantic import BaseModel

from groundjudge import errors
from groundjudge.cache import Cache
from groundjudge.llm import BatchRunner, DeferredCall, Ledger, LLMClient
from groundjudge.models import Message, PromptRef, Usage
from groundjudge.testing import RecordedRequest, Reply, ScriptedLLMServer
from groundjudge.testing.batches import ScriptedBatch
from tests.conftest import make_test_client

PROVIDERS = ["openai", "anthropic"]
PROMPT = PromptRef(name="judge", version="1")


class Verdict(BaseModel):
    label: str
    claim: str


def asks(n: int) -> list[list[Message]]:
    return [
        [Message(role="system", content="You grade claims."), Message(role="user", content=f"Claim number {i}.")]
        for i in range(n)
    ]


def answer(req: RecordedRequest) -> Reply:
    return Reply.json({"label": "SUPPORTED", "claim": req.last_user})


def defer_all(client: LLMClient, n: int = 3) -> list[DeferredCall]:
    with client.deferring() as deferred:
        for messages in asks(n):
            with pytest.raises(errors.DeferredCallError):
                client.complete_json(messages, Verdict, prompt=PROMPT)
    return deferred


@pytest.fixture
def scripted() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(answer) as s:
        yield s


def runner(client: LLMClient, tmp_path: Path, **kw: object) -> BatchRunner:
    kw.setdefault("sleep", lambda s: None)
    return BatchRunner(client, tmp_path / "out.jsonl.batches.json", poll_seconds=1.0, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_batch_fills_the_cache_and_a_cache_only_run_hits_every_entry(
    scripted: ScriptedLLMServer, provider: str, tmp_path: Path
) -> None:
    cache = Cache(tmp_path / "cache")
    client = make_test_client(scripted, provider, cache=cache)
    deferred = defer_all(client)
    assert len(deferred) == 3 and scripted.requests == []  # nothing sent while deferring
    seen: list[tuple[int, int]] = []
    outcome = runner(client, tmp_path, progress=lambda d, t: seen.append((d, t))).run(deferred)
    assert (outcome.submitted, outcome.succeeded, outcome.failed, outcome.expired) == (3, 3, 0, 0)
    assert len(scripted.batches) == 1 and seen[-1] == (3, 3) and seen[0] == (0, 3)
    assert all(r.batch_id for r in scripted.requests)
    cache.close()

    replay = make_test_client(scripted, provider, cache=Cache(tmp_path / "cache", mode="only"))
    before = len(scripted.requests)
    for messages in asks(3):
        value, usage = replay.complete_json(messages, Verdict, prompt=PROMPT)
        assert usage.cached_calls == 1 and usage.calls == 0
        assert value.claim == messages[-1].content
    assert len(scripted.requests) == before


@pytest.mark.parametrize("provider", PROVIDERS)
def test_batched_body_is_the_direct_body(scripted: ScriptedLLMServer, provider: str, tmp_path: Path) -> None:
    client = make_test_client(scripted, provider, cache=Cache(tmp_path / "cache"))
    runner(client, tmp_path).run(defer_all(client, 1))
    direct = make_test_client(scripted, provider)
    direct.complete_json(asks(1)[0], Verdict, prompt=PROMPT)
    batched, sent = scripted.requests
    assert batched.batch_id and not sent.batch_id
    assert batched.body == sent.body


@pytest.mark.parametrize("provider", PROVIDERS)
def test_batch_results_cost_half_the_direct_price(scripted: ScriptedLLMServer, provider: str, tmp_path: Path) -> None:
    direct = make_test_client(scripted, provider)
    for messages in asks(3):
        direct.complete_json(messages, Verdict, prompt=PROMPT)
    client = make_test_client(scripted, provider, cache=Cache(tmp_path / "cache"))
    deferred = defer_all(client)
    outcome = runner(client, tmp_path).run(deferred)
    assert outcome.usage.calls == 3
    assert outcome.usage.input_tokens == direct.ledger.total.input_tokens
    assert outcome.usage.output_tokens == direct.ledger.total.output_tokens
    assert client.ledger.total.cost_usd == pytest.approx(outcome.usage.cost_usd)
    assert client.ledger.total.cost_usd / direct.ledger.total.cost_usd == pytest.approx(0.5)
    # Per key: each answer's own usage at the batch price, and together the whole.
    assert set(outcome.usage_by_key) == {c.key for c in deferred}
    total = sum(outcome.usage_by_key.values(), Usage())
    assert (total.calls, total.input_tokens, total.output_tokens) == (
        3,
        outcome.usage.input_tokens,
        outcome.usage.output_tokens,
    )
    assert total.cost_usd == pytest.approx(outcome.usage.cost_usd) and all(
        u.calls == 1 for u in outcome.usage_by_key.values()
    )


class Killed(Exception):
    pass


def kill(seconds: float) -> None:
    raise Killed("the laptop was closed")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_killed_run_resumes_the_same_batch(scripted: ScriptedLLMServer, provider: str, tmp_path: Path) -> None:
    client = make_test_client(scripted, provider, cache=Cache(tmp_path / "cache"))
    deferred = defer_all(client)
    with pytest.raises(Killed):
        runner(client, tmp_path, sleep=kill).run(deferred)
    assert len(scripted.batches) == 1
    state = json.loads((tmp_path / "out.jsonl.batches.json").read_text())
    (entry,) = state["batches"]
    assert entry["id"] in scripted.batches and sorted(entry["custom_ids"].values()) == sorted(c.key for c in deferred)
    assert client.ledger._reserved_calls == 0 and client.ledger._reserved_usd == 0  # the reservation is released
    assert client.ledger.total.calls == client.ledger.total.unsettled_calls == 3  # counted, at its worst case

    again = make_test_client(scripted, provider, cache=Cache(tmp_path / "cache"))
    outcome = runner(again, tmp_path).run(defer_all(again))
    assert len(scripted.batches) == 1  # not submitted (and paid for) twice
    assert (outcome.submitted, outcome.resumed, outcome.succeeded) == (0, 3, 3)
    # the killed run counted the batch (at most): collecting it counts it no more
    assert again.ledger.total.calls == 0 and outcome.counted_earlier.calls == 3 and outcome.usage.cost_usd > 0
    # A third run finds everything cached and sends nothing.
    third = make_test_client(scripted, provider, cache=Cache(tmp_path / "cache"))
    outcome = runner(third, tmp_path).run(deferred)
    assert (outcome.already_cached, outcome.submitted, outcome.resumed) == (3, 0, 0)
    assert len(scripted.batches) == 1


def defer_some(client: LLMClient, indices: list[int]) -> list[DeferredCall]:
    every = asks(3)
    with client.deferring() as deferred:
        for i in indices:
            with pytest.raises(errors.DeferredCallError):
                client.complete_json(every[i], Verdict, prompt=PROMPT)
    return deferred


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_resumed_batch_keeps_results_this_run_did_not_ask_for(
    scripted: ScriptedLLMServer, provider: str, tmp_path: Path
) -> None:
    first = make_test_client(scripted, provider, cache=Cache(tmp_path / "cache"))
    a, b, c = defer_some(first, [0, 1, 2])
    with pytest.raises(Killed):
        runner(first, tmp_path, sleep=kill).run([a, b, c])
    assert len(scripted.batches) == 1

    # Run 2 asks for A and B only: it collects the batch, caches A and B, and keeps C's result aside.
    second = make_test_client(scripted, provider, cache=Cache(tmp_path / "cache"))
    outcome = runner(second, tmp_path).run(defer_some(second, [0, 1]))
    assert (outcome.resumed, outcome.succeeded, outcome.failed, outcome.submitted) == (2, 2, 0, 0)
    assert outcome.usage_by_key == {} and outcome.counted_earlier.calls == 2  # counted by the killed run
    cache = second.cache
    assert cache is not None and cache.peek(a.key) and cache.peek(b.key) and not cache.peek(c.key)
    kept = tmp_path / "out.jsonl.batches.results.jsonl"
    assert [json.loads(line)["key"] for line in kept.read_text().splitlines()] == [c.key]
    (entry,) = json.loads((tmp_path / "out.jsonl.batches.json").read_text())["batches"]
    assert entry["collected"] and entry["kept"] == [c.key] and entry["failures"] == {}

    # Run 3 asks for C: answered from the kept result, no new batch and no direct request.
    third = make_test_client(scripted, provider, cache=Cache(tmp_path / "cache"))
    outcome = runner(third, tmp_path).run(defer_some(third, [2]))
    assert (outcome.resumed, outcome.succeeded, outcome.failed, outcome.submitted) == (1, 1, 0, 0)
    assert outcome.usage.calls == 1 and outcome.usage_by_key == {} and outcome.counted_earlier == outcome.usage
    value, usage = third.complete_json(asks(3)[2], Verdict, prompt=PROMPT)
    assert usage == Usage() and value.claim == "Claim number 2."  # charged by the batch that took it, not a hit
    assert len(scripted.batches) == 1 and len(scripted.requests) == 3 and all(r.batch_id for r in scripted.requests)
    billed = [client.ledger.total for client in (first, second, third)]
    assert sum(u.calls for u in billed) == 3  # each request billed (and counted) once: by the run that sent it
    assert billed[0].unsettled_calls == 3 and billed[1].calls == billed[2].calls == 0
    assert not kept.exists()  # nothing left kept
    (entry,) = json.loads((tmp_path / "out.jsonl.batches.json").read_text())["batches"]
    assert entry["kept"] == []


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_expired_batch_reports_its_unfinished_requests(
    scripted: ScriptedLLMServer, provider: str, tmp_path: Path
) -> None:
    scripted.batch_expire_after = 1
    cache = Cache(tmp_path / "cache")
    client = make_test_client(scripted, provider, cache=cache)
    deferred = defer_all(client)
    outcome = runner(client, tmp_path).run(deferred)
    assert (outcome.succeeded, outcome.expired, outcome.failed) == (1, 2, 0)
    assert set(outcome.failures) == {c.key for c in deferred[1:]}
    assert all("expired" in why for why in outcome.failures.values())
    assert cache.peek(deferred[0].key) and not any(cache.peek(c.key) for c in deferred[1:])
    assert client.ledger.total.calls == 1
    # The caller asks the expired ones directly.
    before = len(scripted.requests)
    for messages in asks(3):
        client.complete_json(messages, Verdict, prompt=PROMPT)
    assert len(scripted.requests) == before + 2
    # A rerun does not submit the keys a finished batch covered; it reports them as failed in that batch.
    outcome = runner(client, tmp_path).run(deferred)
    assert outcome.already_cached == 3 and len(scripted.batches) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_invalid_json_and_errored_results_are_not_cached(
    scripted: ScriptedLLMServer, provider: str, tmp_path: Path
) -> None:
    scripted.push(Reply.text('{"label": "SUPPORTED", '), Reply.error(500, message="boom"))
    cache = Cache(tmp_path / "cache")
    client = make_test_client(scripted, provider, cache=cache)
    deferred = defer_all(client)
    outcome = runner(client, tmp_path).run(deferred)
    assert (outcome.succeeded, outcome.failed, outcome.expired) == (1, 2, 0)
    assert "not valid JSON" in outcome.failures[deferred[0].key]
    assert "boom" in outcome.failures[deferred[1].key] or "500" in outcome.failures[deferred[1].key]
    assert not cache.peek(deferred[0].key) and not cache.peek(deferred[1].key) and cache.peek(deferred[2].key)
    assert outcome.usage.calls == 2  # the invalid reply was billed; the errored request was not
    assert set(outcome.usage_by_key) == {deferred[0].key, deferred[2].key}
    assert sum(outcome.usage_by_key.values(), Usage()).cost_usd == pytest.approx(outcome.usage.cost_usd)
    # A rerun with the same calls does not resubmit them: a finished batch covered them; still reported.
    again = runner(client, tmp_path).run(deferred)
    assert len(scripted.batches) == 1 and again.resumed == 2 and set(again.failures) == set(list(outcome.failures))


class ErrorsFirst(ScriptedLLMServer):
    """A provider whose results list each request twice: an error line first, then its answer (billed)."""

    def _end_batch(self, batch: ScriptedBatch) -> None:
        super()._end_batch(batch)
        failed = copy.deepcopy(batch.output_lines)
        for line in failed:
            if batch.api == "openai":
                line["response"]["status_code"] = 500
            else:
                line["result"] = {"type": "errored", "error": {"type": "error", "error": {"type": "api_error"}}}
        batch.output_lines[:0] = failed
        if batch.output_file_id is not None:
            self.files[batch.output_file_id] = "".join(json.dumps(x) + "\n" for x in batch.output_lines).encode()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_request_answered_after_an_error_line_for_it_is_taken_not_paid_again(provider: str, tmp_path: Path) -> None:
    """Two result lines for one custom id, an error first: the first line won, so the billed answer was dropped
    and the call made again directly (paid twice). The answer wins over a failure of the same request."""
    with ErrorsFirst(answer) as server:
        client = make_test_client(server, provider, cache=Cache(tmp_path / "cache"))
        deferred = defer_all(client)
        outcome = runner(client, tmp_path).run(deferred)
        assert (outcome.succeeded, outcome.failed, outcome.failures) == (3, 0, {})
        assert outcome.usage.calls == server.billed == 3
        for messages in asks(3):  # the step again: every answer from the cache, nothing sent directly (the batch
            assert client.complete_json(messages, Verdict, prompt=PROMPT)[1] == Usage()  # charged it: no cache hit)
        for messages in asks(3):  # once: a second read of an answer the batch paid for is a reuse
            assert client.complete_json(messages, Verdict, prompt=PROMPT)[1] == Usage(cached_calls=1)
        assert server.billed == 3


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_damaged_cache_entry_goes_into_the_batch_not_asked_directly(
    scripted: ScriptedLLMServer, provider: str, tmp_path: Path
) -> None:
    """An entry that is not JSON is a miss to the call (``Cache.get``) but was cached to the runner's ``peek``: its
    request was left out of the batch, then asked directly at the full price."""
    cache = Cache(tmp_path / "cache")
    client = make_test_client(scripted, provider, cache=cache)
    damaged = client.cache_key(asks(3)[0], Verdict, PROMPT)
    cache.store.set(damaged, '{"output": {"label": "SUPP')  # a value cut short
    deferred = defer_all(client)
    assert len(deferred) == 3 and deferred[0].key == damaged  # the call missed it
    outcome = runner(client, tmp_path).run(deferred)
    assert (outcome.already_cached, outcome.submitted, outcome.succeeded) == (0, 3, 3)
    for messages in asks(3):
        assert client.complete_json(messages, Verdict, prompt=PROMPT)[1] == Usage()  # the batch charged it
    assert len(scripted.requests) == 3 and all(r.batch_id for r in scripted.requests)  # nothing asked directly


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_result_failing_the_check_is_not_cached(scripted: ScriptedLLMServer, provider: str, tmp_path: Path) -> None:
    cache = Cache(tmp_path / "cache")
    client = make_test_client(scripted, provider, cache=cache)
    with client.deferring() as deferred, pytest.raises(errors.DeferredCallError):
        client.complete_json(asks(1)[0], Verdict, check=lambda v: "no verdict for c2")
    outcome = runner(client, tmp_path).run(deferred)
    assert outcome.failed == 1 and "no verdict for c2" in outcome.failures[deferred[0].key]
    assert not cache.peek(deferred[0].key)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_budget_holds_the_whole_batch_before_submitting(
    scripted: ScriptedLLMServer, provider: str, tmp_path: Path
) -> None:
    probe = make_test_client(scripted, provider, cache=Cache(tmp_path / "cache"))
    deferred = defer_all(probe)
    one = probe.costs.worst_case_cost(deferred[0].request, batch=True)
    assert one == pytest.approx(probe.costs.worst_case_cost(deferred[0].request) / 2)
    client = make_test_client(scripted, provider, cache=Cache(tmp_path / "cache"), ledger=Ledger(budget_usd=one * 2.5))
    with pytest.raises(errors.BudgetExceededError):
        runner(client, tmp_path).run(deferred)
    assert scripted.batches == {} and scripted.files == {}
    capped = make_test_client(scripted, provider, cache=Cache(tmp_path / "cache"), ledger=Ledger(max_calls=2))
    with pytest.raises(errors.BudgetExceededError):
        runner(capped, tmp_path).run(deferred)
    assert scripted.batches == {}


def test_a_batch_still_running_after_the_wait_raises_pending_and_resumes(
    scripted: ScriptedLLMServer, tmp_path: Path
) -> None:
    scripted.batch_polls = 5
    client = make_test_client(scripted, "openai", cache=Cache(tmp_path / "cache"))
    deferred = defer_all(client)
    with pytest.raises(errors.BatchPendingError) as info:
        runner(client, tmp_path, max_wait_seconds=2.0).run(deferred)
    assert info.value.batch_ids == list(scripted.batches)
    outcome = runner(client, tmp_path).run(deferred)
    assert outcome.resumed == 3 and outcome.succeeded == 3 and len(scripted.batches) == 1


def test_deferring_is_thread_safe_and_records_each_key_once(scripted: ScriptedLLMServer, tmp_path: Path) -> None:
    client = make_test_client(scripted, "openai", cache=Cache(tmp_path / "cache"))
    work = asks(20) * 3

    def call(messages: list[Message]) -> str:
        try:
            client.complete_json(messages, Verdict, prompt=PROMPT)
        except errors.DeferredCallError as exc:
            assert not isinstance(exc, errors.LLMError) and not exc.retryable
            return exc.key
        return ""

    with client.deferring() as deferred, ThreadPoolExecutor(8) as pool:
        keys = list(pool.map(call, work))
    assert len(deferred) == 20 and {c.key for c in deferred} == set(keys)
    assert scripted.requests == []
    # Outside the block, calls are sent again.
    client.complete_json(asks(1)[0], Verdict, prompt=PROMPT)
    assert len(scripted.requests) == 1


def test_batch_needs_a_batch_api_and_a_writable_cache(scripted: ScriptedLLMServer, tmp_path: Path) -> None:
    compatible = make_test_client(
        scripted, "openai", model=f"openai-compatible/qwen@{scripted.openai_base_url}", cache=Cache(tmp_path / "c")
    )
    with pytest.raises(errors.ConfigError, match="no batch API"):
        BatchRunner(compatible, tmp_path / "state.json")
    with pytest.raises(errors.ConfigError, match="cache"):
        BatchRunner(make_test_client(scripted, "openai"), tmp_path / "state.json")


def test_a_damaged_state_file_stops_the_run(scripted: ScriptedLLMServer, tmp_path: Path) -> None:
    client = make_test_client(scripted, "openai", cache=Cache(tmp_path / "cache"))
    (tmp_path / "out.jsonl.batches.json").write_text('{"batches": [')
    with pytest.raises(errors.ConfigError, match="already paid for"):
        runner(client, tmp_path).run(defer_all(client))
    assert scripted.batches == {}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_transient_status_fault_keeps_polling(scripted: ScriptedLLMServer, provider: str, tmp_path: Path) -> None:
    scripted.batch_status_errors = 2
    sleeps: list[float] = []
    client = make_test_client(scripted, provider, cache=Cache(tmp_path / "cache"))
    outcome = runner(client, tmp_path, sleep=sleeps.append).run(defer_all(client))
    assert outcome.succeeded == 3 and scripted.batch_status_errors == 0
    assert sleeps == [1.0, 1.0, 1.0]  # two faulty reads and one "in progress", each followed by a poll interval


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_transient_fault_reading_the_results_reads_them_again(
    scripted: ScriptedLLMServer, provider: str, tmp_path: Path
) -> None:
    # the batch ended and is paid for: a 503 on its results is read again, not the whole batch failed
    scripted.batch_results_errors = 2
    sleeps: list[float] = []
    client = make_test_client(scripted, provider, cache=Cache(tmp_path / "cache"), ledger=Ledger(budget_usd=10.0))
    outcome = runner(client, tmp_path, sleep=sleeps.append).run(defer_all(client))
    assert outcome.succeeded == 3 and outcome.failures == {} and scripted.batch_results_errors == 0
    assert sleeps == [1.0, 1.0, 1.0]  # "in progress", then two faulty reads, each followed by a poll interval
    assert client.ledger.total.calls == 3 and client.ledger._reserved_calls == 0
    state = json.loads((tmp_path / "out.jsonl.batches.json").read_text())
    assert [e["collected"] for e in state["batches"]] == [True]
    # a fault that lasts is raised after a few reads, the batch left for a later run to collect (paid once)
    scripted.batch_results_errors = 99
    client = make_test_client(scripted, provider, cache=Cache(tmp_path / "cache2"), ledger=Ledger(budget_usd=10.0))
    with pytest.raises(errors.ServerError):
        runner(client, tmp_path / "again", sleep=lambda s: None).run(defer_all(client))
    scripted.batch_results_errors = 0
    outcome = runner(client, tmp_path / "again").run(defer_all(client))
    assert (outcome.resumed, outcome.succeeded, len(scripted.batches)) == (3, 3, 2)


def test_a_failed_submit_raises_typed_and_releases_the_reservation(tmp_path: Path) -> None:
    with ScriptedLLMServer(answer) as server:
        client = make_test_client(server, "openai", cache=Cache(tmp_path / "cache"), ledger=Ledger(budget_usd=10.0))
        deferred = defer_all(client)
    with pytest.raises(errors.LLMConnectionError):
        runner(client, tmp_path).run(deferred)
    assert client.ledger._reserved_usd == 0 and client.ledger._reserved_calls == 0
    assert not (tmp_path / "out.jsonl.batches.json").exists()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_state_file_keeps_no_password_of_the_base_url_and_still_reads_what_an_older_run_wrote(
    scripted: ScriptedLLMServer, provider: str, tmp_path: Path
) -> None:
    """The state file (beside the cache, plain text) kept the provider's identity as given, so a base URL with a user
    and password (a proxy's) was written there in clear. It keeps the address without them, and a digest."""
    from groundjudge.llm.batch import stored_identity
    from groundjudge.llm.registry import get_provider
    from tests.conftest import MODELS, base_url_for

    url = base_url_for(scripted, provider).replace("://", "://alice:s3cret@", 1)
    prov = get_provider(MODELS[provider], base_url=url, timeout=5.0)
    client = LLMClient(prov, cache=Cache(tmp_path / "cache"), sleep=lambda s: None)
    deferred = defer_all(client)
    with pytest.raises(Killed):
        runner(client, tmp_path, sleep=kill).run(deferred)
    state_file = tmp_path / "out.jsonl.batches.json"
    text = state_file.read_text()
    assert "s3cret" not in text and "alice" not in text, text
    (entry,) = json.loads(text)["batches"]
    assert entry["identity"]["base_url"].startswith(base_url_for(scripted, provider).rstrip("/") + " #")
    # another password is another identity: its run does not take this batch's results
    assert stored_identity({"base_url": url.replace("s3cret", "other")}) != entry["identity"]
    # an entry an older groundjudge wrote (the URL as given) is still resumed, not submitted and paid again
    state = json.loads(text)
    state["batches"][0]["identity"] = prov.identity()
    state_file.write_text(json.dumps(state))
    again = LLMClient(get_provider(MODELS[provider], base_url=url, timeout=5.0), cache=Cache(tmp_path / "cache"))
    outcome = runner(again, tmp_path).run(defer_all(again))
    assert len(scripted.batches) == 1 and (outcome.submitted, outcome.resumed, outcome.succeeded) == (0, 3, 3)
