"""The review database: its tables, its schema version, the engine, writes that wait their turn, and the running
totals of the team's progress that each decision keeps in its transaction (:func:`record_decision`).

SQLite by default (a file beside the run), in WAL mode with ``synchronous=FULL`` and a busy timeout; every write
transaction starts with ``BEGIN IMMEDIATE`` so that writers queue at the start instead of failing half-way.
PostgreSQL by URL (``postgresql://...``, driven by psycopg 3). :func:`write` runs a transaction and retries it when
the database is busy or a concurrent writer won a race (a unique key); its caller acknowledges only after it
returns, that is after the commit.

Schema versions: the table ``gj_schema`` holds the version; :data:`MIGRATIONS` are the steps from each version to the
next, applied in order by :func:`open_db` (a database made by a newer groundjudge is refused).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import (
    Column,
    Connection,
    Engine,
    ForeignKey,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
    and_,
    create_engine,
    event,
    func,
    select,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, IntegrityError, OperationalError

from groundjudge.errors import ConfigError

T = TypeVar("T")

SCHEMA_VERSION = 2

metadata = MetaData()

schema = Table("gj_schema", metadata, Column("version", Integer, nullable=False))

runs = Table(
    "gj_runs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("path", Text, nullable=False),
    Column("identity", String(64), nullable=False, unique=True),  # review.html.run_identity of its queue
    Column("answers", Integer, nullable=False),
    Column("loaded_at", String(40), nullable=False),
)

answers = Table(
    "gj_answers",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", Integer, ForeignKey("gj_runs.id"), nullable=False),
    Column("answer_id", Text, nullable=False, unique=True),  # the report's id: what the API names an answer by
    Column("position", Integer, nullable=False),  # in the queue, riskiest (or most informative) first
    Column("needed", Integer, nullable=False),  # reviewers it goes to: 2 in the overlap share, else 1
    Column("report", Text, nullable=False),  # the report as JSON (finite)
    Column("reasons", Text, nullable=False),  # why it is in the queue, as a JSON list of words
)

claims = Table(
    "gj_claims",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("answer_pk", Integer, ForeignKey("gj_answers.id"), nullable=False),
    Column("claim_id", Text, nullable=False),
    Column("position", Integer, nullable=False),
    Column("text", Text, nullable=False),
    Column("label", String(20), nullable=False),  # groundjudge's
    Column("route", String(20), nullable=True),
    Column("citation", String(20), nullable=True),
    UniqueConstraint("answer_pk", "claim_id"),
)

reviewers = Table(
    "gj_reviewers",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", Text, nullable=False, unique=True),
    Column("token_key", String(40), nullable=False, unique=True),  # the token's public part: finds the row
    Column("token_hash", String(64), nullable=False),  # sha256 of its secret part, compared in constant time
    Column("role", String(20), nullable=False),  # reviewer | adjudicator
    Column("created_at", String(40), nullable=False),
)


def _decision_table(name: str, *columns: Column[Any], label_nullable: bool) -> Table:
    """A table of decisions on claims: who decided which label on which claim, with a note, when, under the
    client's request key (a retried request is stored once); ``columns`` come after the note."""
    return Table(
        name,
        metadata,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("claim_pk", Integer, ForeignKey("gj_claims.id"), nullable=False, index=True),
        Column("reviewer_id", Integer, ForeignKey("gj_reviewers.id"), nullable=False),
        Column("label", String(20), nullable=label_nullable),
        Column("note", Text, nullable=False),
        *columns,
        Column("decided_at", String(40), nullable=False),
        Column("request_id", String(80), nullable=True),  # the client's key
        UniqueConstraint("reviewer_id", "request_id"),
    )


# append-only: every decision ever posted; a reviewer's latest one on a claim is the one that counts (a None label:
# the reviewer cleared their verdict)
decisions = _decision_table("gj_decisions", Column("citation", String(10), nullable=True), label_nullable=True)

# an adjudicator's final word on a claim the reviewers disagree on
adjudications = _decision_table("gj_adjudications", label_nullable=False)

# who reviews which answer: slot 0 for every answer, slot 1 too for the overlap share
assignments = Table(
    "gj_assignments",
    metadata,
    Column("answer_pk", Integer, ForeignKey("gj_answers.id"), nullable=False),
    Column("slot", Integer, nullable=False),
    Column("reviewer_id", Integer, ForeignKey("gj_reviewers.id"), nullable=False),
    Column("assigned_at", String(40), nullable=False),
    PrimaryKeyConstraint("answer_pk", "slot"),
    UniqueConstraint("answer_pk", "reviewer_id"),
)

# kept in step with the decisions, in each decision's transaction (record_decision, record_adjudication), so that
# the team's progress reads running totals instead of counting every decision: each reviewer's latest decision per
# claim (its id and label, None: cleared)
verdicts = Table(
    "gj_verdicts",
    metadata,
    Column("claim_pk", Integer, ForeignKey("gj_claims.id"), nullable=False),
    Column("reviewer_id", Integer, ForeignKey("gj_reviewers.id"), nullable=False),
    Column("decision_id", Integer, nullable=False),
    Column("label", String(20), nullable=True),
    PrimaryKeyConstraint("claim_pk", "reviewer_id"),
)

# the running totals: (name, owner 0, item 0) the queue's numbers; (name, a reviewer's id, 0) a reviewer's;
# ("answer_verdicts", a reviewer's id, an answer's pk) the claims of that answer with the reviewer's verdict
tallies = Table(
    "gj_tallies",
    metadata,
    Column("name", String(40), nullable=False),
    Column("owner", Integer, nullable=False),
    Column("item", Integer, nullable=False),
    Column("value", Integer, nullable=False),
    PrimaryKeyConstraint("name", "owner", "item"),
)

sessions = Table(
    "gj_sessions",
    metadata,
    Column("key_hash", String(64), primary_key=True),  # sha256 of the cookie's value
    Column("reviewer_id", Integer, ForeignKey("gj_reviewers.id"), nullable=False),
    Column("csrf", String(64), nullable=False),
    Column("created_at", String(40), nullable=False),
    Column("expires_at", String(40), nullable=False),
)


def claim_sizes() -> Any:
    """How many claims each answer has: a select of (answer_pk, size), the one count of them (the store's assignment
    and progress, the team's progress)."""
    return select(claims.c.answer_pk, func.count().label("size")).group_by(claims.c.answer_pk)


def _v1(conn: Connection) -> None:
    metadata.create_all(conn)


def _v2(conn: Connection) -> None:
    metadata.create_all(conn)  # the verdicts and the running totals
    rebuild_tallies(conn)


# MIGRATIONS[n] takes a database from version n to n + 1 (version 0: empty)
MIGRATIONS: list[Callable[[Connection], None]] = [_v1, _v2]


# -- the running totals -------------------------------------------------------------------------------------------

Key = tuple[str, int, int]  # a row of gj_tallies: name, owner, item

QUEUE_TALLIES = (
    "claims_decided",
    "claims_complete",
    "claims_double_reviewed",
    "claims_agreed",
    "disagreements_open",
    "disagreements_settled",
)


def claim_tallies(by: dict[int, str], settled: bool, needed: int, answer_pk: int) -> dict[Key, int]:
    """What one claim adds to the running totals, given each reviewer's verdict on it (``by``: reviewer id ->
    label, only verdicts), whether an adjudication settled it and how many reviewers its answer needs: the queue's
    claims decided, complete (by every reviewer needed), double-reviewed, agreed, disagreements open and settled
    (its reviewers' verdicts differ); each of its reviewers' claims decided and disagreements, and their verdicts
    on its answer."""
    if not by:
        return {}
    n, disputed = len(by), len(set(by.values())) > 1
    said = (n >= 1, n >= needed, n >= 2, n >= 2 and not disputed, disputed and not settled, disputed and settled)
    out: dict[Key, int] = {(name, 0, 0): int(yes) for name, yes in zip(QUEUE_TALLIES, said, strict=True)}
    for r in by:
        out |= {("claims_decided", r, 0): 1, ("disagreements", r, 0): int(disputed)}
        out[("answer_verdicts", r, answer_pk)] = 1
    return out


def _add_tallies(conn: Connection, after: dict[Key, int], before: dict[Key, int]) -> None:
    """Add ``after - before`` to the running totals, in one statement per row in key order (two writers lock the
    rows they share in the same order)."""
    change = {k: after.get(k, 0) - before.get(k, 0) for k in sorted(set(after) | set(before))}
    rows = [{"name": k[0], "owner": k[1], "item": k[2], "value": v} for k, v in change.items() if v]
    if not rows:
        return
    add = (postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert)(tallies)
    conn.execute(
        add.on_conflict_do_update(
            index_elements=["name", "owner", "item"], set_={"value": tallies.c.value + add.excluded.value}
        ),
        rows,
    )


def lock_claim(conn: Connection, claim_pk: int) -> tuple[int, int]:
    """Lock the claim for the rest of the transaction (on PostgreSQL ``FOR NO KEY UPDATE``; SQLite's write
    transactions already run one at a time): every change of its decisions, verdicts and adjudications waits for the
    one before. A decision takes it before it is stamped and numbered, so that on PostgreSQL two decisions at once
    are stamped in the order they are numbered (the service's latest is the highest number, its export's readers
    take the latest ``decided_at``). Returns its answer and the reviewers that answer needs."""
    answer_pk, needed = conn.execute(
        select(claims.c.answer_pk, answers.c.needed)
        .join(answers, answers.c.id == claims.c.answer_pk)
        .where(claims.c.id == claim_pk)
        .with_for_update(of=claims, key_share=True)
    ).one()
    return int(answer_pk), int(needed)


def _claim_state(conn: Connection, claim_pk: int) -> tuple[int, int, bool, dict[int, str]]:
    """The claim locked (:func:`lock_claim`: every change of its verdicts and adjudications waits for the one
    before: they read its state here), then its answer, the reviewers its answer needs, whether it is settled and
    its verdicts."""
    answer_pk, needed = lock_claim(conn, claim_pk)
    settled = conn.execute(select(adjudications.c.id).where(adjudications.c.claim_pk == claim_pk).limit(1)).first()
    v = verdicts
    by = conn.execute(select(v.c.reviewer_id, v.c.label).where(v.c.claim_pk == claim_pk, v.c.label.is_not(None)))
    return answer_pk, needed, settled is not None, {int(r): str(label) for r, label in by}


def record_decision(conn: Connection, claim_pk: int, reviewer_id: int, decision_id: int, label: str | None) -> None:
    """Keep the verdicts and running totals in step with decision ``decision_id`` just stored, in its transaction.
    A decision older than the reviewer's latest on the claim (a concurrent one on PostgreSQL numbered after it and
    committed first) changes nothing: the latest by number counts, as a recount takes it."""
    answer_pk, needed, settled, by = _claim_state(conn, claim_pk)
    v = verdicts
    mine = and_(v.c.claim_pk == claim_pk, v.c.reviewer_id == reviewer_id)
    old = conn.execute(select(v.c.decision_id, v.c.label).where(mine)).first()
    if old is not None and old.decision_id > decision_id:
        return
    if old is None:
        conn.execute(
            v.insert().values(claim_pk=claim_pk, reviewer_id=reviewer_id, decision_id=decision_id, label=label)
        )
    else:
        conn.execute(v.update().where(mine).values(decision_id=decision_id, label=label))
    after = {r: x for r, x in by.items() if r != reviewer_id} | ({reviewer_id: label} if label is not None else {})
    _add_tallies(conn, claim_tallies(after, settled, needed, answer_pk), claim_tallies(by, settled, needed, answer_pk))


def record_adjudication(conn: Connection, claim_pk: int) -> None:
    """Keep the running totals in step with an adjudication about to be stored on the claim, in its transaction (its
    first one settles the claim)."""
    answer_pk, needed, settled, by = _claim_state(conn, claim_pk)
    if not settled:
        _add_tallies(conn, claim_tallies(by, True, needed, answer_pk), claim_tallies(by, False, needed, answer_pk))


def rebuild_tallies(conn: Connection) -> None:
    """The verdicts and running totals counted again from every decision and adjudication (the schema's migration to
    them; a load that changed the reviewers some answer needs). On PostgreSQL the claims are locked first: a decision
    stored meanwhile waits for this count, then adds to it."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql("LOCK TABLE gj_claims IN EXCLUSIVE MODE")
    conn.execute(verdicts.delete())
    conn.execute(tallies.delete())
    t = decisions
    last = select(func.max(t.c.id)).group_by(t.c.claim_pk, t.c.reviewer_id)
    conn.execute(
        verdicts.insert().from_select(
            ["claim_pk", "reviewer_id", "decision_id", "label"],
            select(t.c.claim_pk, t.c.reviewer_id, t.c.id, t.c.label).where(t.c.id.in_(last)),
        )
    )
    settled = set(conn.execute(select(adjudications.c.claim_pk).distinct()).scalars())
    v = verdicts
    q = (
        select(v.c.claim_pk, v.c.reviewer_id, v.c.label, claims.c.answer_pk, answers.c.needed)
        .join(claims, claims.c.id == v.c.claim_pk)
        .join(answers, answers.c.id == claims.c.answer_pk)
        .where(v.c.label.is_not(None))
    )
    by: dict[int, dict[int, str]] = {}
    of: dict[int, tuple[int, int]] = {}
    for claim_pk, reviewer_id, label, answer_pk, needed in conn.execute(q):
        by.setdefault(int(claim_pk), {})[int(reviewer_id)] = str(label)
        of[int(claim_pk)] = (int(answer_pk), int(needed))
    total: dict[Key, int] = {}
    for claim_pk, labels in by.items():
        answer_pk, needed = of[claim_pk]
        for k, n in claim_tallies(labels, claim_pk in settled, needed, answer_pk).items():
            total[k] = total.get(k, 0) + n
    _add_tallies(conn, total, {})


class ReviewDatabaseError(ConfigError):
    """The review database cannot be reached, or was made by a newer groundjudge."""


def now() -> str:
    """The time in UTC, ISO 8601 with milliseconds (sorts as text)."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def default_url(run: str | Path) -> str:
    """The database ``review serve`` uses when none is given: a SQLite file beside the (first) run."""
    p = Path(run)
    return f"sqlite:///{p.with_name(p.name + '.review.sqlite').resolve()}"


def normalize_url(url: str) -> str:
    """``postgresql://`` and ``postgres://`` drive psycopg 3; a bare path is a SQLite file."""
    if "://" not in url:
        return f"sqlite:///{Path(url).resolve()}"
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def shown_url(url: str) -> str:
    """The URL without its password (for messages and logs)."""
    try:
        return make_url(normalize_url(url)).render_as_string(hide_password=True)
    except ArgumentError:
        return "(not a database URL)"


def _sqlite_events(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _connect(dbapi: Any, _record: Any) -> None:
        dbapi.isolation_level = None  # transactions are begun below, not by the driver
        cur = dbapi.cursor()
        for pragma in ("journal_mode=WAL", "synchronous=FULL", "busy_timeout=10000", "foreign_keys=ON"):
            cur.execute(f"PRAGMA {pragma}")
        cur.close()

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        writing = conn.get_execution_options().get("gj_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if writing else "BEGIN")


def open_db(url: str, migrate: bool = True) -> Engine:
    """An engine on ``url`` with the schema brought to :data:`SCHEMA_VERSION`.

    Raises:
        ReviewDatabaseError: not a database URL, the database cannot be reached, or its schema is newer.
    """
    full = normalize_url(url)
    try:
        parsed = make_url(full)
    except ArgumentError as exc:
        raise ReviewDatabaseError(f"--db {url!r} is not a database URL (sqlite:///FILE or postgresql://...)") from exc
    args: dict[str, Any] = {"pool_pre_ping": True}
    if parsed.get_backend_name() == "postgresql":
        args["connect_args"] = {"connect_timeout": 5}
    elif parsed.get_backend_name() == "sqlite":
        args["connect_args"] = {"check_same_thread": False, "timeout": 10}
        if parsed.database:
            folder = Path(parsed.database).parent
            if not folder.is_dir():
                raise ReviewDatabaseError(f"cannot open the review database {shown_url(url)}: no folder {folder}")
    try:
        engine = create_engine(full, **args)
    except (ArgumentError, ImportError) as exc:
        raise ReviewDatabaseError(f"cannot open the review database {shown_url(url)}: {exc}") from exc
    if engine.dialect.name == "sqlite":
        _sqlite_events(engine)
    if migrate:
        write(engine, _migrate)
    else:
        if engine.dialect.name == "sqlite" and parsed.database and not Path(parsed.database).is_file():
            raise ReviewDatabaseError(f"no review database at {shown_url(url)}")
        have = read(engine, version)
        if have != SCHEMA_VERSION:
            raise ReviewDatabaseError(
                f"{shown_url(url)} holds schema version {have}, not {SCHEMA_VERSION}: "
                "run 'groundjudge review serve' on it once (it migrates), or use a newer groundjudge"
            )
    return engine


def version(conn: Connection) -> int:
    """The database's schema version (0: no tables yet)."""
    if not conn.dialect.has_table(conn, "gj_schema"):
        return 0
    return int(conn.execute(select(schema.c.version)).scalar_one_or_none() or 0)


def _migrate(conn: Connection) -> None:
    have = version(conn)
    if have > SCHEMA_VERSION:
        raise ReviewDatabaseError(
            f"the review database has schema version {have}; this groundjudge knows up to {SCHEMA_VERSION}: upgrade it"
        )
    for step in MIGRATIONS[have:]:
        step(conn)
    if have == 0:
        conn.execute(schema.insert().values(version=SCHEMA_VERSION))
    elif have < SCHEMA_VERSION:
        conn.execute(schema.update().values(version=SCHEMA_VERSION))


def _busy(exc: DBAPIError) -> bool:
    """A transient conflict worth trying again: SQLite busy or locked, a PostgreSQL serialization failure or
    deadlock, or a unique key a concurrent writer took first."""
    if isinstance(exc, IntegrityError):
        return True
    code = getattr(exc.orig, "sqlstate", None)
    if code in ("40001", "40P01"):
        return True
    text = str(exc.orig).lower()
    return "locked" in text or "busy" in text


def _unreachable(engine: Engine, exc: Exception) -> ReviewDatabaseError:
    reason = str(getattr(exc, "orig", exc)).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return ReviewDatabaseError(
        f"the review database {shown_url(engine.url.render_as_string())} is unreachable: {reason}"
    )


def write(engine: Engine, fn: Callable[[Connection], T], attempts: int = 30) -> T:
    """Run ``fn`` in one write transaction and commit it; retried from the start when the database is busy or a
    concurrent writer won a race. Returns ``fn``'s result once committed.

    Raises:
        ReviewDatabaseError: the database cannot be reached (or stayed busy through every attempt).
    """
    for attempt in range(attempts):
        try:
            with engine.connect().execution_options(gj_write=True) as conn, conn.begin():
                return fn(conn)
        except DBAPIError as exc:
            if exc.connection_invalidated or not _busy(exc) or attempt == attempts - 1:
                if isinstance(exc, IntegrityError):
                    raise
                raise _unreachable(engine, exc) from exc
            time.sleep(min(0.5, 0.01 * 2**attempt))
    raise AssertionError("unreachable")  # pragma: no cover


def read(engine: Engine, fn: Callable[[Connection], T]) -> T:
    """Run ``fn`` in one read transaction.

    Raises:
        ReviewDatabaseError: the database cannot be reached.
    """
    for attempt in range(10):
        try:
            with engine.connect() as conn, conn.begin():
                return fn(conn)
        except OperationalError as exc:
            if exc.connection_invalidated or not _busy(exc) or attempt == 9:
                raise _unreachable(engine, exc) from exc
            time.sleep(0.05 * (attempt + 1))
    raise AssertionError("unreachable")  # pragma: no cover
