"""Attacks on Cache.filling across processes (c1a0e85)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from groundjudge.cache import FILLING, Cache
from groundjudge.llm import LLMClient
from groundjudge.testing import Reply, ScriptedLLMServer
from tests.conftest import make_test_client
from tests.llm.test_llm_client import ASK, GOOD, PROMPT, Verdict


def stale(server: ScriptedLLMServer, tmp_path: Path) -> tuple[Cache, LLMClient, str]:
    """A client over a cache whose entry at ASK's key no longer validates (a reply it must not serve)."""
    cache = Cache(tmp_path / "shared")
    client = make_test_client(server, cache=cache)
    key = client.cache_key(ASK, Verdict, PROMPT)
    cache.store.set(key, json.dumps({"output": {"label": "MAYBE", "quotes": []}, "raw": "{}"}))
    return cache, client, key


def test_a_stale_entry_does_not_make_a_waiter_spin_past_a_dead_holder(tmp_path: Path) -> None:
    """A cached entry that no longer validates sits at the key; the process that held the key's turn was killed
    (its marker stays, its pid is gone). The waiter must ask at once, as it does without the stale entry."""
    with ScriptedLLMServer(lambda req: Reply.json(GOOD)) as server:
        cache, client, key = stale(server, tmp_path)
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait()
        holder = {"host": socket.gethostname(), "pid": dead.pid, "token": "x"}
        cache.store.set(f"{FILLING}:{key}", json.dumps(holder), expire=600)
        box: list[object] = []
        t = threading.Thread(target=lambda: box.append(client.complete_json(ASK, Verdict, prompt=PROMPT)), daemon=True)
        t0 = time.monotonic()
        t.start()
        t.join(5)
        looks = cache.hits["llm"] + cache.misses["llm"]
        assert box, f"still waiting after {time.monotonic() - t0:.1f}s, having looked at the cache {looks} times"
        assert len(server.requests) == 1


def test_a_stale_entry_does_not_make_a_waiter_spin_after_a_failed_turn(tmp_path: Path) -> None:
    """Same with a failed turn's marker that this waiter waited for: it must ask at once."""
    with ScriptedLLMServer(lambda req: Reply.json(GOOD)) as server:
        cache, client, key = stale(server, tmp_path)
        holder = {"host": socket.gethostname(), "pid": 1, "token": "x", "failed_at": time.time() + 1}
        cache.store.set(f"{FILLING}:{key}", json.dumps(holder), expire=60)
        box: list[object] = []
        t = threading.Thread(target=lambda: box.append(client.complete_json(ASK, Verdict, prompt=PROMPT)), daemon=True)
        t.start()
        t.join(5)
        looks = cache.hits["llm"] + cache.misses["llm"]
        assert box, f"still waiting, having looked at the cache {looks} times"


def test_a_stale_entry_does_not_make_a_waiter_spin_while_a_live_holder_asks(tmp_path: Path) -> None:
    """While another live process holds the turn, a waiter with a stale entry at the key waits (looks every 50 to
    500 ms), rather than reading and counting the stale entry thousands of times a second."""
    with ScriptedLLMServer(lambda req: Reply.json(GOOD)) as server:
        cache, client, key = stale(server, tmp_path)
        alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        try:
            holder = {"host": socket.gethostname(), "pid": alive.pid, "token": "x", "until": time.time() + 600}
            cache.store.set(f"{FILLING}:{key}", json.dumps(holder), expire=600)
            box: list[object] = []
            t = threading.Thread(
                target=lambda: box.append(client.complete_json(ASK, Verdict, prompt=PROMPT)), daemon=True
            )
            t.start()
            time.sleep(2)
            looks = cache.hits["llm"] + cache.misses["llm"]
            assert looks < 10, looks
            cache.store.set(key, json.dumps({"output": GOOD, "raw": json.dumps(GOOD)}))  # the holder's answer
            cache.store.delete(f"{FILLING}:{key}")
            t.join(5)
            assert box and len(server.requests) == 0
        finally:
            alive.kill()
            alive.wait()


def test_a_cache_db_with_a_turns_marker_is_still_groundjudges(tmp_path: Path) -> None:
    """A failed turn leaves its marker row (expired rows stay until culled); a copy of that cache.db without the
    GROUNDJUDGE_CACHE file (copied alone, or a folder where the marker file could not be written) was refused as
    another program's ('holds entries groundjudge never writes', key 'gj-filling:llm:...')."""
    import shutil

    first = Cache(tmp_path / "a")
    key = "llm:" + "3" * 64
    try:
        with first.filling(key):
            raise RuntimeError("the call failed")
    except RuntimeError:
        pass
    first.close()
    (tmp_path / "b").mkdir()
    shutil.copy(tmp_path / "a" / "cache.db", tmp_path / "b" / "cache.db")
    assert Cache(tmp_path / "b").stats()["total_entries"] == 0


def _turn_thread(cache: Cache, key: str) -> tuple[list[bool], threading.Thread]:
    """A thread taking (or waiting for) the turn at ``key``; what it was given lands in the list."""
    box: list[bool] = []

    def run() -> None:
        with cache.filling(key) as mine:
            box.append(mine)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return box, t


def _wait_for_turn(cache: Cache, key: str, seconds: float = 5) -> list[bool]:
    box, t = _turn_thread(cache, key)
    t.join(seconds)
    return box


LINUX_PROC = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="tells processes apart by /proc")


@LINUX_PROC
def test_a_killed_holder_not_yet_reaped_is_gone(tmp_path: Path) -> None:
    """The holder was killed but its parent has not waited for it yet (a zombie: a driver that started several
    scorers and waits for them in order; a pool worker killed by the OOM killer): signal 0 still reaches its pid,
    yet it will never end its turn. The waiter must not wait for the marker's 10-minute lease."""
    import signal

    key = "llm:" + "5" * 64
    cache = Cache(tmp_path / "shared")
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        cache.store.set(
            f"{FILLING}:{key}", json.dumps({"host": socket.gethostname(), "pid": holder.pid, "token": "x"}), expire=600
        )
        holder.send_signal(signal.SIGKILL)
        deadline = time.monotonic() + 30
        while Path(f"/proc/{holder.pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z":
            assert time.monotonic() < deadline, "the killed process never became a zombie"
            time.sleep(0.01)  # killed, not reaped (no wait yet): a zombie
        assert _wait_for_turn(cache, key) == [True]
    finally:
        holder.kill()
        holder.wait()


def test_a_marker_left_by_an_earlier_process_with_this_processs_pid_is_not_waited_for(tmp_path: Path) -> None:
    """A container restarted after its scorer was killed (OOM): the new scorer often gets the same pid (pids in a
    container are few and handed out in order), finds the old marker naming its own pid, and took itself for the
    holder, waiting the marker's 10-minute lease for itself."""
    import os

    key = "llm:" + "6" * 64
    cache = Cache(tmp_path / "shared")
    old = {"host": socket.gethostname(), "pid": os.getpid(), "token": "an earlier process's"}
    cache.store.set(f"{FILLING}:{key}", json.dumps(old), expire=600)
    assert _wait_for_turn(cache, key) == [True]


@LINUX_PROC
def test_a_marker_whose_pid_was_reused_by_another_process_is_not_waited_for(tmp_path: Path) -> None:
    """The holder was killed and its pid given to another, unrelated process (Linux: its start time differs)."""
    key = "llm:" + "7" * 64
    cache = Cache(tmp_path / "shared")
    with cache.filling("llm:" + "8" * 64):  # a marker as this groundjudge writes it, to learn its form
        real = json.loads(cache.store.get(f"{FILLING}:llm:" + "8" * 64))
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        reused = {**real, "pid": other.pid, "token": "the killed holder's"}  # its start time: this process's
        cache.store.set(f"{FILLING}:{key}", json.dumps(reused), expire=600)
        assert _wait_for_turn(cache, key) == [True]
    finally:
        other.kill()
        other.wait()


def test_a_damaged_marker_with_a_pid_past_any_pid_is_taken_over(tmp_path: Path) -> None:
    """A marker no groundjudge wrote (a damaged entry, a hand edit) is taken over, as the existing test with 'not
    json' shows; one naming a pid past any pid made os.kill raise OverflowError out of complete_json."""
    key = "llm:" + "9" * 64
    cache = Cache(tmp_path / "shared")
    cache.store.set(f"{FILLING}:{key}", json.dumps({"host": socket.gethostname(), "pid": 2**40}), expire=600)
    with cache.filling(key) as mine:
        assert mine


HOLD = """
import sys, time
import groundjudge.cache as c
c._LEASE = 0.5  # a turn that outlasts its lease (a slow server, retries, a rate limiter's wait)
cache = c.Cache(sys.argv[1])
with cache.filling(sys.argv[2]) as mine:
    print("holding" if mine else "not mine", flush=True)
    time.sleep(60)
"""


@LINUX_PROC
def test_a_live_holder_on_this_host_keeps_its_turn_past_the_lease(tmp_path: Path) -> None:
    """The lease is for a holder that cannot be seen (another host): a process on this host that still asks (a
    call past ten minutes: a slow local server, retries with backoff, a rate limiter's wait) kept its turn only for
    the marker's lease; then the waiter took a turn and asked too, and both paid."""
    key = "llm:" + "a" * 64
    cache = Cache(tmp_path / "shared")
    cache.stats()  # the folder made before the holder opens it
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path / "shared"), key],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        time.sleep(1.0)  # past the holder's lease
        box, t = _turn_thread(cache, key)
        t.join(2.0)
        assert box == [], "the waiter took the turn of a live holder on this host"
        holder.kill()
        holder.wait()
        t.join(10)
        assert box == [True]  # gone: the waiter asks
    finally:
        holder.kill()
        holder.wait()


def test_a_holder_on_another_host_holds_its_turn_for_its_lease_only() -> None:
    """Where the holder cannot be seen (another host sharing the folder), its marker's lease decides."""
    from groundjudge.cache import _alive

    elsewhere = {"host": socket.gethostname() + "-other", "pid": 1, "token": "x"}
    assert _alive({**elsewhere, "until": time.time() + 600})
    assert not _alive({**elsewhere, "until": time.time() - 1})
    assert not _alive(elsewhere)  # a marker naming no lease is no turn
