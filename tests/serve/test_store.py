"""The review database without the web server: concurrent assignment never gives a slot to two reviewers, the
schema version is kept and a newer one refused, a run is loaded once, and an answer id of another run is refused."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from tests.serve.conftest import need_serve

need_serve()

from groundjudge.errors import InputError
from groundjudge.review.metrics import join_reviews, parse_reviews
from groundjudge.serve import db, load, progress, store
from tests.serve.conftest import make_report, new_database


def test_concurrent_assignment_gives_each_slot_to_one_reviewer(tmp_path: Path) -> None:
    engine = db.open_db(f"sqlite:///{tmp_path / 'r.sqlite'}")
    reports = [make_report(f"a{i:02d}") for i in range(24)]
    load.load_runs(engine, [("run", reports)], overlap=0.5)
    for i in range(4):
        store.add_reviewer(engine, f"r{i}")
    people = [r["id"] for r in store.reviewers(engine)]
    barrier = threading.Barrier(len(people))

    def take(rid: int) -> None:
        barrier.wait()
        for _ in range(4):
            store.take_work(engine, rid, batch=100)

    threads = [threading.Thread(target=take, args=(rid,)) for rid in people]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    given: Counter[str] = Counter()
    for rid in people:
        given.update(a["id"] for a in store.my_queue(engine, rid)["answers"])
    for r in reports:
        assert given[r.id] == (2 if load.in_overlap(r.id, 0.5) else 1), r.id


def test_a_run_is_loaded_once_and_another_runs_answer_id_is_refused(tmp_path: Path) -> None:
    engine = db.open_db(f"sqlite:///{tmp_path / 'r.sqlite'}")
    first = load.load_runs(engine, [("run", [make_report("a"), make_report("b")])])
    again = load.load_runs(engine, [("run", [make_report("a"), make_report("b")])])
    assert (first.added, first.answers_added, again.added, again.kept, again.answers) == (1, 2, 0, 1, 2)
    with pytest.raises(InputError, match="answer 'a' of other is already in this review database from run with"):
        load.load_runs(engine, [("other", [make_report("a", n_claims=3)])])
    with pytest.raises(InputError, match="--overlap must be between 0 and 1"):
        load.load_runs(engine, [("run", [])], overlap=1.5)


def test_a_run_scored_again_with_the_same_claims_and_versions_but_other_judgments_is_refused(tmp_path: Path) -> None:
    # its identity (ids, claim texts, versions) is the loaded run's: it was kept silently, and the team went on
    # reviewing the old verdicts
    engine = db.open_db(f"sqlite:///{tmp_path / 'r.sqlite'}")
    load.load_runs(engine, [("run", [make_report("a"), make_report("b")])])
    b = make_report("b")
    b.claims[0].reason = "the judge's reason this time"  # another verdict's reason, the queue's order the same
    again = [make_report("a"), b]
    with pytest.raises(InputError, match="answer 'b' of run2 is already in this review database from run with"):
        load.load_runs(engine, [("run2", again)])
    assert load.load_runs(engine, [("run", [make_report("b"), make_report("a")])]).kept == 1  # the same: kept


def test_a_run_holding_an_answer_id_twice_is_refused_at_once_and_loads_nothing(tmp_path: Path) -> None:
    engine = db.open_db(f"sqlite:///{tmp_path / 'r.sqlite'}")
    started = time.monotonic()
    for twice in ([make_report("a"), make_report("a")], [make_report("a"), make_report("a", n_claims=3)]):
        with pytest.raises(InputError, match="answer 'a' is in run twice"):
            load.load_runs(engine, [("run", [make_report("b"), *twice])])
    assert time.monotonic() - started < 5  # refused, not retried as a race for a unique id
    assert load.load_runs(engine, [("run", [make_report("b")])]).answers == 1


def test_a_run_served_again_with_other_options_or_grown_keeps_its_decisions(tmp_path: Path) -> None:
    # the run's identity hashes its queue in order: serving it again with another --order or --every-answer, or
    # after score --resume added answers, was refused as "another run" (the advice: another --db, a new review)
    engine = db.open_db(f"sqlite:///{tmp_path / 'r.sqlite'}")
    labels = ("UNSUPPORTED", "CONTRADICTED", "SUPPORTED")
    reports = [make_report(f"a{i}", n_claims=1 + i % 3, label=labels[i % 3]) for i in range(6)]
    for i, r in enumerate(reports):
        r.scores.combined = 0.1 * i
    passed = make_report("p")
    passed.verdict = "PASS"
    orders = {o: [r.id for r in load.queue([("run", reports)], o)[0][1]] for o in ("risk", "informative")}
    assert orders["risk"] != orders["informative"]  # the two orders differ for this run
    load.load_runs(engine, [("run", [*reports, passed])])
    store.add_reviewer(engine, "ann")
    ann = store.reviewers(engine)[0]["id"]
    store.decide(engine, ann, "a0", "c0", "SUPPORTED")
    again = load.load_runs(engine, [("run", [*reports, passed])], order="informative")
    assert (again.added, again.kept, again.answers_added, again.answers) == (0, 1, 0, 6)
    wider = load.load_runs(engine, [("run", [*reports, passed])], only_flagged=False)
    assert (wider.added, wider.answers_added, wider.answers) == (1, 1, 7)  # the passing answer joins the queue
    grown = load.load_runs(engine, [("run", [*reports, passed, make_report("new")])], only_flagged=False)
    assert (grown.answers_added, grown.answers) == (1, 8)
    assert [a["id"] for a in store.my_decisions(engine, ann)] == ["a0"]  # kept
    store.take_work(engine, ann, batch=100)
    assert [a["id"] for a in store.my_queue(engine, ann)["answers"]][-2:] == ["p", "new"]  # at the end
    changed = make_report("a1", n_claims=3)
    with pytest.raises(InputError, match="answer 'a1' of run is already in this review database from run with"):
        load.load_runs(engine, [("run", [changed])])


def test_the_schema_version_is_kept_and_a_newer_one_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'r.sqlite'}"
    engine = db.open_db(url)
    assert db.read(engine, db.version) == db.SCHEMA_VERSION
    db.open_db(url)  # opening again migrates nothing
    db.write(engine, lambda conn: conn.execute(db.schema.update().values(version=db.SCHEMA_VERSION + 1)))
    with pytest.raises(db.ReviewDatabaseError, match="knows up to"):
        db.open_db(url)
    with pytest.raises(db.ReviewDatabaseError, match="no review database"):
        db.open_db(f"sqlite:///{tmp_path / 'none.sqlite'}", migrate=False)


def test_sessions_end_and_expired_ones_are_deleted(tmp_path: Path) -> None:
    from groundjudge.serve import auth

    engine = db.open_db(f"sqlite:///{tmp_path / 'r.sqlite'}")
    token = store.add_reviewer(engine, "eve")
    who = auth.check_token(engine, token)
    assert who is not None and auth.check_token(engine, token + "x") is None
    old, _ = auth.new_session(engine, who)
    db.write(engine, lambda conn: conn.execute(db.sessions.update().values(expires_at="2000-01-01T00:00:00.000+00:00")))
    assert auth.check_session(engine, old) is None  # expired
    live, csrf = auth.new_session(engine, who)  # and the expired one is deleted
    assert db.read(engine, lambda conn: conn.execute(db.sessions.select()).all()).__len__() == 1
    signed = auth.check_session(engine, live)
    assert signed is not None and signed.csrf == csrf and auth.csrf_ok(signed, csrf) and not auth.csrf_ok(signed, None)
    auth.end_session(engine, live)
    assert auth.check_session(engine, live) is None


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_text_the_database_cannot_hold_is_refused_alike_on_both_databases(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    # PostgreSQL's text holds no NUL: a note with one was "the review database is unreachable" (503, which the page
    # retries for ever) there and stored on SQLite; a lone surrogate was a 500 on both
    engine = db.open_db(new_database(kind, request, tmp_path))
    hostile = make_report("a")
    hostile.claims[0].claim.text = "a claim with a NUL \x00 in it"
    load.load_runs(engine, [("run", [hostile])])
    store.add_reviewer(engine, "ann")
    store.add_reviewer(engine, "adj", role="adjudicator")
    ann, adj = (r["id"] for r in store.reviewers(engine))
    for field, value in [
        ("note", "x\x00y"),
        ("note", "x\ud800y"),
        ("request_id", "r\x00"),
        ("request_id", "r" * 81),
        ("id", "a\x00"),
        ("claim_id", "\udc00"),
    ]:
        args = {"answer_id": "a", "claim_id": "c0", "note": "", "request_id": None} | {
            {"id": "answer_id"}.get(field, field): value
        }
        with pytest.raises(InputError, match=f"field '{field}'"):
            store.decide(engine, ann, label="SUPPORTED", **args)
        with pytest.raises(InputError, match=f"field '{field}'"):
            store.adjudicate(engine, adj, label="SUPPORTED", **args)
    assert store.decide(engine, ann, "a", "c0", "SUPPORTED", note="fine \u2028 \U0001f9ea")["duplicate"] is False
    # the export writes the report's own text (the claims table holds U+FFFD in its place), so that the decision
    # joins its claim of the run: with U+FFFD, metrics, calibrate and tune counted it as a review of another run
    assert store.export_lines(engine)[0]["claim"] == "a claim with a NUL \x00 in it"
    joined = join_reviews([hostile], parse_reviews(store.dumps_line(line) for line in store.export_lines(engine)))
    assert len(joined.matched) == 1 and not joined.unmatched
    with pytest.raises(InputError, match="holds a NUL character"):
        load.load_runs(engine, [("other", [make_report("b\x00")])])
    engine.dispose()


def test_a_cleared_verdict_and_a_note_alone_are_exported_as_no_label(tmp_path: Path) -> None:
    """The export left decisions without a verdict out: a reviewer who cleared a verdict was missing from the next
    export, so that export joined to an earlier one (two days' files given to tune, metrics or calibrate) let the
    withdrawn verdict teach; a note or citation choice made without a verdict was not exported at all. Both are now
    lines with a null label, as the static page writes them, which every reader takes for no label and for the
    withdrawal of that reviewer's earlier verdict."""
    from groundjudge.review.metrics import parse_reviews

    engine = db.open_db(f"sqlite:///{tmp_path / 'r.sqlite'}")
    load.load_runs(engine, [("run", [make_report("a")])])
    store.add_reviewer(engine, "ann")
    store.add_reviewer(engine, "bob")
    ann, bob = (r["id"] for r in store.reviewers(engine))
    store.decide(engine, ann, "a", "c0", "SUPPORTED")
    store.decide(engine, bob, "a", "c1", None, note="the source is ambiguous")
    day1 = [store.dumps_line(x) for x in store.export_lines(engine)]
    assert {(r.claim_id, r.label) for r in parse_reviews(day1)} == {("c0", "SUPPORTED")}
    store.decide(engine, ann, "a", "c0", None)  # withdrawn
    lines = store.export_lines(engine)
    assert [(x["claim_id"], x["reviewer"], x["label"], x["note"], "status" in x) for x in lines] == [
        ("c0", "ann", None, "", False),
        ("c1", "bob", None, "the source is ambiguous", False),
    ]
    day2 = [store.dumps_line(x) for x in lines]
    assert parse_reviews(day1 + day2) == []  # the withdrawn verdict teaches nothing


def test_a_decision_stored_later_is_never_stamped_before_the_one_it_replaces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The service's latest decision is the one stored last; readers of its exports take the one with the latest
    ``decided_at`` (``review.metrics.review_labels``). A clock that stepped back between two decisions (a time
    correction, or service processes whose clocks differ on one PostgreSQL) stamped the newer one earlier, so two
    exports put together taught the older one. A decision is now stamped no earlier than the one it replaces."""
    engine = db.open_db(f"sqlite:///{tmp_path / 'r.sqlite'}")
    load.load_runs(engine, [("run", [make_report("a")])])
    store.add_reviewer(engine, "ann")
    store.add_reviewer(engine, "adj", role="adjudicator")
    ann, adj = (r["id"] for r in store.reviewers(engine))
    clock = ["2026-11-30T11:00:00.000+00:00"]
    monkeypatch.setattr(db, "now", lambda: clock[0])
    store.decide(engine, ann, "a", "c0", "SUPPORTED")
    store.decide(engine, ann, "a", "c1", "SUPPORTED")
    store.adjudicate(engine, adj, "a", "c1", "UNSUPPORTED")
    day1 = [store.dumps_line(x) for x in store.export_lines(engine)]
    clock[0] = "2026-11-30T10:00:00.000+00:00"  # the clock steps back
    store.decide(engine, ann, "a", "c0", "CONTRADICTED")
    store.adjudicate(engine, adj, "a", "c1", "CONTRADICTED")
    assert [d["label"] for d in store.my_decisions(engine, ann)] == ["CONTRADICTED", "SUPPORTED"]  # the service's
    day2 = [store.dumps_line(x) for x in store.export_lines(engine)]
    for joined in (day1 + day2, day2 + day1):  # in either order, as the service has them
        assert {r.claim_id: r.label for r in parse_reviews(joined)} == {"c0": "CONTRADICTED", "c1": "CONTRADICTED"}
    clock[0] = "2026-11-30T12:00:00.000+00:00"  # and a clock that goes on is used as it is
    assert store.decide(engine, ann, "a", "c0", "UNSUPPORTED")["decided_at"] == clock[0]


def test_an_adjudication_is_exported_where_no_reviewer_verdict_stands(tmp_path: Path) -> None:
    # settled through the API on a claim nobody decided, or whose verdicts were cleared afterwards: acknowledged
    # (200) and in the history, but missing from the export that metrics, calibrate and tune read
    from groundjudge.review.metrics import parse_reviews

    engine = db.open_db(f"sqlite:///{tmp_path / 'r.sqlite'}")
    load.load_runs(engine, [("run", [make_report("a"), make_report("b")])])
    store.add_reviewer(engine, "ann")
    store.add_reviewer(engine, "adj", role="adjudicator")
    ann, adj = (r["id"] for r in store.reviewers(engine))
    store.decide(engine, ann, "b", "c1", "CONTRADICTED")
    store.decide(engine, ann, "b", "c0", "SUPPORTED")
    store.adjudicate(engine, adj, "b", "c0", "UNSUPPORTED", note="settled")
    store.decide(engine, ann, "b", "c0", None)  # cleared after it was settled
    store.adjudicate(engine, adj, "a", "c1", "CONTRADICTED", note="nobody decided it")
    lines = store.export_lines(engine)
    assert [(x["id"], x["claim_id"], x["reviewer"], x["label"], x.get("adjudicated", False)) for x in lines] == [
        ("a", "c1", "adj", "CONTRADICTED", True),  # in queue order
        ("b", "c0", "ann", None, False),  # ann's cleared verdict: no label, the withdrawal of her earlier one
        ("b", "c0", "adj", "UNSUPPORTED", True),
        ("b", "c1", "ann", "CONTRADICTED", False),
    ]
    final = {(r.id, r.claim_id): r.label for r in parse_reviews(store.dumps_line(x) for x in lines)}
    assert final == {("a", "c1"): "CONTRADICTED", ("b", "c0"): "UNSUPPORTED", ("b", "c1"): "CONTRADICTED"}
    assert {x["claim"] for x in lines if x["id"] == "a"} == {"Claim 1 of a."}


def test_review_export_says_what_its_lines_are(tmp_path: Path) -> None:
    """'wrote OUT (N decisions)' counted every line: null-label lines (a cleared verdict, a note alone) and
    adjudications too, and a disputed claim's lines as decisions like any other. It now says what it wrote."""
    from typer.testing import CliRunner

    from groundjudge.cli.root import app

    url = f"sqlite:///{tmp_path / 'r.sqlite'}"
    engine = db.open_db(url)
    load.load_runs(engine, [("run", [make_report("a", n_claims=4)])])
    for name, role in (("ann", "reviewer"), ("bob", "reviewer"), ("adj", "adjudicator")):
        store.add_reviewer(engine, name, role=role)
    ann, bob, adj = (r["id"] for r in store.reviewers(engine))
    store.decide(engine, ann, "a", "c0", "SUPPORTED")
    store.decide(engine, bob, "a", "c0", "SUPPORTED")
    store.decide(engine, ann, "a", "c1", "SUPPORTED")  # disputed, open
    store.decide(engine, bob, "a", "c1", "UNSUPPORTED")
    store.decide(engine, ann, "a", "c2", "SUPPORTED")  # disputed, then settled
    store.decide(engine, bob, "a", "c2", "CONTRADICTED")
    store.adjudicate(engine, adj, "a", "c2", "CONTRADICTED")
    store.decide(engine, ann, "a", "c3", None, note="ambiguous source")
    store.decide(engine, bob, "a", "c3", None, citation="WRONG")
    engine.dispose()
    out = tmp_path / "reviews.jsonl"
    result = CliRunner().invoke(app, ["review", "export", "--db", url, "--out", str(out)])
    assert result.exit_code == 0, result.output
    said = " ".join(result.stderr.split())
    assert len(out.read_text(encoding="utf-8").splitlines()) == 9
    assert (
        f"wrote {out}: 6 verdicts, 2 decisions without a verdict (cleared, or a note or citation choice alone), "
        "1 adjudication, 1 disputed claim" in said
    ), said
    assert "9 decisions" not in said


def test_the_export_of_many_claims_whose_text_held_a_nul_reads_their_reports_in_bounded_lists(tmp_path: Path) -> None:
    """The export looked up the reports of every answer with a U+FFFD claim in one IN list: past the database's
    limit on bound parameters (999 in SQLite before 3.32 and in builds that keep its old default; 65,535 for
    psycopg) ``review export``, the service's export and its metrics failed with "too many SQL variables". It reads
    them in lists of at most 500, as the load does."""
    import sqlite3

    from sqlalchemy import event

    engine = db.open_db(f"sqlite:///{tmp_path / 'review.sqlite'}")

    @event.listens_for(engine, "connect")
    def old_limit(conn: Any, _: Any) -> None:
        conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 999)

    engine.dispose()  # the pooled connections go: every new one has the old limit
    reports = []
    for i in range(1001):
        r = make_report(f"a{i}", n_claims=1)
        r.claims[0].claim.text = f"claim {i} with a NUL \x00 in it"
        reports.append(r)
    load.load_runs(engine, [("run", reports)])
    store.add_reviewer(engine, "ann")
    (ann,) = (r["id"] for r in store.reviewers(engine))
    for r in reports:
        store.decide(engine, ann, r.id, "c0", "SUPPORTED")
    lines = store.export_lines(engine)
    assert [line["claim"] for line in lines] == [r.claims[0].claim.text for r in reports]
    engine.dispose()


def test_a_reviewers_page_reads_the_export_of_their_own_answers_only(tmp_path: Path) -> None:
    # the page counts the team's decisions on the reviewer's answers in its header; it read and parsed the whole
    # team's export on every load (seconds a page on a run of 10,000 answers reviewed by two)
    engine = db.open_db(f"sqlite:///{tmp_path / 'r.sqlite'}")
    load.load_runs(engine, [("run", [make_report(f"a{i}") for i in range(6)])], overlap=0.5)
    for name in ("ann", "bob", "cat"):
        store.add_reviewer(engine, name)
    store.add_reviewer(engine, "adj", role="adjudicator")
    ann, bob, cat, adj = (r["id"] for r in store.reviewers(engine))
    for rid in (ann, bob, cat):
        store.take_work(engine, rid, 2)
    for rid, label in ((ann, "SUPPORTED"), (bob, "CONTRADICTED"), (cat, "UNSUPPORTED")):
        for a in store.my_queue(engine, rid)["answers"]:
            for c in ("c0", "c1"):
                store.decide(engine, rid, a["id"], c, label if c == "c0" else None, note=f"{rid}")
    store.decide(engine, ann, "a5", "c0", "UNSUPPORTED")  # a claim of an answer not hers
    disputed = next(x for x in store.export_lines(engine) if x["status"] == "disputed")
    store.adjudicate(engine, adj, disputed["id"], disputed["claim_id"], "SUPPORTED")
    every = store.export_lines(engine)
    for rid in (ann, bob, cat, adj):
        mine = {a["id"] for a in store.my_queue(engine, rid)["answers"]}
        assert store.export_lines(engine, assigned_to=rid) == [x for x in every if x["id"] in mine]
    assert store.export_lines(engine, assigned_to=adj) == []


def test_a_revoked_reviewers_unfinished_answers_go_back_to_the_queue(tmp_path: Path) -> None:
    # a reviewer who left (new-token --revoke) kept the answers they were given: no one else was ever given them
    engine = db.open_db(f"sqlite:///{tmp_path / 'r.sqlite'}")
    reports = [make_report(f"a{i}") for i in range(3)]
    load.load_runs(engine, [("run", reports)], overlap=1.0)  # every answer goes to two reviewers
    for name in ("ann", "bob", "cat"):
        store.add_reviewer(engine, name)
    ann, bob, cat = (r["id"] for r in store.reviewers(engine))
    store.take_work(engine, ann, 3)
    store.take_work(engine, bob, 1)  # a0's second slot
    for c in ("c0", "c1"):
        store.decide(engine, ann, "a1", c, "SUPPORTED")  # a1 finished
    store.decide(engine, ann, "a2", "c0", "SUPPORTED", note="half done")  # a2 begun
    store.new_token(engine, "ann", revoke=True)

    def queue_of(rid: int) -> list[str]:
        return [a["id"] for a in store.my_queue(engine, rid)["answers"]]

    assert queue_of(ann) == ["a1"]  # what she finished stays hers
    assert queue_of(bob) == ["a0"]
    assert store.take_work(engine, cat, 3) == 3
    assert queue_of(cat) == ["a0", "a1", "a2"]
    assert store.take_work(engine, bob, 3) == 1
    assert queue_of(bob) == ["a0", "a2"]
    assert progress.team(engine)["queue"]["slots_assigned"] == 6
    assert [x["note"] for x in store.export_lines(engine) if x["reviewer"] == "ann"] == ["", "", "half done"]


def test_a_revoked_reviewers_freed_slot_leaves_the_answer_with_one_reviewer_to_a_later_load(tmp_path: Path) -> None:
    # the answer's other reviewer moves down to slot 0: a later load (another overlap) reads an answer with a slot 1
    # as given to two reviewers already, and keeps its share of the overlap
    engine = db.open_db(f"sqlite:///{tmp_path / 'r.sqlite'}")
    reports = [make_report("a0")]
    load.load_runs(engine, [("run", reports)], overlap=1.0)  # a0 goes to two reviewers
    for name in ("ann", "bob", "cat"):
        store.add_reviewer(engine, name)
    ann, bob, cat = (r["id"] for r in store.reviewers(engine))
    assert store.take_work(engine, ann, 1) == store.take_work(engine, bob, 1) == 1
    store.new_token(engine, "ann", revoke=True)  # a0 unfinished: ann's slot 0 freed, bob's is slot 0 now
    load.load_runs(engine, [("run", reports)], overlap=0.0)  # no overlap now: a0 needs its one reviewer, bob
    assert store.take_work(engine, cat, 1) == 0


def test_new_token_on_a_mistyped_database_says_so_and_makes_none(tmp_path: Path) -> None:
    # it made an empty review database at the mistyped path, then said that it had no such reviewer
    from typer.testing import CliRunner

    from groundjudge.cli.root import app

    missing = tmp_path / "reveiw.sqlite"
    result = CliRunner().invoke(app, ["review", "new-token", "ann", "--db", f"sqlite:///{missing}"])
    assert result.exit_code == 2 and "no review database at" in " ".join(result.output.split()), result.output
    assert not missing.exists()


def test_an_answer_whose_first_slot_was_freed_below_a_taken_one_is_given_that_slot(tmp_path: Path) -> None:
    # a revoke racing another reviewer's take_work on PostgreSQL can leave slot 1 taken and slot 0 free: the next
    # reviewer was given slot 1 (the count of slots taken), a unique-key conflict retried 30 times, then a 500 for
    # every reviewer whose queue reached that answer
    engine = db.open_db(f"sqlite:///{tmp_path / 'r.sqlite'}")
    load.load_runs(engine, [("run", [make_report("a0")])], overlap=1.0)
    for name in ("ann", "bob", "cat"):
        store.add_reviewer(engine, name)
    ann, bob, cat = (r["id"] for r in store.reviewers(engine))
    store.take_work(engine, ann, 1)
    store.take_work(engine, bob, 1)
    a = db.assignments
    db.write(engine, lambda conn: conn.execute(a.delete().where(a.c.reviewer_id == ann)))  # slot 0 freed only
    started = time.monotonic()
    assert store.take_work(engine, cat, 1) == 1
    assert time.monotonic() - started < 5
    slots = db.read(engine, lambda conn: sorted(conn.execute(select(a.c.slot, a.c.reviewer_id)).all()))
    assert [tuple(x) for x in slots] == [(0, cat), (1, bob)]


def test_decisions_sent_at_once_are_stamped_in_the_order_they_are_stored(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On PostgreSQL two decisions of one reviewer on one claim (two tabs, a second click before the first reply)
    overlap: the first was stamped, then stored after the second, which the service (latest by number) keeps while
    the export's readers (latest by ``decided_at``) took the other. The claim is locked before the stamp."""
    engine = db.open_db(new_database("postgresql", request, tmp_path))
    load.load_runs(engine, [("run", [make_report("a")])])
    store.add_reviewer(engine, "ann")
    (ann,) = (r["id"] for r in store.reviewers(engine))
    real, stamped = db.now, threading.Event()

    def slow_now() -> str:  # the first decision's clock is read, then it is held up before it is stored
        at = real()
        if threading.current_thread().name == "first":
            stamped.set()
            time.sleep(0.5)
        return at

    monkeypatch.setattr(db, "now", slow_now)
    first = threading.Thread(target=store.decide, args=(engine, ann, "a", "c0", "SUPPORTED"), name="first")
    first.start()
    assert stamped.wait(10)
    store.decide(engine, ann, "a", "c0", "CONTRADICTED")
    first.join()
    service = store.my_decisions(engine, ann)[0]["label"]
    exported = [store.dumps_line(x) for x in store.export_lines(engine)]
    every = db.read(engine, lambda c: list(c.execute(select(db.decisions).order_by(db.decisions.c.id))))
    assert [d.decided_at for d in every] == sorted(d.decided_at for d in every)
    assert {r.claim_id: r.label for r in parse_reviews(exported)} == {"c0": service}
    engine.dispose()
