"""The command line's root: the Typer app, ``version``, ``cache stats`` / ``cache clear``, the registration of every
command (one function each, in ``score``, ``review`` and ``learn``), and the console entry point.

Library errors become exit codes in this package and nowhere else: a :class:`GroundjudgeError` out of any command is
a message and exit 2 (:class:`groundjudge.cli.command.Command`, the class of every command); a run's stops keep their
own codes (1, 3, 4; :mod:`groundjudge.cli.common`).
"""

from __future__ import annotations

import codecs
import io
import json
import sys
from typing import Annotated

import typer

from groundjudge import __version__
from groundjudge.cache import Cache
from groundjudge.cli.command import Command
from groundjudge.cli.common import fail
from groundjudge.cli.learn import calibrate_command, tune_command
from groundjudge.cli.notes import third_party_output
from groundjudge.cli.options import CacheDir
from groundjudge.cli.review import compare_command, diagnose_command, metrics_command, report_command
from groundjudge.cli.review_serve import review_app
from groundjudge.cli.score import score_command

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


CACHE_KINDS = ("llm", "nli")  # the cache's namespaces: the LLM's replies, the NLI scores
cache_app = typer.Typer(help="Inspect or empty the disk cache.", no_args_is_help=True)
app.add_typer(cache_app, name="cache")


@app.command(cls=Command)
def version() -> None:
    """Print the version."""
    typer.echo(__version__)


@cache_app.command("stats", cls=Command)
def cache_stats(cache_dir: CacheDir = None) -> None:
    """Entries per kind (llm, nli), size on disk, and the hits and misses of every run's lookups, as JSON."""
    stats = Cache(cache_dir).stats()  # the lookups are counted in the directory, so every run's are here
    typer.echo(json.dumps(stats, indent=2))


@cache_app.command("clear", cls=Command)
def cache_clear(
    cache_dir: CacheDir = None,
    kind: Annotated[str | None, typer.Option(help="Only this kind: llm or nli.")] = None,
) -> None:
    """Delete cached entries (all, or one kind)."""
    if kind not in (None, *CACHE_KINDS):  # a typo ('NLI', 'nli-scores') removed nothing and said "removed 0 entries"
        raise fail(f"--kind {kind}: one of {', '.join(CACHE_KINDS)}")
    removed = Cache(cache_dir).clear(kind)
    typer.echo(f"removed {removed} entries")


# every command, in the order --help lists them
app.command("score", cls=Command)(score_command)
app.command("report", cls=Command)(report_command)
app.command("metrics", cls=Command)(metrics_command)
app.command("compare", cls=Command)(compare_command)
app.command("calibrate", cls=Command)(calibrate_command)
app.command("tune", cls=Command)(tune_command)
app.command("diagnose", cls=Command)(diagnose_command)
app.add_typer(review_app, name="review")


def _escape(exc: UnicodeError) -> tuple[str | bytes, int]:
    """An encoding error handler: bytes a path smuggled in as surrogates go out as they came (``surrogateescape``),
    any other character the encoding cannot hold as its escape (``backslashreplace``)."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    piece = exc.object[exc.start : exc.end]
    if all(0xDC80 <= ord(char) <= 0xDCFF for char in piece):
        return bytes(ord(char) - 0xDC00 for char in piece), exc.end
    return codecs.backslashreplace_errors(exc)


codecs.register_error("groundjudge.escape", _escape)


def main() -> None:
    """Console entry point. Where the terminal's encoding cannot hold a character (``LC_ALL=C`` without Python's
    UTF-8 mode: ASCII), it is printed escaped (``\\u2026``), never a traceback in place of the output; files are
    written in UTF-8 whatever the locale."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper) and stream.errors in ("strict", "surrogateescape"):
            stream.reconfigure(errors="groundjudge.escape")
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
