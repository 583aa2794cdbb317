"""The local engine: a dataset run in this process.

``score_rows`` is the engine's half of the one engine contract (:mod:`groundjudge.runs.engines`): it scores the
pending rows, writes OUT, and hands back how the run ended instead of raising, so that the caller can still write
what finished (a Parquet copy, a summary) before it reports the stop. The Python entry point is
:func:`groundjudge.runs.score_file`; ``score_file`` here is its deprecated older name.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path

from groundjudge.config import Config
from groundjudge.errors import GroundjudgeError
from groundjudge.io.made_with import MadeWith
from groundjudge.io.reports import dumps, finite_report
from groundjudge.models import Usage
from groundjudge.pipeline import Evaluator
from groundjudge.pipeline.fallback import evaluate_rows
from groundjudge.runs.out import Pending, RunOutput, RunResult, deprecated, score_input
from groundjudge.tally import RunSummary

log = logging.getLogger(__name__)

__all__ = ["RunResult", "score_file", "score_rows"]


def score_rows(pending: Pending, output: RunOutput, evaluator: Evaluator, *, batch_size: int = 32) -> RunResult:
    """Score ``pending.rows`` and hand each report to ``output`` (OUT, the summary, the caller) as it finishes, in
    input order.

    A run stop (budget, cache-only miss, a pending provider batch) or another GroundjudgeError ends the run after
    every finished report is written; it is returned, not raised. A batch that breaks outside any one row is scored
    row by row (:func:`groundjudge.pipeline.fallback.evaluate_rows`).

    Raises:
        ConfigError: OUT's reports were made with other settings (``runs.out.Pending.check_made_with``), before
            any call and before OUT is touched.
    """
    pending.check_made_with(lambda: MadeWith.of(evaluator.mode, evaluator.versions()), output.note)
    start = evaluator.usage
    finished = False
    stopped: GroundjudgeError | None = None
    try:
        for report in evaluate_rows(evaluator, pending.rows, batch_size=batch_size):
            report = finite_report(report)  # a NaN or Infinity makes the row an ERROR, never the file
            output.write(report, dumps(report))
        finished = True
    except GroundjudgeError as exc:
        stopped = exc
    finally:
        output.close(finished)
        # also when Ctrl-C ends the run (runs.engines keeps it), with the calls it leaves in flight in the
        # background (sent: the provider may bill them) at their worst case
        held = evaluator.client.ledger.in_flight() if evaluator.client is not None else Usage()
        output.billed = evaluator.usage + held - start
    billed = output.billed
    at_stop = getattr(stopped, "calls", None)  # a budget stop: the ledger's calls when it was raised
    calls_at_stop = None if not isinstance(at_stop, int) else max(0, at_stop - start.calls)
    return output.result(stopped, billed, calls_at_stop)


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
    deprecated("groundjudge.runs.local.score_file", "groundjudge.runs.score_file")
    evaluator = config if isinstance(config, Evaluator) else Evaluator(config)
    score = partial(score_rows, evaluator=evaluator, batch_size=batch_size)
    return score_input(
        input, out, score, columns=columns, resume=resume, retry_errors=retry_errors, progress=progress
    ).summary
