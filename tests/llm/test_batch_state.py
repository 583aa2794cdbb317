"""Jobs sharing one batch state file, and batches whose create reply was lost: through the real SDKs against the
scripted server, counting what the provider was sent (each request is paid once)."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groundjudge import errors
from groundjudge.cache import Cache
from groundjudge.llm import BatchRunner, DeferredCall, LLMClient
from groundjudge.llm.batch import batch_tag
from groundjudge.llm.batch_state import file_lock
from groundjudge.testing import ScriptedLLMServer
from groundjudge.testing.batches import ScriptedBatch
from tests.conftest import make_test_client
from tests.llm.test_batch import PROMPT, PROVIDERS, Killed, Verdict, answer, asks, kill

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def scripted() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(answer) as s:
        yield s


def defer(client: LLMClient, indices: list[int]) -> list[DeferredCall]:
    every = asks(max(indices) + 1)
    with client.deferring() as deferred:
        for i in indices:
            with contextlib.suppress(errors.DeferredCallError):  # raised unless the cache has it
                client.complete_json(every[i], Verdict, prompt=PROMPT)
    return deferred


def job(server: ScriptedLLMServer, provider: str, tmp: Path) -> LLMClient:
    """A new job: its own client (SDK, ledger), on the shared cache folder."""
    return make_test_client(server, provider, cache=Cache(tmp / "cache"))


def runner(client: LLMClient, tmp: Path, sleep: Callable[[float], None] = lambda s: None) -> BatchRunner:
    return BatchRunner(client, tmp / "batches.json", poll_seconds=1.0, sleep=sleep)


def sent(server: ScriptedLLMServer) -> Counter[str]:
    """How many times the provider was sent each request (custom id), over all its batches."""
    return Counter(custom_id for batch in server.batches.values() for custom_id, _ in batch.requests)


def entries(tmp: Path) -> list[dict[str, Any]]:
    path = tmp / "batches.json"
    return list(json.loads(path.read_text())["batches"]) if path.exists() else []


def cached(client: LLMClient, indices: list[int]) -> bool:
    every = asks(max(indices) + 1)
    replay = LLMClient(client.provider, cache=client.cache)
    with replay.deferring() as missing:
        for i in indices:
            with contextlib.suppress(errors.DeferredCallError):
                replay.complete_json(every[i], Verdict, prompt=PROMPT)
    return not missing


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_job_collecting_keeps_the_batch_another_job_submitted_meanwhile(
    scripted: ScriptedLLMServer, provider: str, tmp_path: Path
) -> None:
    a, b = job(scripted, provider, tmp_path), job(scripted, provider, tmp_path)
    calls_b = defer(b, [3, 4, 5])

    def b_submits_and_dies(seconds: float) -> None:  # while A polls, B submits its batch; its laptop is closed
        if len(scripted.batches) == 1:
            with pytest.raises(Killed):
                runner(b, tmp_path, sleep=kill).run(calls_b)

    outcome = runner(a, tmp_path, sleep=b_submits_and_dies).run(defer(a, [0, 1, 2]))
    assert (outcome.submitted, outcome.succeeded) == (3, 3) and len(scripted.batches) == 2
    by_id = {e["id"]: e for e in entries(tmp_path)}
    assert set(by_id) == set(scripted.batches)  # A's collection kept B's entry
    assert [e["collected"] for e in by_id.values()] == [True, False]

    again = job(scripted, provider, tmp_path)
    outcome = runner(again, tmp_path).run(defer(again, [3, 4, 5]))
    assert (outcome.submitted, outcome.resumed, outcome.succeeded) == (0, 3, 3)
    assert len(scripted.batches) == 2 and sent(scripted) == Counter({k: 1 for k in sent(scripted)})
    assert sum(sent(scripted).values()) == 6  # 2 batches, 6 requests for 6 calls
    assert all(e["collected"] for e in entries(tmp_path)) and cached(again, [0, 1, 2, 3, 4, 5])


@pytest.mark.parametrize("provider", PROVIDERS)
def test_concurrent_jobs_with_shared_keys_send_and_pay_each_request_once(
    scripted: ScriptedLLMServer, provider: str, tmp_path: Path
) -> None:
    scripted.batch_polls = 3
    wants = [[0, 1, 2, 3], [2, 3, 4, 5], [0, 1, 2, 3, 4, 5], [5, 1]]
    clients = [job(scripted, provider, tmp_path) for _ in wants]
    calls = [defer(client, indices) for client, indices in zip(clients, wants, strict=True)]
    outcomes: list[Any] = [None] * len(wants)
    start = threading.Barrier(len(wants))

    def go(i: int) -> None:
        start.wait()
        outcomes[i] = runner(clients[i], tmp_path, sleep=lambda s: time.sleep(0.005)).run(calls[i])

    threads = [threading.Thread(target=go, args=(i,)) for i in range(len(wants))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert all(o is not None and not o.failures for o in outcomes)
    assert sorted(sent(scripted).values()) == [1] * 6  # every request sent in exactly one batch
    assert {e["id"] for e in entries(tmp_path)} == set(scripted.batches)  # no job erased another's entry
    assert sum(c.ledger.total.calls for c in clients) == 6  # and billed once, to one job
    assert all(cached(c, w) for c, w in zip(clients, wants, strict=True))


_JOB_SCRIPT = """
import json, sys
from groundjudge.cache import Cache
from groundjudge.errors import DeferredCallError
from groundjudge.llm import BatchRunner, LLMClient, get_provider
from groundjudge.models import Message, PromptRef
from tests.llm.test_batch import Verdict, asks

url, tmp, indices = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
client = LLMClient(get_provider("openai/gpt-4o-mini", base_url=url, timeout=10.0), cache=Cache(tmp + "/cache"))
with client.deferring() as deferred:
    for i in indices:
        try:
            client.complete_json(asks(6)[i], Verdict, prompt=PromptRef(name="judge", version="1"))
        except DeferredCallError:
            pass
outcome = BatchRunner(client, tmp + "/batches.json", poll_seconds=0.01).run(deferred)
print(json.dumps({"failures": len(outcome.failures), "calls": client.ledger.total.calls}))
"""


def test_two_processes_sharing_one_state_file_send_each_request_once(
    scripted: ScriptedLLMServer, tmp_path: Path
) -> None:
    scripted.batch_polls = 3
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _JOB_SCRIPT, scripted.openai_base_url, str(tmp_path), json.dumps(indices)],
            cwd=ROOT,
            env={"PYTHONPATH": str(ROOT), "OPENAI_API_KEY": "sk-test", "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for indices in ([0, 1, 2, 3], [2, 3, 4, 5])
    ]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert [r["failures"] for r in results] == [0, 0]
    assert sorted(sent(scripted).values()) == [1] * 6
    assert sum(r["calls"] for r in results) == 6
    assert {e["id"] for e in entries(tmp_path)} == set(scripted.batches)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_lost_create_reply_is_found_again_not_paid_twice(
    scripted: ScriptedLLMServer, provider: str, tmp_path: Path
) -> None:
    scripted.batch_create_lost = 1
    client = job(scripted, provider, tmp_path)
    deferred = defer(client, [0, 1, 2])
    outcome = runner(client, tmp_path).run(deferred)
    assert (outcome.submitted, outcome.adopted, outcome.succeeded) == (0, 3, 3)
    assert scripted.batch_create_lost == 0 and len(scripted.batches) == 1
    assert sorted(sent(scripted).values()) == [1, 1, 1]
    assert client.ledger.total.calls == 3 and client.ledger.total.cost_usd > 0
    (entry,) = entries(tmp_path)
    assert entry["id"] in scripted.batches and entry["adopted"] and entry["collected"]
    if provider == "openai":  # the tag rides in the batch's metadata
        assert scripted.batches[entry["id"]].metadata == {"groundjudge_batch": entry["tag"]}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_run_killed_right_after_create_is_adopted_on_rerun(
    scripted: ScriptedLLMServer, provider: str, tmp_path: Path
) -> None:
    scripted.batch_create_lost = 1
    first = job(scripted, provider, tmp_path)
    with pytest.raises(Killed):  # create's reply lost, then the process dies before it learns the batch id
        runner(first, tmp_path, sleep=kill).run(defer(first, [0, 1, 2]))
    (entry,) = entries(tmp_path)
    assert entry["id"] is None and entry["tag"] and len(scripted.batches) == 1

    again = job(scripted, provider, tmp_path)
    outcome = runner(again, tmp_path).run(defer(again, [0, 1, 2]))
    assert (outcome.submitted, outcome.adopted, outcome.succeeded) == (0, 3, 3)
    assert len(scripted.batches) == 1 and sorted(sent(scripted).values()) == [1, 1, 1]
    assert again.ledger.total.calls == 3
    (entry,) = entries(tmp_path)
    assert entry["id"] in scripted.batches and entry["collected"]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_lost_batch_is_found_among_pages_of_newer_and_foreign_batches(
    scripted: ScriptedLLMServer, provider: str, tmp_path: Path
) -> None:
    scripted.batch_create_lost = 1
    first = job(scripted, provider, tmp_path)
    with pytest.raises(Killed):
        runner(first, tmp_path, sleep=kill).run(defer(first, [0, 1, 2]))
    (lost,) = scripted.batches
    # Another tool's batches on the same account, newer: 105 (more than one page), ended; five of three requests.
    for i in range(105):
        api = "openai" if provider == "openai" else "anthropic"
        n = 3 if i % 20 == 0 else 2
        other = ScriptedBatch(id=f"zz_other_{i:03d}", api=api, requests=[(f"x{i}_{j}", {}) for j in range(n)])
        other.ended, other.created_at = True, time.time() + 1
        other.output_lines = [{"custom_id": cid, "result": {"type": "canceled"}} for cid, _ in other.requests]
        scripted.batches[other.id] = other
    again = job(scripted, provider, tmp_path)
    if provider == "anthropic":  # ours has ended too: only its results tell it from the others
        for _ in range(scripted.batch_polls + 1):
            again.provider.sdk.messages.batches.retrieve(lost)  # type: ignore[attr-defined]
        assert scripted.batches[lost].ended

    outcome = runner(again, tmp_path).run(defer(again, [0, 1, 2]))
    assert (outcome.adopted, outcome.succeeded, outcome.submitted) == (3, 3, 0)
    assert outcome.batch_ids == [lost] and len(scripted.batches) == 106


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_entry_whose_batch_never_reached_the_provider_is_submitted_anew(
    scripted: ScriptedLLMServer, provider: str, tmp_path: Path
) -> None:
    scripted.batch_create_lost = 1
    first = job(scripted, provider, tmp_path)
    with pytest.raises(Killed):
        runner(first, tmp_path, sleep=kill).run(defer(first, [0, 1, 2]))
    scripted.batches.clear()  # the create never arrived after all
    again = job(scripted, provider, tmp_path)
    outcome = runner(again, tmp_path).run(defer(again, [0, 1, 2]))
    assert (outcome.adopted, outcome.submitted, outcome.succeeded) == (0, 3, 3)
    assert len(scripted.batches) == 1 and [e["id"] for e in entries(tmp_path)] == list(scripted.batches)


def test_the_tag_is_the_set_of_keys() -> None:
    identity = {"model": "m"}
    assert batch_tag(identity, ["b", "a"]) == batch_tag(identity, ["a", "b"]) != batch_tag(identity, ["a"])
    assert batch_tag(identity, ["a"]) != batch_tag({"model": "n"}, ["a"])
    assert len(batch_tag(identity, ["a"])) <= 64


# -- a property over interleavings of two jobs' steps --------------------------------------------------------

WANTS = {"A": [0, 1, 2], "B": [1, 2, 3, 4]}
STEPS = st.lists(
    st.tuples(st.sampled_from(sorted(WANTS)), st.sampled_from(["finish", "die_polling", "die_after_create"])),
    max_size=4,
)


@settings(max_examples=10, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(provider=st.sampled_from(PROVIDERS), steps=STEPS)
def test_any_interleaving_of_two_jobs_sends_each_key_once_and_loses_no_entry(
    provider: str, steps: list[tuple[str, str]]
) -> None:
    with ScriptedLLMServer(answer) as server, tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        known: set[str] = set()
        for name, step in [*steps, ("A", "finish"), ("B", "finish")]:
            client = job(server, provider, tmp)
            server.batch_create_lost = 1 if step == "die_after_create" else 0
            with contextlib.suppress(Killed):
                runner(client, tmp, sleep=(lambda s: None) if step == "finish" else kill).run(
                    defer(client, WANTS[name])
                )
            server.batch_create_lost = 0
            assert max(sent(server).values(), default=1) == 1  # no key in two batches
            ids = {e["id"] for e in entries(tmp)}
            assert known <= ids  # no entry is ever lost
            known = ids - {None}
            tags = {e["tag"] for e in entries(tmp) if e["id"] is None}
            assert len(known) + len(tags) == len(server.batches)  # each batch the provider has is in the file
        assert {e["id"] for e in entries(tmp)} == set(server.batches)
        assert all(e["collected"] for e in entries(tmp))
        assert cached(client, sorted(set(WANTS["A"]) | set(WANTS["B"])))


_HOLDER = """
import sys, time
from pathlib import Path
from groundjudge.llm.batch_state import file_lock
with file_lock(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(120)
"""


def test_the_lock_waits_for_its_holder_and_goes_when_the_holder_dies(tmp_path: Path) -> None:
    lock = tmp_path / "batches.json.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(lock)],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        got = threading.Event()

        def take() -> None:
            with file_lock(lock):
                got.set()

        waiter = threading.Thread(target=take, daemon=True)
        waiter.start()
        assert not got.wait(0.5)  # held by the other process
        holder.kill()  # the holder crashes: no unlock, no cleanup
        holder.wait(30)
        assert got.wait(30)
        waiter.join(30)
    finally:
        holder.kill()
        holder.wait(30)


def test_two_evaluators_on_the_default_state_file_pay_each_request_once(shared_nli: Any, tmp_path: Path) -> None:
    from groundjudge.config import Config
    from groundjudge.pipeline.evaluator import Evaluator
    from groundjudge.testing import route
    from tests.pipeline.test_cost import ROWS
    from tests.pipeline.test_pipeline import HANDLERS

    with ScriptedLLMServer(route(HANDLERS)) as server:
        server.batch_polls = 3

        def evaluate(rows: list[dict[str, Any]]) -> list[Any]:
            cache = Cache(tmp_path / "cache")  # one cache; the state is its default, batches.json in the cache dir
            client = make_test_client(server, "openai", cache=cache)
            config = Config(batch_api=True, batch_poll_seconds=0.0, cache_dir=str(tmp_path / "cache"))
            return list(Evaluator(config, nli=shared_nli, client=client, cache=cache).evaluate_many(rows))

        results: list[list[Any]] = [[], []]

        def go(i: int, rows: list[dict[str, Any]]) -> None:
            results[i] = evaluate(rows)

        threads = [threading.Thread(target=go, args=(0, ROWS[:2])), threading.Thread(target=go, args=(1, ROWS[1:]))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert [r.id for r in results[0]] == ["good", "bad"] and [r.id for r in results[1]] == ["bad", "claim"]
        assert all(r.verdict != "ERROR" for rs in results for r in rs)
        assert [r for r in server.requests if r.batch_id is None] == []  # every call through a provider batch
        assert max(sent(server).values()) == 1  # the row both evaluated was sent once
        assert {e["id"] for e in entries(tmp_path / "cache")} == set(server.batches)
