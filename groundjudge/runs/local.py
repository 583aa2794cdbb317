"""The local engine: a dataset run in this process.

``score_rows`` is the engine's half of the one engine contract (:mod:`groundjudge.runs.engines`): it scores the
pending rows, writes OUT, and hands back how the run ended instead of raising, so that the caller can still write
what finished (a Parquet copy, a summary) before it reports the stop. The Python entry point is
:func:`groundjudge.runs.score_file`; ``score_file`` here is its deprecated older name.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path

from groundjudge.config import Config
from groundjudge.errors import GroundjudgeError
from groundjudge.io.reports import dumps, finite_report
from groundjudge.models import AnswerReport
from groundjudge.pipeline import Evaluator
from groundjudge.pipeline.fallback import evaluate_rows
from groundjudge.review.summary import RunSummary, Summarizer
from groundjudge.runs.out import Pending, ReportWriter, RunResult, score_input

log = logging.getLogger(__name__)

__all__ = ["RunResult", "score_file", "score_rows"]


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
    repaired and appended to. A run stop (budget, cache-only miss, a pending provider batch) or another
    GroundjudgeError ends the run after every finished report is written; it is returned, not raised. A batch that
    breaks outside any one row is scored row by row (:func:`groundjudge.pipeline.fallback.evaluate_rows`).
    ``note`` hears what the writer did to OUT (damaged lines moved).
    """
    summary = Summarizer()
    writer = ReportWriter(out, fresh=fresh, existing=pending.existing, drop_ids=pending.retry, note=note)
    start = evaluator.usage
    finished = False
    stopped: GroundjudgeError | None = None
    try:
        for report in evaluate_rows(evaluator, pending.rows, batch_size=batch_size):
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
    billed = evaluator.usage - start
    at_stop = getattr(stopped, "calls", None)  # a budget stop: the ledger's calls when it was raised
    calls_at_stop = None if not isinstance(at_stop, int) else max(0, at_stop - start.calls)
    return RunResult(summary.summary(), stopped, writer.rows, billed, calls_at_stop)


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
    """Deprecated: :func:`groundjudge.runs.score_file` (``engine="local"``), which returns a RunResult and raises
    :class:`~groundjudge.runs.out.RunStopped`.

    Returns:
        The summary of the rows this run scored.

    Raises:
        RunStopped: after every report that finished is written (also an instance of its cause's class:
            BudgetExceededError, CacheMissError, BatchPendingError); its ``summary`` holds the run summary so far.
        ConfigError, InputError: bad arguments or an unreadable input, before anything is written.
    """
    warnings.warn(
        "groundjudge.runs.local.score_file is deprecated: use groundjudge.runs.score_file (it returns a RunResult; "
        "its .summary is what this returned)",
        DeprecationWarning,
        stacklevel=2,
    )
    evaluator = config if isinstance(config, Evaluator) else Evaluator(config)
    score = partial(score_rows, evaluator=evaluator, batch_size=batch_size)
    return score_input(
        input, out, score, columns=columns, resume=resume, retry_errors=retry_errors, progress=progress
    ).summary
