"""The review service's API against the real service (``groundjudge review serve`` in a subprocess, SQLite):
sign-in and tokens, decisions and their history, assignment with an overlap share, team progress, adjudication,
the export that ``metrics --reviews`` reads, and the refusals (401, 403, 404, 422, 429, 503)."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from tests.serve.conftest import need_serve

need_serve()

from groundjudge.cli.root import app
from groundjudge.serve.load import in_overlap
from tests.serve.conftest import HOSTILE, Service, add_reviewer, bearer, export, make_report, write_run

IDS = [f"a{i}" for i in range(8)] + [HOSTILE]


@pytest.fixture(scope="module")
def svc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    folder = tmp_path_factory.mktemp("api")
    run = write_run(folder / "run.jsonl", [make_report(rid, hostile=rid == HOSTILE) for rid in IDS])
    db = f"sqlite:///{folder / 'review.sqlite'}"
    tokens = {
        "alice": add_reviewer(db, "alice"),
        "bob": add_reviewer(db, "bob"),
        "carol": add_reviewer(db, "carol", adjudicator=True),
    }
    service = Service([run], db, folder, "--overlap", "0.5", "--batch", "3", "--sign-in-limit", "1000").start()
    try:
        yield {"service": service, "url": service.url, "db": db, "tokens": tokens, "run": run, "folder": folder}
    finally:
        service.stop()


def post(svc: dict[str, Any], who: str | None, body: Any, path: str = "/api/decisions") -> httpx.Response:
    headers = bearer(svc["tokens"][who]) if who else {}
    return httpx.post(svc["url"] + path, json=body, headers=headers, timeout=10)


def get(svc: dict[str, Any], who: str | None, path: str, **headers: str) -> httpx.Response:
    h = bearer(svc["tokens"][who]) if who else {}
    return httpx.get(svc["url"] + path, headers={**h, **headers}, timeout=10)


ROUTES = [
    "/api/me",
    "/api/decisions",
    "/api/queue",
    "/api/progress",
    "/api/team",
    "/api/disagreements",
    "/api/history",
    "/api/export",
]


def test_every_route_needs_a_valid_token(svc: dict[str, Any]) -> None:
    for path in ROUTES:
        assert get(svc, None, path).status_code == 401, path
        r = get(svc, None, path, Authorization="Bearer gj_0000000000000000_not-a-real-secret")
        assert r.status_code == 401 and r.json()["detail"] == "invalid token", path
    assert get(svc, None, "/api/me", Authorization="Basic YWxpY2U6eA==").status_code == 401
    good = svc["tokens"]["alice"]
    wrong_secret = good[: good.rindex("_") + 1] + "x" * 43  # the right key, another secret
    assert get(svc, None, "/api/me", Authorization=f"Bearer {wrong_secret}").status_code == 401
    r = post(svc, None, {"id": "a0", "claim_id": "c0", "label": "SUPPORTED"})
    assert r.status_code == 401
    assert get(svc, "alice", "/api/me").json() == {"name": "alice", "role": "reviewer"}
    assert get(svc, None, "/api/health").json()["ok"] is True  # no data: no sign-in


def test_a_token_writes_only_as_its_reviewer(svc: dict[str, Any]) -> None:
    r = post(svc, "alice", {"id": "a1", "claim_id": "c0", "label": "SUPPORTED", "reviewer": "bob"})
    assert r.status_code == 403 and "bob" in r.json()["detail"]
    assert not [d for d in get(svc, "bob", "/api/decisions").json() if d["id"] == "a1"]
    r = post(svc, "alice", {"id": "a1", "claim_id": "c0", "label": "SUPPORTED", "reviewer": "alice"})
    assert r.status_code == 200 and r.json()["reviewer"] == "alice"


@pytest.mark.parametrize(
    ("body", "code", "words"),
    [
        ({"id": "a0", "claim_id": "c0", "label": "MAYBE"}, 422, "field 'label': 'MAYBE' is not one of"),
        ({"id": "a0", "claim_id": "c0", "label": 3}, 422, "label"),
        ({"id": "a0", "claim_id": "c0"}, 422, "label: Field required"),
        ({"id": "nope", "claim_id": "c0", "label": "SUPPORTED"}, 404, "no answer 'nope'"),
        ({"id": "a0", "claim_id": "c9", "label": "SUPPORTED"}, 404, "has no claim 'c9'"),
        ({"id": "a0", "claim_id": "c0", "label": "SUPPORTED", "citation": "MAYBE"}, 422, "citation"),
        ({"id": "a0", "claim_id": "c0", "label": "SUPPORTED", "extra": 1}, 422, "extra"),
        ({"id": "a0", "claim_id": "c0", "label": "SUPPORTED", "note": "x" * 10_001}, 422, "note"),
        ("not an object", 422, ""),
    ],
)
def test_bad_decisions_get_a_4xx_with_a_clear_message(svc: dict[str, Any], body: Any, code: int, words: str) -> None:
    r = post(svc, "alice", body)
    assert r.status_code == code, r.text
    assert words in r.json()["detail"]


@pytest.mark.parametrize("path", ["/signin", "/signout", "/more"])
def test_a_form_address_opened_as_a_page_leads_to_the_page(svc: dict[str, Any], path: str) -> None:
    # after a failed sign-in the address bar says /signin: opened again, it answered {"detail":"Method Not Allowed"}
    r = httpx.get(svc["url"] + path, timeout=10)
    assert (r.status_code, r.headers["location"]) == (303, "./")


@pytest.mark.parametrize("path", ["/api/decisions", "/api/adjudications"])
def test_a_body_that_is_not_json_is_a_422_that_says_so(svc: dict[str, Any], path: str) -> None:
    # it said "46: JSON decode error", as if the body had a field named 46
    headers = {**bearer(svc["tokens"]["carol"]), "Content-Type": "application/json"}
    r = httpx.post(svc["url"] + path, content=b'{"id": "a0", "claim_id": "c0"', headers=headers, timeout=10)
    assert r.status_code == 422, r.text
    assert r.json()["detail"].startswith("body: not valid JSON (") and "at character 29" in r.json()["detail"]


@pytest.mark.parametrize("text", ["\\ud800", "\\u0000"])
def test_a_note_the_database_cannot_hold_is_a_422_not_a_500(svc: dict[str, Any], text: str) -> None:
    # JSON may escape a lone surrogate or a NUL; the page would retry a 500 or a 503 for ever
    raw = '{"id": "a0", "claim_id": "c0", "label": "SUPPORTED", "note": "x' + text + 'y"}'
    headers = {**bearer(svc["tokens"]["alice"]), "Content-Type": "application/json"}
    r = httpx.post(svc["url"] + "/api/decisions", content=raw.encode(), headers=headers, timeout=10)
    assert r.status_code == 422, r.text
    assert "field 'note'" in r.json()["detail"]


def test_the_latest_decision_counts_and_every_change_is_kept(svc: dict[str, Any]) -> None:
    for label in ("CONTRADICTED", "unsupported", "SUPPORTED"):
        r = post(svc, "bob", {"id": "a2", "claim_id": "c1", "label": label, "note": f"now {label}"})
        assert r.status_code == 200 and r.json()["label"] == label.upper()
    again = post(svc, "bob", {"id": "a2", "claim_id": "c1", "label": "UNSUPPORTED", "request_id": "r-1"})
    dup = post(svc, "bob", {"id": "a2", "claim_id": "c1", "label": "UNSUPPORTED", "request_id": "r-1"})
    assert dup.json()["duplicate"] is True and dup.json()["decision"] == again.json()["decision"]
    mine = [d for d in get(svc, "bob", "/api/decisions").json() if (d["id"], d["claim_id"]) == ("a2", "c1")]
    assert [d["label"] for d in mine] == ["UNSUPPORTED"]
    hist = [
        h
        for h in get(svc, "bob", "/api/history").json()
        if (h["id"], h["claim_id"], h["reviewer"]) == ("a2", "c1", "bob")
    ]
    assert [h["label"] for h in hist] == ["CONTRADICTED", "UNSUPPORTED", "SUPPORTED", "UNSUPPORTED"]  # r-1 once
    cleared = post(svc, "bob", {"id": "a2", "claim_id": "c1", "label": None})
    assert cleared.status_code == 200
    # the cleared decision is exported as no label (a null one), with no status: no verdict stands on the claim
    mine = [x for x in export(svc["db"], svc["folder"] / "e0.jsonl") if (x["id"], x["reviewer"]) == ("a2", "bob")]
    assert [(x["label"], "status" in x) for x in mine] == [(None, False)]


def test_a_request_id_used_again_for_another_decision_is_refused_not_dropped(svc: dict[str, Any]) -> None:
    # a script that numbers its requests from 1 on every start sends a key it used before: its new decision must
    # not be dropped while the answer says "duplicate" with the new claim's ids
    first = {"id": "a7", "claim_id": "c0", "label": "SUPPORTED", "request_id": "script-1"}
    assert post(svc, "alice", first).status_code == 200
    assert post(svc, "alice", first).json()["duplicate"] is True  # the same request again: stored once
    for other in ({"claim_id": "c1"}, {"label": "CONTRADICTED"}, {"note": "changed"}, {"citation": "WRONG"}):
        r = post(svc, "alice", {**first, **other})
        assert r.status_code == 409, (other, r.text)
        assert "request_id 'script-1' was used before for another request" in r.json()["detail"]
    mine = {(d["id"], d["claim_id"]): d["label"] for d in get(svc, "alice", "/api/decisions").json()}
    assert mine[("a7", "c0")] == "SUPPORTED" and ("a7", "c1") not in mine
    settle = {"id": "a7", "claim_id": "c0", "label": "SUPPORTED", "request_id": "settle-1"}
    assert post(svc, "carol", settle, "/api/adjudications").status_code == 200
    r = post(svc, "carol", {**settle, "claim_id": "c1"}, "/api/adjudications")
    assert r.status_code == 409 and "settle-1" in r.json()["detail"]


def test_assignment_gives_each_answer_to_one_reviewer_and_the_overlap_to_two(svc: dict[str, Any]) -> None:
    queues: dict[str, set[str]] = {}
    for who in ("alice", "bob", "carol"):
        for _ in range(3):
            r = httpx.post(svc["url"] + "/api/queue/next", headers=bearer(svc["tokens"][who]), timeout=10)
            assert r.status_code == 200
        queues[who] = {a["id"] for a in get(svc, who, "/api/queue").json()["answers"]}
    given = Counter(a for q in queues.values() for a in q)
    assert set(given) == set(IDS)  # the whole queue is handed out
    for rid in IDS:
        assert given[rid] == (2 if in_overlap(rid, 0.5) else 1), rid
    assert {rid for rid in IDS if in_overlap(rid, 0.5)}  # the draw put some in the overlap
    team = get(svc, "alice", "/api/team").json()
    assert team["queue"]["slots_assigned"] == team["queue"]["slots"] == sum(given.values())
    assert {r["name"]: r["answers_assigned"] for r in team["reviewers"]} == {k: len(v) for k, v in queues.items()}


def test_disagreements_are_settled_by_an_adjudicator_and_exported(svc: dict[str, Any], tmp_path: Path) -> None:
    assert post(svc, "alice", {"id": "a5", "claim_id": "c0", "label": "SUPPORTED", "note": "fine"}).status_code == 200
    assert post(svc, "bob", {"id": "a5", "claim_id": "c0", "label": "CONTRADICTED", "note": "no"}).status_code == 200
    assert post(svc, "bob", {"id": "a5", "claim_id": "c1", "label": "SUPPORTED"}).status_code == 200
    assert post(svc, "alice", {"id": "a5", "claim_id": "c1", "label": "SUPPORTED"}).status_code == 200
    open_ = get(svc, "bob", "/api/disagreements?open_only=true").json()
    assert [(d["id"], d["claim_id"]) for d in open_] == [("a5", "c0")]
    assert {d["reviewer"]: d["label"] for d in open_[0]["decisions"]} == {"alice": "SUPPORTED", "bob": "CONTRADICTED"}
    body = {"id": "a5", "claim_id": "c0", "label": "CONTRADICTED", "note": "the source says otherwise"}
    r = post(svc, "alice", body, "/api/adjudications")
    assert r.status_code == 403 and "adjudicator" in r.json()["detail"]
    assert post(svc, "carol", {**body, "label": "NOPE"}, "/api/adjudications").status_code == 422
    assert post(svc, "carol", body, "/api/adjudications").status_code == 200
    assert get(svc, "bob", "/api/disagreements?open_only=true").json() == []
    q = get(svc, "bob", "/api/team").json()["queue"]
    assert q["disagreements_settled"] >= 1 and q["disagreements_open"] == 0

    lines = export(svc["db"], tmp_path / "export.jsonl")
    a5 = [x for x in lines if (x["id"], x["claim_id"]) == ("a5", "c0")]
    assert [(x["reviewer"], x["label"], x.get("adjudicated", False), x["status"]) for x in a5] == [
        ("alice", "SUPPORTED", False, "adjudicated"),
        ("bob", "CONTRADICTED", False, "adjudicated"),
        ("carol", "CONTRADICTED", True, "adjudicated"),
    ]
    # the static page's export line (review/page_assets.py, exportJsonl) for a decision without a citation, and the
    # claim's status (one reviewer's file has none: each claim has one reviewer's label); one reader
    # (review.metrics.parse_reviews) takes both
    assert set(a5[0]) - {"status"} == {
        "id",
        "claim_id",
        "claim",
        "label",
        "groundjudge_label",
        "route",
        "note",
        "reviewer",
        "decided_at",
        "run",
    }
    assert httpx.get(svc["url"] + "/api/export", headers=bearer(svc["tokens"]["bob"])).text.splitlines() == [
        json.dumps(x) for x in lines
    ]
    # the readers of the page's export read it: one label per claim (the adjudicated one), and each reviewer's
    from groundjudge.review.metrics import read_reviews

    final = {(r.id, r.claim_id): r.label for r in read_reviews(tmp_path / "export.jsonl")}
    assert final[("a5", "c0")] == "CONTRADICTED"
    result = CliRunner().invoke(
        app, ["metrics", str(svc["run"]), "--reviews", str(tmp_path / "export.jsonl"), "--json"]
    )
    assert result.exit_code == 0, result.output
    m = json.loads(result.stdout)
    assert m["level"] == "review" and m["n"] == len(final)
    assert m["reviewers_agreement"]["n"] >= 2  # a5's two claims, each decided by alice and bob


def test_a_history_number_past_any_integer_is_a_422_not_a_500(svc: dict[str, Any]) -> None:
    for after in ("99999999999999999999", "-1"):
        r = get(svc, "alice", f"/api/history?after={after}")
        assert r.status_code == 422 and "after" in r.json()["detail"], r.text
    assert get(svc, "alice", f"/api/history?after={2**62}").json() == []


def test_tokens_are_stored_hashed_and_never_logged(svc: dict[str, Any]) -> None:
    raw = Path(svc["db"].removeprefix("sqlite:///"))
    with sqlite3.connect(raw) as conn:
        stored = conn.execute("select token_key, token_hash from gj_reviewers").fetchall()
    blob = b"".join(p.read_bytes() for p in raw.parent.glob("review.sqlite*"))
    for token in svc["tokens"].values():
        secret = token.split("_", 2)[2]  # gj_KEY_SECRET: the key is hex, the secret may hold "_"
        assert secret.encode() not in blob
        assert all(secret not in h for _, h in stored)
        assert secret not in svc["service"].output()


def test_the_api_is_described_by_openapi(svc: dict[str, Any]) -> None:
    spec = httpx.get(svc["url"] + "/api/openapi.json").json()
    assert {"/api/decisions", "/api/queue", "/api/team", "/api/disagreements", "/api/adjudications"} <= set(
        spec["paths"]
    )
    assert "DecisionIn" in spec["components"]["schemas"]


def test_the_page_signs_in_with_a_form_and_refuses_writes_without_its_csrf_token(svc: dict[str, Any]) -> None:
    with httpx.Client(base_url=svc["url"], timeout=10) as c:
        page = c.get("/")
        assert page.status_code == 200 and "name='token'" in page.text and "gj-data" not in page.text
        bad = c.post("/signin", data={"token": "gj_nope_nope"})
        assert bad.status_code == 401 and "not valid" in bad.text
        ok = c.post("/signin", data={"token": svc["tokens"]["alice"]})
        assert ok.status_code == 303
        cookie = ok.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie
        assert svc["tokens"]["alice"] not in ok.headers.get("location", "")
        page = c.get("/")
        assert "gj-data" in page.text and "Content-Security-Policy" in page.headers
        csrf = json.loads(page.text.split("id='gj-server'>", 1)[1].split("</script>", 1)[0])["csrf"]
        body = {"id": "a3", "claim_id": "c0", "label": "UNSUPPORTED"}
        assert c.post("/api/decisions", json=body).status_code == 403
        assert c.post("/api/decisions", json=body, headers={"X-CSRF-Token": "x" + csrf}).status_code == 403
        other = {"X-CSRF-Token": csrf, "Origin": "http://evil.example"}
        assert c.post("/api/decisions", json=body, headers=other).status_code == 403
        assert c.post("/api/decisions", json=body, headers={"X-CSRF-Token": csrf}).status_code == 200
        assert c.post("/signout", data={"csrf": "wrong"}).status_code == 403
        assert c.post("/signout", data={"csrf": csrf}).status_code == 303
        assert c.get("/api/me").status_code == 401  # the session is gone


def test_hostile_text_is_escaped_on_the_served_pages(svc: dict[str, Any]) -> None:
    # hostile text in every field: the report's (answer id, claim id, texts, sources), a reviewer's name, notes
    name = "<img src=x onerror=alert(1)>&amp;'\""
    token = add_reviewer(svc["db"], name, adjudicator=True)
    claim = f"c0{HOSTILE}"
    for who, label in ((token, "SUPPORTED"), (svc["tokens"]["alice"], "UNSUPPORTED")):
        body = {"id": HOSTILE, "claim_id": claim, "label": label, "note": HOSTILE}
        r = httpx.post(svc["url"] + "/api/decisions", json=body, headers=bearer(who), timeout=10)
        assert r.status_code == 200 and r.json()["note"] == HOSTILE
    settle = {"id": HOSTILE, "claim_id": claim, "label": "UNSUPPORTED", "note": HOSTILE}
    assert httpx.post(svc["url"] + "/api/adjudications", json=settle, headers=bearer(token)).status_code == 200
    with httpx.Client(base_url=svc["url"], timeout=10) as c:
        c.post("/signin", data={"token": token})
        c.post("/api/queue/next", headers={"X-CSRF-Token": "?"})  # refused (no CSRF): the page takes work itself
        pages = {path: c.get(path).text for path in ("/", "/team")}
    assert name in [r["name"] for r in get(svc, "alice", "/api/team").json()["reviewers"]]
    assert any(d["id"] == HOSTILE for d in get(svc, "alice", "/api/disagreements").json())
    for path, text in pages.items():
        assert "<img src=x" not in text and "<b>bold</b>" not in text and "</script><img" not in text, path
    assert "&lt;img src=x onerror=alert(1)&gt;&amp;amp;&#x27;&quot;" in pages["/team"]  # the name, escaped
    assert pages["/team"].count("tr class='disagreement'") >= 1


def test_sign_in_is_rate_limited(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from groundjudge.serve.app import create_app
    from groundjudge.serve.db import open_db

    engine = open_db(f"sqlite:///{tmp_path / 'r.sqlite'}")
    with TestClient(create_app(engine, sign_in_limit=3)) as c:
        codes = [c.post("/signin", data={"token": f"gj_{i}_bad"}).status_code for i in range(4)]
        assert codes == [401, 401, 401, 429]
        assert c.get("/api/me", headers={"Authorization": "Bearer gj_x_y"}).status_code == 429


def test_behind_a_proxy_that_rewrites_host_the_origin_option_lets_reviewers_work(tmp_path: Path) -> None:
    # nginx's default proxy_pass sends "Host: 127.0.0.1:8765" while the browser says "Origin: https://review...":
    # sign-in and every decision were refused (403) as if from another site, with no way to allow them
    from fastapi.testclient import TestClient

    from groundjudge.serve.app import create_app
    from groundjudge.serve.db import open_db
    from groundjudge.serve.load import load_runs
    from groundjudge.serve.store import add_reviewer as add

    engine = open_db(f"sqlite:///{tmp_path / 'r.sqlite'}")
    load_runs(engine, [("run", [make_report("a")])])
    token = add(engine, "dora")
    public = {"Origin": "https://review.example.org"}
    body = {"id": "a", "claim_id": "c0", "label": "SUPPORTED"}
    with TestClient(create_app(engine), base_url="http://127.0.0.1:8765") as c:
        assert c.post("/signin", data={"token": token}, headers=public).status_code == 403  # no --origin: refused
    behind = create_app(engine, origins=["https://Review.example.org/"])
    with TestClient(behind, base_url="http://127.0.0.1:8765", follow_redirects=False) as c:
        assert c.post("/signin", data={"token": token}, headers=public).status_code == 303
        page = c.get("/").text
        csrf = json.loads(page.split("id='gj-server'>", 1)[1].split("</script>", 1)[0])["csrf"]
        assert c.post("/api/decisions", json=body, headers={**public, "X-CSRF-Token": csrf}).status_code == 200
        evil = {"Origin": "https://evil.example", "X-CSRF-Token": csrf}
        assert c.post("/api/decisions", json=body, headers=evil).status_code == 403  # another site still is not
        plain = {"Origin": "http://review.example.org"}  # not the scheme reviewers use
        assert c.post("/signin", data={"token": token}, headers=plain).status_code == 403
    engine.dispose()
    run = write_run(tmp_path / "run.jsonl", [make_report("a")])
    result = CliRunner().invoke(app, ["review", "serve", str(run), "--origin", "review.example.org"])
    assert result.exit_code == 2 and "is not an http(s) address" in result.output, result.output


def test_an_oversized_body_is_refused_before_it_is_read(tmp_path: Path) -> None:
    # FastAPI parses a body before it asks who sent it: anyone reaching the port made the service hold any size
    from fastapi.testclient import TestClient

    from groundjudge.serve.app import create_app
    from groundjudge.serve.db import open_db
    from groundjudge.serve.load import load_runs
    from groundjudge.serve.store import add_reviewer as add

    engine = open_db(f"sqlite:///{tmp_path / 'r.sqlite'}")
    load_runs(engine, [("run", [make_report("a")])])
    token = add(engine, "dora")
    MAX_BODY = 1 << 20  # serve.app.MAX_BODY
    big = json.dumps({"id": "a", "claim_id": "c0", "label": "SUPPORTED", "note": "x" * MAX_BODY}).encode()
    json_type = {"Content-Type": "application/json"}

    def chunked() -> Iterator[bytes]:
        for start in range(0, len(big), 65536):
            yield big[start : start + 65536]

    with TestClient(create_app(engine)) as c:
        for headers in ({}, bearer(token)):
            r = c.post("/api/decisions", content=big, headers={**headers, **json_type})
            assert r.status_code == 413, r.text
            assert "over 1048576 bytes" in r.json()["detail"] and r.headers["x-content-type-options"] == "nosniff"
            assert c.post("/api/decisions", content=chunked(), headers={**headers, **json_type}).status_code == 413
        assert c.post("/signin", content=b"token=" + b"x" * MAX_BODY).status_code == 413
        small = {"id": "a", "claim_id": "c0", "label": "SUPPORTED", "note": "x" * 10_000}
        assert c.post("/api/decisions", json=small, headers=bearer(token)).status_code == 200
        assert c.get("/api/me", headers=bearer(token)).json()["name"] == "dora"
    engine.dispose()


@pytest.mark.parametrize(
    ("db", "words"),
    [
        ("postgresql://gj@127.0.0.1:1/none", "unreachable"),
        ("sqlite:////no/such/folder/r.sqlite", "no folder /no/such/folder"),
        ("mysql+nosuchdriver://x", "cannot open the review database"),
    ],
)
def test_an_unreachable_database_is_a_clear_error(db: str, words: str, tmp_path: Path) -> None:
    run = write_run(tmp_path / "run.jsonl", [make_report("a")])
    for args in (["review", "add-reviewer", "x", "--db", db], ["review", "serve", str(run), "--db", db]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2, result.output
        assert words in result.output


def test_the_service_says_503_when_its_database_goes_away(postgres: str) -> None:
    import uuid

    import psycopg
    from fastapi.testclient import TestClient

    from groundjudge.serve.app import create_app
    from groundjudge.serve.db import open_db
    from groundjudge.serve.store import add_reviewer as add

    name = "gj_" + uuid.uuid4().hex[:12]
    with psycopg.connect(postgres, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    url = postgres.rsplit("/", 1)[0] + "/" + name
    engine = open_db(url)
    token = add(engine, "dora")
    with TestClient(create_app(engine)) as c:
        assert c.get("/api/me", headers=bearer(token)).status_code == 200
        with psycopg.connect(postgres, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE {name} WITH (FORCE)")  # the database goes away under the service
        for path in ("/api/me", "/api/health"):
            r = c.get(path, headers=bearer(token))
            assert r.status_code == 503, r.text
            assert "the review database postgresql+psycopg://gj@127.0.0.1" in r.json()["detail"]
            assert "is unreachable" in r.json()["detail"]
    engine.dispose()


def test_history_pages_one_kind_at_a_time_without_repeats_or_loops(svc: dict[str, Any]) -> None:
    # Decisions and adjudications are numbered apart, and the history mixed both in time order: a client paging with
    # the last entry's n as its next 'after' got entries twice, and, when the last entry by time was an adjudication
    # with a small number, the same page for ever. One kind at a time pages exactly.
    for rid in ("a6", "a7"):
        for who, label in (("alice", "SUPPORTED"), ("bob", "UNSUPPORTED")):
            assert post(svc, who, {"id": rid, "claim_id": "c0", "label": label}).status_code == 200
        settle = {"id": rid, "claim_id": "c0", "label": "CONTRADICTED", "note": "settled"}
        assert post(svc, "carol", settle, "/api/adjudications").status_code == 200
    everything = get(svc, "alice", "/api/history?limit=10000").json()
    for kind in ("decision", "adjudication"):
        seen: list[int] = []
        after, pages = 0, 0
        while pages < 100:
            page = get(svc, "alice", f"/api/history?kind={kind}&after={after}&limit=2").json()
            if not page:
                break
            assert {e["kind"] for e in page} == {kind} and len(page) <= 2
            seen += [e["n"] for e in page]
            after, pages = page[-1]["n"], pages + 1
        assert seen == sorted({e["n"] for e in everything if e["kind"] == kind}), (kind, seen)
    assert get(svc, "alice", "/api/history?kind=vote").status_code == 422


def test_a_leaked_token_is_replaced_or_revoked_at_once_and_the_decisions_stay(svc: dict[str, Any]) -> None:
    # A team whose reviewer's token leaked, or who left, had no way to shut it but editing the database: the service
    # kept accepting it and any session signed in with it.
    from typer.testing import CliRunner

    from groundjudge.cli.root import app
    from groundjudge.serve import auth, db

    old = add_reviewer(svc["db"], "dave")
    svc["tokens"]["dave"] = old
    assert post(svc, "dave", {"id": "a3", "claim_id": "c1", "label": "SUPPORTED"}).status_code == 200
    engine = db.open_db(svc["db"])
    signed = auth.check_token(engine, old)
    assert signed is not None
    cookie, _ = auth.new_session(engine, signed)
    command = ["review", "new-token", "dave", "--db", svc["db"]]
    result = CliRunner().invoke(app, command)
    assert result.exit_code == 0, result.output
    new = result.stdout.strip().splitlines()[-1]
    assert new.startswith("gj_") and new != old
    assert get(svc, "dave", "/api/me").status_code == 401  # the running service refuses the old token now
    assert auth.check_session(engine, cookie) is None  # and every session signed in with it
    svc["tokens"]["dave"] = new
    assert get(svc, "dave", "/api/me").status_code == 200
    result = CliRunner().invoke(app, [*command, "--revoke"])
    assert result.exit_code == 0 and "token revoked and signed out" in " ".join(result.output.split()), result.output
    assert get(svc, "dave", "/api/me").status_code == 401
    history = get(svc, "alice", "/api/history?kind=decision&limit=10000").json()
    assert any(e["reviewer"] == "dave" and e["id"] == "a3" for e in history)  # what dave decided stays
    result = CliRunner().invoke(app, ["review", "new-token", "nobody", "--db", svc["db"]])
    assert result.exit_code == 2 and "no reviewer named 'nobody'" in result.output, result.output


def test_a_valid_token_is_never_refused_by_the_sign_in_limit(tmp_path: Path) -> None:
    # the limit counts failures: a flood of bad tokens (from one address, or from more addresses than the table holds,
    # which then share one bucket) refused every reviewer's valid token with 429 for as long as the flood went on
    from fastapi.testclient import TestClient

    from groundjudge.serve.app import create_app
    from groundjudge.serve.db import open_db
    from groundjudge.serve.load import load_runs
    from groundjudge.serve.store import add_reviewer as add

    engine = open_db(f"sqlite:///{tmp_path / 'r.sqlite'}")
    load_runs(engine, [("run", [make_report("a")])])
    token = add(engine, "dora")
    service = create_app(engine, sign_in_limit=2)
    with TestClient(service, follow_redirects=False) as c:
        bad = [c.get("/api/me", headers={"Authorization": f"Bearer gj_{i}_bad"}).status_code for i in range(3)]
        assert bad == [401, 401, 429]
        assert c.post("/signin", data={"token": "gj_x_bad"}).status_code == 429  # a bad one still waits
        me = c.get("/api/me", headers={"Authorization": f"Bearer {token}"})
        assert me.status_code == 200 and me.json()["name"] == "dora"
        assert c.post("/signin", data={"token": token}).status_code == 303
        assert c.get("/api/me", headers={"Authorization": "Bearer gj_y_bad"}).status_code == 429  # still counted


def test_a_port_in_use_is_a_clear_error_before_the_database_is_touched(tmp_path: Path) -> None:
    """'review serve' on a port another program listens on loaded the runs into the database, then failed with
    uvicorn's own bind error. It now says so first (exit 2), naming the port, and leaves the database alone."""
    import socket

    run = write_run(tmp_path / "run.jsonl", [make_report("a")])
    db = tmp_path / "r.sqlite"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(app, ["review", "serve", str(run), "--db", str(db), "--port", str(port)])
    assert result.exit_code == 2, result.output
    assert f"cannot listen on 127.0.0.1 port {port}" in result.output and "--port" in result.output
    assert not db.exists()
    # an address of no interface here (TEST-NET-1): refused at bind, with no name lookup (no DNS on a fresh machine)
    bad = CliRunner().invoke(app, ["review", "serve", str(run), "--db", str(db), "--host", "192.0.2.1"])
    assert bad.exit_code == 2 and "cannot listen on 192.0.2.1 port 8765" in bad.output, bad.output
    assert not db.exists()
