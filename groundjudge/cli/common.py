"""What every command shares: exit codes, the error console, usage errors, the progress bar, the summary table,
tables that a pipe never wraps, ``--json`` output, reading a report file. The options several commands share are in
:mod:`groundjudge.cli.options`.

Exit codes: 0 ok, 1 some rows failed, 2 usage or configuration error, 3 budget reached, 4 a provider batch is
still running (re-run to collect it).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer
from rich.console import Console, RenderableType
from rich.markup import escape

EXIT_OK, EXIT_ROWS_FAILED, EXIT_USAGE, EXIT_BUDGET, EXIT_PENDING = 0, 1, 2, 3, 4

err = Console(stderr=True, soft_wrap=True)  # a message to a pipe or a CI log is never hard-wrapped mid-path


def human_console(as_json: bool) -> Console:
    """Where a command's tables and sentences go: stdout, or stderr when ``--json`` keeps stdout for the one JSON
    object. A sentence is never hard-wrapped (soft_wrap); print tables with :func:`print_table`."""
    return Console(stderr=as_json, soft_wrap=True)


def print_table(console: Console, table: RenderableType, pipe_width: int | None = None) -> None:
    """Print a table: on a terminal at the terminal's width, where only values wrap (label columns are ``no_wrap``
    with a ``min_width``; a terminal narrower than the labels gets lines as long as they need, which it folds
    itself); to a pipe, a file or a CI log at the table's own width, so that no cell is wrapped or cut, whatever
    COLUMNS says, or with ``pipe_width`` at most that wide (values wrap; the labels and the longest word decide
    the least)."""
    wide = console.measure(table, options=console.options.update_width(1_000_000))
    needed = wide.minimum if console.is_terminal else wide.maximum
    if pipe_width is not None and not console.is_terminal:
        needed = max(wide.minimum, min(needed, pipe_width))
    width = console.width
    console.width = max(needed, width if console.is_terminal else 1)  # print(width=...) is capped at this width
    try:
        console.print(table)
    finally:
        console.width = width


def print_json(value: Any) -> None:
    """The one JSON object of ``--json`` on stdout, on one line; strict JSON: a number that is not finite (no number
    could be computed) is null, never NaN, which most JSON readers refuse."""

    def finite(x: Any) -> Any:
        if isinstance(x, float) and not math.isfinite(x):
            return None
        if isinstance(x, dict):
            return {str(k): finite(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [finite(v) for v in x]
        return x

    def scalar(x: Any) -> Any:  # a numpy number: its Python value
        if hasattr(x, "item"):
            return finite(x.item())
        raise TypeError(f"{type(x).__name__} is not JSON")

    typer.echo(json.dumps(finite(value), allow_nan=False, default=scalar))


def fail(message: str, code: int = EXIT_USAGE) -> typer.Exit:
    err.print(f"[red]error:[/red] {escape(message)}", highlight=False)
    return typer.Exit(code)


@contextmanager
def progress_bar(console: Console, enabled: bool) -> Iterator[Any]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn
    from rich.text import Text

    class Rate(ProgressColumn):
        def render(self, task: Any) -> Text:
            # rows arrive a batch at a time, so the rate over the whole run, not rich's recent-window speed
            elapsed = task.elapsed or 0.0
            return Text(f"{task.completed / elapsed:.2f} rows/s" if elapsed > 0 and task.completed else "- rows/s")

    class Calls(ProgressColumn):
        def render(self, task: Any) -> Text:
            # a task's "llm" field: a function giving the LLM calls' cell (limits_cell), read at each refresh
            cell = task.fields.get("llm")
            return Text(cell() if callable(cell) else "")

    columns = [
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        Rate(),
        TextColumn("[cyan]{task.fields[cost]}"),  # cost_cell(usage)
        TextColumn("cache hits {task.fields[cached]}"),
        Calls(),
        TimeElapsedColumn(),
    ]
    with Progress(*columns, console=console, disable=not enabled, transient=False) as bar:
        yield bar


def cost_cell(usage: Any) -> str:
    """The progress bar's cost of a :class:`~groundjudge.models.Usage`: "$0.0123", and "?" for what calls to a model
    without a price cost ("$?" when no call had one, "$0.0123+?" when some did): unknown, never a known $0. "<=" before
    it when calls sent with no reply (or a packed answer's share of one) are in it at their worst case
    (``unsettled_calls``, ``unsettled_cost_usd``): at most that."""
    at_most = "<=" if usage.unsettled_calls or usage.unsettled_cost_usd else ""
    if not usage.unpriced_calls:
        return f"{at_most}${usage.cost_usd:.4f}"
    return f"{at_most}${usage.cost_usd:.4f}+?" if usage.calls > usage.unpriced_calls else "$?"


def limits_cell(stats: Any) -> str:
    """The progress bar's LLM calls of a :class:`~groundjudge.llm.LimiterStats`: "LLM 3/8 in flight, 429s 2" (calls
    in flight / the current concurrency limit, rate-limit answers seen), "LLM 3 in flight, 429s 0" with no
    concurrency limit, ", at most 3.6/s" once a rate limit has set the learned send rate, and ", waiting 12s" added
    while a Retry-After holds every send."""
    cell = f"LLM {stats.in_flight}" + (f"/{stats.limit}" if stats.limit is not None else "") + " in flight"
    if getattr(stats, "send_rate", None) is not None:
        cell += f", at most {stats.send_rate:.3g}/s"
    cell += f", 429s {stats.rate_limited}"
    if stats.cooldown_seconds >= 1:
        cell += f", waiting {stats.cooldown_seconds:.0f}s"
    return cell


SUMMARY_WIDTH = 120  # the summary table in a pipe or a CI log: values wrap at this width, never a label


LONGEST_WORD = 80
"""The longest run of characters without a space a summary table shows: an answer's id or a reason's word beyond it
is cut (its start, then "…"), since a table's width is at least its longest word (an id of 5,000 characters made
every line of a piped summary that wide). The JSON summary, the review page and the notebook keep them whole."""


def _cut_words(text: str) -> str:
    return re.sub(rf"\S{{{LONGEST_WORD + 1},}}", lambda m: m.group(0)[: LONGEST_WORD - 1] + "…", text)


def print_summary(console: Console, summary: Any, title: str = "groundjudge summary") -> None:
    from rich.table import Table
    from rich.text import Text

    from groundjudge.review.summary import summary_rows

    rows = [(name, _cut_words(value)) for name, value in summary_rows(summary)]
    table = Table(title=title, show_header=False)
    # a narrow terminal wraps the values, never a quantity's name
    table.add_column("", style="bold", no_wrap=True, min_width=max((len(name) for name, _ in rows), default=1))
    table.add_column("")
    for name, value in rows:
        table.add_row(Text(name), Text(value))  # data, not markup (rich's escape drops the backslash of "\\[")
    print_table(console, table, pipe_width=SUMMARY_WIDTH)


def load_reports(path: Path) -> list[Any]:
    """The reports of a ``groundjudge score`` output, one per id: the last report of an id that has several (a
    ``--retry-errors`` run stopped before it compacted OUT), said on stderr (``io.reports.last_reports``)."""
    from groundjudge.io.reports import last_reports, read_reports

    if not path.is_file():
        raise fail(f"no file {path}")
    try:
        reports, dropped = last_reports(read_reports(path))
    except ValueError as exc:
        raise fail(f"{path} is not a groundjudge output file: {exc}") from exc
    if dropped:
        err.print(
            f"{path}: {dropped} earlier report(s) of an id reported again (a --retry-errors run stopped before it "
            "compacted the file) left out: the last report of each id counts",
            markup=False,
            highlight=False,
        )
    return reports


def load_reviews(path: Path) -> Any:
    """The labels a file of reviews teaches (``review.metrics.review_labels``: one per claim, the claims reviewers
    disagree on with no adjudication left out), what was left out said on stderr; for every command that reads
    ``--reviews`` (metrics, calibrate, compare, report)."""
    from groundjudge.errors import InputError
    from groundjudge.review.metrics import read_reviews, review_labels

    if not path.is_file():
        raise fail(f"no file {path}")
    try:
        settled = review_labels(read_reviews(path, per_reviewer=True))
    except InputError as exc:
        raise fail(f"{path}: {exc}") from exc
    if not settled.every:
        raise fail(f"{path}: no verdict in it (a line with a null label, a note alone, is no label)")
    note = settled.note(str(path))
    if note:
        err.print(note, markup=False, highlight=False)
    return settled
