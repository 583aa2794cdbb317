"""What the review service keeps and how: reviewers, decisions with their history, assignment with an overlap share,
progress, disagreements and adjudication, and the export. The runs loaded as a queue: :mod:`groundjudge.serve.load`.

Every function takes an engine (:mod:`groundjudge.serve.db`) and returns plain data; a write returns only after its
transaction committed.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, and_, bindparam, func, select

from groundjudge.atomic import atomic_writer
from groundjudge.errors import InputError
from groundjudge.io.labels import claim_label
from groundjudge.models import AnswerReport
from groundjudge.serve import db
from groundjudge.serve.db import read, write
from groundjudge.serve.load import in_lists

ROLES = ("reviewer", "adjudicator")
CITATIONS = ("RIGHT", "WRONG")
MAX_NOTE = 10_000


class NotFoundError(InputError):
    """No such answer, claim or reviewer in this review."""


class ForbiddenError(InputError):
    """The caller may not do this (another reviewer's identity, adjudication without the role)."""


class FullError(InputError):
    """The reviewer holds as many unfinished answers as the service lets one reviewer hold (``--max-open``)."""


class ConflictError(InputError):
    """A request id the caller already used for another request (another claim, label, note or citation)."""


# -- reviewers and tokens ---------------------------------------------------------------------------------------


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def add_reviewer(engine: Engine, name: str, role: str = "reviewer") -> str:
    """Create a reviewer; returns their access token (``gj_KEY_SECRET``), shown once: only a hash of its secret
    part is stored.

    Raises:
        InputError: an empty name, an unknown role, or a name already taken.
    """
    name = name.strip()
    if not name or len(name) > 200 or not name.isprintable():
        raise InputError("a reviewer's name must be 1 to 200 printable characters")
    if role not in ROLES:
        raise InputError(f"role must be one of {', '.join(ROLES)}, not {role!r}")
    key, secret = secrets.token_hex(8), secrets.token_urlsafe(32)

    def add(conn: Connection) -> None:
        if conn.execute(select(db.reviewers.c.id).where(db.reviewers.c.name == name)).first() is not None:
            raise InputError(f"a reviewer named {name!r} exists already")
        conn.execute(
            db.reviewers.insert().values(
                name=name, token_key=key, token_hash=_sha(secret), role=role, created_at=db.now()
            )
        )

    write(engine, add)
    return f"gj_{key}_{secret}"


REVOKED = "revoked"  # a token_hash no sha256 digest equals: the reviewer's token opens nothing


def new_token(engine: Engine, name: str, *, revoke: bool = False) -> str | None:
    """Give reviewer ``name`` a new access token (returned, shown once; only its hash is stored) or, with
    ``revoke``, none that works. Either way their old token and every session of theirs stop working at once, in a
    running service too (it reads both from the database on each request); their decisions stay in the history and
    the export. Revoked, the answers they were given and had not finished (a claim without their verdict) go back to
    the team's queue, for the next reviewer who asks for work: else no one would ever be given them. ``new_token``
    on a revoked reviewer lets them in again.

    Raises:
        InputError: no reviewer of that name.
    """
    name = name.strip()
    key, secret = secrets.token_hex(8), secrets.token_urlsafe(32)

    def change(conn: Connection) -> None:
        row = conn.execute(select(db.reviewers.c.id).where(db.reviewers.c.name == name)).first()
        if row is None:
            raise InputError(f"no reviewer named {name!r} in this review database ('review add-reviewer' adds one)")
        conn.execute(db.sessions.delete().where(db.sessions.c.reviewer_id == row.id))
        if revoke:
            _release_unfinished(conn, int(row.id))
        digest = REVOKED if revoke else _sha(secret)
        conn.execute(db.reviewers.update().where(db.reviewers.c.id == row.id).values(token_key=key, token_hash=digest))

    write(engine, change)
    return None if revoke else f"gj_{key}_{secret}"


def _release_unfinished(conn: Connection, reviewer_id: int) -> None:
    """The reviewer's assignments of answers they have not finished are removed; an answer's other reviewer keeps
    theirs, its slots renumbered from 0 (:func:`take_work` gives an answer's next reviewer the slot after them)."""
    sizes = _claim_counts(conn)
    done = _decided_counts(conn, reviewer_id)
    a = db.assignments
    for pk, slot in conn.execute(select(a.c.answer_pk, a.c.slot).where(a.c.reviewer_id == reviewer_id)).all():
        if done.get(pk, 0) >= sizes.get(pk, 0):
            continue
        conn.execute(a.delete().where(and_(a.c.answer_pk == pk, a.c.slot == slot)))
        conn.execute(a.update().where(and_(a.c.answer_pk == pk, a.c.slot > slot)).values(slot=a.c.slot - 1))


def reviewers(engine: Engine) -> list[dict[str, Any]]:
    """Every reviewer: id, name, role, created_at (never a token)."""
    cols = (db.reviewers.c.id, db.reviewers.c.name, db.reviewers.c.role, db.reviewers.c.created_at)
    return read(engine, lambda conn: [dict(r._mapping) for r in conn.execute(select(*cols).order_by(cols[0]))])


# -- decisions ----------------------------------------------------------------------------------------------------


def _retried(conn: Connection, table: Any, reviewer_id: int, request_id: str | None, row: dict[str, Any]) -> Any:
    """The row this reviewer already stored under ``request_id`` (a retried request is stored once), else None.

    Raises:
        ConflictError: that row is another request (another claim, label, note or citation): a client that reuses
            its keys would otherwise see a decision it never stored acknowledged as a duplicate.
    """
    if request_id is None:
        return None
    where = and_(table.c.reviewer_id == reviewer_id, table.c.request_id == request_id)
    old = conn.execute(select(table).where(where)).first()
    if old is not None and any(old._mapping[k] != v for k, v in row.items() if k in old._mapping):
        raise ConflictError(
            f"request_id {request_id!r} was used before for another request: send a new request_id for a new decision",
            field="request_id",
        )
    return old


def _stamp(conn: Connection, table: Any, claim_pk: int, reviewer_id: int | None) -> str:
    """The ``decided_at`` of a decision stored now on ``claim_pk`` (by ``reviewer_id``; None: an adjudication, any
    adjudicator's): the clock's time, but always after the latest one stored for the decisions it replaces (by a
    millisecond at least: two decisions in one millisecond, or a clock behind, would tie or go back). The
    service's latest decision is the one stored last (:func:`_latest`, :func:`_adjudicated`: the highest id); the
    readers of its exports take the one with the latest ``decided_at`` (``review.metrics.review_labels``). A clock
    that steps back (a time correction, service processes whose clocks differ on one database) would stamp the newer
    decision earlier, and two exports put together would teach the older one."""
    latest = select(func.max(table.c.decided_at)).where(table.c.claim_pk == claim_pk)
    if reviewer_id is not None:
        latest = latest.where(table.c.reviewer_id == reviewer_id)
    before, now = conn.execute(latest).scalar(), db.now()  # both db.now()'s text: it sorts as time
    if before is None or before < now:
        return now
    return (datetime.fromisoformat(before) + timedelta(milliseconds=1)).isoformat(timespec="milliseconds")


def _claim(conn: Connection, answer_id: str, claim_id: str) -> int:
    pk = conn.execute(select(db.answers.c.id).where(db.answers.c.answer_id == answer_id)).scalar_one_or_none()
    if pk is None:
        raise NotFoundError(f"no answer {answer_id!r} in this review", field="id")
    claim_pk = conn.execute(
        select(db.claims.c.id).where(and_(db.claims.c.answer_pk == pk, db.claims.c.claim_id == claim_id))
    ).scalar_one_or_none()
    if claim_pk is None:
        raise NotFoundError(f"answer {answer_id!r} has no claim {claim_id!r}", field="claim_id")
    return int(claim_pk)


def check_text(**fields: str | None) -> None:
    """Text a request stores or looks up: valid Unicode without NUL characters, which PostgreSQL's text cannot hold
    (refused the same way on SQLite, so a client sees one rule); a note at most :data:`MAX_NOTE` characters, a
    request id 1 to 80.

    Raises:
        InputError: naming the field.
    """
    for field, text in fields.items():
        if text is None:
            continue
        if "\x00" in text:
            raise InputError("holds a NUL character (\\u0000), which the review database cannot store", field=field)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise InputError("is not valid Unicode (a lone surrogate)", field=field) from None
    note, request_id = fields.get("note"), fields.get("request_id")
    if note is not None and len(note) > MAX_NOTE:
        raise InputError(f"a note holds at most {MAX_NOTE} characters", field="note")
    if request_id is not None and not 1 <= len(request_id) <= 80:
        raise InputError("request_id must be 1 to 80 characters", field="request_id")


def check_label(label: str | None, allow_none: bool) -> str | None:
    """A decision's label by the one label rule (:func:`groundjudge.io.labels.claim_label`: trimmed, upper-cased):
    one of SUPPORTED, CONTRADICTED, UNSUPPORTED (None: cleared, where allowed).

    Raises:
        InputError: any other value.
    """
    if label is None and allow_none:
        return None
    return claim_label(label)  # the one label rule (a review file's lines are read by it too)


def decide(
    engine: Engine,
    reviewer_id: int,
    answer_id: str,
    claim_id: str,
    label: str | None,
    note: str = "",
    citation: str | None = None,
    request_id: str | None = None,
) -> dict[str, Any]:
    """Store a reviewer's decision on a claim (appended to the history; the latest one per reviewer and claim
    counts; ``label`` None clears it). A ``request_id`` already stored for this reviewer is not stored again:
    the first one is returned, ``duplicate`` True. Returns the stored decision once committed.

    Raises:
        InputError: a bad label, citation or note; NotFoundError: no such answer or claim.
    """
    label = check_label(label, allow_none=True)
    if citation is not None and citation not in CITATIONS:
        raise InputError(f"citation {citation!r} is not one of {', '.join(CITATIONS)}", field="citation")
    check_text(id=answer_id, claim_id=claim_id, note=note, request_id=request_id)

    def store(conn: Connection) -> dict[str, Any]:
        claim_pk = _claim(conn, answer_id, claim_id)
        db.lock_claim(conn, claim_pk)  # before the retry's look and the stamp: one decision on the claim at a time
        row = {"claim_pk": claim_pk, "reviewer_id": reviewer_id, "label": label, "note": note, "citation": citation}
        old = _retried(conn, db.decisions, reviewer_id, request_id, row)
        if old is not None:
            return {**_decision_out(old._mapping, answer_id, claim_id), "duplicate": True}
        row |= {"decided_at": _stamp(conn, db.decisions, claim_pk, reviewer_id), "request_id": request_id}
        pk = conn.execute(db.decisions.insert().values(**row)).inserted_primary_key[0]  # type: ignore[index]
        db.record_decision(conn, claim_pk, reviewer_id, int(pk), label)  # the running totals, in this transaction
        return {**_decision_out({**row, "id": pk}, answer_id, claim_id), "duplicate": False}

    return write(engine, store)


def _decision_out(row: Any, answer_id: str, claim_id: str) -> dict[str, Any]:
    return {
        "decision": row["id"],
        "id": answer_id,
        "claim_id": claim_id,
        "label": row["label"],
        "note": row["note"],
        "citation": row["citation"],
        "decided_at": row["decided_at"],
    }


def _claim_columns() -> list[Any]:
    """A claim's ids, text, groundjudge's label, route and citation, its places and its run, under the names the
    export reads (the claims table joined to answers and runs)."""
    return [
        db.claims.c.claim_id,
        db.claims.c.position.label("claim_position"),
        db.claims.c.text.label("claim_text"),
        db.claims.c.label.label("groundjudge_label"),
        db.claims.c.route,
        db.claims.c.citation.label("groundjudge_citation"),
        db.answers.c.answer_id,
        db.answers.c.position.label("answer_position"),
        db.runs.c.identity.label("run"),
    ]


def _of_answers(t: Any, answers: Any) -> Any:
    """The rows of decision table ``t`` on claims of ``answers`` (a select of answer pks)."""
    return t.c.claim_pk.in_(select(db.claims.c.id).where(db.claims.c.answer_pk.in_(answers)))


def _latest(conn: Connection, reviewer_id: int | None = None, answers: Any = None) -> list[Any]:
    """Each reviewer's latest decision per claim (their label may be None: cleared), with the claim's ids; only on
    claims of ``answers`` (a select of answer pks) when given. The latest is the one stored last, whose
    ``decided_at`` is the latest too (:func:`_stamp`), as the export's readers take it."""
    t = db.decisions
    last = select(func.max(t.c.id)).group_by(t.c.claim_pk, t.c.reviewer_id)
    if reviewer_id is not None:
        last = last.where(t.c.reviewer_id == reviewer_id)
    if answers is not None:
        last = last.where(_of_answers(t, answers))
    q = (
        select(t, *_claim_columns(), db.reviewers.c.name.label("reviewer"))
        .join(db.claims, db.claims.c.id == t.c.claim_pk)
        .join(db.answers, db.answers.c.id == db.claims.c.answer_pk)
        .join(db.runs, db.runs.c.id == db.answers.c.run_id)
        .join(db.reviewers, db.reviewers.c.id == t.c.reviewer_id)
        .where(t.c.id.in_(last))
        .order_by(db.answers.c.position, db.claims.c.position, t.c.id)
    )
    return list(conn.execute(q).all())


def my_decisions(engine: Engine, reviewer_id: int, answers: Any = None) -> list[dict[str, Any]]:
    """The reviewer's latest decision on each claim they decided (cleared ones included, label None); only on
    claims of ``answers`` (a select of answer pks: :func:`shown_answers`) when given."""
    rows = read(engine, lambda conn: _latest(conn, reviewer_id, answers))
    return [_decision_out(r._mapping, r.answer_id, r.claim_id) for r in rows]


HISTORY_KINDS = {"decision": db.decisions, "adjudication": db.adjudications}


def history(engine: Engine, after: int = 0, limit: int = 1000, kind: str | None = None) -> list[dict[str, Any]]:
    """The append-only history of decisions and adjudications: who decided what and when, oldest first.

    Decisions and adjudications are numbered apart (``n``): ``kind`` keeps one of them, the entries numbered after
    ``after`` in number order, at most ``limit``: what a client pages with (the last ``n`` it got is its next
    ``after``). Without ``kind`` both, each numbered after ``after`` and at most ``limit`` of each, in time order.
    """
    kinds = [(kind, HISTORY_KINDS[kind])] if kind is not None else list(HISTORY_KINDS.items())

    def get(conn: Connection) -> list[dict[str, Any]]:
        out = []
        for kind, t in kinds:
            q = (
                select(
                    t.c.id,
                    t.c.label,
                    t.c.note,
                    t.c.decided_at,
                    db.reviewers.c.name,
                    db.claims.c.claim_id,
                    db.answers.c.answer_id,
                )
                .join(db.reviewers, db.reviewers.c.id == t.c.reviewer_id)
                .join(db.claims, db.claims.c.id == t.c.claim_pk)
                .join(db.answers, db.answers.c.id == db.claims.c.answer_pk)
                .where(t.c.id > after)
                .order_by(t.c.id)
                .limit(limit)
            )
            out += [
                {
                    "kind": kind,
                    "n": r.id,
                    "id": r.answer_id,
                    "claim_id": r.claim_id,
                    "label": r.label,
                    "note": r.note,
                    "reviewer": r.name,
                    "decided_at": r.decided_at,
                }
                for r in conn.execute(q)
            ]
        return out if kind is not None else sorted(out, key=lambda d: (d["decided_at"], d["kind"], d["n"]))

    return read(engine, get)


# -- assignment and progress --------------------------------------------------------------------------------------


def _decided_counts(conn: Connection, reviewer_id: int) -> dict[int, int]:
    """answer pk -> how many of its claims the reviewer has a verdict on (their latest decision has a label)."""
    t = db.decisions
    last = select(func.max(t.c.id)).where(t.c.reviewer_id == reviewer_id).group_by(t.c.claim_pk)
    q = (
        select(db.claims.c.answer_pk, func.count())
        .join(t, t.c.claim_pk == db.claims.c.id)
        .where(and_(t.c.id.in_(last), t.c.label.is_not(None)))
        .group_by(db.claims.c.answer_pk)
    )
    return {int(a): int(n) for a, n in conn.execute(q)}


def _claim_counts(conn: Connection, answers: Any = None) -> dict[int, int]:
    """answer pk -> its claims (:func:`groundjudge.serve.db.claim_sizes`); only ``answers`` (a select of answer pks)
    when given."""
    q = db.claim_sizes()
    if answers is not None:
        q = q.where(db.claims.c.answer_pk.in_(answers))
    return {int(a): int(n) for a, n in conn.execute(q)}


def take_work(
    engine: Engine, reviewer_id: int, batch: int = 10, *, more: bool = False, max_open: int | None = None
) -> int:
    """Give the reviewer more answers until ``batch`` of theirs are open (not every claim decided), or with ``more``
    ``batch`` more than they hold open, never past ``max_open`` open: the next answers of the queue that still need
    a reviewer and are not theirs already (an answer of the overlap share goes to two different reviewers).
    Concurrent calls never give one slot to two reviewers. Returns how many answers were added.

    Raises:
        FullError: with ``more``, the reviewer holds ``max_open`` open answers already.
    """

    def assign(conn: Connection) -> int:
        mine = [
            int(a)
            for a in conn.execute(
                select(db.assignments.c.answer_pk).where(db.assignments.c.reviewer_id == reviewer_id)
            ).scalars()
        ]
        sizes = _claim_counts(conn)
        done = _decided_counts(conn, reviewer_id)
        holding = sum(1 for a in mine if done.get(a, 0) < sizes.get(a, 0))
        if more and max_open is not None and holding >= max_open:
            raise FullError(
                f"you hold {holding} unfinished answers, the most a reviewer may hold (review serve --max-open "
                f"{max_open}): finish some before taking more"
            )
        target = holding + batch if more else batch
        if max_open is not None:
            target = min(target, max_open)
        want = target - holding
        if want <= 0:
            return 0
        taken = (
            select(db.assignments.c.answer_pk, func.count().label("n")).group_by(db.assignments.c.answer_pk).subquery()
        )
        q = (
            select(db.answers.c.id, func.coalesce(taken.c.n, 0))
            .outerjoin(taken, taken.c.answer_pk == db.answers.c.id)
            .where(func.coalesce(taken.c.n, 0) < db.answers.c.needed)
            .order_by(db.answers.c.position)
        )
        if mine:
            q = q.where(db.answers.c.id.not_in(mine))
        added = 0
        for pk, n in conn.execute(q.limit(want)).all():
            # the first free slot: n (the slots are 0..n-1), unless one was freed below n (a revoked reviewer's,
            # while another writer gave this answer a slot after it): n would be taken, and stay taken at each retry
            used = set(conn.execute(select(db.assignments.c.slot).where(db.assignments.c.answer_pk == pk)).scalars())
            slot = next(i for i in range(int(n) + 1) if i not in used)
            conn.execute(
                db.assignments.insert().values(answer_pk=pk, slot=slot, reviewer_id=reviewer_id, assigned_at=db.now())
            )
            added += 1
        return added

    return write(engine, assign)  # a slot taken meanwhile is a unique-key conflict: write() runs it again


FINISHED_SHOWN = 50  # a reviewer's finished answers on one page of theirs (the latest first; the older ones paged)


@dataclass(frozen=True)
class Window:
    """What a reviewer's page holds: their unfinished answers and a window of their finished ones (page ``page``
    of ``pages``, the latest finished first: the answer they last decided on), in queue order with why each is in
    the queue (``items``); ``answers``, the answers' keys; ``unfinished`` and ``finished``, how many they hold of
    each in all; ``claims`` and ``decided``, the claims of all their answers and those with their verdict;
    ``hidden_answers`` and ``hidden_claims``, their finished answers with a claim not on this page and the claims
    of those (all decided): what the page's counts add to count the whole queue."""

    items: list[tuple[AnswerReport, list[str]]]
    answers: list[int]
    unfinished: int
    finished: int
    page: int
    pages: int
    claims: int = 0
    decided: int = 0
    hidden_answers: int = 0
    hidden_claims: int = 0


def shown_answers(answers: Iterable[int]) -> Any:
    """A select of these answer pks (as :func:`my_decisions` and :func:`export_lines` take them): the numbers are
    written into the statement, so that no count of them passes a database's limit on bound parameters."""
    keys = sorted({int(a) for a in answers})
    return select(db.answers.c.id).where(
        db.answers.c.id.in_(bindparam("shown", keys, expanding=True, literal_execute=True, unique=True))
    )


def reviewer_window(engine: Engine, reviewer_id: int, page: int = 0, size: int = FINISHED_SHOWN) -> Window:
    """The answers of a reviewer's page: every one of theirs not finished (not every claim has their verdict: at
    most ``--max-open`` of them), and ``size`` of their finished ones, the latest first (page 0), then page ``page``
    of the older ones; only their reports are read."""

    def get(conn: Connection) -> Window:
        mine = select(db.assignments.c.answer_pk).where(db.assignments.c.reviewer_id == reviewer_id)
        claims, t = db.claims, db.decisions
        sizes = _claim_counts(conn, mine)
        done = _decided_counts(conn, reviewer_id)
        latest = (
            select(claims.c.answer_pk, func.max(t.c.id))
            .join(claims, claims.c.id == t.c.claim_pk)
            .where(t.c.reviewer_id == reviewer_id)
            .group_by(claims.c.answer_pk)
        )
        last = {int(a): int(n) for a, n in conn.execute(latest)}
        keys = [int(a) for a in conn.execute(mine).scalars()]
        open_ = [a for a in keys if done.get(a, 0) < sizes.get(a, 0)]
        finished = sorted(set(keys) - set(open_), key=lambda a: (-last.get(a, 0), a))
        pages = max(1, -(-len(finished) // size))
        at = min(max(page, 0), pages - 1)
        shown = open_ + finished[at * size : (at + 1) * size]
        q = (
            select(db.answers.c.report, db.answers.c.reasons)
            .where(db.answers.c.id.in_(shown_answers(shown)))
            .order_by(db.answers.c.position)
        )
        items = [(AnswerReport.model_validate_json(rep), json.loads(why)) for rep, why in conn.execute(q)]
        hidden = [sizes.get(a, 0) for a in set(finished) - set(shown)]
        return Window(
            items,
            shown,
            len(open_),
            len(finished),
            at,
            pages,
            claims=sum(sizes.get(a, 0) for a in keys),
            decided=sum(min(done.get(a, 0), sizes.get(a, 0)) for a in keys),
            hidden_answers=sum(1 for n in hidden if n),
            hidden_claims=sum(hidden),
        )

    return read(engine, get)


def my_queue(engine: Engine, reviewer_id: int) -> dict[str, Any]:
    """The reviewer's assigned answers in queue order, each with its claims decided, and their totals."""

    def get(conn: Connection) -> dict[str, Any]:
        sizes = _claim_counts(conn)
        done = _decided_counts(conn, reviewer_id)
        q = (
            select(db.answers.c.id, db.answers.c.answer_id, db.answers.c.needed, db.assignments.c.assigned_at)
            .join(db.assignments, db.assignments.c.answer_pk == db.answers.c.id)
            .where(db.assignments.c.reviewer_id == reviewer_id)
            .order_by(db.answers.c.position)
        )
        items = [
            {
                "id": aid,
                "claims": sizes.get(pk, 0),
                "decided": done.get(pk, 0),
                "overlap": needed > 1,
                "assigned_at": at,
            }
            for pk, aid, needed, at in conn.execute(q)
        ]
        return {
            "answers": items,
            "answers_assigned": len(items),
            "answers_done": sum(i["decided"] >= i["claims"] for i in items),
            "claims_assigned": sum(i["claims"] for i in items),
            "claims_decided": sum(min(i["decided"], i["claims"]) for i in items),
        }

    return read(engine, get)


def _verdicts(rows: Iterable[Any]) -> dict[int, dict[str, Any]]:
    """claim pk -> {reviewer name: latest row with a label}."""
    out: dict[int, dict[str, Any]] = defaultdict(dict)
    for r in rows:
        if r.label is not None:
            out[r.claim_pk][r.reviewer] = r
    return out


def _disputed(by: dict[str, Any]) -> bool:
    """Whether a claim's reviewers disagree: their latest verdicts (:func:`_verdicts`) differ. Open until an
    adjudication settles it; the export marks it (``status``) and its readers leave it out until then."""
    return len({r.label for r in by.values()}) > 1


def _adjudicated(conn: Connection, answers: Any = None) -> dict[int, Any]:
    """claim pk -> its latest adjudication (only claims of ``answers``, a select of answer pks, when given)."""
    t = db.adjudications
    last = select(func.max(t.c.id)).group_by(t.c.claim_pk)
    if answers is not None:
        last = last.where(_of_answers(t, answers))
    q = select(t, db.reviewers.c.name).join(db.reviewers, db.reviewers.c.id == t.c.reviewer_id).where(t.c.id.in_(last))
    return {int(r.claim_pk): r for r in conn.execute(q)}


def disagreements(engine: Engine, include_settled: bool = True) -> list[dict[str, Any]]:
    """Claims whose reviewers' latest verdicts differ, in queue order: each reviewer's label and note, groundjudge's
    label, and the adjudication if there is one."""

    def get(conn: Connection) -> list[dict[str, Any]]:
        rows = _latest(conn)
        verdicts = _verdicts(rows)
        settled = _adjudicated(conn)
        out = []
        seen: set[int] = set()
        for r in rows:
            by = verdicts.get(r.claim_pk, {})
            if r.claim_pk in seen or not _disputed(by):
                continue
            seen.add(r.claim_pk)
            adj = settled.get(r.claim_pk)
            if adj is not None and not include_settled:
                continue
            out.append(
                {
                    "id": r.answer_id,
                    "claim_id": r.claim_id,
                    "claim": r.claim_text,
                    "groundjudge_label": r.groundjudge_label,
                    "route": r.route,
                    "decisions": [
                        {"reviewer": name, "label": v.label, "note": v.note, "decided_at": v.decided_at}
                        for name, v in sorted(by.items())
                    ],
                    "adjudication": None
                    if adj is None
                    else {"label": adj.label, "note": adj.note, "reviewer": adj.name, "decided_at": adj.decided_at},
                }
            )
        return out

    return read(engine, get)


def adjudicate(
    engine: Engine,
    reviewer_id: int,
    answer_id: str,
    claim_id: str,
    label: str,
    note: str = "",
    request_id: str | None = None,
) -> dict[str, Any]:
    """Settle a claim: the adjudicator's label becomes the claim's label in the export (the reviewers' own
    decisions stay, for agreement). Appended to the history like a decision.

    Raises:
        ForbiddenError: the caller is not an adjudicator; InputError / NotFoundError as :func:`decide`.
    """
    checked = check_label(label, allow_none=False)
    check_text(id=answer_id, claim_id=claim_id, note=note, request_id=request_id)

    def store(conn: Connection) -> dict[str, Any]:
        role = conn.execute(select(db.reviewers.c.role).where(db.reviewers.c.id == reviewer_id)).scalar_one()
        if role != "adjudicator":
            raise ForbiddenError("only an adjudicator settles disagreements (review add-reviewer --adjudicator)")
        claim_pk = _claim(conn, answer_id, claim_id)
        row = {"claim_pk": claim_pk, "reviewer_id": reviewer_id, "label": checked, "note": note}
        old = _retried(conn, db.adjudications, reviewer_id, request_id, row)
        if old is not None:
            return {**_decision_out({**old._mapping, "citation": None}, answer_id, claim_id), "duplicate": True}
        db.record_adjudication(conn, claim_pk)  # the running totals, in this transaction
        row |= {"decided_at": _stamp(conn, db.adjudications, claim_pk, None), "request_id": request_id}
        pk = conn.execute(db.adjudications.insert().values(**row)).inserted_primary_key[0]  # type: ignore[index]
        return {**_decision_out({**row, "id": pk, "citation": None}, answer_id, claim_id), "duplicate": False}

    return write(engine, store)


# -- the export ---------------------------------------------------------------------------------------------------


def export_lines(engine: Engine, assigned_to: int | None = None, answers: Any = None) -> list[dict[str, Any]]:
    """The decisions as the review page exports them (one object per line; :func:`groundjudge.review.metrics.
    parse_reviews` reads them): each reviewer's latest decision on each claim, in queue order, the latest last; then
    the claim's adjudication, if any, marked ``adjudicated`` (also where no reviewer's verdict stands on the claim:
    none made, or every one cleared). A decision without a verdict (cleared, or a note or citation choice alone) is
    a line with a null ``label``, as the static page writes it: readers take it for no label, and for the
    withdrawal of that reviewer's earlier verdict in a file exported before it. A claim with a verdict says its
    ``status`` on every line: ``adjudicated``, else ``disputed`` where the reviewers' verdicts differ
    (:func:`_disputed`), else ``agreed``; a claim with none has no ``status``. Readers take one label per claim
    (:func:`groundjudge.review.metrics.review_labels`): the adjudicated one, else the agreed one; a disputed claim
    teaches nothing. ``metrics`` also reads each reviewer's. ``assigned_to``: only the lines of the answers assigned
    to that reviewer; ``answers`` (a select of answer pks: :func:`shown_answers`), only theirs (a reviewer's page
    counts the team's decisions on the answers it holds, not the whole export's)."""
    if assigned_to is not None:
        answers = select(db.assignments.c.answer_pk).where(db.assignments.c.reviewer_id == assigned_to)

    def get(conn: Connection) -> list[dict[str, Any]]:
        latest = _latest(conn, answers=answers)
        rows = [r for r in latest if r.label is not None]
        settled = _adjudicated(conn, answers)
        verdicts = _verdicts(rows)
        by_claim: dict[int, list[Any]] = defaultdict(list)
        for r in latest:
            by_claim[r.claim_pk].append(r)
        claims = {r.claim_pk: r for r in latest} | _claim_rows(conn, set(settled) - set(by_claim))
        out = []
        for claim_pk in sorted(claims, key=lambda pk: (claims[pk].answer_position, claims[pk].claim_position)):
            adj = settled.get(claim_pk)
            status = "adjudicated" if adj is not None else "disputed" if _disputed(verdicts[claim_pk]) else "agreed"
            said = {"status": status} if adj is not None or verdicts[claim_pk] else {}
            group = sorted(by_claim[claim_pk], key=lambda r: (r.decided_at, r.id))
            for r in group:
                out.append(_line(r, r.label, r.note, r.reviewer, r.decided_at, r.citation) | said)
            if adj is not None:
                line = _line(claims[claim_pk], adj.label, adj.note, adj.name, adj.decided_at, None)
                out.append(line | {"adjudicated": True, **said})
        return _report_texts(conn, out)

    return read(engine, get)


def _report_texts(conn: Connection, lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The lines with each claim's text as its report has it: the claims table holds a NUL as U+FFFD (PostgreSQL's
    text holds none), and a line whose text is not the report's joins no claim of the run (metrics, calibrate and
    tune join a review by answer id, claim id and claim text). Only answers with such a claim are read."""
    ids = {line["id"] for line in lines if "\ufffd" in line["claim"]}
    if not ids:
        return lines
    texts: dict[tuple[str, str], str] = {}
    for some in in_lists(sorted(ids)):
        for (report,) in conn.execute(select(db.answers.c.report).where(db.answers.c.answer_id.in_(some))):
            r = json.loads(report)
            for c in r["claims"]:
                texts.setdefault((r["id"], c["claim"]["id"]), c["claim"]["text"])
    return [line | {"claim": texts.get((line["id"], line["claim_id"]), line["claim"])} for line in lines]


def _claim_rows(conn: Connection, claim_pks: set[int]) -> dict[int, Any]:
    """claim pk -> the claim's ids, text, groundjudge's label, route and citation, its places, its run (the columns
    :func:`_latest` names them by)."""
    if not claim_pks:
        return {}
    q = (
        select(db.claims.c.id.label("claim_pk"), *_claim_columns())
        .join(db.answers, db.answers.c.id == db.claims.c.answer_pk)
        .join(db.runs, db.runs.c.id == db.answers.c.run_id)
        .where(db.claims.c.id.in_(claim_pks))
    )
    return {int(r.claim_pk): r for r in conn.execute(q)}


def _line(r: Any, label: str, note: str, reviewer: str, decided_at: str, citation: str | None) -> dict[str, Any]:
    line: dict[str, Any] = {
        "id": r.answer_id,
        "claim_id": r.claim_id,
        "claim": r.claim_text,
        "label": label,
        "groundjudge_label": r.groundjudge_label,
        "route": r.route,
        "note": note,
        "reviewer": reviewer,
    }
    if citation:
        line["citation"] = citation
        line["groundjudge_citation"] = r.groundjudge_citation
    line["decided_at"] = decided_at
    line["run"] = r.run
    return line


def dumps_line(line: dict[str, Any]) -> str:
    """An export line as JSON, ASCII only: no line or paragraph separator inside a line, for any line splitter."""
    return json.dumps(line, ensure_ascii=True)


def write_export(engine: Engine, out: str | Path) -> list[dict[str, Any]]:
    """Write :func:`export_lines` to ``out`` as JSONL (atomically: a temporary file renamed); returns the lines."""
    lines = export_lines(engine)
    path = Path(out)
    try:
        with atomic_writer(path) as fh:
            for line in lines:
                fh.write(dumps_line(line) + "\n")
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc}") from exc
    return lines


def export_counts(lines: Iterable[dict[str, Any]]) -> dict[str, int]:
    """What an export (:func:`export_lines`) holds, as its readers take it: ``verdicts``, reviewers' latest
    decisions with a label; ``without_verdict``, reviewers' latest decisions with a null label (cleared, or a note
    or citation choice alone: no label, the withdrawal of an earlier one); ``adjudications``; ``disputed``, the
    claims whose reviewers disagree with no adjudication (every line of one says so)."""
    counts = {"verdicts": 0, "without_verdict": 0, "adjudications": 0}
    disputed: set[tuple[str, str]] = set()
    for line in lines:
        key = "adjudications" if line.get("adjudicated") else "verdicts" if line["label"] else "without_verdict"
        counts[key] += 1
        if line.get("status") == "disputed":
            disputed.add((line["id"], line["claim_id"]))
    return counts | {"disputed": len(disputed)}


def read_ok(engine: Engine) -> None:
    """Raises ReviewDatabaseError when the database does not answer."""
    read(engine, lambda conn: conn.execute(select(1)).scalar_one())
