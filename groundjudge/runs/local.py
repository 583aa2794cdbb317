"""The local engine: a dataset run in this process, callable from Python as the CLI calls it.

``score_file`` is the Python face (it matches :func:`groundjudge.runs.ray.score_file`); ``score_rows`` is the loop
the CLI drives, which hands back how the run ended instead of raising, so that the caller can still write what
finished (a Parquet copy, a summary) before it reports the stop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from groundjudge.config import Config
from groundjudge.errors import ConfigError, GroundjudgeError
from groundjudge.io.reports import dumps, finite_report
from groundjudge.models import AnswerReport
from groundjudge.pipeline import Evaluator
from groundjudge.review.summary import RunSummary, Summarizer
from groundjudge.runs.out import Pending, ReportWriter, pending_rows

log = logging.getLogger(__name__)

__all__ = ["RunResult", "score_file", "score_rows"]


@dataclass
class RunResult:
    """How a run ended: its summary, the error that stopped it (None: it finished), the reports it wrote."""

    summary: RunSummary
    stopped: GroundjudgeError | None
    rows_written: int


def score_rows(
    pending: Pending,
    out: Path,
    evaluator: Evaluator,
    *,
    fresh: bool = False,
    batch_size: int = 32,
    on_report: Callable[[AnswerReport], None] | None = None,
    note: Callable[[str], None] = log.warning,
) -> RunResult:
    """Score ``pending.rows`` and append each report to ``out`` as it finishes, flushed, in input order.

    ``fresh`` replaces OUT (at its first report, so a run that fails before one changes nothing); otherwise OUT is
    repaired and appended to. A run stop (:data:`~groundjudge.pipeline.work.RUN_STOPS`: budget, cache-only miss,
    a pending provider batch) or another GroundjudgeError ends the run after every finished report is written; it
    is returned, not raised. ``note`` hears what the writer did to OUT (damaged lines moved).
    """
    summary = Summarizer()
    writer = ReportWriter(out, fresh=fresh, existing=pending.existing, drop_ids=pending.retry, note=note)
    finished = False
    stopped: GroundjudgeError | None = None
    try:
        for report in evaluator.evaluate_numbered(pending.rows, batch_size=batch_size):
            report = finite_report(report)  # a NaN or Infinity makes the row an ERROR, never the file
            writer.write(dumps(report), report.id)
            summary.add(report)
            if on_report is not None:
                on_report(report)
        finished = True
    except GroundjudgeError as exc:
        stopped = exc
    finally:
        writer.close(finished)
    return RunResult(summary.summary(), stopped, writer.rows)


def score_file(
    input: str | Path,
    out: str | Path,
    config: Config | Evaluator,
    *,
    resume: bool = False,
    retry_errors: bool = False,
    columns: Mapping[str, str] | None = None,
    batch_size: int = 32,
    progress: Callable[[int], None] | None = None,
) -> RunSummary:
    """Score a JSONL, CSV or Parquet file (or a directory of Parquet files) here and write one report per row to
    ``out``, as ``groundjudge score`` does.

    Args:
        input: the rows (a path, or a URI pyarrow reads); columns are mapped as :func:`groundjudge.io.read_rows`
            maps them.
        out: the report JSONL. Without ``resume`` it is replaced (when the first report is written).
        config: a Config, or an Evaluator to reuse (its model and cache).
        resume: skip ids that already have a report in ``out`` and append (damaged lines are moved to
            ``out.damaged``, a torn last line is cut).
        retry_errors: with ``resume``, score again the rows whose report failed, replacing it.
        columns: explicit column mapping ``{field: column}``.
        batch_size: rows evaluated together (NLI batches across them).
        progress: called after each report with the number of reports this run has written so far.

    Returns:
        The summary of the rows this run scored.

    Raises:
        BudgetExceededError, CacheMissError, BatchPendingError (or another GroundjudgeError that stopped the run):
            after every report that finished is written; the exception's ``summary`` holds the run summary so far.
        ConfigError, InputError: bad arguments or an unreadable input, before anything is written.
    """
    if retry_errors and not resume:
        raise ConfigError("retry_errors goes with resume")
    out = Path(out)
    evaluator = config if isinstance(config, Evaluator) else Evaluator(config)
    pending = pending_rows(input, out, columns=columns, resume=resume, retry_errors=retry_errors)
    written = 0

    def count(_: Any) -> None:
        nonlocal written
        written += 1
        if progress is not None:
            progress(written)

    result = score_rows(pending, out, evaluator, fresh=not resume, batch_size=batch_size, on_report=count)
    if result.stopped is not None:
        result.stopped.summary = result.summary  # type: ignore[attr-defined]
        raise result.stopped
    return result.summary
