"""Who is asking: access tokens (a bearer header for the API), sign-in sessions (a cookie for the page), CSRF
tokens, and the sign-in rate limit.

A token is ``gj_KEY_SECRET``: the key finds the reviewer, the secret's SHA-256 is compared with the stored one in
constant time (a key that finds no one is compared against a dummy, so both take the same time). A session is a
random cookie (HttpOnly, SameSite=Strict) whose hash is stored; a request that changes something under a session
must carry the session's CSRF token (the page sends it as a header, its forms as a field). Tokens never travel in
URLs and are never logged.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from sqlalchemy import Connection, Engine, select

from groundjudge.serve import db
from groundjudge.serve.db import read, write

SESSION_COOKIE = "gj_session"
SESSION_HOURS = 12
_DUMMY = hashlib.sha256(b"no such reviewer").hexdigest()


@dataclass(frozen=True)
class Reviewer:
    """The caller: their id, name and role; ``csrf`` is their session's CSRF token (None under a bearer token)."""

    id: int
    name: str
    role: str
    csrf: str | None = None


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def check_token(engine: Engine, token: str) -> Reviewer | None:
    """The reviewer a token belongs to, or None (compared in constant time)."""
    parts = token.split("_", 2)  # the key is hex; the secret may hold '_'
    key, secret = (parts[1], parts[2]) if len(parts) == 3 and parts[0] == "gj" else ("", token)

    def find(conn: Connection) -> tuple[int, str, str, str] | None:
        row = conn.execute(
            select(db.reviewers.c.id, db.reviewers.c.name, db.reviewers.c.role, db.reviewers.c.token_hash).where(
                db.reviewers.c.token_key == key
            )
        ).first()
        return None if row is None else (int(row[0]), row[1], row[2], row[3])

    row = read(engine, find) if key else None
    ok = hmac.compare_digest(_sha(secret), row[3] if row else _DUMMY)
    return Reviewer(row[0], row[1], row[2]) if ok and row else None


def new_session(engine: Engine, reviewer: Reviewer) -> tuple[str, str]:
    """Start a session for ``reviewer``: returns the cookie's value and the session's CSRF token."""
    value, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(24)
    expires = (datetime.now(timezone.utc) + timedelta(hours=SESSION_HOURS)).isoformat(timespec="milliseconds")

    def add(conn: Connection) -> None:
        conn.execute(db.sessions.delete().where(db.sessions.c.expires_at < db.now()))  # the expired ones go
        conn.execute(
            db.sessions.insert().values(
                key_hash=_sha(value), reviewer_id=reviewer.id, csrf=csrf, created_at=db.now(), expires_at=expires
            )
        )

    write(engine, add)
    return value, csrf


def check_session(engine: Engine, value: str) -> Reviewer | None:
    """The reviewer of a live session cookie, with its CSRF token; None for an unknown or expired one."""

    def find(conn: Connection) -> Reviewer | None:
        row = conn.execute(
            select(
                db.reviewers.c.id,
                db.reviewers.c.name,
                db.reviewers.c.role,
                db.sessions.c.csrf,
                db.sessions.c.expires_at,
                db.sessions.c.key_hash,
            )
            .join(db.reviewers, db.reviewers.c.id == db.sessions.c.reviewer_id)
            .where(db.sessions.c.key_hash == _sha(value))
        ).first()
        if row is None or row.expires_at < db.now() or not hmac.compare_digest(row.key_hash, _sha(value)):
            return None
        return Reviewer(int(row.id), row.name, row.role, row.csrf)

    return read(engine, find)


def end_session(engine: Engine, value: str) -> None:
    """Sign out: the session is deleted."""
    write(engine, lambda conn: conn.execute(db.sessions.delete().where(db.sessions.c.key_hash == _sha(value))))


def csrf_ok(reviewer: Reviewer, sent: str | None) -> bool:
    """Whether a request under a session carries its CSRF token (constant time); bearer requests need none."""
    if reviewer.csrf is None:
        return True
    return sent is not None and hmac.compare_digest(sent.encode("utf-8", "surrogatepass"), reviewer.csrf.encode())


class RateLimit:
    """At most ``limit`` failed sign-ins (or bad tokens) per client address in ``window`` seconds.

    The table is bounded. An address is kept only while it has a failure inside the window (checking an address
    adds nothing; the addresses are kept in the order of their latest failure, so those whose window has passed
    are dropped from the front as time goes on), each with at most ``limit`` times. It holds at most
    ``max_clients`` addresses: no address is ever dropped while its failures still count (dropping one would reset
    its limit), so an address the full table has no room for, and any address without its own failures while the
    overflow bucket still counts some, shares one bucket with the same ``limit``. The limit is never weaker: every
    failure of an address inside the window is counted in the one bucket its attempts are checked against (its
    own, or the shared one); under a flood of more than ``max_clients`` addresses the addresses without a record
    of their own are limited together, not each.
    """

    def __init__(
        self,
        limit: int = 10,
        window: float = 60.0,
        max_clients: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.clock = clock  # seconds that only go forward (a test moves its own by hand)
        self.limit = limit
        self.window = window
        self.max_clients = max_clients
        # address -> the times of its latest failures (at most ``limit``), oldest latest failure first
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()
        self._overflow: deque[float] = deque(maxlen=max(1, limit))  # the addresses the table had no room for
        self._lock = threading.Lock()

    def _forget(self, t: float) -> None:
        """Drop the addresses whose latest failure is outside the window, and the shared bucket's old times."""
        edge = t - self.window
        while self._failures:
            oldest = next(iter(self._failures.values()))
            if oldest[-1] > edge:
                break
            self._failures.popitem(last=False)
        while self._overflow and self._overflow[0] <= edge:
            self._overflow.popleft()

    def _bucket(self, client: str, t: float) -> deque[float] | None:
        """The failures ``client``'s attempts are checked against (None: none, and no room taken)."""
        self._forget(t)
        q = self._failures.get(client)
        if q is not None:
            while q[0] <= t - self.window:
                q.popleft()  # its latest failure is inside the window (_forget): q is never emptied here
            return q
        if self._overflow or len(self._failures) >= self.max_clients:
            return self._overflow
        return None

    def blocked(self, client: str) -> float:
        """Seconds until ``client`` may try again (0: now)."""
        t = self.clock()
        with self._lock:
            q = self._bucket(client, t)
            return 0.0 if q is None or len(q) < self.limit else q[0] + self.window - t

    def failed(self, client: str) -> None:
        """Count a failed attempt by ``client``."""
        t = self.clock()
        with self._lock:
            q = self._bucket(client, t)
            if q is None:
                q = self._failures[client] = deque(maxlen=max(1, self.limit))
            elif q is not self._overflow:
                self._failures.move_to_end(client)  # the table stays in the order of the latest failure
            q.append(t)

    def __len__(self) -> int:
        """How many addresses the table holds."""
        with self._lock:
            return len(self._failures)
