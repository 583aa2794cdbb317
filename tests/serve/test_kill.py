"""Nothing acknowledged is lost or stored twice: three reviewers post decisions at once while the service is
killed (SIGKILL, mid-way through their work) and started again, on SQLite and on PostgreSQL; afterwards ``review
export`` holds every acknowledged decision exactly once, and the history holds each request once."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.serve.conftest import need_serve

need_serve()

from tests.serve.conftest import Service, add_reviewer, bearer, export, make_report, new_database, write_run

LABELS = ("SUPPORTED", "CONTRADICTED", "UNSUPPORTED")


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_three_reviewers_while_the_service_is_killed_lose_and_duplicate_nothing(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    db = new_database(kind, request, tmp_path)
    run = write_run(tmp_path / "run.jsonl", [make_report(f"k{i}", n_claims=3) for i in range(6)])
    names = ("r1", "r2", "r3")
    tokens = {n: add_reviewer(db, n) for n in names}
    service = Service([run], db, tmp_path, "--sign-in-limit", "1000").start()
    claims = [(f"k{i}", f"c{j}") for i in range(6) for j in range(3)]
    acked: dict[str, dict[tuple[str, str], dict[str, Any]]] = {n: {} for n in names}
    failures: Counter[str] = Counter()
    problems: list[str] = []

    def reviewer(name: str) -> None:
        with httpx.Client(timeout=5) as client:
            for k, (aid, cid) in enumerate(claims):
                body = {
                    "id": aid,
                    "claim_id": cid,
                    "label": LABELS[(k + len(name)) % 3],
                    "note": f"{name} {k}",
                    "request_id": f"{name}-{k}",
                }
                deadline = time.monotonic() + 90
                while time.monotonic() < deadline:
                    try:
                        r = client.post(service.url + "/api/decisions", json=body, headers=bearer(tokens[name]))
                    except httpx.HTTPError:
                        failures[name] += 1  # killed: no answer, so not acknowledged: send it again
                        time.sleep(0.05)
                        continue
                    if r.status_code == 200:
                        acked[name][(aid, cid)] = {**body, "decision": r.json()["decision"]}
                        break
                    problems.append(f"{name}: {r.status_code} {r.text}")
                    return
                else:
                    problems.append(f"{name}: no answer for 90 s")
                    return

    threads = [threading.Thread(target=reviewer, args=(n,)) for n in names]
    for t in threads:
        t.start()
    try:
        deadline = time.monotonic() + 60  # kill it once every reviewer is under way
        while min(len(a) for a in acked.values()) < 4 and time.monotonic() < deadline and not problems:
            time.sleep(0.02)
        service.kill()
        service.start()
        for t in threads:
            t.join(180)
    finally:
        service.stop()
    assert not problems, problems
    assert sum(failures.values()) > 0  # the kills did land while reviewers were posting
    assert all(len(acked[n]) == len(claims) for n in names)

    lines = export(db, tmp_path / "export.jsonl")
    seen = Counter((x["reviewer"], x["id"], x["claim_id"]) for x in lines)
    assert max(seen.values()) == 1  # nothing twice
    assert set(seen) == {(n, a, c) for n in names for (a, c) in acked[n]}  # nothing lost
    for x in lines:
        sent = acked[x["reviewer"]][(x["id"], x["claim_id"])]
        assert (x["label"], x["note"]) == (sent["label"], sent["note"])

    from groundjudge.serve.db import open_db
    from groundjudge.serve.store import history

    engine = open_db(db)
    stored = Counter((h["reviewer"], h["id"], h["claim_id"]) for h in history(engine, limit=10_000))
    assert set(stored.values()) == {1}  # a request sent again after a kill is stored once
    engine.dispose()
