"""What one reviewer takes and is served, bounded (through the HTTP API and the page, on SQLite): a take gives at most
``--batch`` answers and never past ``--max-open`` unfinished (More answers took any number, a batch a click, and
starved the other reviewers), and the page holds the unfinished answers and a window of the latest finished ones,
with links to page back (it held every answer the reviewer was ever given: 5.5 MB at 2,000)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.serve.conftest import need_serve

need_serve()

from fastapi.testclient import TestClient

from groundjudge.cli.root import app as cli
from groundjudge.errors import InputError
from groundjudge.serve import db, load, store
from groundjudge.serve.app import create_app
from tests.serve.conftest import bearer, make_report, write_run


def _review(tmp_path: Path, answers: int) -> tuple[Any, dict[str, str]]:
    engine = db.open_db(f"sqlite:///{tmp_path / 'r.sqlite'}")
    load.load_runs(engine, [("run", [make_report(f"a{i:03d}") for i in range(answers)])])
    return engine, {name: store.add_reviewer(engine, name) for name in ("ann", "bob")}


def _open(c: TestClient, token: str) -> int:
    q = c.get("/api/queue", headers=bearer(token)).json()
    return int(q["answers_assigned"] - q["answers_done"])


def test_a_take_gives_a_batch_and_never_past_the_most_a_reviewer_may_hold(tmp_path: Path) -> None:
    engine, tokens = _review(tmp_path, 30)
    ann = bearer(tokens["ann"])
    with TestClient(create_app(engine, batch=3, max_open=5)) as c:
        assert c.post("/api/queue/next", headers=ann).status_code == 200
        assert _open(c, tokens["ann"]) == 3
        assert c.post("/api/queue/next", headers=ann).status_code == 200
        assert _open(c, tokens["ann"]) == 5  # two more, not three: five is the most
        for _ in range(3):  # asking again takes nothing, and says why
            r = c.post("/api/queue/next", headers=ann)
            assert r.status_code == 409, r.text
            assert r.json()["detail"] == (
                "you hold 5 unfinished answers, the most a reviewer may hold (review serve --max-open 5): finish some "
                "before taking more"
            )
        assert _open(c, tokens["ann"]) == 5
        assert c.post("/api/queue/next", headers=bearer(tokens["bob"])).json()["answers_assigned"] == 3
        first = c.get("/api/queue", headers=ann).json()["answers"][0]["id"]
        for claim in ("c0", "c1"):  # one answer finished: room for one more
            body = {"id": first, "claim_id": claim, "label": "SUPPORTED"}
            assert c.post("/api/decisions", json=body, headers=ann).status_code == 200
        q = c.post("/api/queue/next", headers=ann).json()
        assert (q["answers_assigned"], q["answers_done"]) == (6, 1)
    engine.dispose()


def test_more_answers_on_the_page_says_when_the_reviewer_holds_the_most(tmp_path: Path) -> None:
    engine, tokens = _review(tmp_path, 8)
    with TestClient(create_app(engine, batch=2, max_open=4), follow_redirects=False) as c:
        assert c.post("/signin", data={"token": tokens["ann"]}).status_code == 303
        page = c.get("/").text
        csrf = json.loads(page.split("id='gj-server'>", 1)[1].split("</script>", 1)[0])["csrf"]
        assert "id='notice'" not in page
        assert c.post("/more", data={"csrf": csrf}).headers["location"] == "./"
        assert _open(c, tokens["ann"]) == 4
        r = c.post("/more", data={"csrf": csrf})
        assert r.status_code == 303 and r.headers["location"] == "./?said=full"
        assert "You hold as many unfinished answers as a reviewer may (4): finish some" in c.get("/?said=full").text
        assert _open(c, tokens["ann"]) == 4
        bob = c.post("/api/queue/next", headers=bearer(tokens["bob"])).json()
        assert bob["answers_assigned"] == 2
        assert c.post("/api/queue/next", headers=bearer(tokens["bob"])).json()["answers_assigned"] == 4
        mine = c.get("/api/queue", headers=bearer(tokens["ann"])).json()["answers"]
        for a in mine:  # ann finishes hers; the queue (8 answers) is empty now
            for claim in ("c0", "c1"):
                body = {"id": a["id"], "claim_id": claim, "label": "SUPPORTED"}
                assert c.post("/api/decisions", json=body, headers=bearer(tokens["ann"])).status_code == 200
        r = c.post("/more", data={"csrf": csrf})
        assert r.headers["location"] == "./?said=none"
        assert "The team&#x27;s queue has no answer left for you." in c.get("/?said=none").text
        assert "no answer left" not in c.get("/?said=<b>x</b>").text  # only the service's own lines
    engine.dispose()


def test_a_take_bigger_than_a_reviewer_may_hold_is_refused_before_the_service_starts(tmp_path: Path) -> None:
    engine = db.open_db(f"sqlite:///{tmp_path / 'r.sqlite'}")
    with pytest.raises(InputError, match="--batch 60 is over --max-open 50"):
        create_app(engine, batch=60)
    engine.dispose()
    run = write_run(tmp_path / "run.jsonl", [make_report("a")])
    database = tmp_path / "other.sqlite"
    result = CliRunner().invoke(
        cli, ["review", "serve", str(run), "--db", str(database), "--batch", "20", "--max-open", "10"]
    )
    assert result.exit_code == 2, result.output
    assert "--batch 20 is over --max-open 10" in " ".join(result.output.split())
    assert not database.exists()


def _held(page: str) -> tuple[list[str], list[dict[str, Any]]]:
    """The answers a served page holds, and the decisions it was given."""
    data = json.loads(page.split("id='gj-data'>", 1)[1].split("</script>", 1)[0])
    server = json.loads(page.split("id='gj-server'>", 1)[1].split("</script>", 1)[0])
    return [r["id"] for r in data["reports"]], server["decisions"]


def test_the_page_holds_the_unfinished_answers_and_the_latest_finished_and_pages_back(tmp_path: Path) -> None:
    engine, tokens = _review(tmp_path, 125)
    ann = store.reviewers(engine)[0]["id"]
    store.take_work(engine, ann, 125)  # given before any limit, or through the API over time
    ids = [f"a{i:03d}" for i in range(125)]
    for rid in ids[:120]:  # finished in queue order: the last 5 open
        for claim in ("c0", "c1"):
            store.decide(engine, ann, rid, claim, "SUPPORTED")
    store.decide(engine, ann, ids[0], "c1", "UNSUPPORTED")  # a000 looked at again: the latest finished now
    with TestClient(create_app(engine), follow_redirects=False) as c:
        assert c.post("/signin", data={"token": tokens["ann"]}).status_code == 303
        page = c.get("/").text
        held, decisions = _held(page)
        assert held == [ids[0], *ids[71:125]]  # queue order: the 49 latest finished after a000, the 5 open
        assert {d["id"] for d in decisions} == {ids[0], *ids[71:120]} and len(decisions) == 100
        assert "Here: your 5 unfinished answers and 50 of the 120 you finished, the latest first (page 1 of 3)" in page
        assert "href='?finished=1'" in page and "id='later'" not in page
        older = c.get("/?finished=1").text
        assert _held(older)[0] == [*ids[21:71], *ids[120:]]
        assert "href='?finished=0'" in older and "href='?finished=2'" in older
        last = c.get("/?finished=2").text
        assert _held(last)[0] == [*ids[1:21], *ids[120:]] and "id='earlier'" not in last
        assert _held(c.get("/?finished=99").text)[0] == _held(last)[0]  # past the last page: the last page
        assert _held(c.get("/?finished=x").text)[0] == held
        # a digit that is no number Python reads (str.isdigit holds for '²'): the first page, not a server error
        for odd in ("²", "1²", "-1", "1e3", " 1"):
            r = c.get("/", params={"finished": odd})
            assert r.status_code == 200 and _held(r.text)[0] == held, (odd, r.status_code)
    engine.dispose()


def test_the_pages_header_counts_the_whole_queue_and_says_what_the_page_holds(tmp_path: Path) -> None:
    # the header counted the answers the page holds (its unfinished ones and 50 finished) as if they were the queue:
    # "54 of 54 answers in this queue, 108 claims" for a queue of 60 answers and 120 claims
    engine, tokens = _review(tmp_path, 60)
    ann = store.reviewers(engine)[0]["id"]
    store.take_work(engine, ann, 60)
    for i in range(56):
        for claim in ("c0", "c1"):
            store.decide(engine, ann, f"a{i:03d}", claim, "SUPPORTED")
    with TestClient(create_app(engine), follow_redirects=False) as c:
        assert c.post("/signin", data={"token": tokens["ann"]}).status_code == 303
        page = c.get("/").text
        line = page.split("<p id='queue'>", 1)[1].split("</p>", 1)[0]
        assert line == (
            "<b>Your queue: 60 answers, 120 claims, 112 decided by you (4 answers unfinished, 56 finished).</b> This "
            "page holds 54 of the 60 answers (108 claims): the run summary and the corrected unsupported rate below "
            "count those; the decided counts count your whole queue."
        )
        server = json.loads(page.split("id='gj-server'>", 1)[1].split("</script>", 1)[0])
        assert server["hidden"] == {"answers": 6, "claims": 12}  # what the page's live counts add
        mine = c.get("/api/queue", headers=bearer(tokens["ann"])).json()
        assert (mine["claims_assigned"], mine["claims_decided"]) == (120, 112)
    engine.dispose()
