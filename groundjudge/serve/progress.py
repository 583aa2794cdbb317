"""The team's progress (``GET /api/team``, the team page): the running totals the database keeps in step with each
decision and adjudication (:func:`groundjudge.serve.db.record_decision`: no count reads the decisions), with the
assignments, and kept by the running service until the review changes (:class:`TeamProgress`): every reviewer's
page asks for it every 15 s.

Every function takes an engine (:mod:`groundjudge.serve.db`) or a connection and returns plain data.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import Connection, Engine, and_, case, func, select

from groundjudge.serve import db
from groundjudge.serve.db import read


def _n(value: Any) -> int:
    return int(value or 0)


def _count(*when: Any) -> Any:
    return func.coalesce(func.sum(case((and_(*when), 1), else_=0)), 0)


def _queue(conn: Connection, kept: dict[db.Key, int]) -> dict[str, int]:
    """The queue's numbers: answers and claims, slots, and the running totals (claims decided, complete,
    double-reviewed, agreed, disagreements open and settled: :func:`groundjudge.serve.db.claim_tallies`)."""
    a = db.answers
    answers = conn.execute(
        select(func.count(func.distinct(db.claims.c.answer_pk)), func.count()).select_from(db.claims)
    ).one()
    slots = conn.execute(select(_count(a.c.needed > 1), func.coalesce(func.sum(a.c.needed), 0))).one()
    assigned = conn.execute(select(func.count()).select_from(db.assignments)).scalar_one()
    return {
        "answers": _n(answers[0]),
        "claims": _n(answers[1]),
        "overlap_answers": _n(slots[0]),
        "slots": _n(slots[1]),
        "slots_assigned": _n(assigned),
        **{name: kept.get((name, 0, 0), 0) for name in db.QUEUE_TALLIES},
    }


def _reviewers(conn: Connection, kept: dict[db.Key, int]) -> list[dict[str, Any]]:
    """Per reviewer: answers assigned and done (every claim has their verdict), claims assigned, and from the
    running totals claims decided (their verdicts, on any answer) and disagreements (claims with their verdict
    whose reviewers' verdicts differ, settled or not)."""
    a, t = db.assignments, db.tallies
    sizes = db.claim_sizes().subquery()
    size = func.coalesce(sizes.c.size, 0)
    done = and_(t.c.name == "answer_verdicts", t.c.owner == a.c.reviewer_id, t.c.item == a.c.answer_pk)
    assigned = select(
        a.c.reviewer_id, func.count(), _count(func.coalesce(t.c.value, 0) >= size), func.coalesce(func.sum(size), 0)
    ).select_from(a.outerjoin(sizes, sizes.c.answer_pk == a.c.answer_pk).outerjoin(t, done))
    given = {int(r): (_n(k), _n(d), _n(c)) for r, k, d, c in conn.execute(assigned.group_by(a.c.reviewer_id))}
    out = []
    r = db.reviewers
    for rid, name, role in conn.execute(select(r.c.id, r.c.name, r.c.role).order_by(r.c.id)):
        k, d, c = given.get(int(rid), (0, 0, 0))
        out.append(
            {
                "name": name,
                "role": role,
                "answers_assigned": k,
                "answers_done": d,
                "claims_assigned": c,
                "claims_decided": kept.get(("claims_decided", int(rid), 0), 0),
                "disagreements": kept.get(("disagreements", int(rid), 0), 0),
            }
        )
    return out


def count_team(conn: Connection) -> dict[str, Any]:
    """The team's progress as the database holds it now (:func:`team`): the running totals kept with each decision
    (:func:`groundjudge.serve.db.record_decision`), never a count of the decisions, with the assignments."""
    t = db.tallies
    rows = conn.execute(select(t.c.name, t.c.owner, t.c.item, t.c.value).where(t.c.name != "answer_verdicts"))
    kept = {(str(name), int(owner), int(item)): int(value) for name, owner, item, value in rows}
    return {"reviewers": _reviewers(conn, kept), "queue": _queue(conn, kept)}


def team(engine: Engine) -> dict[str, Any]:
    """The team's progress: per reviewer (answers assigned and done, claims assigned and decided, disagreements
    with others), and the queue's (answers and claims, assigned, decided by every reviewer they need, the overlap
    share's agreement, disagreements open and settled)."""
    return read(engine, count_team)


def change_mark(conn: Connection) -> tuple[Any, ...]:
    """What changes whenever :func:`team`'s numbers may have, but for the reviewers each answer needs (a later load
    with another overlap share, which :class:`TeamProgress` counts again within a minute): the rows of each table
    it reads (decisions, adjudications, reviewers, answers and claims are only ever added to) and the assignments
    (added, and removed when a reviewer is revoked: their count, sums and latest time). Cheap: counts, sums and a
    maximum, no join, no read of a report."""
    a = db.assignments

    def rows(table: Any) -> Any:
        return select(func.count()).select_from(table).scalar_subquery()

    def of(column: Any) -> Any:
        return select(column).scalar_subquery()

    marks = select(
        rows(db.decisions),
        rows(db.adjudications),
        rows(db.reviewers),
        rows(db.answers),
        rows(db.claims),
        rows(a),
        of(func.sum(a.c.answer_pk)),
        of(func.sum(a.c.reviewer_id)),
        of(func.max(a.c.assigned_at)),
    )
    return tuple(conn.execute(marks).one())


class TeamProgress:
    """The team's progress for one running service (``GET /api/team``, the team page): counted again
    (:func:`count_team`) only when the review changed since the last count (:func:`change_mark`, read first, in
    the same transaction: a count is never older than its mark), or when the last count is ``fresh_s`` old; else
    the last count, for a query that reads no decision. One count at a time: the reviewers' pages asking at once
    after a change wait for it rather than each counting."""

    def __init__(self, engine: Engine, fresh_s: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.engine, self.fresh_s, self.clock = engine, fresh_s, clock
        self._kept: tuple[tuple[Any, ...], float, dict[str, Any]] | None = None
        self._lock = threading.Lock()

    def __call__(self) -> dict[str, Any]:
        def get(conn: Connection) -> dict[str, Any]:
            mark, now = change_mark(conn), self.clock()
            kept = self._kept
            if kept is not None and kept[0] == mark and now - kept[1] < self.fresh_s:
                return kept[2]
            counted = count_team(conn)
            self._kept = (mark, now, counted)
            return counted

        with self._lock:
            return copy.deepcopy(read(self.engine, get))
