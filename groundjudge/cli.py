"""The command line. Library errors become exit codes here and nowhere else.

Exit codes: 0 ok, 1 some rows failed, 2 usage or configuration error, 3 budget reached.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console

from groundjudge import __version__
from groundjudge.cache import Cache
from groundjudge.errors import BudgetExceededError, CacheMissError, GroundjudgeError, InputError

EXIT_OK, EXIT_ROWS_FAILED, EXIT_USAGE, EXIT_BUDGET = 0, 1, 2, 3

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
    typer.Option("--cache-dir", help="Cache directory [default: $GROUNDJUDGE_CACHE_DIR or ~/.cache/groundjudge]."),
]


def fail(message: str, code: int = EXIT_USAGE) -> typer.Exit:
    err.print(f"[red]error:[/red] {message}", highlight=False)
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
            return Text(f"{task.speed:.2f} rows/s" if task.speed else "- rows/s")

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

    from groundjudge.report import summary_rows

    table = Table(title="groundjudge summary", show_header=False)
    table.add_column("", style="bold")
    table.add_column("")
    for name, value in summary_rows(summary):
        table.add_row(name, value)
    console.print(table)


# -- score ------------------------------------------------------------------------------------------------------


def _read_jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, parsed row or an InputError) for each non-blank line, streamed."""
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                yield n, json.loads(line)
            except json.JSONDecodeError as exc:
                yield n, InputError(f"invalid JSON: {exc.msg} at column {exc.colno}", row=n)


def _done_ids(out: Path) -> set[str]:
    """Ids already in OUT (for --resume); a torn last line from a killed run is ignored and cut off."""
    ids: set[str] = set()
    if not out.exists():
        return ids
    good_bytes = 0
    with out.open("rb") as fh:
        for raw in fh:
            if not raw.endswith(b"\n"):
                break
            try:
                ids.add(str(json.loads(raw)["id"]))
            except (ValueError, KeyError, TypeError):
                break
            good_bytes += len(raw)
    if good_bytes < out.stat().st_size:
        with out.open("r+b") as fh:
            fh.truncate(good_bytes)
    return ids


@app.command()
def score(
    input: Annotated[Path, typer.Argument(help="JSONL rows: {id, contexts, answer | claim, question?, label?}.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Where the reports go, one JSON object a line.")],
    mode: Annotated[
        str | None, typer.Option(help="nli, cascade or llm [default: cascade with --llm, else nli].")
    ] = None,
    llm: Annotated[Optional[str], typer.Option(help="provider/model, e.g. openai/gpt-4o-mini.")] = None,  # noqa: UP045
    base_url: Annotated[Optional[str], typer.Option(help="Server for an OpenAI-compatible model.")] = None,  # noqa: UP045
    nli_model: Annotated[
        str | None, typer.Option(help="NLI model id or path [default: $GROUNDJUDGE_NLI_MODEL or the hub default].")
    ] = None,
    qa: Annotated[bool, typer.Option("--qa/--no-qa", help="QA-consistency check (with an LLM).")] = True,
    cache_dir: CacheDir = None,
    cache_mode: Annotated[str, typer.Option(help="use, off, only (replay; a miss is an error) or refresh.")] = "use",
    budget: Annotated[Optional[float], typer.Option(help="Stop before spending more than this many USD.")] = None,  # noqa: UP045
    max_calls: Annotated[Optional[int], typer.Option(help="Stop before more than this many LLM calls.")] = None,  # noqa: UP045
    concurrency: Annotated[int, typer.Option(help="LLM calls in flight at once.")] = 4,
    batch_size: Annotated[int, typer.Option(help="Rows evaluated together (NLI batches across them).")] = 32,
    preset: Annotated[
        str | None,
        typer.Option(help="Thresholds by use case: default, support-bot, knowledge-base, medical-legal, research."),
    ] = None,
    config: Annotated[Optional[Path], typer.Option(help="JSON config (e.g. from 'groundjudge calibrate').")] = None,  # noqa: UP045
    resume: Annotated[bool, typer.Option(help="Skip ids already in OUT and append.")] = False,
    overwrite: Annotated[bool, typer.Option(help="Replace OUT if it exists.")] = False,
    dry_run: Annotated[bool, typer.Option(help="Estimate calls and cost (counting the cache) and exit.")] = False,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Show a progress bar.")] = True,
) -> None:
    """Score answers against their sources; one report per input row, written as each finishes."""
    from groundjudge.config import Config
    from groundjudge.pipeline import Evaluator
    from groundjudge.report import Summarizer, dumps

    if not input.is_file():
        raise fail(f"no input file {input}")
    if out.exists() and out.stat().st_size and not (resume or overwrite or dry_run):
        raise fail(f"{out} exists: pass --resume to continue it or --overwrite to replace it")
    overrides = {
        "mode": mode,
        "llm": llm,
        "base_url": base_url,
        "nli_model": nli_model,
        "qa": qa,
        "cache_dir": str(cache_dir) if cache_dir else None,
        "cache_mode": cache_mode,
        "budget_usd": budget,
        "max_calls": max_calls,
        "concurrency": concurrency,
        "preset": preset,
    }
    try:
        cfg = (
            Config.load(config, **overrides)
            if config
            else Config.make(**{k: v for k, v in overrides.items() if v is not None})
        )
        evaluator = Evaluator(cfg)
    except GroundjudgeError as exc:
        raise fail(str(exc)) from exc

    done = _done_ids(out) if resume else set()
    rows = ((n, row) for n, row in _read_jsonl(input) if not (isinstance(row, dict) and str(row.get("id", n)) in done))
    if dry_run:
        estimate = evaluator.estimate(row for _, row in rows if not isinstance(row, InputError))
        typer.echo(json.dumps(estimate, indent=2))
        raise typer.Exit(EXIT_OK)

    total = sum(1 for _ in _read_jsonl(input)) - len(done) if progress else None
    summary = Summarizer()
    code = EXIT_OK
    console = Console(stderr=True)
    with (
        out.open("w" if overwrite and not resume else "a", encoding="utf-8") as fh,
        _progress(console, progress) as bar,
    ):
        task = bar.add_task("scoring", total=total, cost=0.0, cached=0)

        def write(report: Any) -> None:
            fh.write(dumps(report) + "\n")
            fh.flush()
            summary.add(report)
            usage = evaluator.usage
            bar.update(task, advance=1, cost=usage.cost_usd, cached=usage.cached_calls)

        try:
            for report in evaluator.evaluate_numbered(rows, batch_size=batch_size):
                write(report)
        except BudgetExceededError as exc:
            err.print(
                f"[yellow]budget reached:[/yellow] {exc}. Finished rows are in {out}; raise the budget and "
                "re-run with --resume to go on.",
                highlight=False,
            )
            code = EXIT_BUDGET
        except CacheMissError as exc:
            err.print(f"[red]cache-only run stopped:[/red] {exc}", highlight=False)
            code = EXIT_ROWS_FAILED
    result = summary.summary()
    _print_summary(console, result)
    if code == EXIT_OK and result.rows_failed:
        code = EXIT_ROWS_FAILED
    raise typer.Exit(code)


def main() -> None:
    """Console entry point."""
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
