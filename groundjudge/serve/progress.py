"""The team's progress (``GET /api/team``, the team page): counted by the database (GROUP BY), never by reading
every decision into Python, and kept by the running service until the review changes (:class:`TeamProgress`):
every reviewer's page asks for it every 15 s.

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


def _verdicts() -> Any:
    """Each reviewer's latest decision per claim, where it gives a label (a cleared one gives none): claim_pk,
    reviewer_id, label."""
    t, later = db.decisions, db.decisions.alias("later")
    newer = select(later.c.id).where(
        later.c.claim_pk == t.c.claim_pk, later.c.reviewer_id == t.c.reviewer_id, later.c.id > t.c.id
    )
    return select(t.c.claim_pk, t.c.reviewer_id, t.c.label).where(t.c.label.is_not(None), ~newer.exists()).cte()


def _n(value: Any) -> int:
    return int(value or 0)


def _per_claim(verdicts: Any) -> Any:
    """Per claim with a verdict: how many reviewers gave one (n) and whether they differ (lo, hi: the least and the
    greatest label; they differ when the labels do)."""
    v = verdicts
    return (
        select(v.c.claim_pk, func.count().label("n"), func.min(v.c.label).label("lo"), func.max(v.c.label).label("hi"))
        .group_by(v.c.claim_pk)
        .cte()
    )


def _count(*when: Any) -> Any:
    return func.coalesce(func.sum(case((and_(*when), 1), else_=0)), 0)


def _queue(conn: Connection, per_claim: Any) -> dict[str, int]:
    """The queue's numbers: answers and claims, slots, claims decided, complete, double-reviewed, agreed, and
    disagreements open and settled (reviewers' latest verdicts differ; settled: an adjudication on the claim)."""
    pc = per_claim
    settled = select(db.adjudications.c.claim_pk).group_by(db.adjudications.c.claim_pk).subquery()
    disputed = pc.c.lo != pc.c.hi
    claims = conn.execute(
        select(
            func.count().label("claims_decided"),
            _count(pc.c.n >= db.answers.c.needed).label("claims_complete"),
            _count(pc.c.n >= 2).label("claims_double_reviewed"),
            _count(pc.c.n >= 2, pc.c.lo == pc.c.hi).label("claims_agreed"),
            _count(disputed, settled.c.claim_pk.is_(None)).label("disagreements_open"),
            _count(disputed, settled.c.claim_pk.is_not(None)).label("disagreements_settled"),
        ).select_from(
            pc.join(db.claims, db.claims.c.id == pc.c.claim_pk)
            .join(db.answers, db.answers.c.id == db.claims.c.answer_pk)
            .outerjoin(settled, settled.c.claim_pk == pc.c.claim_pk)
        )
    ).one()
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
        **{k: _n(v) for k, v in claims._mapping.items()},
    }


def _reviewers(conn: Connection, verdicts: Any, per_claim: Any) -> list[dict[str, Any]]:
    """Per reviewer: answers assigned and done (every claim has their verdict), claims assigned and decided
    (their verdicts, on any answer), and disagreements (claims with their verdict whose reviewers' verdicts
    differ, settled or not)."""
    v, pc, claims, a = verdicts, per_claim, db.claims, db.assignments
    sizes = db.claim_sizes().subquery()
    done = (
        select(v.c.reviewer_id, claims.c.answer_pk, func.count().label("n"))
        .join(claims, claims.c.id == v.c.claim_pk)
        .group_by(v.c.reviewer_id, claims.c.answer_pk)
        .subquery()
    )
    size, n = func.coalesce(sizes.c.size, 0), func.coalesce(done.c.n, 0)
    assigned = select(a.c.reviewer_id, func.count(), _count(n >= size), func.coalesce(func.sum(size), 0)).select_from(
        a.outerjoin(sizes, sizes.c.answer_pk == a.c.answer_pk).outerjoin(
            done, and_(done.c.reviewer_id == a.c.reviewer_id, done.c.answer_pk == a.c.answer_pk)
        )
    )
    given = {int(r): (_n(k), _n(d), _n(c)) for r, k, d, c in conn.execute(assigned.group_by(a.c.reviewer_id))}
    decided = select(v.c.reviewer_id, func.count(), _count(pc.c.lo != pc.c.hi)).join(pc, pc.c.claim_pk == v.c.claim_pk)
    verdicts_of = {int(r): (_n(k), _n(d)) for r, k, d in conn.execute(decided.group_by(v.c.reviewer_id))}
    out = []
    r = db.reviewers
    for rid, name, role in conn.execute(select(r.c.id, r.c.name, r.c.role).order_by(r.c.id)):
        k, d, c = given.get(int(rid), (0, 0, 0))
        mine, against = verdicts_of.get(int(rid), (0, 0))
        out.append(
            {
                "name": name,
                "role": role,
                "answers_assigned": k,
                "answers_done": d,
                "claims_assigned": c,
                "claims_decided": mine,
                "disagreements": against,
            }
        )
    return out


def count_team(conn: Connection) -> dict[str, Any]:
    """The team's progress as the database holds it now (:func:`team`)."""
    verdicts = _verdicts()
    per_claim = _per_claim(verdicts)
    return {"reviewers": _reviewers(conn, verdicts, per_claim), "queue": _queue(conn, per_claim)}


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
