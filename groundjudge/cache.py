"""Disk cache for LLM answers and NLI scores, shared safely by threads and processes (SQLite via diskcache).

Keys are SHA-256 hashes of canonical JSON of everything that changes an output; values are JSON text, so the
files hold no pickles and no secrets beyond what was sent (API keys are never part of a key or a value).

Filling a key (:meth:`Cache.filling`): callers that miss the same key of the same directory take turns, so that one
of them asks and the others read its answer (two evaluators over one cache folder, two notebook threads scoring the
same rows, two processes: two notebooks, two ``groundjudge score`` commands, Ray workers). In a process the turns
are a table in memory; across processes, a marker entry (:data:`FILLING`) that the directory's database adds
atomically, so one process's caller asks and the others look again until its answer is there.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import socket
import sqlite3
import threading
import time
import uuid
import weakref
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import diskcache

from groundjudge.errors import CacheMissError, ConfigError

log = logging.getLogger(__name__)

CacheMode = Literal["use", "off", "only", "refresh"]
"""use: read and write; off: neither; only: read, and a miss is an error (replay); refresh: write, never read."""

CACHE_MODES: tuple[str, ...] = ("use", "off", "only", "refresh")

COUNTS = "gj-counts"
"""The namespace of the lookups counted in a cache directory (``gj-counts:hits:llm``): not an entry of its own."""
_FLUSH_EVERY = 256  # lookups counted in memory before they are added to the directory's counts

FILLING = "gj-filling"
"""The namespace of the markers of keys being filled across processes (``gj-filling:llm:...``): a process's turn,
not an entry (:meth:`Cache.filling`)."""
_LEASE = 600.0  # seconds a marker holds the turn where its process cannot be seen (another host: see _alive)
_KEPT = 3600.0  # seconds a marker stays at most, even one of a live holder on this host (one its process failed to
# remove, an interrupt between adding it and its turn: a notebook's kernel lives on); a killed holder's too
_FAILED_FOR = 60.0  # seconds a failed turn's marker says so (to the processes that waited for it)
_POLL = (0.05, 0.5)  # the first and the longest wait between two looks at a key another process fills
_HOST = socket.gethostname()


def _flush(store: diskcache.Cache, pending: Counter[tuple[str, str]], lock: threading.Lock) -> None:
    """Add the lookups counted in memory to the directory's counts (atomic per key: processes may share it)."""
    with lock:
        taken = dict(pending)
        pending.clear()
    for (kind, namespace), n in taken.items():
        if n:
            store.incr(f"{COUNTS}:{kind}:{namespace}", n)


MARKER = "GROUNDJUDGE_CACHE"
"""The file that marks a directory as a groundjudge cache, written before the cache is made in it."""
_MARKER_TEXT = "A groundjudge cache (diskcache over SQLite): `groundjudge cache stats` and `cache clear` read it.\n"
_DISKCACHE_TABLES = {"Cache", "Settings"}
_OUR_KEY = re.compile(rf"(?:(?:{FILLING}:)?[a-z]+:[0-9a-f]{{64}}|{COUNTS}:(?:hits|misses):[a-z]+)")
_KEYS_LOOKED_AT = 200  # keys of an unmarked database read to tell an older groundjudge cache from another's


def _not_ours(database: Path) -> str | None:
    """Why the ``cache.db`` of a directory without the marker is not an older groundjudge cache (None: it is one):
    tables other than diskcache's, or keys groundjudge never writes (its keys are ``namespace:sha256``)."""
    try:
        con = sqlite3.connect(f"{database.resolve().as_uri()}?mode=ro", uri=True)
        try:
            tables = {name for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if tables != _DISKCACHE_TABLES:
                return f"has the tables {', '.join(sorted(tables)) or '(none)'}, not a disk cache's"
            keys = con.execute("SELECT key FROM Cache ORDER BY rowid LIMIT ?", (_KEYS_LOOKED_AT,)).fetchall()
        finally:
            con.close()
    except sqlite3.Error as exc:
        return f"is not a database groundjudge can read ({exc})"
    other = next((key for (key,) in keys if not (isinstance(key, str) and _OUR_KEY.fullmatch(key))), None)
    return None if other is None else f"holds entries groundjudge never writes (key {str(other)[:40]!r})"


def claim_directory(directory: Path) -> None:
    """Make ``directory`` a groundjudge cache, or check that it is one, before diskcache opens it: a directory with
    the marker; a new or empty one (the marker is written first); one whose ``cache.db`` an earlier groundjudge made
    (the marker is added). A ``cache.db`` of another program is refused: diskcache would add its tables to that
    database, rewrite its settings (size limit, eviction) and, on ``cache clear``, empty its ``Cache`` table.

    Raises:
        ConfigError: naming the directory and why its ``cache.db`` is not a groundjudge cache.
    """
    marker = directory / MARKER
    if marker.is_file():
        return
    database = directory / "cache.db"
    # a groundjudge process that made the folder meanwhile wrote the marker before its cache.db, which may still be
    # half made (no table yet): the marker, looked at again, says whose it is (Ray actors on a new shared folder)
    if database.exists() and (why := _not_ours(database)) is not None and not marker.is_file():
        raise ConfigError(
            f"cache directory {directory} is not a groundjudge cache: its cache.db {why}; pass another "
            "--cache-dir (a new folder is made on first use)"
        )
    directory.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):  # a read-only copy of an older cache still reads; it just stays unmarked
        marker.write_text(_MARKER_TEXT)


def default_cache_dir() -> Path:
    """$GROUNDJUDGE_CACHE_DIR, else $XDG_CACHE_HOME/groundjudge, else ~/.cache/groundjudge."""
    if env := os.environ.get("GROUNDJUDGE_CACHE_DIR"):
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "groundjudge"


def make_key(namespace: str, payload: Any) -> str:
    """A stable key: namespace plus the SHA-256 of the payload's canonical JSON."""
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return f"{namespace}:{hashlib.sha256(blob.encode()).hexdigest()}"


def _flush_late(store: diskcache.Cache, pending: Counter[tuple[str, str]], lock: threading.Lock) -> None:
    """:func:`_flush` when the cache is collected or the process exits: best effort, since the directory may be
    gone by then (a temporary one); the lookups are counts, not entries, and losing them loses no data."""
    with contextlib.suppress(OSError, sqlite3.Error, diskcache.Timeout):
        _flush(store, pending, lock)


class _Turn:
    """One caller's turn at filling a key: ``done`` is set when it is over, ``failed`` says it ended in an error,
    ``waiting`` counts the callers waiting for it to end (changed under ``_filling_lock``)."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.failed = False
        self.waiting = 0


_filling: dict[tuple[str, str], _Turn] = {}  # (directory, key) -> the turn of the caller filling it
_filling_lock = threading.Lock()  # held only to look up and change _filling, never while a key is being filled


def _forget_fillers() -> None:
    """In a forked child: the parent's fillers are not its threads and will never be done there."""
    global _filling_lock
    _filling.clear()
    _filling_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_fillers)


_held: set[str] = set()  # the tokens of the turns across processes this process holds now (see _alive)


def _stat(pid: int) -> tuple[str, str] | None:
    """A process's state and start time (clock ticks after boot) from ``/proc/<pid>/stat``; None where there is no
    such file (not Linux, or the process is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return (fields[0], fields[19]) if len(fields) > 19 else None


_own: dict[int, str | None] = {}  # this process's start time by pid (a forked child has its own pid: read anew)


def _started_here() -> str | None:
    """This process's start time (:func:`_stat`), read once per process rather than at every turn."""
    pid = os.getpid()
    if pid not in _own:
        stat = _stat(pid)
        _own[pid] = stat and stat[1]
    return _own[pid]


def _alive(holder: dict[str, Any]) -> bool:
    """Whether the process that holds a marker may still be filling its key: False only when it ran on this host
    and is gone (killed: its turn will never end, so its marker is not waited for until its lease ends). A process
    seen alive on this host (Linux: its pid and the start time the marker names) holds its turn as long as it asks,
    past the lease (a slow server, retries, a rate limiter's wait), up to an hour (:data:`_KEPT`). Elsewhere, or
    where it cannot be told (another host; not POSIX, where ``os.kill`` with signal 0 would not be a question),
    while the marker's lease lasts. Its pid may since name another process (pids are reused; a restarted
    container's scorer often gets the same one): this process's own pid is the holder only with a token of a turn
    it holds, another's only with the start time the marker names (Linux); a killed process its parent has not
    waited for yet (a zombie) is gone too."""
    pid = holder.get("pid")
    if holder.get("gone"):
        return False
    until = holder.get("until")  # the lease: what holds where the process cannot be seen
    leased = isinstance(until, (int, float)) and time.time() < until
    if holder.get("host") != _HOST or os.name != "posix" or not isinstance(pid, int) or pid <= 0:
        return leased  # (0 and below name process groups, never a process)
    if pid == os.getpid():
        return holder.get("token") in _held
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # (a pid past any pid: a marker no groundjudge wrote)
        return False
    except OSError:  # another user's process: it may be the holder
        return leased
    stat = _stat(pid)
    if stat is None:
        return leased
    state, started = stat
    named = holder.get("started")  # (a marker that names none: not told apart by it)
    if state in ("Z", "X"):
        return False
    return named == started if isinstance(named, str) else leased  # seen alive: its turn lasts as long as it does


def _holder(raw: Any) -> dict[str, Any]:
    """A marker's value, read; a value no process of groundjudge wrote is one of a process that is gone."""
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        value = None
    return value if isinstance(value, dict) else {"gone": True}


class Cache:
    """A namespaced JSON cache on disk with a mode and hit/miss counters: this object's (``hits``, ``misses``) and
    the directory's, over every process that used it since it was cleared (:meth:`stats`)."""

    def __init__(
        self,
        directory: str | Path | None = None,
        mode: CacheMode = "use",
        size_limit_bytes: int = 8 * 2**30,
    ) -> None:
        if mode not in CACHE_MODES:
            raise ConfigError(f"cache mode {mode!r} is not one of {', '.join(CACHE_MODES)}")
        self.mode: CacheMode = mode
        self.directory = Path(directory) if directory is not None else default_cache_dir()
        self._real_directory = os.path.realpath(self.directory)  # the turns' table key (filling): once, not per miss
        self._store: diskcache.Cache | None = None
        self._size_limit = size_limit_bytes
        self._lock = threading.Lock()
        self.hits: Counter[str] = Counter()
        self.misses: Counter[str] = Counter()
        self._pending: Counter[tuple[str, str]] = Counter()  # (hits|misses, namespace): not yet in the directory
        self._finalizer: Any = None
        if mode != "off" and self.directory.is_dir():  # another program's cache.db: refused before any work
            claim_directory(self.directory)

    @property
    def store(self) -> diskcache.Cache:
        if self._store is None:
            with self._lock:
                if self._store is None:
                    claim_directory(self.directory)
                    # SQLite's page cache and memory map bounded (8 MiB + 16 MiB; diskcache's defaults allow
                    # 32 + 64 MiB), so that a long run's resident memory stays flat as the cache file grows.
                    self._store = diskcache.Cache(
                        str(self.directory),
                        size_limit=self._size_limit,
                        sqlite_cache_size=2**11,
                        sqlite_mmap_size=2**24,
                    )
                    # the counts still in memory reach the directory when this cache is closed or collected, or
                    # when the process exits
                    self._finalizer = weakref.finalize(self, _flush_late, self._store, self._pending, self._lock)
        return self._store

    @property
    def reads(self) -> bool:
        return self.mode in ("use", "only")

    @property
    def writes(self) -> bool:
        return self.mode in ("use", "refresh")

    def _entry(self, key: str) -> tuple[Any | None, Exception | None]:
        """The one rule of a usable entry (:meth:`get` and :meth:`peek`): ``(value, None)`` for an entry that reads
        as JSON, ``(None, None)`` for none, ``(None, why)`` for a damaged one (not JSON: a damaged database page, a
        value cut short by another tool), which is a miss."""
        raw = self.store.get(key)
        if raw is None:
            return None, None
        try:
            return json.loads(raw), None
        except (ValueError, TypeError) as exc:  # UnicodeDecodeError is a ValueError too
            return None, exc

    def get(self, key: str, *, miss_ok: bool = False) -> Any | None:
        """The cached value, or None. In ``only`` mode a miss raises :class:`CacheMissError` unless ``miss_ok``.

        An entry that is not JSON (a damaged database page, a value cut short by another tool) is a miss, logged:
        the call is asked again and its answer replaces the entry, never served nor raised as the caller's error.
        """
        namespace = key.split(":", 1)[0]
        if not self.reads:
            return None
        value, damaged = self._entry(key)
        if damaged is not None:
            log.warning("ignoring a damaged cache entry (%s): %s", damaged, key)
        found = value is not None
        kind = "hits" if found else "misses"
        with self._lock:
            (self.hits if found else self.misses)[namespace] += 1
            self._pending[kind, namespace] += 1
            full = self._pending.total() >= _FLUSH_EVERY
        if full:
            _flush(self.store, self._pending, self._lock)
        if not found and self.mode == "only" and not miss_ok:
            what = "no cached" if damaged is None else "only a damaged (not JSON)"
            miss = CacheMissError(f"cache-only mode: {what} {namespace} entry for key {key}")
            miss.damaged = damaged is not None
            raise miss from damaged
        return value

    def peek(self, key: str) -> bool:
        """Whether :meth:`get` would return a value for the key (a damaged entry is a miss here too), without
        counting, logging or raising: for the batch runner's plan and cost estimates. It reads the entry."""
        return self.reads and self._entry(key)[0] is not None

    @contextlib.contextmanager
    def filling(self, key: str) -> Iterator[bool]:
        """Take the turn to fill ``key`` (a miss about to be asked for): yields True to the one caller in this process
        that fills it for this directory, which asks and stores the answer inside the block; a caller that finds
        another filling it waits until that one is done (no lock is held while it waits, nor while the filler asks).
        When the filler's block ended normally the waiter gets False: it should look in the cache again, and take
        its own turn if the key is still missing. When the filler's block raised (its call failed: an error, a
        refusal, a cut-off or rejected reply, its budget, an interrupt) nothing is handed on and every caller that
        waited gets True at once, without a turn: each asks itself, all at the same time, as if it had not waited
        (they are not queued behind each other, one failing call's time after another's). Only in ``use`` mode:
        another mode yields True at once.

        Across processes the same holds (:meth:`_across`): the caller of this process that holds its turn takes the
        directory's turn too, or waits for the process that holds it, looking at the key and the marker (from 50 ms
        apart up to 0.5 s), and gets False when the key is filled, True when that process failed (every process
        that waited asks, as above) or is gone (killed on this host; where it cannot be seen, another host, when
        its marker's lease of 10 minutes ended: a process seen alive on this host keeps its turn while it asks).
        """
        if self.mode != "use":
            yield True
            return
        which = (self._real_directory, key)
        with _filling_lock:
            other = _filling.get(which)
            if other is None:
                mine = _filling[which] = _Turn()
            else:
                other.waiting += 1
        if other is not None:
            try:
                other.done.wait()
            finally:
                with _filling_lock:
                    other.waiting -= 1
            yield other.failed
            return
        try:
            with self._across(key) as ask:
                yield ask
        except BaseException:
            mine.failed = True
            raise
        finally:
            with _filling_lock:
                if _filling.get(which) is mine:  # a forked child's table holds none of its parent's turns
                    del _filling[which]
            mine.done.set()

    @contextlib.contextmanager
    def _across(self, key: str) -> Iterator[bool]:
        """The directory's turn at ``key`` for this process (see :meth:`filling`): a marker added atomically, with
        this process's host, pid and a token of this turn, removed when the turn ends (a failed turn's marker says
        when it failed, for :data:`_FAILED_FOR` seconds: the processes that waited before then ask at once; a
        process that comes later takes a new turn)."""
        store, marker = self.store, f"{FILLING}:{key}"
        token = uuid.uuid4().hex
        since, pause = time.time(), _POLL[0]
        turn = {"host": _HOST, "pid": os.getpid(), "token": token, "started": _started_here()}
        before = store.get(key, retry=True)  # an entry the caller found unusable (no longer valid) is no answer
        # the lease counts from the turn taken, not from the wait begun ("until": see _alive)
        while not store.add(marker, mine := json.dumps({**turn, "until": time.time() + _LEASE}), _KEPT, retry=True):
            if (now := store.get(key, retry=True)) is not None and now != before:
                yield False  # filled by the other process: look again
                return
            raw = store.get(marker, retry=True)
            if raw is None:
                continue  # the turn ended between the two looks: take it
            holder = _holder(raw)
            failed = holder.get("failed_at")
            if isinstance(failed, (int, float)) and failed >= since:
                yield True  # the turn this caller waited for failed: ask, as every caller that waited does
                return
            if failed is not None or not _alive(holder):  # a turn that is over: take a new one
                with store.transact(retry=True):
                    if store.get(marker) == raw:
                        store.delete(marker)
                continue
            time.sleep(pause)
            pause = min(2 * pause, _POLL[1])
        owner = os.getpid()  # a child forked inside the turn ends its copy of the block: the parent's turn goes on
        _held.add(token)
        try:
            yield True
        except BaseException:
            if os.getpid() == owner:
                with store.transact(retry=True):
                    if store.get(marker) == mine:
                        failed_turn = {**json.loads(mine), "failed_at": time.time()}
                        store.set(marker, json.dumps(failed_turn), expire=_FAILED_FOR)
            raise
        finally:
            _held.discard(token)
        if os.getpid() == owner:
            with store.transact(retry=True):
                if store.get(marker) == mine:
                    store.delete(marker)

    def waiting(self, key: str) -> int:
        """How many callers in this process wait for the turn of the caller filling ``key`` in this directory (0
        when nobody fills it): read-only, for tests that must know callers are waiting before they go on."""
        with _filling_lock:
            turn = _filling.get((self._real_directory, key))
            return turn.waiting if turn is not None else 0

    def set(self, key: str, value: Any) -> None:
        if self.writes:
            self.store.set(key, json.dumps(value, ensure_ascii=False))

    def stats(self) -> dict[str, Any]:
        """Entries per namespace, bytes on disk, and the hits and misses of lookups per namespace in this directory
        (every process that used it, since it was cleared)."""
        per_namespace: Counter[str] = Counter()
        counted: dict[str, Counter[str]] = {"hits": Counter(), "misses": Counter()}
        if self.directory.exists():
            _flush(self.store, self._pending, self._lock)
            for key in self.store.iterkeys():
                namespace, _, rest = str(key).partition(":")
                if namespace == FILLING:  # a turn in progress, not an entry
                    continue
                if namespace != COUNTS:
                    per_namespace[namespace] += 1
                    continue
                kind, _, counted_namespace = rest.partition(":")
                value = self.store.get(key)
                if kind in counted and isinstance(value, int):
                    counted[kind][counted_namespace] += value
        volume = self.store.volume() if self.directory.exists() else 0
        return {
            "directory": str(self.directory),
            "mode": self.mode,
            "entries": dict(per_namespace),
            "total_entries": sum(per_namespace.values()),
            "bytes": volume,
            "hits": dict(counted["hits"]),
            "misses": dict(counted["misses"]),
        }

    def clear(self, namespace: str | None = None) -> int:
        """Delete every entry, or those of one namespace; returns how many were removed."""
        if not self.directory.exists():
            return 0
        if namespace is None:  # the lookups counted go too; they are not entries
            with self._lock:
                self._pending.clear()
            entries = sum(1 for key in self.store.iterkeys() if not str(key).startswith((COUNTS + ":", FILLING + ":")))
            self.store.clear()
            return entries
        removed = 0
        for key in list(self.store.iterkeys()):
            if str(key).startswith(namespace + ":") and self.store.delete(key):
                removed += 1
        return removed

    def close(self) -> None:
        if self._store is not None:
            self._finalizer()  # the counts still in memory first
            self._store.close()
            self._store = None
