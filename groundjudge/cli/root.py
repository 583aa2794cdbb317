"""The command line. Library errors become exit codes here and nowhere else.

Exit codes: 0 ok, 1 some rows failed, 2 usage or configuration error, 3 budget reached, 4 a provider batch is
still running (re-run to collect it).
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.console import Console
from rich.markup import escape

from groundjudge import __version__
from groundjudge.cache import Cache
from groundjudge.errors import BatchPendingError, BudgetExceededError, CacheMissError, GroundjudgeError, InputError

if TYPE_CHECKING:  # heavy imports (numpy, torch): only where a command needs them
    from groundjudge.checker.head import VerdictHead
    from groundjudge.models import ClaimNLI

EXIT_OK, EXIT_ROWS_FAILED, EXIT_USAGE, EXIT_BUDGET, EXIT_PENDING = 0, 1, 2, 3, 4

app = typer.Typer(
    name="groundjudge",
    help="How much of an LLM's answer is grounded in its sources.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
cache_app = typer.Typer(help="Inspect or empty the disk cache.", no_args_is_help=True)
app.add_typer(cache_app, name="cache")
err = Console(stderr=True)

CacheDir = Annotated[
    Optional[Path],  # noqa: UP045 - typer needs Optional at runtime on 3.10
    typer.Option("--cache-dir", help="Cache directory \\[default: $GROUNDJUDGE_CACHE_DIR or ~/.cache/groundjudge]."),
]


def fail(message: str, code: int = EXIT_USAGE) -> typer.Exit:
    err.print(f"[red]error:[/red] {escape(message)}", highlight=False)
    return typer.Exit(code)


@app.command()
def version() -> None:
    """Print the version."""
    typer.echo(__version__)


@cache_app.command("stats")
def cache_stats(cache_dir: CacheDir = None) -> None:
    """Entries per kind (llm, nli) and size on disk, as JSON."""
    try:
        typer.echo(json.dumps(Cache(cache_dir).stats(), indent=2))
    except GroundjudgeError as exc:
        raise fail(str(exc)) from exc


@cache_app.command("clear")
def cache_clear(
    cache_dir: CacheDir = None,
    kind: Annotated[Optional[str], typer.Option(help="Only this kind: llm or nli.")] = None,  # noqa: UP045
) -> None:
    """Delete cached entries (all, or one kind)."""
    removed = Cache(cache_dir).clear(kind)
    typer.echo(f"removed {removed} entries")


@contextmanager
def _progress(console: Console, enabled: bool) -> Iterator[Any]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn
    from rich.text import Text

    class Rate(ProgressColumn):
        def render(self, task: Any) -> Text:
            # rows arrive a batch at a time, so the rate over the whole run, not rich's recent-window speed
            elapsed = task.elapsed or 0.0
            return Text(f"{task.completed / elapsed:.2f} rows/s" if elapsed > 0 and task.completed else "- rows/s")

    columns = [
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        Rate(),
        TextColumn("[cyan]${task.fields[cost]:.4f}"),
        TextColumn("cache hits {task.fields[cached]}"),
        TimeElapsedColumn(),
    ]
    with Progress(*columns, console=console, disable=not enabled, transient=False) as bar:
        yield bar


def _print_summary(console: Console, summary: Any) -> None:
    from rich.table import Table

    from groundjudge.review.report import summary_rows

    table = Table(title="groundjudge summary", show_header=False)
    table.add_column("", style="bold")
    table.add_column("")
    for name, value in summary_rows(summary):
        table.add_row(escape(name), escape(value))  # ids and reasons are data, not markup
    console.print(table)


# -- score ------------------------------------------------------------------------------------------------------


_BOM = b"\xef\xbb\xbf"


class _NonFiniteNumber(ValueError):
    pass


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NonFiniteNumber(f"{text} is out of range")
    return value


def _no_constant(name: str) -> Any:
    raise _NonFiniteNumber(f"{name} is not a JSON number")


_BLANK = object()


def _parse_line(raw: bytes, n: int) -> Any:
    """One input line as a row, an InputError naming the line and what is wrong with it, or _BLANK."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return InputError(f"not UTF-8: byte 0x{raw[exc.start]:02x} at byte {exc.start + 1} of the line", row=n)
    if not text.strip():
        return _BLANK
    try:
        return json.loads(text, parse_float=_finite_float, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        return InputError(f"invalid JSON: {exc.msg} at column {exc.colno}", row=n)
    except _NonFiniteNumber as exc:
        return InputError(f"invalid JSON: {exc}", row=n)
    except RecursionError:
        return InputError("invalid JSON: nested too deeply", row=n)


def _read_jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, parsed row or an InputError) for each non-blank line, streamed.

    Bytes are decoded line by line, so a bad byte spoils only its own line; a UTF-8 byte order mark is skipped.
    """
    with path.open("rb") as fh:
        for n, raw in enumerate(fh, start=1):
            if n == 1 and raw.startswith(_BOM):
                raw = raw[len(_BOM) :]
            row = _parse_line(raw, n)
            if row is not _BLANK:  # a JSON null is a (bad) row, not a blank line
                yield n, row


def _input_rows(path: Path, skip: set[str], columns: dict[str, str] | None = None) -> Iterator[tuple[int, Any]]:
    """Rows of ``path`` (JSONL, CSV or Parquet, columns mapped by :mod:`groundjudge.io`) whose report id is not in
    ``skip``; a row that repeats an earlier row's id is an InputError.

    Duplicates are decided while streaming (a set of the ids seen), over every row, skipped or not; the second
    row's report takes the id ``row-N``, so the first keeps its own.
    """
    from groundjudge.io.tables import read_rows

    return _unique_rows(read_rows(path, columns), skip)


def _unique_rows(rows: Iterable[tuple[int, Any]], skip: set[str]) -> Iterator[tuple[int, Any]]:
    """The rule for ids, shared by both engines: a row that repeats an earlier row's id is an InputError (its report
    id ``row-N``), decided over every row, skipped or not; rows whose id is in ``skip`` are left out."""
    from groundjudge.pipeline.evaluator import row_id

    seen: dict[str, int] = {}
    for n, row in rows:
        rid = row_id(row, n)
        if rid in seen:
            row = InputError(f"duplicate id {rid!r}: row {seen[rid]} has it already", row=n, field="id")
            rid = row_id(row, n)
        seen.setdefault(rid, n)
        if rid not in skip:
            yield n, row


def _count_rows(path: Path, fmt: str) -> int | None:
    """Rows in an input file, cheaply (no parsing): non-blank lines, CSV records, or Parquet metadata."""
    if fmt == "parquet":
        try:
            import pyarrow.parquet as pq

            return int(pq.ParquetFile(str(path)).metadata.num_rows)
        except Exception:  # the reader says what is wrong when it reads
            return None
    with path.open("rb") as raw:
        lines = sum(1 for line in raw if line.strip())
    return max(0, lines - 1) if fmt == "csv" else lines


@dataclass
class _OutLine:
    """What one line of an existing OUT holds."""

    rid: str | None  # None: not a report (damaged)
    failed: bool = False  # its report is ERROR or has errors
    complete: bool = True  # ends with a newline
    why: str = ""


def _classify(raw: bytes) -> _OutLine:
    complete = raw.endswith(b"\n")
    if not raw.strip():
        return _OutLine(None, complete=complete, why="blank line")
    try:
        data = json.loads(raw)
        if not isinstance(data, dict) or "id" not in data or "verdict" not in data:
            return _OutLine(None, complete=complete, why="not a report (no id and verdict)")
        return _OutLine(str(data["id"]), data["verdict"] == "ERROR" or bool(data.get("errors")), complete)
    except (ValueError, RecursionError) as exc:
        return _OutLine(None, complete=complete, why=f"unreadable ({str(exc)[:80]})")


@dataclass
class _Existing:
    """An existing OUT, read without changing it (for --resume)."""

    ids: set[str] = field(default_factory=set)  # ids with a report
    failed: set[str] = field(default_factory=set)  # of those, the ones whose report failed
    damaged: list[tuple[int, str]] = field(default_factory=list)  # (line, why) of damaged lines before the last
    torn_tail: bool = False  # the last line has no newline and is no report: a write cut short by a kill
    open_tail: bool = False  # the last line is a report without its newline
    repeated: bool = False  # an id has more than one report (a --retry-errors run killed before it compacted OUT)


def _scan_out(out: Path) -> _Existing:
    """What OUT holds; changes nothing (a dry run may call it)."""
    found = _Existing()
    if not out.exists():
        return found
    with out.open("rb") as fh:
        for n, raw in enumerate(fh, start=1):
            line = _classify(raw)
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


def _rewrite_out(out: Path) -> int:
    """Rewrite OUT atomically (temp file + os.replace) without its damaged lines, a torn last line and all but the
    last report of each id (a --retry-errors run appends the new report after the old one); damaged lines are moved
    to ``OUT.damaged`` rather than lost. Returns the lines moved."""
    last: dict[str, int] = {}
    with out.open("rb") as src:
        for n, raw in enumerate(src):
            line = _classify(raw)
            if line.rid is not None:
                last[line.rid] = n
    tmp = out.with_name(out.name + ".tmp")
    moved: list[bytes] = []
    with out.open("rb") as src, tmp.open("wb") as dst:
        for n, raw in enumerate(src):
            line = _classify(raw)
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


class _Writer:
    """OUT, opened at the first report, so that a run which fails before its first row changes nothing.

    ``fresh`` replaces OUT (--overwrite); otherwise reports are appended after OUT is repaired (damaged lines moved
    out, a torn last line cut, repeated ids cut to their last report). With ``drop_ids`` (--retry-errors, the ids
    whose old report failed) the new report of such a row is appended after its old one, and close() keeps only
    the last: a run stopped or killed early still holds one report per id, old for the rows it did not reach.
    """

    def __init__(self, out: Path, *, fresh: bool, existing: _Existing, drop_ids: set[str]) -> None:
        self.out = out
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
            moved = _rewrite_out(self.out)
            if moved:
                err.print(
                    escape(f"moved {moved} damaged line(s) of {self.out} to {self.out.name}.damaged"), highlight=False
                )
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
            _rewrite_out(self.out)
            self.replaced = 0


# Options that 'score --config FILE' takes from the file unless they are given on the command line.
_CONFIG_OPTIONS = {
    "mode": "mode",
    "llm": "llm",
    "base_url": "base_url",
    "nli_model": "nli_model",
    "qa": "qa",
    "cache_dir": "cache_dir",
    "cache_mode": "cache_mode",
    "budget": "budget_usd",
    "max_calls": "max_calls",
    "concurrency": "concurrency",
    "preset": "preset",
    "batch_api": "batch_api",
    "nli_kind": "nli_kind",
    "nli_supported_label": "nli_supported_label",
    "nli_trust_remote_code": "nli_trust_remote_code",
    "nli_max_length": "nli_max_length",
    "head": "use_head",
}


# --batch-api without --batch-size: rows evaluated together, so that each stage sends one provider batch.
_BATCH_API_ROWS = 5000


def _batch_state_path(out: Path) -> Path:
    return out.with_name(out.name + ".batches.json")


def _given(ctx: typer.Context, name: str) -> bool:
    """Whether option ``name`` was given on the command line (or in the environment), not left at its default."""
    source = ctx.get_parameter_source(name)  # by name: typer may bring its own copy of click's enum
    return source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")


@app.command()
def score(
    ctx: typer.Context,
    input: Annotated[
        Path,
        typer.Argument(
            help="Rows {id, contexts, answer | claim, question?, label?, reference?}: .jsonl, .csv or .parquet; "
            "RAGAS and DeepEval column names are recognised."
        ),
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            "-o",
            help="Where the reports go, one JSON object a line; a .parquet OUT is written from OUT.jsonl (kept, "
            "for --resume) at the end.",
        ),
    ],
    columns: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(
            "--map", help="Column mapping field=column,...: e.g. answer=response,contexts=retrieved_contexts."
        ),
    ] = None,
    mode: Annotated[
        str | None, typer.Option(help="nli, cascade or llm \\[default: cascade with --llm, else nli].")
    ] = None,
    llm: Annotated[Optional[str], typer.Option(help="provider/model, e.g. openai/gpt-4o-mini.")] = None,  # noqa: UP045
    base_url: Annotated[Optional[str], typer.Option(help="Server for an OpenAI-compatible model.")] = None,  # noqa: UP045
    nli_model: Annotated[
        str | None,
        typer.Option(help="NLI model id or path \\[default: $GROUNDJUDGE_NLI_MODEL or the hub default]."),
    ] = None,
    qa: Annotated[bool, typer.Option("--qa/--no-qa", help="QA-consistency check (with an LLM).")] = True,
    cache_dir: CacheDir = None,
    cache_mode: Annotated[str, typer.Option(help="use, off, only (replay; a miss is an error) or refresh.")] = "use",
    budget: Annotated[Optional[float], typer.Option(help="Stop before spending more than this many USD.")] = None,  # noqa: UP045
    max_calls: Annotated[Optional[int], typer.Option(help="Stop before more than this many LLM calls.")] = None,  # noqa: UP045
    concurrency: Annotated[int, typer.Option(help="LLM calls in flight at once.")] = 4,
    batch_size: Annotated[
        Optional[int],  # noqa: UP045
        typer.Option(
            help="Rows evaluated together (NLI batches across them); with --batch-api, unless given here, "
            f"{_BATCH_API_ROWS}, so that each stage sends one provider batch \\[default: 32].",
            min=1,
        ),
    ] = None,
    preset: Annotated[
        str | None,
        typer.Option(
            help="Thresholds by use case: default, support-bot, knowledge-base, medical-legal, research "
            "\\[default: default]."
        ),
    ] = None,
    config: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option(help="JSON config (e.g. from 'groundjudge calibrate'); options given here override it."),
    ] = None,
    resume: Annotated[bool, typer.Option(help="Skip ids already in OUT and append.")] = False,
    retry_errors: Annotated[
        bool, typer.Option(help="With --resume: score again the rows whose report in OUT failed, replacing it.")
    ] = False,
    overwrite: Annotated[
        bool, typer.Option(help="Replace OUT if it exists (kept until the new run has its first row).")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option(help="Estimate calls and cost (counting the cache) and exit; writes nothing.")
    ] = False,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Show a progress bar.")] = True,
    batch_api: Annotated[
        bool,
        typer.Option(
            help="Send each stage's LLM calls through the provider's batch API (half price, results within a day; "
            "the batch ids are kept beside OUT, so a rerun resumes them). Rows go "
            f"{_BATCH_API_ROWS} at a time unless --batch-size is given: one provider batch per stage for the whole "
            "input, not one per 32 rows, each awaited in turn."
        ),
    ] = False,
    nli_kind: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(help="Local checker kind: auto, nli, binary, seq2seq \\[default: auto, from the model's config]."),
    ] = None,
    nli_supported_label: Annotated[
        Optional[int],  # noqa: UP045
        typer.Option(help="Binary checkers whose labels are LABEL_0/LABEL_1: the index that means supported."),
    ] = None,
    nli_trust_remote_code: Annotated[
        bool, typer.Option(help="Allow a local checker that runs its own code (e.g. HHEM-2.1-open).")
    ] = False,
    nli_max_length: Annotated[
        Optional[int],  # noqa: UP045
        typer.Option(help="Tokens per (passage, claim) pair \\[default: the model's own limit]."),
    ] = None,
    head: Annotated[
        bool,
        typer.Option(
            "--head/--no-head",
            help="Apply the verdict head of the config or the one stored beside the model's weights; --no-head: "
            "raw NLI scores \\[default: a head if the config or the model has one].",
            show_default=False,
        ),
    ] = True,
    engine: Annotated[
        str, typer.Option(help="local, or ray: score on a Ray cluster (pip install 'groundjudge[ray]').")
    ] = "local",
    address: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(
            help="With --engine ray: the cluster (ray://HOST:10001, auto) \\[default: $RAY_ADDRESS or local]."
        ),
    ] = None,
) -> None:
    """Score answers against their sources; one report per input row, written as each finishes."""
    from groundjudge.config import Config
    from groundjudge.io.tables import parse_mapping, table_format
    from groundjudge.pipeline.evaluator import Evaluator
    from groundjudge.review.report import Summarizer, dumps, finite_report

    if not input.is_file():
        raise fail(f"no input file {input}")
    parquet_out: Path | None = None
    try:
        mapping = parse_mapping(columns)
        input_format = table_format(input) if input.suffix.lower() in (".csv", ".parquet") else "jsonl"
        if out.suffix.lower() == ".parquet":  # reports go to OUT.jsonl (resumable), converted at the end
            parquet_out, out = out, out.with_name(out.name + ".jsonl")
            if parquet_out.exists() and parquet_out.stat().st_size and not (resume or overwrite or dry_run):
                raise fail(f"{parquet_out} exists: pass --resume to continue it or --overwrite to replace it")
            table_format(parquet_out)
    except GroundjudgeError as exc:
        raise fail(str(exc)) from exc
    if out.exists() and out.resolve() == input.resolve():
        raise fail("--out is the input file")
    if out.exists() and out.stat().st_size and not (resume or overwrite or dry_run):
        raise fail(f"{out} exists: pass --resume to continue it or --overwrite to replace it")
    if retry_errors and not resume:
        raise fail("--retry-errors goes with --resume")
    values = {
        "mode": mode,
        "llm": llm,
        "base_url": base_url,
        "nli_model": nli_model,
        "qa": qa,
        "cache_dir": str(cache_dir) if cache_dir else None,
        "cache_mode": cache_mode,
        "budget": budget,
        "max_calls": max_calls,
        "concurrency": concurrency,
        "preset": preset,
        "batch_api": batch_api,
        "nli_kind": nli_kind,
        "nli_supported_label": nli_supported_label,
        "nli_trust_remote_code": nli_trust_remote_code,
        "nli_max_length": nli_max_length,
        "head": head,
    }
    # only what was given: the CLI's own defaults must not overwrite a config file's values
    overrides = {_CONFIG_OPTIONS[k]: v for k, v in values.items() if v is not None and _given(ctx, k)}
    try:
        cfg = Config.load(config, **overrides) if config else Config.make(**overrides)
        if cfg.batch_api and cfg.batch_state is None:  # beside OUT: a rerun of this command resumes the batches
            cfg = Config.make(**cfg.model_dump(exclude_unset=True), batch_state=str(_batch_state_path(out)))
        evaluator = Evaluator(cfg)
    except GroundjudgeError as exc:
        raise fail(str(exc)) from exc

    if batch_size is None:  # one provider batch per stage, not one per 32 rows awaited in turn (up to a day each)
        batch_size = _BATCH_API_ROWS if cfg.batch_api else 32
    if engine not in ("local", "ray"):
        raise fail(f"--engine {engine!r}: local or ray")
    if engine == "ray" and not dry_run:
        if retry_errors or cfg.batch_api or mapping or input_format == "csv":
            raise fail(
                "--engine ray takes JSONL or Parquet with groundjudge's field names; no --retry-errors, "
                "--batch-api or --map yet (run those with the local engine)"
            )
        code = EXIT_USAGE
        try:
            code = _score_on_ray(
                input, out, cfg, address=address, resume=resume, batch_size=batch_size, progress=progress
            )
        finally:
            if parquet_out is not None and out.exists():  # as the local engine does
                code = _write_parquet_out(out, parquet_out, code)
        raise typer.Exit(code)
    existing = _scan_out(out) if resume else _Existing()
    for line, why in existing.damaged:
        err.print(
            f"[yellow]{escape(str(out))}, line {line}:[/yellow] damaged ({escape(why)}); "
            "its row, if any, is scored again",
            highlight=False,
        )
    retry = existing.failed if retry_errors else set()
    skip = existing.ids - retry
    rows = _input_rows(input, skip, mapping)
    if dry_run:  # writes nothing, ever
        estimate = evaluator.estimate(row for _, row in rows if not isinstance(row, InputError))
        typer.echo(json.dumps(estimate, indent=2))
        raise typer.Exit(EXIT_OK)

    try:
        _ = evaluator.nli  # load the model now: a bad --nli-model is a usage error; the rate excludes loading
    except GroundjudgeError as exc:
        raise fail(str(exc)) from exc
    total = None
    if progress:  # a cheap line count, no parsing
        total = _count_rows(input, input_format)
        total = None if total is None else max(0, total - len(skip))
    summary = Summarizer()
    code = EXIT_OK
    console = Console(stderr=True)
    writer = _Writer(out, fresh=overwrite and not resume, existing=existing, drop_ids=retry)
    finished = False
    try:
        with _progress(console, progress) as bar:
            task = bar.add_task("scoring", total=total, cost=0.0, cached=0)
            batch_task: list[Any] = []

            def on_batch(done: int, requests: int) -> None:
                if not batch_task:
                    batch_task.append(bar.add_task("provider batch", total=requests, cost=0.0, cached=0))
                bar.update(batch_task[0], completed=done, total=requests, cost=evaluator.usage.cost_usd)

            evaluator.batch_progress = on_batch
            try:
                for report in evaluator.evaluate_numbered(rows, batch_size=batch_size):
                    report = finite_report(report)  # a NaN or Infinity makes the row an ERROR, never the file
                    writer.write(dumps(report), report.id)
                    summary.add(report)
                    usage = evaluator.usage
                    bar.update(task, advance=1, cost=usage.cost_usd, cached=usage.cached_calls)
                finished = True
            except BudgetExceededError as exc:
                where = f"Finished rows are in {out}" if writer.rows else f"No row finished; {out} is as it was"
                err.print(
                    f"[yellow]budget reached:[/yellow] {escape(str(exc))}. {escape(where)}; raise the budget and "
                    "re-run with --resume to go on.",
                    highlight=False,
                )
                code = EXIT_BUDGET
            except CacheMissError as exc:
                err.print(f"[red]cache-only run stopped:[/red] {escape(str(exc))}", highlight=False)
                code = EXIT_ROWS_FAILED
            except BatchPendingError as exc:
                err.print(
                    f"[yellow]provider batch still running:[/yellow] {escape(str(exc))}. Finished rows are in "
                    f"{escape(str(out))}; re-run the same command with --resume later to collect the batch "
                    "(it is not paid twice).",
                    highlight=False,
                )
                code = EXIT_PENDING
            except GroundjudgeError as exc:
                err.print(f"[red]run stopped:[/red] {escape(str(exc))}", highlight=False)
                code = EXIT_ROWS_FAILED
    finally:
        writer.close(finished)
        if parquet_out is not None and out.exists():
            code = _write_parquet_out(out, parquet_out, code)
    result = summary.summary()
    _print_summary(console, result)
    if code == EXIT_OK and result.rows_failed:
        code = EXIT_ROWS_FAILED
    raise typer.Exit(code)


def _write_parquet_out(out: Path, parquet_out: Path, code: int) -> int:
    """Convert the run's JSONL ``out`` to the ``--out *.parquet`` the user asked for; returns the exit code."""
    from groundjudge.io.tables import write_parquet

    try:
        written = write_parquet(out, parquet_out)
        err.print(escape(f"wrote {parquet_out} ({written} reports; resumable JSONL in {out})"))
    except (GroundjudgeError, ValueError, OSError) as exc:
        err.print(f"[red]could not write {escape(str(parquet_out))}:[/red] {escape(str(exc))}")
        return code or EXIT_ROWS_FAILED
    return code


def _score_on_ray(
    input: Path, out: Path, cfg: Any, *, address: str | None, resume: bool, batch_size: int, progress: bool
) -> int:
    """``score --engine ray``: the same reports, resume, summary and exit codes, computed on a Ray cluster."""
    try:
        from groundjudge.runs.ray import score_file
    except ImportError as exc:
        raise fail(f"--engine ray needs Ray: pip install 'groundjudge[ray]' ({exc})") from exc
    console = Console(stderr=True)
    code = EXIT_OK
    summary: Any = None
    with _progress(console, progress) as bar:
        task = bar.add_task("scoring on ray", total=None, cost=0.0, cached=0)
        try:
            summary = score_file(
                str(input),
                out,
                cfg,
                address=address,
                resume=resume,
                batch_size=batch_size,
                progress=lambda n: bar.update(task, completed=n),
            )
        except BudgetExceededError as exc:
            err.print(f"[yellow]budget reached:[/yellow] {escape(str(exc))}; re-run with --resume", highlight=False)
            summary, code = getattr(exc, "summary", None), EXIT_BUDGET
        except CacheMissError as exc:
            err.print(f"[red]cache-only run stopped:[/red] {escape(str(exc))}", highlight=False)
            summary, code = getattr(exc, "summary", None), EXIT_ROWS_FAILED
        except GroundjudgeError as exc:
            raise fail(str(exc)) from exc
    if summary is not None:
        _print_summary(console, summary)
        if code == EXIT_OK and summary.rows_failed:
            code = EXIT_ROWS_FAILED
    return code


# -- metrics, compare, calibrate -------------------------------------------------------------------------------


def _load_reports(path: Path) -> list[Any]:
    from groundjudge.review.report import read_reports

    if not path.is_file():
        raise fail(f"no file {path}")
    try:
        return list(read_reports(path))
    except ValueError as exc:
        raise fail(f"{path} is not a groundjudge output file: {exc}") from exc


@app.command()
def report(
    scored: Annotated[Path, typer.Argument(help="Output of 'groundjudge score'.")],
    html: Annotated[Optional[Path], typer.Option(help="Write a self-contained HTML review page here.")] = None,  # noqa: UP045
    only_flagged: Annotated[bool, typer.Option(help="Only answers that did not pass cleanly.")] = False,
) -> None:
    """Summarize a scored file; with --html, write a review page for reviewers."""
    from groundjudge.review.report import summarize

    reports = _load_reports(scored)
    if html is not None:
        from groundjudge.review.html import render_html

        html.write_text(
            render_html(reports, title=f"groundjudge review: {scored.name}", only_flagged=only_flagged),
            encoding="utf-8",
        )
        err.print(escape(f"wrote {html} ({sum(1 for r in reports if r.flagged or not only_flagged)} answers)"))
    _print_summary(Console(), summarize(r for r in reports if r.flagged or not only_flagged))


@app.command()
def metrics(
    scored: Annotated[Path, typer.Argument(help="Output of 'groundjudge score' on rows that carried gold labels.")],
    reviews: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option(help="Reviewer decisions exported by the review page (JSONL): agreement with them instead."),
    ] = None,
) -> None:
    """Agreement with gold labels (or with reviewers): balanced accuracy, P/R/F1, confusion, kappa, by route;
    last line JSON."""
    from groundjudge.review.metrics import label_metrics

    if reviews is not None:
        _review_metrics(scored, reviews)
        return
    try:
        m = label_metrics(_load_reports(scored))
    except ValueError as exc:
        raise fail(str(exc)) from exc
    console = Console()
    console.print(f"[bold]{m['level']}-level labels[/bold]: n={m['n']}, unlabelled={m['unlabelled']}")
    _print_block(console, "all", m)
    for route, block in m["by_route"].items():
        _print_block(console, f"decided by {route}", block)
    esc = m["escalation_rate"]
    console.print(
        f"escalation rate {'-' if esc is None else f'{100 * esc:.1f}%'}, calls {m['calls']}, cost ${m['cost_usd']:.4f}"
    )
    summary = {
        "level": m["level"],
        "n": m["n"],
        "balanced_accuracy": m["balanced_accuracy"],
        "kappa": m["kappa"],
        "escalation_rate": esc,
        "cost_usd": m["cost_usd"],
        "confusion": m["confusion"],
        "labels": m["labels"],
        "by_route": {k: {"n": v["n"], "balanced_accuracy": v["balanced_accuracy"]} for k, v in m["by_route"].items()},
    }
    if "three_way" in m:
        summary["balanced_accuracy_3way"] = m["three_way"]["balanced_accuracy"]
    typer.echo(json.dumps(summary))


def _review_metrics(scored: Path, reviews: Path) -> None:
    """``metrics --reviews``: groundjudge's claim verdicts against reviewer labels; last line JSON."""
    from groundjudge.review.metrics import read_reviews, review_metrics

    if not reviews.is_file():
        raise fail(f"no file {reviews}")
    try:
        m = review_metrics(_load_reports(scored), read_reviews(reviews))
    except (ValueError, InputError) as exc:
        raise fail(f"{reviews}: {exc}") from exc
    console = Console()
    console.print(
        f"[bold]reviewer labels[/bold] (rows) against groundjudge (columns): n={m['n']} of {m['n_reviews']} "
        f"reviews, unmatched={m['unmatched']}, changed since review={m['changed_since_review']}, "
        f"agreement {100 * m['agreement']:.1f}%"
    )
    _print_block(console, "all", m)
    for route, block in m["by_route"].items():
        _print_block(console, f"decided by {route}", block)
    if m["unmatched"]:
        err.print(
            f"{m['unmatched']} reviews match no claim of {escape(str(scored))} (answer id, claim id and claim text)",
            highlight=False,
        )
    typer.echo(
        json.dumps(
            {
                "level": "review",
                "n": m["n"],
                "agreement": m["agreement"],
                "kappa": m["kappa"],
                "balanced_accuracy": m["balanced_accuracy"],
                "confusion": m["confusion"],
                "labels": m["labels"],
                "binary": {"kappa": m["binary"]["kappa"], "balanced_accuracy": m["binary"]["balanced_accuracy"]},
                "by_route": {
                    k: {"n": v["n"], "agreement": v["agreement"], "kappa": v["kappa"], "confusion": v["confusion"]}
                    for k, v in m["by_route"].items()
                },
                "unmatched": m["unmatched"],
                "changed_since_review": m["changed_since_review"],
                "reviewers": m["reviewers"],
            }
        )
    )


def _print_block(console: Console, title: str, block: dict[str, Any]) -> None:
    from rich.table import Table

    labels = block["labels"]
    table = Table(
        title=f"{title}: n={block['n']}, balanced accuracy {100 * block['balanced_accuracy']:.1f}, "
        f"kappa {block['kappa']:.3f}"
    )
    table.add_column("gold \\ predicted")
    for label in labels:
        table.add_column(label, justify="right")
    for label in ("precision", "recall", "f1"):
        table.add_column(label, justify="right")
    for i, label in enumerate(labels):
        pl = block["per_label"][label]
        table.add_row(
            label, *map(str, block["confusion"][i]), f"{pl['precision']:.3f}", f"{pl['recall']:.3f}", f"{pl['f1']:.3f}"
        )
    console.print(table)


@app.command()
def compare(
    a: Annotated[Path, typer.Argument(help="Scored run A (e.g. prompt v1).")],
    b: Annotated[Path, typer.Argument(help="Scored run B of the same samples (e.g. prompt v2).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON only.")] = False,
    fail_if_worse: Annotated[bool, typer.Option(help="Exit 1 when B is significantly worse than A.")] = False,
    alpha: Annotated[float, typer.Option(help="Significance level.")] = 0.05,
    html: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option(help="Also write a self-contained HTML page: intervals, verdict flips, changed claims."),
    ] = None,
) -> None:
    """Paired comparison of two runs: mean differences with bootstrap CIs, paired tests, verdict flips."""
    from groundjudge.review.compare import compare_runs

    runs = _load_reports(a), _load_reports(b)
    result = compare_runs(*runs, alpha=alpha)
    if result["paired"] == 0:
        raise fail("the two runs share no sample ids")
    if html is not None:
        from groundjudge.review.html import render_compare_html

        page = render_compare_html(
            *runs, result, title=f"groundjudge compare: {b.name} vs {a.name}", names=(a.name, b.name)
        )
        html.write_text(page, encoding="utf-8")
        err.print(escape(f"wrote {html}"), highlight=False)
    if as_json:
        typer.echo(json.dumps(result, indent=2))
    else:
        from rich.table import Table

        console = Console()
        table = Table(title=f"B vs A over {result['paired']} paired samples")
        for col in ("metric", "mean A", "mean B", "diff", "95% CI", "p", ""):
            table.add_column(col)
        for name, m in result["metrics"].items():
            mark = "[red]B worse[/red]" if m["b_worse"] else ("significant" if m["significant"] else "")
            table.add_row(
                name,
                f"{m['mean_a']:.3f}",
                f"{m['mean_b']:.3f}",
                f"{m['diff']:+.3f}",
                f"[{m['ci95'][0]:+.3f}, {m['ci95'][1]:+.3f}]",
                f"{m['p_value']:.4f}",
                mark,
            )
        console.print(table)
        mc = result["mcnemar"]
        console.print(
            f"verdict flips: {result['verdict_flips'] or 'none'}; PASS lost {mc['pass_lost']}, "
            f"gained {mc['pass_gained']} (McNemar p={mc['p_value']:.4f})"
        )
        for row in result["most_changed"]:
            console.print(
                f"  {escape(row['id'])}: {row['verdict']}, combined {row['combined_diff']:+.3f}, "
                f"{row['claim_label_changes']} claim label changes"
            )
        console.print(
            "[red]B is significantly worse than A[/red]"
            if result["b_significantly_worse"]
            else "B is not significantly worse than A"
        )
    if fail_if_worse and result["b_significantly_worse"]:
        raise typer.Exit(EXIT_ROWS_FAILED)


_HEAD_MIN_CLAIMS, _HEAD_MIN_CLASS = (
    60,
    15,
)  # checker.head.MIN_CLAIMS / MIN_CLASS, without importing numpy
_LABELS = ("SUPPORTED", "UNSUPPORTED", "CONTRADICTED")
# why a claim of a 'score' OUT did not teach calibrate, in the order they are told
_LEFT_OUT = {
    "local": "decided locally (never judged)",
    "error": "judge errors",
    "unverified": "with an unverified quote",
    "no_quote": "SUPPORTED / CONTRADICTED without a quote",
    "no_nli": "without NLI scores",
    "failed": "answer(s) that failed whole (their claims are not in the file)",
}


@app.command()
def calibrate(
    labeled: Annotated[
        Path,
        typer.Argument(
            help="Claim rows with gold labels, or 'score' output: on such rows (gold labels), with --reviews, or else "
            "the judge's own verdicts (best: a sample scored with --mode llm)."
        ),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="Config file to write (JSON, for 'score --config').")] = Path(
        "groundjudge-config.json"
    ),
    target: Annotated[float, typer.Option(help="Precision the NLI-decided verdicts must reach.")] = 0.95,
    min_decided: Annotated[int, typer.Option(help="Fewest claims a threshold may rest on.")] = 10,
    unsupported: Annotated[bool, typer.Option("--unsupported/--no-unsupported", help="Also fit t_unsupported.")] = True,
    nli_model: Annotated[Optional[str], typer.Option(help="NLI model id or path.")] = None,  # noqa: UP045
    cache_dir: CacheDir = None,
    reviews: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option(
            help="Reviewer decisions (JSONL from the review page) on the claims of LABELED, a 'score' OUT; without "
            "gold labels there, the judge's verdicts teach on the claims no reviewer decided."
        ),
    ] = None,
    reliability: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option(help="Write a reliability diagram of the NLI entailment (.html or .svg)."),
    ] = None,
    bins: Annotated[int, typer.Option(help="Bins of the reliability diagram.", min=2, max=50)] = 10,
    save_to_model: Annotated[
        bool,
        typer.Option(
            help="Also store the cascade thresholds (and the verdict head, if one was fitted) beside the local "
            "model's weights (groundjudge.json), so that every later run with that model uses them with no flags; "
            "without a head, a head stored there before is removed."
        ),
    ] = False,
    head: Annotated[
        bool,
        typer.Option(
            "--head/--no-head",
            help="Also fit a verdict head (a logistic model over the NLI scores and text signals, with its own "
            f"thresholds) on the same claims; it needs {_HEAD_MIN_CLAIMS}+ claims, {_HEAD_MIN_CLASS}+ SUPPORTED "
            "and not. The config then carries the head instead of the raw thresholds.",
        ),
    ] = True,
) -> None:
    """Fit t_support / t_contradict (and t_unsupported) to a precision target, and a verdict head on the same claims;
    write a config 'score' takes. Labels: gold if LABELED has them, else the reviews (if given) and the judge's
    verdicts with verified quotes on the other claims."""
    from groundjudge.config import Config
    from groundjudge.learn.calibrate import fit_thresholds
    from groundjudge.pipeline.evaluator import Evaluator

    if not labeled.is_file():
        raise fail(f"no file {labeled}")
    if reliability is not None and reliability.suffix.lower() not in (".html", ".htm", ".svg"):
        raise fail(f"--reliability {reliability}: write .html or .svg")
    first: dict[str, Any] = next((json.loads(x) for x in labeled.open() if x.strip()), {})
    from_out = "verdict" in first and "claims" in first  # a 'score' OUT: the claims are scored already
    evaluator: Any = None
    try:
        # raw scores: a head stored beside the model must neither change them nor stop the run (it may be stale)
        cfg = Config.make(
            nli_model=nli_model, cache_dir=str(cache_dir) if cache_dir else None, mode="nli", use_head=False
        )
        if from_out:
            reports = _load_reports(labeled)
        elif reviews is not None:
            raise fail(f"--reviews needs the 'groundjudge score' OUT the reviews were made on; {labeled} is not one")
        else:
            rows = (json.loads(x) for x in labeled.open() if x.strip())
            evaluator = Evaluator(cfg)
            reports = list(evaluator.evaluate_many(rows, batch_size=64))
    except GroundjudgeError as exc:
        raise fail(str(exc)) from exc
    # what the raw thresholds and a verdict head are fitted on: the claim, its answer's sources, its NLI result and
    # its 3-way label
    texts: list[str] = []
    sources: list[list[str]] = []
    results: list[ClaimNLI] = []
    labels: list[str] = []
    fingerprints: set[str] = set()  # the NLI models that scored the claims of a 'score' OUT
    taught: dict[str, int] = {}  # where the labels came from: gold, reviews, judge

    def add(report: Any, verdict: Any, label: str, origin: str) -> None:
        texts.append(verdict.claim.text)
        sources.append(list(report.contexts))
        results.append(verdict.nli)
        labels.append(label)
        fingerprints.add(report.versions.get("nli_model", "") if from_out else "")
        taught[origin] = taught.get(origin, 0) + 1

    reviewed: set[tuple[str, str]] = set()  # (answer id, claim id) a reviewer decided: the judge's verdict yields
    if reviews is not None:
        from groundjudge.review.metrics import join_reviews, read_reviews

        if not reviews.is_file():
            raise fail(f"no file {reviews}")
        try:
            joined = join_reviews(reports, read_reviews(reviews))
        except InputError as exc:
            raise fail(f"{reviews}: {exc}") from exc
        for m in joined.matched:
            reviewed.add((m.report.id, m.verdict.claim.id))
            if _scored(m.verdict.nli):
                add(m.report, m.verdict, m.review.label, "reviews")
        if joined.unmatched:
            err.print(f"{len(joined.unmatched)} reviews match no claim of {escape(str(labeled))}", highlight=False)
        if not labels:
            raise fail(f"no review in {reviews} matches a claim of {labeled} with NLI scores")
    gold_labelled = any(r.label and r.label.upper() in _LABELS for r in reports)
    if gold_labelled and reviews is None:
        for r in reports:
            if r.label and r.label.upper() in _LABELS and r.claims and _scored(r.claims[0].nli):
                add(r, r.claims[0], r.label.upper(), "gold")
    elif from_out and not gold_labelled:  # no gold label: the judge's own verdicts teach (reviews win on theirs)
        usable, left_out = _judge_labelled(reports, reviewed)
        for r, v in usable:
            add(r, v, v.label, "judge")
        if usable or reviews is None:  # with reviews and no judge verdict to add, they teach alone, as they did
            err.print(escape(_judge_said(len(usable), left_out, reviewed=bool(reviewed))), highlight=False)
        if usable and any(r.mode == "cascade" for r in reports):
            err.print(
                "[yellow]note:[/yellow] these answers were scored in cascade mode: only the escalated claims were "
                "judged, so the sample leans to the claims the local checker found hard; for calibration, score a "
                "sample with --mode llm (the judge sees every claim).",
                highlight=False,
            )
        if not labels:
            raise fail(
                f"no labels in {labeled}: no answer carries a gold label (SUPPORTED / UNSUPPORTED / CONTRADICTED), "
                "and no claim was decided by the judge with verified quotes, no error and NLI scores"
            )
    if not labels:
        raise fail("no claim rows with a gold label (SUPPORTED / UNSUPPORTED / CONTRADICTED)")
    ent = [r.entailment for r in results]
    con = [r.contradiction for r in results]
    gold = [label == "SUPPORTED" for label in labels]
    if reliability is not None:
        from groundjudge.learn.calibrate import expected_calibration_error, reliability_bins
        from groundjudge.review.html import render_reliability_html
        from groundjudge.review.plots import reliability_svg, standalone

        diagram = reliability_bins(ent, gold, n_bins=bins)
        ece = expected_calibration_error(diagram)
        source = f"{labeled.name}" + (f" + reviews {reviews.name}" if reviews is not None else "")
        if reliability.suffix.lower() == ".svg":
            reliability.write_text(standalone(reliability_svg(diagram)), encoding="utf-8")
        else:
            page = render_reliability_html(diagram, subtitle=f"{len(gold)} claims from {source}", ece=ece)
            reliability.write_text(page, encoding="utf-8")
        err.print(
            escape(f"wrote {reliability} ({len(gold)} claims, expected calibration error {ece:.3f})"), highlight=False
        )
    fit = fit_thresholds(ent, con, gold, target=target, min_decided=min_decided, unsupported=unsupported)
    fitted: VerdictHead | None = None
    if head:
        try:
            fitted, why_not = _calibration_head(
                texts,
                sources,
                results,
                labels,
                lambda: evaluator or Evaluator(cfg),
                fingerprints - {""},
                target=target,
                meta={"source": str(labeled), "reviews": str(reviews) if reviews else None, "labels": taught},
                min_decided=min_decided,
                unsupported=unsupported,
            )
        except GroundjudgeError as exc:
            raise fail(
                f"{exc} (the verdict head needs the NLI model that scored the claims; or pass --no-head)"
            ) from exc
        if why_not:
            err.print(
                f"[yellow]no verdict head:[/yellow] {escape(why_not)}; the config has the thresholds only.",
                highlight=False,
            )
    # "never" where no level reached the target; with a head, its own thresholds (on its probability) are in force
    # without a head the raw thresholds are on the entailment: the config turns off any head stored with the model
    written: dict[str, Any] = {"head": fitted.model_dump()} if fitted else {**fit.config_values(), "use_head": False}
    if nli_model:
        written["nli_model"] = nli_model
    out.write_text(json.dumps(written, indent=2) + "\n")
    if save_to_model:
        from groundjudge.checker.nli import resolve_model_name
        from groundjudge.checker.profile import read_model_head, write_model_head, write_model_profile

        model_dir = Path(resolve_model_name(nli_model))
        if not model_dir.is_dir():
            raise fail(f"--save-to-model needs a local model folder; {model_dir} is not one (pass --nli-model PATH)")
        meta = {
            "source": str(labeled),
            "target": target,
            "n": fit.n,
            "local_precision": fit.local_precision,
            "escalation_rate": fit.escalation_rate,
            "reviews": str(reviews) if reviews else None,
            "labels": taught,
        }
        try:
            saved = write_model_profile(model_dir, {"cascade": fit.local}, meta)
            # without a new head, an older one stored there would override the thresholds just stored: removed
            stale = fitted is None and read_model_head(model_dir) is not None
            if fitted is not None or stale:
                write_model_head(model_dir, fitted.model_dump() if fitted else None)
        except (GroundjudgeError, OSError) as exc:
            raise fail(f"could not store the thresholds beside {model_dir}: {exc}") from exc
        if fitted is not None:
            said = f"stored the cascade thresholds and the verdict head in {saved} (the head's thresholds are in force)"
        else:
            said = f"stored the cascade thresholds in {saved}" + (
                "; removed the verdict head stored there (it would have overridden them)" if stale else ""
            )
        err.print(escape(said), highlight=False)
    head_json = None
    if fitted is not None:
        head_json = {"l2": fitted.l2, "claims": fitted.meta["claims"], "out_of_fold": fitted.meta["out_of_fold"]}
    typer.echo(json.dumps({**fit.as_dict(), "config": str(out), "head": head_json, "labels": taught}))
    err.print(
        f"Raw thresholds (on the entailment, in-sample): NLI decides {fit.decided} of {fit.n} claims locally "
        f"(precision {_num(fit.local_precision)}); escalation rate {100 * fit.escalation_rate:.1f}%."
        + ("" if head_json is None else " " + _head_line(head_json))
        + f" Wrote {out}"
        + (" (with the head and its thresholds)." if fitted else "."),
        highlight=False,
    )


def _judge_labelled(
    reports: Sequence[Any], reviewed: set[tuple[str, str]]
) -> tuple[list[tuple[Any, Any]], Counter[str]]:
    """The claims of a 'score' OUT the judge decided well enough to learn from, as ``(report, verdict)``, and how many
    were left out by reason (keys of :data:`_LEFT_OUT`); claims a reviewer decided are neither.

    Usable: ``tune.judge_usable`` (judge route, a real label, every quote verified for SUPPORTED / CONTRADICTED, no
    unverified_quote flag, no error) and NLI scores (no NLI error, passages scored).
    """
    from groundjudge.learn.tune import judge_usable

    usable: list[tuple[Any, Any]] = []
    left_out: Counter[str] = Counter()
    for r in reports:
        if r.verdict == "ERROR" and not r.claims:
            left_out["failed"] += 1
        for v in r.claims:
            if (r.id, v.claim.id) in reviewed:
                continue
            if judge_usable(v) and _scored(v.nli):
                usable.append((r, v))
            elif v.route != "judge":
                left_out["local"] += 1
            elif v.error or v.label == "ERROR":
                left_out["error"] += 1
            elif "unverified_quote" in v.flags or any(not q.verified for q in v.quotes):
                left_out["unverified"] += 1
            elif not judge_usable(v):
                left_out["no_quote"] += 1
            else:
                left_out["no_nli"] += 1
    return usable, left_out


def _scored(nli: ClaimNLI | None) -> bool:
    """Whether the NLI stage scored the claim: only those can teach thresholds (an unscored claim is escalated by
    the pipeline, so counting it as a local UNSUPPORTED would flatter the fit)."""
    return nli is not None and nli.error is None and nli.passages_scored > 0


def _judge_said(used: int, left_out: Counter[str], reviewed: bool) -> str:
    """One line: how many judge verdicts taught calibrate and why the others did not."""
    why = ", ".join(f"{left_out[k]} {said}" for k, said in _LEFT_OUT.items() if left_out[k])
    return (
        f"No gold labels: {used} judge verdicts used as labels"
        + (" (for the claims no reviewer decided)" if reviewed else "")
        + f"; left out: {why or 'none'}."
    )


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _head_line(head: dict[str, Any]) -> str:
    """What the verdict head does out of fold, in one sentence."""
    oof = head["out_of_fold"]
    accuracy = oof.get("nli_balanced_accuracy")
    escalation = oof.get("escalation_rate")
    return (
        f"Verdict head ({head['claims']} claims, L2 {head['l2']:g}), out of fold: balanced accuracy "
        f"{'-' if accuracy is None else f'{accuracy:.1f}%'} in nli mode; in the cascade, escalation "
        f"{'-' if escalation is None else f'{100 * escalation:.1f}%'} at local precision "
        f"{_num(oof.get('local_precision'))}."
    )


def _calibration_head(
    claims: list[str],
    contexts: list[list[str]],
    results: list[ClaimNLI],
    labels: list[str],
    load: Callable[[], Any],
    fingerprints: set[str],
    target: float,
    meta: dict[str, Any],
    min_decided: int = 10,
    unsupported: bool = True,
) -> tuple[VerdictHead | None, str | None]:
    """Fit a verdict head on calibrate's labelled claims: ``(head, None)``, or ``(None, why not)``.

    ``load`` gives the nli-mode Evaluator whose model the head is tied to (loaded only when a head can be fitted):
    the claims are scored again with it as the pipeline scores them under a head, every selected passage (a stored
    or just-made result may have stopped at the first passage that passed t_support; mostly cache hits);
    ``fingerprints`` are those of the models that scored a 'score' OUT's claims (empty: scored here).

    Raises:
        GroundjudgeError: the NLI model cannot be loaded.
    """
    from groundjudge.checker.head import MIN_CLAIMS, MIN_CLASS
    from groundjudge.learn.calibrate import build_head

    scored = [i for i, r in enumerate(results) if r.error is None and r.passages_scored]
    supported = sum(labels[i] == "SUPPORTED" for i in scored)
    if len(scored) < MIN_CLAIMS or min(supported, len(scored) - supported) < MIN_CLASS:
        return None, (
            f"it needs at least {MIN_CLAIMS} scored claims with {MIN_CLASS} SUPPORTED and {MIN_CLASS} not; "
            f"got {len(scored)}, {supported} SUPPORTED"
        )
    evaluator = load()
    model = evaluator.nli
    other = sorted(fp for fp in fingerprints if not _same_weights(fp, model.identity))
    if other:  # a head is tied to the model whose scores it reads: fitted on another's, it would mislead
        return None, (
            f"the claims were scored by NLI model {other[0]}, not the one loaded here ({model.identity}); "
            "pass that model as --nli-model"
        )
    from groundjudge.learn.tune import TuneExample, TuneSettings, score_claims

    c = evaluator.config
    settings = TuneSettings(k=c.evidence_k, passage_tokens=c.passage_tokens, passage_overlap=c.passage_overlap)
    examples = [
        TuneExample(str(i), claim, list(ctx), label, "calibrate")
        for i, (claim, ctx, label) in enumerate(zip(claims, contexts, labels, strict=True))
    ]
    results = score_claims(model, examples, settings, evaluator.cache)
    try:
        head = build_head(
            claims,
            contexts,
            results,
            labels,
            model.identity,
            target=target,
            meta=meta,
            min_decided=min_decided,
            unsupported=unsupported,
        )
        return head, None
    except ValueError as exc:
        return None, str(exc)


def _same_weights(fingerprint: str, identity: str) -> bool:
    """Whether a report's ``nli_model`` fingerprint (``weights/kind/numerics``) is of the model with ``identity``
    (``digest/kind``): a local model's weights are ``folder@digest``, a hub model's ``id@revision`` (= its digest)."""
    return fingerprint.startswith(identity + "/") or f"@{identity}/" in fingerprint


def _register_tune() -> None:
    from groundjudge.learn.tune import tune_command

    app.command("tune", help="Fine-tune the local checker on gold labels, judge verdicts and review decisions.")(
        tune_command
    )


_register_tune()


def main() -> None:
    """Console entry point."""
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)


# -- diagnose ---------------------------------------------------------------------------------------------------


@app.command()
def diagnose(
    scored: Annotated[Path, typer.Argument(help="Output of 'groundjudge score'.")],
    id: Annotated[Optional[str], typer.Option("--id", help="Only this answer (default: every failed one).")] = None,  # noqa: UP045
    nli_model: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(help="NLI model for context recall \\[default: $GROUNDJUDGE_NLI_MODEL or the hub default]."),
    ] = None,
    cache_dir: CacheDir = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON diagnosis a line.")] = False,
) -> None:
    """For failed answers: is retrieval or generation to blame? Context precision, context recall (rows with a
    reference answer), the cause, and the claims and passages behind it."""
    from groundjudge.diagnose import diagnose as run_diagnosis
    from groundjudge.diagnose import diagnosis_lines, failed, reference_of

    reports = _load_reports(scored)
    if id is not None:
        reports = [r for r in reports if r.id == id]
        if not reports:
            raise fail(f"no answer with id {id!r} in {scored}")
    else:
        reports = [r for r in reports if failed(r)]
    evaluator = None
    if any(reference_of(r) for r in reports):
        from groundjudge.config import Config
        from groundjudge.pipeline.evaluator import Evaluator

        try:
            evaluator = Evaluator(
                Config.make(mode="nli", nli_model=nli_model, cache_dir=str(cache_dir) if cache_dir else None)
            )
        except GroundjudgeError as exc:
            raise fail(str(exc)) from exc
    console = Console()
    try:
        for r in reports:
            d = run_diagnosis(r, evaluator)
            if as_json:
                typer.echo(d.model_dump_json())
            else:
                for line in diagnosis_lines(d):
                    console.print(escape(line), highlight=False, soft_wrap=True)
    except GroundjudgeError as exc:
        raise fail(str(exc)) from exc
    if not reports:
        err.print("no failed answers to diagnose")
