"""The batch state file that jobs share: batches by id and the results kept for later runs, changed under a lock.

One file (``batches.json`` in the cache folder by default, ``OUT.batches.json`` for the CLI) may be shared by any
number of jobs, in one process or many: it holds one entry per provider batch, keyed by the batch id, and each entry
lists the cache keys its requests answer. A job reads the file, and changes it, only inside
:meth:`BatchStateFile.transaction`, which holds an exclusive lock on ``<state>.lock`` beside it, reads the file
afresh, lets the job change the entries it submits or collects, and writes the file atomically (a temporary file,
flushed, renamed over it) before releasing the lock. No job writes an old copy: another job's entries, added while
this one waited, are kept as they are. The lock is the operating system's (``flock``; ``msvcrt.locking`` on
Windows), so a job that crashes while holding it releases it.

"One state per job" is one entry per batch, not one file per job: a job never rewrites entries it did not submit
or collect, and because all jobs on a cache see the same entries, a key that one job already sent is collected
from that job's batch by the next job that needs it instead of being sent (and paid) again.

The side file ``<state>.results.jsonl`` holds the raw results a job collected for keys it did not ask for (another
job, or a later run, asks for them); it is read and written in the same transaction.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from groundjudge import errors
from groundjudge.atomic import atomic_write_text
from groundjudge.errors import ArgumentError

log = logging.getLogger(__name__)

STATE_VERSION = 2  # 2: entries may be a submission whose batch id is not known yet ("id": null, "tag")


class StateTransaction:
    """The state and the kept results as read under the lock; change them, then :meth:`save` (or leave)."""

    def __init__(self, owner: BatchStateFile, state: dict[str, Any], kept: dict[str, dict[str, Any]]) -> None:
        self._owner = owner
        self.state = state
        self.kept = kept
        self.dirty = False

    @property
    def entries(self) -> list[dict[str, Any]]:
        batches: list[dict[str, Any]] = self.state["batches"]
        return batches

    def entry(self, batch_id: str) -> dict[str, Any] | None:
        """The entry of ``batch_id`` as the file holds it now."""
        return next((e for e in self.entries if e.get("id") == batch_id), None)

    def save(self) -> None:
        """Write the kept results, then the state, atomically (the lock stays held)."""
        self._owner.write(self)
        self.dirty = False


class BatchStateFile:
    """The state file at ``path``, its lock file and its kept-results side file; see the module docstring."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.results_path = self.path.with_suffix(".results.jsonl")
        self.lock_path = self.path.with_name(self.path.name + ".lock")

    @contextmanager
    def transaction(self) -> Iterator[StateTransaction]:
        """Hold the lock, read both files afresh, yield them; write them on the way out when marked ``dirty``.

        They are written even when the body raises, so that what was done before the error (a batch submitted,
        results cached) is not forgotten; the body keeps the state consistent after each step.
        """
        with file_lock(self.lock_path):
            tx = StateTransaction(self, self._load(), self._load_kept())
            try:
                yield tx
            finally:
                if tx.dirty:
                    tx.save()

    def _load(self) -> dict[str, Any]:
        if not self.path.exists():
            return {"version": STATE_VERSION, "batches": []}
        try:
            state = json.loads(self.path.read_text(encoding="utf-8"))
            if not isinstance(state, dict) or not isinstance(state.get("batches"), list):
                raise ArgumentError("no batches list")
            if not all(isinstance(e, dict) and isinstance(e.get("custom_ids"), dict) for e in state["batches"]):
                raise ArgumentError("an entry without custom_ids")
        except (OSError, ValueError) as exc:
            raise errors.ConfigError(
                f"batch state file {self.path} is unreadable ({exc}); it lists batches already paid for: "
                "fix or move it before running again"
            ) from exc
        return state

    def _load_kept(self) -> dict[str, dict[str, Any]]:
        """The kept results by cache key: ``{"batch", "custom_id", "key", "body"}`` per line of the side file."""
        if not self.results_path.exists():
            return {}
        try:
            text = self.results_path.read_text(encoding="utf-8")
        except OSError as exc:
            raise errors.ConfigError(
                f"batch results file {self.results_path} is unreadable ({exc}); it holds results already paid for: "
                "fix or move it before running again"
            ) from exc
        kept: dict[str, dict[str, Any]] = {}
        for raw in text.splitlines():
            try:
                line = json.loads(raw)
                kept[str(line["key"])] = line
            except (ValueError, KeyError, TypeError):
                log.warning("%s: a kept result line is unreadable, skipped: %.200s", self.results_path, raw)
        return kept

    def write(self, tx: StateTransaction) -> None:
        """The kept results first (removed when none are), then the state: both atomically."""
        if tx.kept:
            lines = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in tx.kept.values())
            self._write(self.results_path, lines)
        else:
            self.results_path.unlink(missing_ok=True)
        self._write(self.path, json.dumps({**tx.state, "version": STATE_VERSION}, indent=1))

    @staticmethod
    def _write(path: Path, text: str) -> None:
        """Replace ``path`` atomically, private to the user (0o600: it holds results already paid for)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, text, mode=0o600)


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created if missing) until the block ends.

    The operating system's lock on an open file: other processes, and other threads that open the file themselves,
    wait; the lock goes when the holder closes the file or dies, so a crashed job never leaves it held. Not
    re-entrant: a holder that asks again waits for itself.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        _acquire(fd, path)
        try:
            yield
        finally:
            _release(fd)
    finally:
        os.close(fd)


if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
    import msvcrt

    def _acquire(fd: int, path: Path) -> None:
        waited = 0.0
        while True:
            try:
                os.lseek(fd, 0, os.SEEK_SET)
                msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
                return
            except OSError:
                if waited == 0.0:
                    log.info("waiting for another job's lock on %s", path)
                time.sleep(0.05)
                waited += 0.05

    def _release(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    def _acquire(fd: int, path: Path) -> None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.info("waiting for another job's lock on %s", path)
            fcntl.flock(fd, fcntl.LOCK_EX)

    def _release(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)
