"""The team's progress (``GET /api/team``): its numbers are a plain recount of the review's rows, on SQLite and
PostgreSQL, whatever the decisions (changed, withdrawn, several reviewers, at once), adjudications, takes and
revokes; they are running totals kept with each decision, so that no count reads a decision (every reviewer's page
polls it every 15 s: a recount of every decision took 0.5-0.9 s at 60,000); and a poll with nothing changed since
the last count reads no total."""

from __future__ import annotations

import threading
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, event, select

from tests.serve.conftest import need_serve

need_serve()

from fastapi.testclient import TestClient

from groundjudge.review.metrics import REVIEW_LABELS
from groundjudge.serve import db, load, progress, store
from groundjudge.serve.app import create_app
from tests.serve.conftest import bearer, make_report, new_database

SIZES = [1, 3, 2, 1, 2, 3]  # claims of each answer
CLAIMS = [(f"a{i}", f"c{j}") for i, n in enumerate(SIZES) for j in range(n)]
PEOPLE = ["ann", "bob", "cat"]


def recount(engine: Engine) -> dict[str, Any]:
    """The team's numbers counted from the raw rows, the long way: every decision read in order, the latest of each
    reviewer on each claim kept."""

    def rows(conn: Any) -> dict[str, list[Any]]:
        tables = {
            "decisions": select(db.decisions).order_by(db.decisions.c.id),
            "adjudications": select(db.adjudications.c.claim_pk),
            "assignments": select(db.assignments.c.reviewer_id, db.assignments.c.answer_pk),
            "claims": select(db.claims.c.id, db.claims.c.answer_pk),
            "answers": select(db.answers.c.id, db.answers.c.needed),
            "reviewers": select(db.reviewers).order_by(db.reviewers.c.id),
        }
        return {k: list(conn.execute(q)) for k, q in tables.items()}

    got = db.read(engine, rows)
    answer_of = {c.id: c.answer_pk for c in got["claims"]}
    size = Counter(answer_of.values())
    needed = {a.id: a.needed for a in got["answers"]}
    latest: dict[tuple[int, int], str | None] = {}
    for d in got["decisions"]:
        latest[d.claim_pk, d.reviewer_id] = d.label
    labels: dict[int, dict[int, str]] = defaultdict(dict)  # claim -> reviewer -> their verdict
    for (claim, reviewer), label in latest.items():
        if label is not None:
            labels[claim][reviewer] = label
    settled = {a.claim_pk for a in got["adjudications"]}
    disputed = {c for c, by in labels.items() if len(set(by.values())) > 1}
    reviewers = []
    for r in got["reviewers"]:
        mine = [a.answer_pk for a in got["assignments"] if a.reviewer_id == r.id]
        verdicts = Counter(answer_of[c] for c, by in labels.items() if r.id in by)
        reviewers.append(
            {
                "name": r.name,
                "role": r.role,
                "answers_assigned": len(mine),
                "answers_done": sum(verdicts[a] >= size[a] for a in mine),
                "claims_assigned": sum(size[a] for a in mine),
                "claims_decided": sum(verdicts.values()),
                "disagreements": sum(1 for c in disputed if r.id in labels[c]),
            }
        )
    two = [c for c, by in labels.items() if len(by) >= 2]
    queue = {
        "answers": len(size),
        "claims": len(answer_of),
        "overlap_answers": sum(n > 1 for n in needed.values()),
        "slots": sum(needed.values()),
        "slots_assigned": len(got["assignments"]),
        "claims_decided": len(labels),
        "claims_complete": sum(len(by) >= needed[answer_of[c]] for c, by in labels.items()),
        "claims_double_reviewed": len(two),
        "claims_agreed": sum(c not in disputed for c in two),
        "disagreements_open": len(disputed - settled),
        "disagreements_settled": len(disputed & settled),
    }
    return {"reviewers": reviewers, "queue": queue}


@pytest.fixture(params=["sqlite", "postgresql"])
def review(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, Any]]:
    engine = db.open_db(new_database(request.param, request, tmp_path))
    load.load_runs(engine, [("run", [make_report(f"a{i}", n_claims=n) for i, n in enumerate(SIZES)])])
    tokens = {name: store.add_reviewer(engine, name) for name in PEOPLE}
    tokens["judge"] = store.add_reviewer(engine, "judge", role="adjudicator")
    ids = {r["name"]: r["id"] for r in store.reviewers(engine)}
    yield {"engine": engine, "tokens": tokens, "ids": ids}
    engine.dispose()


def clear(engine: Engine, needed: list[int]) -> None:
    """The review back to no decision, adjudication or assignment; each answer needing ``needed`` reviewers."""

    def run(conn: Any) -> None:
        for table in (db.decisions, db.adjudications, db.assignments):
            conn.execute(table.delete())
        for i, n in enumerate(needed):
            conn.execute(db.answers.update().where(db.answers.c.answer_id == f"a{i}").values(needed=n))
        db.rebuild_tallies(conn)

    db.write(engine, run)


claim = st.sampled_from(CLAIMS)
person = st.sampled_from(PEOPLE)
step = st.one_of(
    st.tuples(st.just("decide"), person, claim, st.sampled_from([*REVIEW_LABELS, None])),
    st.tuples(st.just("adjudicate"), st.just("judge"), claim, st.sampled_from(REVIEW_LABELS)),
    st.tuples(st.just("take"), person, st.integers(1, 4)),
    st.tuples(st.just("revoke"), person),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    needed=st.lists(st.sampled_from([1, 2]), min_size=len(SIZES), max_size=len(SIZES)),
    rounds=st.lists(st.lists(step, max_size=12), min_size=1, max_size=3),
)
def test_the_team_numbers_are_a_recount_of_the_rows(
    review: dict[str, Any], needed: list[int], rounds: list[list[tuple[Any, ...]]]
) -> None:
    engine, ids = review["engine"], review["ids"]
    clear(engine, needed)
    with TestClient(create_app(engine)) as c:  # a new service: its kept count starts empty
        for steps in rounds:
            for kind, who, *what in steps:
                if kind == "decide":
                    (answer, claim_id), label = what
                    store.decide(engine, ids[who], answer, claim_id, label)
                elif kind == "adjudicate":
                    (answer, claim_id), label = what
                    store.adjudicate(engine, ids[who], answer, claim_id, label)
                elif kind == "take":
                    store.take_work(engine, ids[who], what[0])
                else:
                    store.new_token(engine, who, revoke=True)
            expected = recount(engine)
            for _ in range(2):  # counted, then kept
                r = c.get("/api/team", headers=bearer(review["tokens"]["judge"]))
                assert r.status_code == 200, r.text
                assert r.json() == expected
    db.write(engine, db.rebuild_tallies)  # the migration's count from scratch gives the running totals' numbers
    assert progress.team(engine) == recount(engine)


def test_a_count_reads_no_decision(tmp_path: Path) -> None:
    engine = db.open_db(f"sqlite:///{tmp_path / 'r.sqlite'}")
    load.load_runs(engine, [("run", [make_report(f"a{i}") for i in range(4)])])
    token = store.add_reviewer(engine, "ann")
    ann = store.reviewers(engine)[0]["id"]
    store.take_work(engine, ann, 2)
    store.decide(engine, ann, "a0", "c0", "SUPPORTED")
    said: list[str] = []

    @event.listens_for(engine, "before_cursor_execute")
    def seen(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        said.append(statement)

    def poll() -> tuple[dict[str, Any], list[str], list[str]]:
        said.clear()
        r = c.get("/api/team", headers=bearer(token))
        assert r.status_code == 200, r.text
        return r.json(), [s for s in said if "gj_decisions" in s], [s for s in said if "gj_tallies" in s]

    with TestClient(create_app(engine)) as c:
        first, decisions, counting = poll()
        assert first["queue"]["claims_decided"] == 1 and counting
        mark = decisions
        assert len(mark) == 1 and "count(" in mark[0].lower()  # the change mark (a count of rows): nothing else
        for _ in range(3):
            again, decisions, read = poll()
            assert again == first
            assert decisions == mark and not read  # the change mark alone: no count
        store.decide(engine, ann, "a0", "c1", "UNSUPPORTED")
        later, decisions, read = poll()
        assert later["queue"]["claims_decided"] == 2 and len(read) == len(counting)  # counted again,
        assert decisions == mark  # from the running totals: no decision read
        store.take_work(engine, ann, 3)  # a0 done, a1 open: two more
        taken, decisions, read = poll()
        assert taken["reviewers"][0]["answers_assigned"] == 4 and len(read) == len(counting)
        assert taken["reviewers"][0]["answers_done"] == 1 and decisions == mark
    engine.dispose()


def test_a_kept_count_is_counted_again_once_it_is_a_minute_old(tmp_path: Path) -> None:
    # the change mark does not read the reviewers each answer needs (a later load with another overlap share
    # changes them, and reading them reads every report's row): a count is kept a minute at most
    engine = db.open_db(f"sqlite:///{tmp_path / 'r.sqlite'}")
    load.load_runs(engine, [("run", [make_report(f"a{i}") for i in range(4)])])
    now = [0.0]
    team = progress.TeamProgress(engine, fresh_s=60.0, clock=lambda: now[0])
    assert team()["queue"]["overlap_answers"] == 0
    load.load_runs(engine, [("run", [make_report(f"a{i}") for i in range(4)])], overlap=1.0)
    now[0] = 59.0
    assert team()["queue"]["overlap_answers"] == 0  # kept
    now[0] = 60.0
    assert team()["queue"] == progress.team(engine)["queue"] and team()["queue"]["overlap_answers"] == 4
    engine.dispose()


def test_the_claims_of_each_answer_are_counted_in_one_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the store's assignment and windows and the team's progress read one GROUP BY (db.claim_sizes), not copies of it
    engine = db.open_db(f"sqlite:///{tmp_path / 'r.sqlite'}")
    load.load_runs(engine, [("run", [make_report(f"a{i}", n_claims=i + 1) for i in range(3)])])
    store.add_reviewer(engine, "ann")
    ann = store.reviewers(engine)[0]["id"]
    real, calls = db.claim_sizes, []
    monkeypatch.setattr(db, "claim_sizes", lambda: calls.append(1) or real())
    for ask in (
        lambda: store.take_work(engine, ann, 2),
        lambda: store.my_queue(engine, ann),
        lambda: store.reviewer_window(engine, ann),
        lambda: progress.team(engine),
    ):
        calls.clear()
        ask()
        assert calls, ask
    mine = store.my_queue(engine, ann)
    assert mine["claims_assigned"] == sum(a["claims"] for a in mine["answers"]) > 2
    assert progress.team(engine)["reviewers"][0]["claims_assigned"] == mine["claims_assigned"]
    engine.dispose()


def test_decisions_made_at_once_keep_the_totals_a_recount(review: dict[str, Any]) -> None:
    # reviewers deciding, changing and withdrawing verdicts on the same claims from several threads at once (on
    # PostgreSQL their transactions overlap; a decision numbered earlier may commit later), an adjudicator settling
    engine, ids = review["engine"], review["ids"]
    clear(engine, [2] * len(SIZES))
    errors: list[BaseException] = []

    def work(who: str, seed: int) -> None:
        try:
            for i in range(24):
                answer, claim_id = CLAIMS[(seed * 7 + i * 5) % len(CLAIMS)]
                label = [*REVIEW_LABELS, None][(seed + i) % 4]
                if who == "judge":
                    store.adjudicate(engine, ids[who], answer, claim_id, label or "SUPPORTED")
                else:
                    store.decide(engine, ids[who], answer, claim_id, label)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(w, n)) for n, w in enumerate([*PEOPLE, "ann", "judge"])]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert progress.team(engine) == recount(engine)


def test_the_migration_counts_an_older_database_once(tmp_path: Path) -> None:
    # a database of schema 1 (decisions, no running totals) gets them from its decisions when it is opened
    engine = db.open_db(f"sqlite:///{tmp_path / 'r.sqlite'}")
    load.load_runs(engine, [("run", [make_report(f"a{i}", n_claims=n) for i, n in enumerate(SIZES)])])
    for name in PEOPLE:
        store.add_reviewer(engine, name)
    ids = [r["id"] for r in store.reviewers(engine)]
    for i, (answer, claim_id) in enumerate(CLAIMS * 2):
        store.decide(engine, ids[i % 3], answer, claim_id, [*REVIEW_LABELS, None][i % 4])
    expected = recount(engine)
    assert progress.team(engine) == expected

    def older(conn: Any) -> None:
        db.tallies.drop(conn)
        db.verdicts.drop(conn)
        conn.execute(db.schema.update().values(version=1))

    db.write(engine, older)
    engine.dispose()
    engine = db.open_db(f"sqlite:///{tmp_path / 'r.sqlite'}")
    assert db.read(engine, db.version) == 2 and progress.team(engine) == expected
    engine.dispose()
