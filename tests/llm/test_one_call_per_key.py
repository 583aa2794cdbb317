"""Clients of one process that share a cache folder ask once for one key (``Cache.filling``), each billed for what
it sent, never for a reply another paid for; a failed call is never handed to the caller that waited for it."""

from __future__ import annotations

import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from groundjudge import errors
from groundjudge.cache import Cache
from groundjudge.llm import Ledger
from groundjudge.testing import Latency, Reply, ScriptedLLMServer
from tests.conftest import make_test_client
from tests.llm.test_llm_client import ASK, GOOD, PROMPT, Verdict


def _asked(server: ScriptedLLMServer, n: int = 1) -> None:
    """Wait until the server has received ``n`` requests (the first caller's call is in flight)."""
    deadline = time.monotonic() + 10
    while len(server.requests) < n:
        assert time.monotonic() < deadline, "the first call never reached the server"
        time.sleep(0.01)


def test_two_clients_over_one_cache_folder_pay_once_for_one_key(tmp_path: Path) -> None:
    """Two evaluators' clients, each with its own Cache object on one folder, eight threads asking the same two
    questions at once: each question was sent by every thread that missed the cache (up to eight times, each billed)
    and the second client, with no call left in its budget, stopped though the reply was on its way. Now one request
    per question; the others read it from the cache, free, and the budget of a client that asked nothing is not
    touched."""
    other = [ASK[0], ASK[1].model_copy(update={"content": "Is the grass green?"})]
    with ScriptedLLMServer(lambda req: Reply.json(GOOD), latency=Latency(median=0.4)) as server:
        payer = make_test_client(server, cache=Cache(tmp_path / "shared"), ledger=Ledger(max_calls=2))
        rider = make_test_client(server, cache=Cache(tmp_path / "shared"), ledger=Ledger(max_calls=0))
        with ThreadPoolExecutor(8) as pool:
            first = [pool.submit(payer.complete_json, ASK, Verdict, prompt=PROMPT)]
            first.append(pool.submit(payer.complete_json, other, Verdict, prompt=PROMPT))
            _asked(server, 2)  # the payer's two calls are in flight
            late: list[Any] = [pool.submit(c.complete_json, m, Verdict, prompt=PROMPT) for c in (payer, rider, rider)
                               for m in (ASK, other)]  # fmt: skip
            results = [f.result(timeout=30) for f in first + late]
        assert len(server.requests) == 2 and server.billed == 2
    assert all(value.label == "SUPPORTED" for value, _ in results)
    assert sum(usage.calls for _, usage in results) == 2
    assert all(usage.calls == 0 and usage.cached_calls == 1 and usage.cost_usd == 0 for _, usage in results[2:])
    assert (payer.ledger.total.calls, payer.ledger.total.cached_calls) == (2, 2)
    assert (rider.ledger.total.calls, rider.ledger.total.cached_calls, rider.ledger.total.cost_usd) == (0, 4, 0)


def test_a_failed_call_is_not_handed_to_the_caller_that_waited_for_it(tmp_path: Path) -> None:
    """The first caller's call fails (HTTP 400, not retried): the caller waiting on the same key gets neither that
    error nor an empty answer; it asks itself, on its own budget, and the key is free again after the failure."""
    with ScriptedLLMServer() as server:
        server.push(Reply.slow(0.4, Reply.error(400)), Reply.json(GOOD))
        first = make_test_client(server, cache=Cache(tmp_path / "shared"))
        second = make_test_client(server, cache=Cache(tmp_path / "shared"), ledger=Ledger(max_calls=1))
        with ThreadPoolExecutor(2) as pool:
            failing = pool.submit(first.complete_json, ASK, Verdict, prompt=PROMPT)
            _asked(server)
            waiting = pool.submit(second.complete_json, ASK, Verdict, prompt=PROMPT)
            with pytest.raises(errors.BadRequestError):
                failing.result(timeout=30)
            value, usage = waiting.result(timeout=30)
        assert len(server.requests) == 2
    assert value.label == "SUPPORTED" and usage.calls == 1 and second.ledger.total.calls == 1
    assert first.ledger.total.calls == 0  # the failed call billed nothing (no usage came back)
    again, cached = first.complete_json(ASK, Verdict, prompt=PROMPT)  # the key is not held by the failed call
    assert again == value and cached.cached_calls == 1


def test_a_caller_waiting_for_another_holds_no_lock(tmp_path: Path) -> None:
    """While one caller's call to a key is in flight, another key of the same folder, and the same key in another
    folder, are asked at once (nothing but the one key waits)."""
    with ScriptedLLMServer(lambda req: Reply.json(GOOD)) as server:
        server.push(Reply.slow(3.0, Reply.json(GOOD)))  # held well past the two calls below, even on a busy runner
        slow = make_test_client(server, cache=Cache(tmp_path / "shared"))
        with ThreadPoolExecutor(3) as pool:
            held = pool.submit(slow.complete_json, ASK, Verdict, prompt=PROMPT)
            _asked(server)
            other_key = make_test_client(server, cache=Cache(tmp_path / "shared")).complete_json(
                [ASK[0], ASK[1].model_copy(update={"content": "Is the grass green?"})], Verdict, prompt=PROMPT
            )
            other_folder = make_test_client(server, cache=Cache(tmp_path / "elsewhere")).complete_json(
                ASK, Verdict, prompt=PROMPT
            )
            in_flight = not held.done()  # both answered while the held call to the one key was still out
            held.result(timeout=30)
    assert other_key[1].calls == 1 and other_folder[1].calls == 1 and in_flight


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_waits_for_its_parents_call_not_for_the_turn_it_inherited(tmp_path: Path) -> None:
    """A process forked while a key was being asked (multiprocessing's fork from a notebook) inherited the parent's
    turn on that key, whose caller does not exist in the child: the child's first call for the key waited forever.
    The parent's caller does exist, in the parent: the child waits for it across processes, as any other process
    would, and reads the key it filled."""
    key = "llm:" + "0" * 64
    cache = Cache(tmp_path / "shared")
    ready, go = os.pipe()
    with cache.filling(key) as mine:
        assert mine
        pid = os.fork()
        if pid == 0:  # the child: never back into pytest
            code = 2
            try:
                signal.signal(signal.SIGALRM, signal.SIG_DFL)
                signal.alarm(30)  # only a hang reaches it, however slow the runner
                child = Cache(tmp_path / "shared")
                os.write(go, b"1")
                with child.filling(key) as child_turn:  # given once the parent's turn is over, never before
                    filled = child.get(key) == "filled"
                code = 0 if filled else 1 if child_turn else 4
            finally:
                os._exit(code)
        os.read(ready, 1)
        time.sleep(0.5)  # the child asks for its turn meanwhile (a slower child still must not get it before this)
        cache.set(key, "filled")
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


@pytest.mark.parametrize("failure", ["refusal", "truncated", "interrupt"])
def test_callers_that_waited_for_a_failed_call_each_ask_at_once(tmp_path: Path, failure: str) -> None:
    """A failed call (a refusal or a cut-off reply, never cached; or an interrupt in the caller: a BaseException)
    hands nothing on, and every caller that waited for it asks itself. They were queued behind each other: the
    second caller asked, the third waited for the second's failure, and so on, one failing call's time (a timeout
    and its retries) after another's, each holding a call slot of its run meanwhile. Now they ask together."""
    waiters = 3
    together = threading.Barrier(waiters, timeout=20)  # waits that long only when the calls are not together
    overlapped: list[bool] = []
    queued = threading.Event()  # set once all the waiters wait for the first caller's turn

    def failed_reply() -> Reply:
        return Reply.refusal() if failure == "refusal" else Reply.truncated('{"label": "SUPP')

    def script(req: Any) -> Reply:
        if req is server.requests[0]:  # the first caller's call: answered only once every waiter waits for its turn
            queued.wait(60)
            return Reply.json(GOOD) if failure == "interrupt" else failed_reply()
        try:
            together.wait()  # the waiters' calls: each waits here until all of them are in flight
            overlapped.append(True)
        except threading.BrokenBarrierError:
            overlapped.append(False)
        return failed_reply()

    def interrupt(value: Verdict) -> str | None:
        raise KeyboardInterrupt  # the first caller's check: its call ends in a BaseException

    with ScriptedLLMServer(script) as server:
        cache = Cache(tmp_path / "shared")
        first = make_test_client(server, cache=cache, max_reasks=0, timeout=120)  # never times out while held
        key = first.cache_key(ASK, Verdict, PROMPT)
        check = interrupt if failure == "interrupt" else None
        with ThreadPoolExecutor(waiters + 1) as pool:
            failing = pool.submit(first.complete_json, ASK, Verdict, prompt=PROMPT, check=check)
            _asked(server)
            clients = [make_test_client(server, cache=Cache(tmp_path / "shared"), max_reasks=0, timeout=60)
                       for _ in range(waiters)]  # fmt: skip
            waiting = [pool.submit(c.complete_json, ASK, Verdict, prompt=PROMPT) for c in clients]
            try:  # the first call fails only after all the waiters queued behind it, however slow the runner
                deadline = time.monotonic() + 30
                while cache.waiting(key) < waiters:
                    assert time.monotonic() < deadline, f"only {cache.waiting(key)} of {waiters} callers waited"
                    time.sleep(0.01)
            finally:
                queued.set()
            with pytest.raises((errors.LLMError, KeyboardInterrupt)):
                failing.result(timeout=30)
            for w in waiting:
                with pytest.raises(errors.LLMError):
                    w.result(timeout=30)
        assert len(server.requests) == waiters + 1
    assert overlapped == [True] * waiters
    assert all(c.ledger.total.calls == 1 for c in clients)  # each paid for its own call, none for another's


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_ends_the_turn_it_inherited_without_harm(tmp_path: Path) -> None:
    """A child forked inside a caller's turn (the forking thread held it) forgets the parent's turns, then leaves
    that caller's block: ending the inherited turn removed the key from the child's table, which no longer held it
    (KeyError), or removed a turn of the child's own. Across processes it would remove the parent's marker, so that
    another process asked beside the parent. Now a turn is ended only by the process and caller that took it: after
    the child leaves the inherited block, a caller of the child still waits for the parent's turn."""
    key = "llm:" + "1" * 64
    inherited = Cache(tmp_path / "shared").filling(key)
    assert inherited.__enter__()
    pid = os.fork()
    if pid == 0:  # the child: never back into pytest
        code = 2
        try:
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
            signal.alarm(30)  # only a hang reaches it, however slow the runner
            inherited.__exit__(None, None, None)  # the parent's caller's block ends in the child too
            turns: list[bool] = []
            late = threading.Thread(target=lambda: turns.append(Cache(tmp_path / "shared").filling(key).__enter__()))
            late.start()
            late.join(1.0)  # it waits for the parent's turn as long as that lasts: alive after any wait
            code = 0 if not turns and late.is_alive() else 1
        except BaseException as exc:
            os.write(2, f"{exc!r}\n".encode())  # shown by pytest on a failure
            code = 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    inherited.__exit__(None, None, None)
    assert os.waitstatus_to_exitcode(status) == 0
