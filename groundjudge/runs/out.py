"""OUT, the report file of a dataset run: what it holds (for --resume and --retry-errors), its repair, the one
writer both engines append through, the input checks of a run, and how a run ends (:class:`RunResult`, raised from
Python as :class:`RunStopped`).

A line is a report (``id`` and ``verdict``), damaged (moved to ``OUT.damaged`` on repair, never lost), or a torn
last line (a write cut short by a kill: cut). Beside OUT, ``OUT.spent.json`` keeps what the runs that wrote it were
billed while a stopped run is being resumed (:func:`record_spent`). Each finished report goes to OUT, to the run's
summary and to the caller through one :class:`RunOutput`. Imports ``io``, ``models``, ``errors`` and the run summary
(:mod:`groundjudge.tally`), never ``review``.
"""

from __future__ import annotations

import json
import logging
import re
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from groundjudge.atomic import atomic_write_text, atomic_writer, same_file
from groundjudge.errors import (
    BatchPendingError,
    BudgetExceededError,
    CacheMissError,
    ConfigError,
    GroundjudgeError,
    InputError,
)
from groundjudge.io.ids import earlier_id_text, read_otherwise
from groundjudge.io.made_with import PLAIN, SHOWN, MadeWith, differences, shown_text
from groundjudge.io.reports import dumps, read_reports
from groundjudge.io.rows import row_id
from groundjudge.io.tables import (
    check_input_exists,
    count_rows,
    input_rows,
    is_local,
    local_path,
    read_rows,
    table_format,
)
from groundjudge.models import AnswerReport, Usage
from groundjudge.tally import RunSummary, Summarizer

log = logging.getLogger(__name__)


@dataclass
class OutLine:
    """What one line of an existing OUT holds."""

    rid: str | None  # None: not a report (damaged)
    failed: bool = False  # its report is ERROR or has errors
    complete: bool = True  # ends with a newline
    why: str = ""
    made_with: MadeWith | None = None  # a report's mode and versions


def classify(raw: bytes) -> OutLine:
    complete = raw.endswith(b"\n")
    if not raw.strip():
        return OutLine(None, complete=complete, why="blank line")
    try:
        data = json.loads(raw)
        if not isinstance(data, dict) or "id" not in data or "verdict" not in data:
            return OutLine(None, complete=complete, why="not a report (no id and verdict)")
        versions = data.get("versions")
        made_with = MadeWith.of(data.get("mode", ""), versions if isinstance(versions, dict) else {})
        failed = data["verdict"] == "ERROR" or bool(data.get("errors"))
        return OutLine(str(data["id"]), failed, complete, made_with=made_with)
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
    made_with: dict[str, MadeWith] = field(default_factory=dict)  # id -> what its (last) report was made with
    first_line: dict[MadeWith, int] = field(default_factory=dict)  # each kind of report's first line


def scan_out(out: Path, parquet_out: Path | None = None) -> Existing:
    """What OUT holds; changes nothing (a dry run may call it). With ``parquet_out``, the Parquet OUT whose JSONL
    ``out`` is: where a resume restores the JSONL from it first (:func:`parquet_lines`), the reports it would
    restore, read without writing them."""
    restored = parquet_lines(parquet_out, out) if parquet_out is not None else []
    if restored:
        return _scan(line.encode("utf-8") for line in restored)
    if not out.exists():
        return Existing()
    with out.open("rb") as fh:
        return _scan(fh)


def _scan(lines: Iterable[bytes]) -> Existing:
    """What the lines of an OUT hold (:func:`scan_out`)."""
    found = Existing()
    kinds: dict[MadeWith, MadeWith] = {}  # one object per kind of report, however many reports
    for n, raw in enumerate(lines, start=1):
        line = classify(raw)
        if line.rid is not None:
            if line.rid in found.ids:
                found.repeated = True
            found.ids.add(line.rid)
            if line.made_with is not None:
                made_with = kinds.setdefault(line.made_with, line.made_with)
                found.first_line.setdefault(made_with, n)
                found.made_with[line.rid] = made_with
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
    """Rewrite OUT atomically (``atomic.atomic_writer``) without its damaged lines, a torn last line and all but
    the last report of each id (a --retry-errors run appends the new report after the old one); damaged lines are
    moved to ``OUT.damaged`` rather than lost. Returns the lines moved."""
    last: dict[str, int] = {}
    with out.open("rb") as src:
        for n, raw in enumerate(src):
            line = classify(raw)
            if line.rid is not None:
                last[line.rid] = n
    moved: list[bytes] = []
    with atomic_writer(out, binary=True) as dst:
        with out.open("rb") as src:
            for n, raw in enumerate(src):
                line = classify(raw)
                if line.rid is not None:
                    if last[line.rid] == n:
                        dst.write(raw if line.complete else raw + b"\n")
                elif line.complete and line.why != "blank line":
                    moved.append(raw)
        if moved:  # kept before OUT is replaced without them
            with out.with_name(out.name + ".damaged").open("ab") as fh:
                fh.writelines(moved)
    return len(moved)


@dataclass(eq=False)
class ReportWriter:
    """OUT, written by both engines; opened at the first report, so that a run which fails before its first row
    changes nothing.

    ``fresh`` replaces OUT (--overwrite); otherwise reports are appended after OUT is repaired (damaged lines moved
    out, a torn last line cut, repeated ids cut to their last report). With ``drop_ids`` (--retry-errors, the ids
    whose old report failed) the new report of such a row is appended after its old one, and close() keeps only
    the last: a run stopped or killed early still holds one report per id, old for the rows it did not reach.
    """

    out: Path
    _: KW_ONLY
    fresh: bool
    existing: Existing
    drop_ids: set[str]
    note: Callable[[str], None] = log.warning
    replaced: int = field(default=0, init=False)  # reports written for an id of drop_ids: old reports to cut at close()
    rescored: set[str] = field(default_factory=set, init=False)  # the ids of drop_ids this run wrote a report for
    rows: int = field(default=0, init=False)
    _fh: Any = field(default=None, init=False, repr=False)

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
            self.rescored.add(rid)

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


def parquet_lines(parquet_out: Path, out: Path) -> list[str]:
    """The lines of OUT's JSONL as the Parquet OUT a finished run made of it holds them (its ``report`` column, read
    by ``io.reports.read_reports``), when the JSONL is gone or empty and the Parquet is there; none otherwise (the
    JSONL is OUT). What :func:`restore_from_parquet` writes, and what a dry run's :func:`scan_out` reads.

    Raises:
        ArgumentError: the Parquet file holds no reports (``io.reports.read_reports``).
    """
    if (out.exists() and out.stat().st_size) or not parquet_out.is_file() or not parquet_out.stat().st_size:
        return []
    return [dumps(r) + "\n" for r in read_reports(parquet_out)]


def restore_from_parquet(parquet_out: Path, out: Path) -> int:
    """Write OUT's JSONL again from the Parquet OUT (:func:`parquet_lines`), when the JSONL is gone or empty and the
    Parquet is there: what ``--resume`` continues, so that a resume keeps the reports the Parquet holds rather than
    scoring (and paying for) every row again. Returns the reports written (0: nothing to restore, OUT's JSONL left as
    it is).

    Raises:
        ArgumentError: the Parquet file holds no reports (``io.reports.read_reports``), before anything is written.
    """
    lines = parquet_lines(parquet_out, out)
    if lines:
        atomic_write_text(out, "".join(lines))
    return len(lines)


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
    input: str | Path = ""
    format: str = ""  # the input's format: jsonl, csv or parquet
    resume: bool = False
    out: Path | None = None

    def total(self) -> int | None:
        """Rows left to score, counted cheaply (no parsing) for a progress bar; None when that cannot be told."""
        rows = count_rows(self.input, self.format) if self.input else None
        return None if rows is None else max(0, rows - len(self.skip))

    def check_made_with(self, run: Callable[[], MadeWith], note: Callable[[str], None] = log.warning) -> None:
        """Refuse to resume OUT when the reports it keeps were made with other settings than this run's (``run()``:
        the mode and versions its reports will carry; asked only when OUT keeps a report, since it may load the NLI
        model). Both engines call it before their first call, so OUT is never touched by a refused run.

        Compared: the mode and every key of ``versions`` (:func:`differences`); the reports this run replaces
        (``--retry-errors``) are not. A report without versions (an answer that failed before it was scored) is
        compared on its mode alone; a key older groundjudge did not write (:data:`LATER_KEYS`) is not compared,
        nor the device and precision the NLI model ran at (``note`` says so).

        Raises:
            ConfigError: naming each setting that differs, with OUT's value and this run's, and what to do.
        """
        made_with = self.existing.made_with
        kept = {m for rid, m in made_with.items() if rid not in self.retry}
        if not kept:
            return
        now = run()
        notes: dict[str, None] = {}
        for old in sorted(kept, key=self.existing.first_line.__getitem__):
            diffs, why = differences(old, now)
            notes.update(dict.fromkeys(why))
            if diffs:
                ids = [rid for rid, m in made_with.items() if m == old and rid not in self.retry]
                reports = len(ids)
                failed = all(rid in self.existing.failed for rid in ids)  # e.g. a mistyped judge: every row ERROR
                retry = (
                    f" All {reports} of them failed: --retry-errors scores them again under this run's settings."
                    if failed
                    else ""
                )
                shown = "".join(
                    f"\n  {shown_text(key)}: {shown_text(a)} in OUT, {shown_text(b)} in this run"
                    for key, a, b in diffs[:SHOWN]
                )
                if len(diffs) > SHOWN:  # OUT is a file anyone may have written: its keys are cut like its values
                    shown += f"\n  and {len(diffs) - SHOWN} more"
                if any(key in SERVER_FIELDS for key, _, _ in diffs):  # a server comes from more than the option
                    shown += (
                        "\n  (a judge's server is its --base-url, the model's '@URL', or else OPENAI_BASE_URL or "
                        "ANTHROPIC_BASE_URL in the environment)"
                    )
                line = self.existing.first_line[old]
                settings = {f: v for key, a, b in diffs for f, v in settings_behind(key, a, b).items()}
                raise ConfigError(
                    f"{self.out or 'OUT'}: {reports} of its reports (the first on line {line}) were made with other "
                    f"settings than this run's:{shown}\n"
                    "Resuming would mix two kinds of run in one file, and every number read from it (report, compare, "
                    "metrics, calibrate) would be wrong. Rerun with the settings OUT was made with (the same command: "
                    "its --mode, --llm, --nli-model, --config, --preset and options, and the same groundjudge, whose "
                    "prompts have versions), or write this run to a new OUT (--out; --overwrite replaces OUT). "
                    f"Nothing was scored and OUT is unchanged.{retry}"
                    + (f"\nThe settings to give as OUT's: {_as_fields(settings)}" if settings else ""),
                    settings=settings,
                )
        if notes:
            note(f"{self.out or 'OUT'}: resumed; not compared: {'; '.join(notes)}")


TOKEN = re.compile(r"(\w+)(?:>=|<=|=)(.*?)(?= \w+(?:>=|<=|=)|$)")
"""A ``name=value`` (or ``name>=value``, ``name<=value``) of a versions value that lists settings
(``thresholds``, ``evidence``, ``verdict``, ``scoring``: :mod:`groundjudge.pipeline.evaluator`'s ``describe_*``)."""


UNSET = ("off", "model", "flagged only")
"""What a listing versions value writes for a setting left unset (no citation limit, the model's own window, the
second judge on flagged claims only)."""


SERVER_FIELDS = {"llm_server": "base_url", "second_judge_server": "second_judge_base_url"}
"""The versions keys that name a judge's server (:func:`groundjudge.llm.base.shown_server`), and the ``Config``
field that sets it."""


def settings_behind(key: str, old: str, new: str) -> dict[str, str | None]:
    """The ``Config`` fields behind a versions key that differs (:func:`differences`: OUT's value ``old``, this
    run's ``new``), each with the value that gives OUT's (None: OUT's says no value to give, a model's fingerprint,
    or no plain one;
    ``(none)``: unset in OUT's run, or a key its reports lack). A key named after a
    field is that field (``mode``, ``llm``, ``nli_model``, ``reasoning_effort``, ``second_judge``,
    ``second_judge_reasoning_effort``, ``head``), a judge's server its base URL's (:data:`SERVER_FIELDS`); a
    value that lists settings names each one that differs, by the field of its name (``preset``,
    ``citation_style``, ...; ``thresholds``' ``support`` is ``t_support``); a verdict threshold of its own comes
    from a config file's ``thresholds`` when no preset differs. A setting named otherwise (the evidence's
    ``passages`` and ``k``) and a prompt's version (the groundjudge release) are not named."""
    from groundjudge.config import Config, Thresholds
    from groundjudge.llm.base import DEFAULT_SERVER

    fields = Config.model_fields
    if key in SERVER_FIELDS:  # its value is the address without what may be a secret: given only when none was set
        return {SERVER_FIELDS[key]: "(none)" if old == DEFAULT_SERVER else None}
    if key != "thresholds" and key in fields:  # versions.thresholds is the local one, Config.thresholds the verdict's
        return {key: None if key in ("nli_model", "head") else _given(old)}
    if key not in ("thresholds", "evidence", "verdict", "scoring"):
        return {}
    was, now = dict(TOKEN.findall(old)), dict(TOKEN.findall(new))
    moved = [n for n in dict.fromkeys([*was, *now]) if was.get(n) != now.get(n)]
    out: dict[str, str | None] = {}
    for name in moved:
        field = f"t_{name}" if key == "thresholds" else name
        if field in fields:
            given = was.get(name, "(none)")
            boolean = fields[field].annotation in (bool, "bool")
            if name not in was and now.get(name) in UNSET and not boolean:
                continue  # unset in both runs (a listing that names it only beside another setting, as the sample)
            if boolean:  # written on / off
                given = {"on": "true", "off": "false"}.get(given, given)
            elif given in UNSET:
                given = "(none)"
            out[field] = _given(given)
        elif name in Thresholds.model_fields and "preset" not in moved:
            out["thresholds"] = None
    return out


def _given(value: str) -> str | None:
    """OUT's value of a setting as one to give, or None where it is no plain value (OUT is a file anyone may have
    written: a control character, a value of more than 300 characters)."""
    return value if len(value) <= 300 and PLAIN.fullmatch(value) else None


def _as_fields(settings: Mapping[str, str | None]) -> str:
    """``settings`` (:func:`settings_behind`) in words, as ``Config`` fields."""
    return ", ".join(
        f"{field} (as OUT's run set it)"
        if value is None
        else f"{field} unset"
        if value == "(none)"
        else f"{field}={shown_text(value)}"
        for field, value in settings.items()
    )


class RunOutput:
    """Where each finished report of a run goes, the same for both engines: appended to OUT (:class:`ReportWriter`),
    counted in the run's summary, then handed to ``on_report``; :meth:`result` is how the run ended.

    ``billed`` is what the run's ledger billed, which each engine leaves here when it ends, however it ends: an
    interrupted run (Ctrl-C) returns no result, and :mod:`groundjudge.runs.engines` keeps this bill for the resume."""

    def __init__(
        self,
        pending: Pending,
        out: Path,
        *,
        fresh: bool,
        note: Callable[[str], None] = log.warning,
        on_report: Callable[[AnswerReport], None] | None = None,
    ) -> None:
        self.out = out
        self.note = note
        self.writer = ReportWriter(out, fresh=fresh, existing=pending.existing, drop_ids=pending.retry, note=note)
        self.summary = Summarizer()
        self.on_report = on_report
        self.billed = Usage()

    def write(self, report: AnswerReport, line: str) -> None:
        """Append ``report`` (its JSON ``line``, written as given), count it, tell ``on_report``."""
        self.writer.write(line, report.id)
        self.summary.add(report)
        if self.on_report is not None:
            self.on_report(report)

    def close(self, finished: bool) -> None:
        """Close OUT (:meth:`ReportWriter.close`)."""
        self.writer.close(finished)

    def result(self, stopped: GroundjudgeError | None, billed: Usage, calls_at_stop: int | None) -> RunResult:
        """How the run ended: its summary, its stop, the reports written, what its ledger billed."""
        return RunResult(self.summary.summary(), stopped, self.writer.rows, billed, calls_at_stop)


def pending_rows(
    input: str | Path,
    out: Path,
    *,
    columns: Mapping[str, str] | None = None,
    resume: bool = False,
    retry_errors: bool = False,
    parquet_out: Path | None = None,
) -> Pending:
    """The rows of ``input`` a run writing ``out`` must score: with ``resume`` the ids OUT has a report for are
    skipped (with ``retry_errors`` except those whose report failed); rows read by the one reader
    (:func:`groundjudge.io.tables.input_rows`: formats, column mapping, the id rule). Reads OUT, changes nothing;
    with ``parquet_out`` (OUT is that Parquet's JSONL) a JSONL that is gone or empty is read as the reports the
    Parquet holds, as a resume restores them (:func:`scan_out`: a dry run, which restores nothing).

    The checks every run makes before it starts (both engines, the CLI and Python) are here, once.

    Raises:
        ConfigError: no input file (local or remote); ``out`` is the input; ``retry_errors`` without ``resume``; a
            ``.csv`` ``out``.
        ConfigError: also when the input's format cannot be told (.jsonl, .csv, .parquet or a Parquet folder).
        ConfigError: OUT holds reports under ids the id rule now reads otherwise (:func:`check_earlier_ids`).
        InputError: an input that holds no rows (local or remote).
    """
    check_input_exists(input)
    if is_local(input) and same_file(out, local_path(input)):
        raise ConfigError("--out is the input file")
    if retry_errors and not resume:
        raise ConfigError("--retry-errors goes with --resume (Python: retry_errors=True with resume=True)")
    if out.suffix.lower() == ".csv":  # the reports would be JSON lines under a CSV name, misread as CSV later
        raise ConfigError(
            f"--out {out}: reports are written as JSON lines (.jsonl) or Parquet (.parquet), not CSV; name the file "
            ".jsonl or .parquet"
        )
    fmt = table_format(input)  # the one reader's rule, checked before anything starts
    # a wrong or unfinished file would pass as "every row scored"; read up to its first row only (a remote one too)
    try:
        first = count_rows(input, fmt, at_most=1)
    except FileNotFoundError:  # a remote one (a local one is checked above)
        raise ConfigError(f"no input file {input}") from None
    if first == 0:
        raise InputError(f"the input {input} holds no rows (an empty file, or a CSV header alone): nothing to score")
    existing = scan_out(out, parquet_out) if resume else Existing()
    retry = set(existing.failed) if retry_errors else set()
    skip = existing.ids - retry
    check_earlier_ids(input, columns, skip, out)
    return Pending(existing, retry, skip, input_rows(input, skip, columns), input, fmt, resume, out)


def check_earlier_ids(
    input: str | Path, columns: Mapping[str, str] | None, skip: set[str], out: Path | None = None
) -> None:
    """Refuse to resume an OUT written under the id rule before ``io.ids.id_text`` (2026-11-29) for rows whose id it
    now reads otherwise (``1.0`` was ``"1.0"`` and is ``"1"``; ``" r1"`` is ``"r1"``; ``2.5`` and true/false are
    the row's error): their reports' ids would match no row, so the resume would score each again and OUT would hold
    two reports for it, one under each id. The input is read again only when an id of ``skip`` (the reports a resume
    keeps) may be such an id (``io.ids.read_otherwise``).

    Raises:
        ConfigError: naming OUT, each such row (at most ten) with its id in OUT and as read now, and what to do;
            before anything is scored, OUT unchanged.
    """
    if not any(read_otherwise(rid) for rid in skip):
        return
    moved: list[tuple[int, str, str]] = []
    for n, row in read_rows(input, columns):
        if not isinstance(row, dict):
            continue
        now = row_id(row, n)
        earlier = earlier_id_text(row.get("id"))
        was = f"row-{n}" if earlier is None else earlier.encode("utf-8", "backslashreplace").decode("utf-8")
        if was != now and was in skip and now not in skip:
            moved.append((n, was, now))
    if not moved:
        return
    shown = "".join(  # quoted, so that the spaces around an id show; escaped and cut, as OUT's keys are
        f"\n  row {n}: {json.dumps(was[:300])} in OUT, {json.dumps(now[:300])} now" for n, was, now in moved[:SHOWN]
    )
    if len(moved) > SHOWN:
        shown += f"\n  and {len(moved) - SHOWN} more"
    raise ConfigError(
        f"{out or 'OUT'}: {len(moved)} of its reports carry an id that this groundjudge reads otherwise (one id rule "
        "since 2026-11-29: 1.0 is 1, spaces around an id are not part of it, a fraction or true/false is no id):"
        f"{shown}\nResuming would score these rows again and OUT would hold two reports for each, one under each id. "
        'Rename those ids in OUT (each report\'s "id"; and in labels or reviews made from it) to the new ones and '
        "resume, or write this run to a new OUT (--out; --overwrite replaces OUT). Nothing was scored and OUT is "
        "unchanged."
    )


def score_input(
    input: str | Path,
    out: str | Path,
    score: Callable[[Pending, RunOutput], RunResult],
    *,
    columns: Mapping[str, str] | None = None,
    resume: bool = False,
    retry_errors: bool = False,
    progress: Callable[[int], None] | None = None,
) -> RunResult:
    """A run of a file from Python, on the engine whose ``score(pending, output)`` is given (an engine's
    ``score_rows`` with its other arguments bound): the input checks (:func:`pending_rows`), OUT replaced unless
    ``resume``, ``progress`` told the reports written so far after each one, and a stop raised.

    Raises:
        RunStopped: the run stopped after every report that finished was written (:func:`run_stopped`).
        ConfigError, InputError: bad arguments or an unreadable input, before anything is written.
    """
    out = Path(out)
    pending = pending_rows(input, out, columns=columns, resume=resume, retry_errors=retry_errors)
    written = 0

    def count(_: AnswerReport) -> None:
        nonlocal written
        written += 1
        if progress is not None:
            progress(written)

    result = score(pending, RunOutput(pending, out, fresh=not resume, on_report=count))
    if result.stopped is not None:
        raise run_stopped(result) from result.stopped
    return result


def deprecated(old: str, new: str) -> None:
    """Warn that the Python entry point ``old``, which returned the run summary, is deprecated for ``new``."""
    warnings.warn(
        f"{old} is deprecated: use {new} (it returns a RunResult; its .summary is what this returned)",
        DeprecationWarning,
        stacklevel=3,
    )


# -- how a run ends ----------------------------------------------------------------------------------------------


@dataclass
class RunResult:
    """How a run ended, the same for both engines.

    Attributes:
        summary: the summary of the reports this run wrote.
        stopped: the stop (budget, cache-only miss, a pending provider batch, or another GroundjudgeError) that
            ended the run after every finished report was written; None: it finished.
        rows_written: reports this run wrote.
        billed: what the run's ledger counted (both judges): every billed call, also those of rows that did not
            finish (their replies are cached; a ``--resume`` reads them free); ``summary.usage`` has only the rows'.
        calls_at_stop: billed calls of this run when a budget stop was raised (the rest were in flight then, or
            made by answers already in flight); None without a budget stop.
        earlier: what the earlier runs writing OUT billed, when this run resumed a stopped one
            (``OUT.spent.json``); None when there is none.
        failures_kept: the ids of an earlier run's failed reports this resume left in OUT (not given
            ``retry_errors``, or rows the input no longer holds): OUT is not all scored while there are any (the
            command exits 1 and says so).
    """

    summary: RunSummary
    stopped: GroundjudgeError | None
    rows_written: int
    billed: Usage = field(default_factory=Usage)
    calls_at_stop: int | None = None
    earlier: Usage | None = None
    failures_kept: list[str] = field(default_factory=list)

    if not TYPE_CHECKING:

        def __getattr__(self, name: str) -> Any:
            """The summary's fields, for code written when ``groundjudge.runs.score_file`` returned the summary."""
            if name in RunSummary.model_fields:
                warnings.warn(
                    f"RunResult.{name}: groundjudge.runs.score_file returns a RunResult now; read .summary.{name}",
                    DeprecationWarning,
                    stacklevel=2,
                )
                return getattr(self.summary, name)
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def unreported(self) -> Usage:
        """Billed by this run but in none of its rows: calls of rows that did not finish (a stop)."""
        return _billed(self.billed) - _billed(self.summary.usage)

    def spent(self) -> dict[str, Any] | None:
        """The ledger's account when the rows' usage does not tell all of it (a stop that left paid calls out, a
        resumed run): ``run`` (billed by this run), ``in_rows`` (of it, in the reports written), ``not_in_rows``,
        ``after_stop_calls`` (billed after the budget stop: in flight then), ``earlier`` and ``all_runs`` (with the
        runs this one resumed). None when the summary's usage is the whole account."""
        left_out = self.unreported
        if not (left_out.calls or left_out.cost_usd > 1e-12 or left_out.unpriced_calls) and self.earlier is None:
            return None
        spent: dict[str, Any] = {
            "run": _billed(self.billed).model_dump(mode="json"),
            "in_rows": _billed(self.summary.usage).model_dump(mode="json"),
            "not_in_rows": left_out.model_dump(mode="json"),
            "after_stop_calls": None if self.calls_at_stop is None else self.billed.calls - self.calls_at_stop,
        }
        if self.earlier is not None:
            spent["earlier"] = self.earlier.model_dump(mode="json")
            spent["all_runs"] = (self.earlier + _billed(self.billed)).model_dump(mode="json")
        return spent

    def spent_lines(self) -> list[str]:
        """:meth:`spent` in sentences, for people (the CLI prints them under the summary)."""
        spent = self.spent()
        if spent is None:
            return []
        run, left_out = _billed(self.billed), self.unreported
        lines = [f"billed by this run: {_calls(run)}, {run.cost_text()} (every call its ledger counted)"]
        if left_out.calls or left_out.cost_usd > 1e-12:
            line = (
                f"of them, {_calls(left_out)} ({left_out.cost_text()}) went to rows that did not finish and are in "
                "no report above: their replies are cached, so --resume reads them without paying again"
            )
            after = spent["after_stop_calls"]
            if after:
                line += f"; {after} of the calls were billed after the stop (in flight when it came)"
            lines.append(line)
        if self.earlier is not None:
            every = self.earlier + run
            lines.append(
                f"billed by the runs that wrote this OUT, this one and the earlier ones it resumed: {_calls(every)}, "
                f"{every.cost_text()} (earlier {_calls(self.earlier)}, {self.earlier.cost_text()}); replies those "
                "runs paid for show here as cached"
            )
        return lines


def _billed(usage: Usage) -> Usage:
    """Only what a provider bills (calls, tokens, USD): cache hits cost nothing and are left out."""
    return usage.model_copy(update={"cached_calls": 0})


def _calls(usage: Usage) -> str:
    return f"{usage.calls} call{'s' * (usage.calls != 1)}"


def spent_path(out: Path) -> Path:
    """Where the runs writing ``out`` keep what they were billed while a stopped run is being resumed."""
    return out.with_name(out.name + ".spent.json")


def read_spent(out: Path) -> Usage | None:
    """What the earlier runs writing ``out`` were billed (``OUT.spent.json``); None when none is kept (or it
    cannot be read: a resumed run then says only what it billed itself)."""
    path = spent_path(out)
    if not path.exists():
        return None
    try:
        return Usage.model_validate(json.loads(path.read_text(encoding="utf-8"))["billed"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("ignoring %s: %s", path, exc)
        return None


def record_spent(out: Path, result: RunResult, *, resume: bool, interrupted: bool = False) -> None:
    """Keep ``OUT.spent.json`` true after a run: kept (the earlier runs' bill plus this run's) while a run stopped
    (``interrupted``: by Ctrl-C, which is no ``stopped``) or resumed a stopped one; removed when a fresh run replaced
    OUT and finished, so a later resume never counts an old bill."""
    path = spent_path(out)
    if result.stopped is not None or interrupted or (resume and result.earlier is not None):
        every = (result.earlier or Usage()) + _billed(result.billed)
        if every.calls or path.exists():
            atomic_write_text(path, json.dumps({"billed": every.model_dump(mode="json")}) + "\n")
    elif not resume and path.exists():
        path.unlink()


class RunStopped(GroundjudgeError):
    """A dataset run stopped before its last row, after every report that finished was written.

    Raised by :func:`groundjudge.runs.score_file`. ``cause`` is the stop (BudgetExceededError, CacheMissError,
    BatchPendingError or another GroundjudgeError), ``result`` the run's :class:`RunResult` and ``summary`` its
    summary. The error is also an instance of its cause's class, with the cause's attributes (``except
    BudgetExceededError`` still catches a budget stop).
    """

    def __init__(self, result: RunResult) -> None:
        cause = result.stopped
        assert cause is not None
        Exception.__init__(self, str(cause))
        vars(self).update(vars(cause))
        self.cause: GroundjudgeError = cause
        self.result = result
        self.summary: RunSummary = result.summary


class BudgetStopped(RunStopped, BudgetExceededError):
    """A run stopped by its budget (``budget_usd`` or ``max_calls``)."""


class CacheMissStopped(RunStopped, CacheMissError):
    """A cache-only run stopped at a reply the cache does not hold."""


class BatchPendingStopped(RunStopped, BatchPendingError):
    """A run stopped while a provider batch is still running (a rerun collects it)."""


def run_stopped(result: RunResult) -> RunStopped:
    """The :class:`RunStopped` of a run that stopped (``result.stopped`` is set)."""
    for cause, kind in (
        (BudgetExceededError, BudgetStopped),
        (CacheMissError, CacheMissStopped),
        (BatchPendingError, BatchPendingStopped),
    ):
        if isinstance(result.stopped, cause):
            return kind(result)
    return RunStopped(result)
