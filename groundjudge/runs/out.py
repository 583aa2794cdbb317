"""OUT, the report file of a dataset run: what it holds (for --resume and --retry-errors), its repair, and the one
writer both engines append through.

A line is a report (``id`` and ``verdict``), damaged (moved to ``OUT.damaged`` on repair, never lost), or a torn
last line (a write cut short by a kill: cut). Imports only ``io``.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from groundjudge.io.tables import input_rows

log = logging.getLogger(__name__)


@dataclass
class OutLine:
    """What one line of an existing OUT holds."""

    rid: str | None  # None: not a report (damaged)
    failed: bool = False  # its report is ERROR or has errors
    complete: bool = True  # ends with a newline
    why: str = ""


def classify(raw: bytes) -> OutLine:
    complete = raw.endswith(b"\n")
    if not raw.strip():
        return OutLine(None, complete=complete, why="blank line")
    try:
        data = json.loads(raw)
        if not isinstance(data, dict) or "id" not in data or "verdict" not in data:
            return OutLine(None, complete=complete, why="not a report (no id and verdict)")
        return OutLine(str(data["id"]), data["verdict"] == "ERROR" or bool(data.get("errors")), complete)
    except (ValueError, RecursionError) as exc:
        return OutLine(None, complete=complete, why=f"unreadable ({str(exc)[:80]})")


@dataclass
class Existing:
    """An existing OUT, read without changing it (for --resume)."""

    ids: set[str] = field(default_factory=set)  # ids with a report
    failed: set[str] = field(default_factory=set)  # of those, the ones whose report failed
    damaged: list[tuple[int, str]] = field(default_factory=list)  # (line, why) of damaged lines before the last
    torn_tail: bool = False  # the last line has no newline and is no report: a write cut short by a kill
    open_tail: bool = False  # the last line is a report without its newline
    repeated: bool = False  # an id has more than one report (a --retry-errors run killed before it compacted OUT)


def scan_out(out: Path) -> Existing:
    """What OUT holds; changes nothing (a dry run may call it)."""
    found = Existing()
    if not out.exists():
        return found
    with out.open("rb") as fh:
        for n, raw in enumerate(fh, start=1):
            line = classify(raw)
            if line.rid is not None:
                if line.rid in found.ids:
                    found.repeated = True
                found.ids.add(line.rid)
                if line.failed:  # the last report of an id is the one that counts
                    found.failed.add(line.rid)
                else:
                    found.failed.discard(line.rid)
                found.open_tail = not line.complete
            elif not line.complete:
                found.torn_tail = True
            elif line.why != "blank line":
                found.damaged.append((n, line.why))
    return found


def rewrite_out(out: Path) -> int:
    """Rewrite OUT atomically (temp file + os.replace) without its damaged lines, a torn last line and all but the
    last report of each id (a --retry-errors run appends the new report after the old one); damaged lines are moved
    to ``OUT.damaged`` rather than lost. Returns the lines moved."""
    last: dict[str, int] = {}
    with out.open("rb") as src:
        for n, raw in enumerate(src):
            line = classify(raw)
            if line.rid is not None:
                last[line.rid] = n
    tmp = out.with_name(out.name + ".tmp")
    moved: list[bytes] = []
    with out.open("rb") as src, tmp.open("wb") as dst:
        for n, raw in enumerate(src):
            line = classify(raw)
            if line.rid is not None:
                if last[line.rid] == n:
                    dst.write(raw if line.complete else raw + b"\n")
            elif line.complete and line.why != "blank line":
                moved.append(raw)
        dst.flush()
        os.fsync(dst.fileno())
    if moved:
        with out.with_name(out.name + ".damaged").open("ab") as fh:
            fh.writelines(moved)
    os.replace(tmp, out)
    return len(moved)


class ReportWriter:
    """OUT, written by both engines; opened at the first report, so that a run which fails before its first row
    changes nothing.

    ``fresh`` replaces OUT (--overwrite); otherwise reports are appended after OUT is repaired (damaged lines moved
    out, a torn last line cut, repeated ids cut to their last report). With ``drop_ids`` (--retry-errors, the ids
    whose old report failed) the new report of such a row is appended after its old one, and close() keeps only
    the last: a run stopped or killed early still holds one report per id, old for the rows it did not reach.
    """

    def __init__(
        self,
        out: Path,
        *,
        fresh: bool,
        existing: Existing,
        drop_ids: set[str],
        note: Callable[[str], None] = log.warning,
    ) -> None:
        self.out = out
        self.note = note
        self.fresh = fresh
        self.existing = existing
        self.drop_ids = drop_ids
        self.replaced = 0  # reports written for an id of drop_ids: old reports to cut at close()
        self.rows = 0
        self._fh: Any = None

    def _open(self) -> None:
        ex = self.existing
        if self.fresh:
            self._fh = self.out.open("w", encoding="utf-8")
            return
        if ex.damaged or ex.torn_tail or ex.open_tail or ex.repeated:
            moved = rewrite_out(self.out)
            if moved:
                self.note(f"moved {moved} damaged line(s) of {self.out} to {self.out.name}.damaged")
        self._fh = self.out.open("a", encoding="utf-8")

    def write(self, line: str, rid: str) -> None:
        """Append the report ``line`` of row id ``rid`` (given, so the line is not parsed again)."""
        if self._fh is None:
            self._open()
        self._fh.write(line + "\n")
        self._fh.flush()
        self.rows += 1
        if rid in self.drop_ids:
            self.replaced += 1

    def close(self, finished: bool) -> None:
        """Close OUT, then cut the old reports of the rows scored again; a run that finished without writing a row
        still leaves OUT as its result (empty if fresh)."""
        if self._fh is None and finished:
            self._open()
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        if self.replaced:
            rewrite_out(self.out)
            self.replaced = 0


def batch_state_path(out: Path) -> Path:
    """Where a run writing ``out`` keeps its provider batch ids (a rerun of the same command resumes them)."""
    return out.with_name(out.name + ".batches.json")


@dataclass
class Pending:
    """What a run still has to score, and what OUT holds already."""

    existing: Existing  # what OUT holds (ids, failed ids, damaged lines)
    retry: set[str]  # ids scored again, their old failed report replaced (--retry-errors)
    skip: set[str]  # ids left out: they have a report
    rows: Iterator[tuple[int, Any]]  # (row number, row or InputError), streamed


def pending_rows(
    input: str | Path,
    out: Path,
    *,
    columns: Mapping[str, str] | None = None,
    resume: bool = False,
    retry_errors: bool = False,
) -> Pending:
    """The rows of ``input`` a run writing ``out`` must score: with ``resume`` the ids OUT has a report for are
    skipped (with ``retry_errors`` except those whose report failed); rows read by the one reader
    (:func:`groundjudge.io.tables.input_rows`: formats, column mapping, the id rule). Reads OUT, changes nothing."""
    existing = scan_out(out) if resume else Existing()
    retry = set(existing.failed) if retry_errors else set()
    skip = existing.ids - retry
    return Pending(existing, retry, skip, input_rows(input, skip, columns))
