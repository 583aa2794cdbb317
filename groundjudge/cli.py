"""The command line. Library errors become exit codes here and nowhere else.

Exit codes: 0 ok, 1 some rows failed, 2 usage or configuration error, 3 budget reached.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from groundjudge import __version__
from groundjudge.cache import Cache
from groundjudge.errors import GroundjudgeError

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


def main() -> None:
    """Console entry point."""
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
