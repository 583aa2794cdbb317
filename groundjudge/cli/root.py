"""The command line's root: the Typer app, ``version``, ``cache stats`` / ``cache clear``, the registration of every
command (one function each, in ``score``, ``review`` and ``learn``), and the console entry point.

Library errors become exit codes in this package and nowhere else (codes in :mod:`groundjudge.cli.common`).
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Optional

import typer

from groundjudge import __version__
from groundjudge.cache import Cache
from groundjudge.cli.common import CacheDir, fail
from groundjudge.cli.learn import calibrate_command, tune_command
from groundjudge.cli.notes import third_party_output
from groundjudge.cli.review import compare_command, diagnose_command, metrics_command, report_command
from groundjudge.cli.score import score_command
from groundjudge.errors import GroundjudgeError

app = typer.Typer(
    name="groundjudge",
    help="How much of an LLM's answer is grounded in its sources.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def root(
    ctx: typer.Context,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            "-v",
            help="Also show the libraries' own output: transformers' loading bars, Ray's INFO lines.",
        ),
    ] = False,
) -> None:
    """How much of an LLM's answer is grounded in its sources."""
    ctx.with_resource(third_party_output(verbose))


cache_app = typer.Typer(help="Inspect or empty the disk cache.", no_args_is_help=True)
app.add_typer(cache_app, name="cache")


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


# every command, in the order --help lists them
app.command("score")(score_command)
app.command("report")(report_command)
app.command("metrics")(metrics_command)
app.command("compare")(compare_command)
app.command("calibrate")(calibrate_command)
app.command("tune", help="Fine-tune the local checker on gold labels, judge verdicts and review decisions.")(
    tune_command
)
app.command("diagnose")(diagnose_command)


def main() -> None:
    """Console entry point."""
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
