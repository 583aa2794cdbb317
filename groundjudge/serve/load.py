"""The review's queue and the runs loaded into it: :func:`queue` (the one ``report --html`` builds: the same filter
and orders), the overlap share (:func:`in_overlap`), and :func:`load_runs`, which loads each run once.

Every function takes an engine (:mod:`groundjudge.serve.db`) and returns plain data; a write returns only after its
transaction committed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, Engine, func, select

from groundjudge.errors import InputError
from groundjudge.io.reports import finite_report
from groundjudge.models import AnswerReport
from groundjudge.review.html import (
    ORDERS,
    informative_key,
    informative_reasons,
    label_shares,
    risk_key,
    risk_reasons,
    run_identity,
)
from groundjudge.serve import db
from groundjudge.serve.db import write

# -- the queue --------------------------------------------------------------------------------------------------


def queue(
    runs: Sequence[tuple[str, Sequence[AnswerReport]]], order: str = "risk", only_flagged: bool = True
) -> list[tuple[str, list[AnswerReport], list[list[str]]]]:
    """Each run's answers for the queue, in the order and with the filter of ``report --html``
    (:func:`groundjudge.review.html.risk_key` / :func:`~groundjudge.review.html.informative_key`), and why each is
    there; answers without claims are left out (nothing to decide)."""
    if order not in ORDERS:
        raise InputError(f"--order must be one of {', '.join(ORDERS)}, not {order!r}")
    out = []
    for path, reports in runs:
        every = [finite_report(r) for r in reports]
        chosen = [r for r in every if (r.flagged or not only_flagged) and r.claims]
        if order == "risk":
            chosen.sort(key=risk_key)
            reasons = [risk_reasons(r) for r in chosen]
        else:
            shares = label_shares(every)
            chosen.sort(key=lambda r: informative_key(r, shares))
            reasons = [informative_reasons(r, shares) for r in chosen]
        out.append((path, chosen, reasons))
    return out


def in_overlap(answer_id: str, share: float) -> bool:
    """Whether an answer is in the overlap share (reviewed by two): a fixed draw from its id."""
    draw = int(hashlib.sha256(answer_id.encode("utf-8", "surrogatepass")).hexdigest()[:12], 16) / 16**12
    return draw < share


@dataclass(frozen=True)
class Loaded:
    """What :func:`load_runs` did: runs added now, runs already there, answers added, answers in the database."""

    added: int
    kept: int
    answers_added: int
    answers: int


def load_runs(
    engine: Engine,
    runs: Sequence[tuple[str, Sequence[AnswerReport]]],
    order: str = "risk",
    only_flagged: bool = True,
    overlap: float = 0.0,
) -> Loaded:
    """Load each run's queue (:func:`queue`) into the database once: a run already there (the same answers, with
    the same reports, maybe in another order or filter) is kept as it is, its decisions with it; a new run's
    answers, and a run's answers not loaded yet (it grew, or ``--every-answer`` now), go after those already queued.
    ``overlap`` (0 to 1) sets the share of answers that go to two reviewers, for every answer not yet assigned
    twice.

    Raises:
        InputError: ``overlap`` out of range, an answer id twice in one run, or an answer id already in the database
            with another report.
    """
    if not 0.0 <= overlap <= 1.0:
        raise InputError(f"--overlap must be between 0 and 1, not {overlap}")
    built = queue(runs, order, only_flagged)
    for path, chosen, _ in built:
        seen: set[str] = set()
        for r in chosen:
            if r.id in seen:  # the second would break the answers' unique id half-way through the load
                raise InputError(
                    f"answer {r.id!r} is in {path} twice: give each report once (the command keeps the last of an id)"
                )
            seen.add(r.id)
            if "\x00" in r.id or any("\x00" in c.claim.id for c in r.claims):
                raise InputError(
                    f"answer {r.id!r} of {path}: its id or a claim id holds a NUL character (\\u0000), which the "
                    "review database cannot store"
                )

    def load(conn: Connection) -> Loaded:
        added = kept = n_answers = 0
        position = int(conn.execute(select(func.coalesce(func.max(db.answers.c.position), -1))).scalar_one()) + 1
        for path, chosen, reasons in built:
            identity = run_identity(chosen)
            # each report is compared with the one stored, also for a run of the same identity (its ids, claims and
            # versions): a run scored again with those gives other verdicts, quotes and scores (an LLM's are not
            # always the same), and keeping it would have the team review the old ones under the new run's name
            fresh = _fresh_answers(conn, path, chosen, reasons)
            if not fresh or conn.execute(select(db.runs.c.id).where(db.runs.c.identity == identity)).first():
                kept += 1  # the same answers, maybe in another order or filter (serve's options changed): kept
                continue
            run_pk = conn.execute(
                db.runs.insert().values(path=str(path), identity=identity, answers=len(fresh), loaded_at=db.now())
            ).inserted_primary_key[0]  # type: ignore[index]
            for r, why in fresh:
                answer_pk = conn.execute(
                    db.answers.insert().values(
                        run_id=run_pk,
                        answer_id=r.id,
                        position=position,
                        needed=2 if in_overlap(r.id, overlap) else 1,
                        report=_report_json(r),
                        reasons=json.dumps(why),
                    )
                ).inserted_primary_key[0]  # type: ignore[index]
                position += 1
                seen: set[str] = set()
                rows = []
                for i, c in enumerate(r.claims):
                    if c.claim.id in seen:  # a report never repeats a claim id; one that does keeps its first
                        continue
                    seen.add(c.claim.id)
                    rows.append(
                        {
                            "answer_pk": answer_pk,
                            "claim_id": c.claim.id,
                            "position": i,
                            "text": c.claim.text.replace("\x00", "\ufffd"),  # PostgreSQL holds no NUL
                            "label": c.label,
                            "route": c.route,
                            "citation": getattr(c, "citation", None),
                        }
                    )
                conn.execute(db.claims.insert(), rows)
            added += 1
            n_answers += len(fresh)
        # the overlap share, for answers not already given to two reviewers
        twice = select(db.assignments.c.answer_pk).where(db.assignments.c.slot >= 1)
        changed = False
        for pk, aid, was in conn.execute(
            select(db.answers.c.id, db.answers.c.answer_id, db.answers.c.needed).where(db.answers.c.id.not_in(twice))
        ).all():
            needed = 2 if in_overlap(aid, overlap) else 1
            if needed != was:
                conn.execute(db.answers.update().where(db.answers.c.id == pk).values(needed=needed))
                changed = True
        if changed:  # the claims complete (decided by every reviewer they need) are counted again
            db.rebuild_tallies(conn)
        total = int(conn.execute(select(func.count()).select_from(db.answers)).scalar_one())
        return Loaded(added, kept, n_answers, total)

    return write(engine, load)


def _report_json(r: AnswerReport) -> str:
    """How an answer's (finite) report is stored: the same report gives the same text."""
    return json.dumps(r.model_dump(mode="json"), ensure_ascii=False, allow_nan=False)


IN_LIST = 500  # values in one IN (...) list at most: a database limits bound parameters (999 in older SQLite builds)


def in_lists(values: Sequence[str]) -> list[Sequence[str]]:
    """``values`` cut into IN lists of at most :data:`IN_LIST`."""
    return [values[i : i + IN_LIST] for i in range(0, len(values), IN_LIST)]


def _fresh_answers(
    conn: Connection, path: str, chosen: Sequence[AnswerReport], reasons: Sequence[list[str]]
) -> list[tuple[AnswerReport, list[str]]]:
    """The answers of a run not in the database yet, with why each is queued. An answer already there with the
    same report is the same answer (the run served again with another ``--order`` or filter, or grown since by
    ``score --resume``): it stays as it is, with its decisions.

    Raises:
        InputError: an answer id already there with another report (another run, or the answer scored again).
    """
    stored: dict[str, tuple[str, str]] = {}
    ids = [r.id for r in chosen]
    for some in in_lists(ids):
        q = (
            select(db.answers.c.answer_id, db.answers.c.report, db.runs.c.path)
            .join(db.runs, db.runs.c.id == db.answers.c.run_id)
            .where(db.answers.c.answer_id.in_(some))
        )
        stored.update({aid: (report, was) for aid, report, was in conn.execute(q)})
    for r in chosen:
        if r.id in stored and stored[r.id][0] != _report_json(r):
            raise InputError(
                f"answer {r.id!r} of {path} is already in this review database from {stored[r.id][1]} with another "
                "report (another run, or the answer scored again since): serve it with another --db"
            )
    return [(r, why) for r, why in zip(chosen, reasons, strict=True) if r.id not in stored]
