"""What provider batches cost a run that stops before collecting them, and the run that collects them later: real
SDKs over real HTTP against the scripted server's batch endpoints."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel

from groundjudge import errors
from groundjudge.cache import Cache
from groundjudge.llm import BatchRunner, DeferredCall, Ledger, LLMClient, Price
from groundjudge.models import Message, PromptRef, Usage
from groundjudge.testing import RecordedRequest, Reply, ScriptedLLMServer
from groundjudge.testing.batches import ScriptedBatch
from tests.conftest import make_test_client

PROVIDERS = ["openai", "anthropic"]
PROMPT = PromptRef(name="judge", version="1")
PRICE = Price(1.0, 2.0)


class Verdict(BaseModel):
    label: str


def answer(req: RecordedRequest) -> Reply:
    return Reply.json({"label": "SUPPORTED"})


@pytest.fixture
def scripted() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(answer) as s:
        yield s


def client(server: ScriptedLLMServer, provider: str, tmp_path: Path, ledger: Ledger | None = None) -> LLMClient:
    return make_test_client(server, provider, cache=Cache(tmp_path / "cache"), price=PRICE, ledger=ledger or Ledger())


def defer(c: LLMClient, n: int = 3) -> list[DeferredCall]:
    with c.deferring() as deferred:
        for i in range(n):
            with pytest.raises(errors.DeferredCallError):
                c.complete_json([Message(role="user", content=f"Claim {i}.")], Verdict, prompt=PROMPT)
    return deferred


def runner(c: LLMClient, tmp_path: Path, **kw: object) -> BatchRunner:
    kw.setdefault("sleep", lambda s: None)
    return BatchRunner(c, tmp_path / "batches.json", poll_seconds=1.0, **kw)  # type: ignore[arg-type]


def interrupt(seconds: float) -> None:
    raise KeyboardInterrupt


@pytest.mark.parametrize("stop", ["pending", "interrupt"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_batch_left_running_counts_at_its_worst_case_once(
    scripted: ScriptedLLMServer, provider: str, tmp_path: Path, stop: str
) -> None:
    scripted.batch_polls = 5
    first = client(scripted, provider, tmp_path)
    deferred = defer(first)
    worst = sum(first.costs.worst_case_cost(call.request, batch=True) for call in deferred)
    if stop == "pending":
        with pytest.raises(errors.BatchPendingError):
            runner(first, tmp_path, max_wait_seconds=2.0).run(deferred)
    else:
        with pytest.raises(KeyboardInterrupt):
            runner(first, tmp_path, sleep=interrupt).run(deferred)
    # billed at the provider whoever collects it: the stopped run's spend holds it, at most its worst case
    spent = first.ledger.total
    assert spent.calls == spent.unsettled_calls == 3
    assert spent.cost_usd == spent.unsettled_cost_usd == pytest.approx(worst)
    assert first.ledger.budget_usd is None and first.ledger._reserved_usd == pytest.approx(0.0)

    # the run that collects it is not charged again (a total summed over both runs counts it once), and its own
    # budget, however small, is not passed by money an earlier run spent and counted
    second = client(scripted, provider, tmp_path, Ledger(budget_usd=1e-9))
    outcome = runner(second, tmp_path).run(defer(second))
    assert outcome.resumed == 3 and outcome.succeeded == 3 and len(scripted.batches) == 1
    assert second.ledger.total.calls == 0 and second.ledger.total.cost_usd == 0
    assert outcome.counted_earlier.calls == 3 and 0 < outcome.counted_earlier.cost_usd <= worst
    assert outcome.usage_by_key == {}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_lost_create_not_found_again_counts_before_a_second_create(
    scripted: ScriptedLLMServer, provider: str, tmp_path: Path
) -> None:
    # the create's reply is lost and the listing does not show its batch yet: a second create makes a second batch
    scripted.batch_create_lost, scripted.batch_list_hides = 1, 1
    c = client(scripted, provider, tmp_path)
    deferred = defer(c)
    worst = sum(c.costs.worst_case_cost(call.request, batch=True) for call in deferred)
    outcome = runner(c, tmp_path).run(deferred)
    assert outcome.succeeded == 3 and len(scripted.batches) == 2  # both billed at the provider
    spent = c.ledger.total
    assert spent.calls == 6 and spent.unsettled_calls == 3  # the first, never seen again, at its worst case
    assert spent.unsettled_cost_usd == pytest.approx(worst) and spent.cost_usd > worst


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_second_create_needs_room_in_the_budget(scripted: ScriptedLLMServer, provider: str, tmp_path: Path) -> None:
    scripted.batch_create_lost, scripted.batch_list_hides = 1, 1
    probe = client(scripted, provider, tmp_path)
    deferred = defer(probe)
    worst = sum(probe.costs.worst_case_cost(call.request, batch=True) for call in deferred)
    c = client(scripted, provider, tmp_path, Ledger(budget_usd=1.5 * worst))
    with pytest.raises(errors.BudgetExceededError):
        runner(c, tmp_path).run(deferred)
    assert len(scripted.batches) == 1  # no second batch past the cap
    assert c.ledger.total.unsettled_calls == 3 and c.ledger.total.cost_usd == pytest.approx(worst)
    # the next run finds the first batch and collects it, counting it no more
    scripted.batch_polls = 1
    again = client(scripted, provider, tmp_path, Ledger(budget_usd=1e-9))
    outcome = runner(again, tmp_path).run(defer(again))
    assert outcome.adopted == 3 and outcome.succeeded == 3 and len(scripted.batches) == 1
    assert again.ledger.total.calls == 0 and outcome.counted_earlier.calls == 3


class Stranger(ScriptedLLMServer):
    """A provider whose batch results hold one more answer, for a custom id the batch's entry does not hold (as a
    batch adopted that was another run's would): billed like the others."""

    def _end_batch(self, batch: ScriptedBatch) -> None:
        super()._end_batch(batch)
        extra = copy.deepcopy(batch.output_lines[0])
        extra["custom_id"] = "gj-not-asked-here"
        batch.output_lines.append(extra)
        if batch.output_file_id is not None:
            self.files[batch.output_file_id] = "".join(json.dumps(x) + "\n" for x in batch.output_lines).encode()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_answer_for_a_custom_id_not_asked_is_counted(provider: str, tmp_path: Path) -> None:
    with Stranger(answer) as server:
        c = client(server, provider, tmp_path)
        deferred = defer(c)
        outcome = runner(c, tmp_path).run(deferred)
        assert outcome.succeeded == 3 and outcome.failures == {}
        answered = sum(outcome.usage_by_key.values(), Usage())
        assert answered.calls == 3
        assert c.ledger.total.calls == outcome.usage.calls == 4  # the fourth answer is billed too
        assert c.ledger.total.cost_usd == pytest.approx(answered.cost_usd * 4 / 3)
