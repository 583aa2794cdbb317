"""Processes that share a cache folder ask once for one key (``Cache.filling`` across processes: two notebooks, two
``groundjudge score`` commands, Ray workers): the first asks, the others wait and read its reply, free; a failed or
killed asker hands nothing on, and those that waited ask at once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from groundjudge.cache import FILLING, Cache
from groundjudge.testing import RecordedRequest, Reply, ScriptedLLMServer
from tests.llm.test_llm_client import GOOD

ROOT = Path(__file__).resolve().parents[2]

# One process's caller: the question of tests.llm.test_llm_client.ASK through a real client over the shared folder;
# prints "asking" just before the call, then one JSON line with what it got and what it paid.
CALLER = textwrap.dedent(
    """
    import json, sys
    from groundjudge import errors
    from groundjudge.cache import Cache
    from groundjudge.llm import LLMClient, RetryPolicy
    from groundjudge.llm.registry import get_provider
    from tests.llm.test_llm_client import ASK, PROMPT, Verdict

    url, folder = sys.argv[1], sys.argv[2]
    client = LLMClient(
        get_provider("openai/gpt-4o-mini", base_url=url, timeout=60.0),
        cache=Cache(folder),
        retry=RetryPolicy(max_attempts=1),
        max_reasks=0,
    )
    print("asking", flush=True)
    try:
        value, usage = client.complete_json(ASK, Verdict, prompt=PROMPT)
        print(json.dumps({"label": value.label, "calls": usage.calls, "cached": usage.cached_calls}), flush=True)
    except errors.GroundjudgeError as exc:
        print(json.dumps({"error": type(exc).__name__}), flush=True)
    """
)


def caller(server: ScriptedLLMServer, folder: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "OPENAI_API_KEY": "sk-test", "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    env.pop("OPENAI_BASE_URL", None)
    return subprocess.Popen(
        [sys.executable, "-c", CALLER, server.openai_base_url, str(folder)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )


def started(proc: subprocess.Popen[str]) -> None:
    """Wait until the process is about to ask (its imports done)."""
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == "asking", (line, proc.stderr.read() if proc.stderr else "")


def outcome(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return dict(json.loads(out.strip().splitlines()[-1]))


def _asked(server: ScriptedLLMServer, n: int = 1) -> None:
    deadline = time.monotonic() + 30
    while len(server.requests) < n:
        assert time.monotonic() < deadline, "the first call never reached the server"
        time.sleep(0.01)


@pytest.fixture
def held(request: pytest.FixtureRequest) -> Any:
    """A server whose first request is answered (with ``request.param``) only once the test sets ``release``; later
    requests at once."""
    release = threading.Event()
    box: list[ScriptedLLMServer] = []

    def script(req: RecordedRequest) -> Reply:
        if req is box[0].requests[0]:
            release.wait(60)
            return request.param  # type: ignore[no-any-return]
        return Reply.json(GOOD)

    with ScriptedLLMServer(script) as server:
        box.append(server)
        try:
            yield server, release
        finally:
            release.set()


@pytest.mark.parametrize("held", [Reply.json(GOOD)], indirect=True)
def test_two_processes_over_one_cache_folder_pay_once_for_one_key(held: Any, tmp_path: Path) -> None:
    """Two processes missing the same key at the same time both sent it and both paid (the turns were a table in
    each process's memory). Now the second waits for the first's reply and reads it from the cache, free."""
    server, release = held
    first = caller(server, tmp_path / "shared")
    started(first)
    _asked(server)  # the first process's call is in flight, held by the server
    second = caller(server, tmp_path / "shared")
    started(second)
    time.sleep(1.0)  # the second asks for its turn meanwhile; without one it sends at once and the server sees it
    release.set()
    assert outcome(first) == {"label": "SUPPORTED", "calls": 1, "cached": 0}
    assert outcome(second) == {"label": "SUPPORTED", "calls": 0, "cached": 1}
    assert len(server.requests) == 1
    stats = Cache(tmp_path / "shared").stats()
    assert stats["total_entries"] == 1 and FILLING not in stats["entries"]  # the turn's marker is gone


def test_the_processes_that_waited_for_a_failed_call_all_ask_at_once(tmp_path: Path) -> None:
    """Two processes wait for a third's call, which fails: each asks itself at once, as callers of one process do,
    not one after the other (the second queued behind the first's call, one failing call's time after another's).
    The server answers the waiters only once both their calls are in."""
    release = threading.Event()
    together = threading.Barrier(2, timeout=20)  # waits that long only when the calls are not together
    overlapped: list[bool] = []
    box: list[ScriptedLLMServer] = []

    def script(req: RecordedRequest) -> Reply:
        if req is box[0].requests[0]:
            release.wait(60)
            return Reply.error(400)
        try:
            together.wait()
            overlapped.append(True)
        except threading.BrokenBarrierError:
            overlapped.append(False)
        return Reply.json(GOOD)

    with ScriptedLLMServer(script) as server:
        box.append(server)
        first = caller(server, tmp_path / "shared")
        started(first)
        _asked(server)
        waiters = [caller(server, tmp_path / "shared") for _ in range(2)]
        for w in waiters:
            started(w)
        time.sleep(1.0)  # both wait for the first's turn meanwhile
        release.set()
        assert outcome(first) == {"error": "BadRequestError"}
        assert [outcome(w) for w in waiters] == [{"label": "SUPPORTED", "calls": 1, "cached": 0}] * 2
    assert overlapped == [True, True]


@pytest.mark.skipif(os.name != "posix", reason="a killed process is told apart by its pid on POSIX only")
@pytest.mark.parametrize("held", [Reply.json(GOOD)], indirect=True)
def test_a_process_killed_while_asking_does_not_hold_the_others_for_its_lease(held: Any, tmp_path: Path) -> None:
    """The asking process is killed (SIGKILL: nothing of it runs again, its marker stays in the folder): the
    process waiting for it sees that it is gone and asks itself, without waiting for the marker's ten minutes."""
    server, _ = held
    first = caller(server, tmp_path / "shared")
    started(first)
    _asked(server)
    first.send_signal(signal.SIGKILL)
    first.wait(30)
    t0 = time.monotonic()
    second = caller(server, tmp_path / "shared")
    started(second)
    assert outcome(second) == {"label": "SUPPORTED", "calls": 1, "cached": 0}
    assert time.monotonic() - t0 < 60 and len(server.requests) == 2


def test_a_marker_no_process_of_groundjudge_wrote_is_taken_over(tmp_path: Path) -> None:
    """A marker whose value is not a turn (a hand edit, a damaged entry) is one of a process that is gone."""
    cache = Cache(tmp_path / "shared")
    key = "llm:" + "2" * 64
    cache.store.set(f"{FILLING}:{key}", "not json", expire=600)
    with cache.filling(key) as mine:
        assert mine
    assert f"{FILLING}:{key}" not in cache.store and cache.stats()["total_entries"] == 0
