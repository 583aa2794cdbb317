"""One engine contract: a dataset run on the local engine or on Ray, called the same way, ending the same way.

- :func:`score_file` is the Python entry point (``groundjudge.runs.score_file``): input checks, the run on the
  engine named, and a stop raised as one documented error, :class:`~groundjudge.runs.out.RunStopped`;
- :func:`score_rows` is what the CLI calls: the same run over rows already checked
  (:func:`~groundjudge.runs.out.pending_rows`), with the stop returned in the :class:`~groundjudge.runs.out.RunResult`
  so that the caller can still write what finished (a Parquet copy, a summary) before it reports the stop.

Both engines return a RunResult; the Ray engine (:mod:`groundjudge.runs.ray`) is imported only when it is named.
``OUT.spent.json`` (what a stopped run and the runs resuming it were billed) is kept here, once for both engines.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

from groundjudge.config import Config
from groundjudge.errors import ConfigError
from groundjudge.models import AnswerReport, Usage
from groundjudge.pipeline import Evaluator
from groundjudge.runs import local
from groundjudge.runs.out import Pending, RunOutput, RunResult, read_spent, record_spent, score_input

log = logging.getLogger(__name__)

__all__ = ["ENGINES", "Engine", "score_file", "score_rows"]

Engine = Literal["local", "ray"]
ENGINES: tuple[str, ...] = ("local", "ray")


def _ray() -> Any:
    """The Ray engine's module, imported when a run names it (it needs the ``ray`` extra)."""
    try:
        ray_engine = importlib.import_module("groundjudge.runs.ray")
    except ImportError as exc:  # Ray Data itself, or one of its dependencies, is missing or broken
        raise ConfigError(f"the Ray engine needs Ray Data: pip install 'groundjudge[ray]' ({exc})") from exc
    return ray_engine


def score_rows(
    pending: Pending,
    out: Path,
    config: Config | Evaluator,
    *,
    engine: str = "local",
    fresh: bool = False,
    batch_size: int = 32,
    on_report: Callable[[AnswerReport], None] | None = None,
    note: Callable[[str], None] = log.warning,
    address: str | None = None,
    actors: int | None = None,
    num_gpus: float | None = None,
    window: int | None = None,
) -> RunResult:
    """Score ``pending.rows`` on ``engine`` and append each report to ``out``, flushed, in input order.

    Args:
        pending: the rows and what OUT holds (:func:`~groundjudge.runs.out.pending_rows`, which checks the input).
        out: the report JSONL; ``fresh`` replaces it at its first report, else it is repaired and appended to.
        config: a Config, or an Evaluator to reuse (its model, cache and ledger; the Ray engine takes its config).
        engine: ``local`` (this process) or ``ray`` (a Ray cluster: ``address``, ``actors``, ``num_gpus``,
            ``window``; see :func:`groundjudge.runs.ray.score_rows`).
        batch_size: rows evaluated together (NLI batches across them).
        on_report: called with each report written.
        note: hears what the writer did to OUT (damaged lines moved).

    Returns:
        How the run ended: its summary, its stop (None: it finished), the reports written and what it was billed.

    Raises:
        ConfigError: an unknown engine, Ray asked for without the extra, or a provider batch on Ray; a resume of an
            OUT whose reports were made with other settings (:meth:`~groundjudge.runs.out.Pending.check_made_with`),
            before any call and before OUT is touched.
    """
    output = RunOutput(pending, out, fresh=fresh, note=note, on_report=on_report)
    return _score(pending, output, config, engine, batch_size, address, actors, num_gpus, window)


def _score(
    pending: Pending,
    output: RunOutput,
    config: Config | Evaluator,
    engine: str,
    batch_size: int,
    address: str | None,
    actors: int | None,
    num_gpus: float | None,
    window: int | None,
) -> RunResult:
    """:func:`score_rows` once OUT's :class:`~groundjudge.runs.out.RunOutput` is made (``score_file`` makes its own)."""
    if engine not in ENGINES:
        raise ConfigError(f"engine {engine!r}: local or ray")
    cfg = config.config if isinstance(config, Evaluator) else config
    if engine == "ray" and cfg.batch_api:
        raise ConfigError("the Ray engine does not take batch_api (--batch-api) yet: run it with the local engine")
    try:
        if engine == "local":
            evaluator = config if isinstance(config, Evaluator) else Evaluator(config)
            result = local.score_rows(pending, output, evaluator, batch_size=batch_size)
        else:
            extra: dict[str, Any] = {} if window is None else {"window": window}
            result = _ray().score_rows(
                pending, output, cfg, batch_size=batch_size, address=address, actors=actors, num_gpus=num_gpus, **extra
            )
    except KeyboardInterrupt:  # Ctrl-C: what was billed (a provider batch collected, calls of unwritten rows)
        try:
            interrupted = output.result(None, output.billed, None)  # the bill the engine left when it ended
            interrupted.earlier = _earlier_bill(pending, output)
            record_spent(output.out, interrupted, resume=pending.resume, interrupted=True)  # for the --resume
        except Exception:  # the bill is a courtesy to the resume: the interrupt stays what the caller gets
            log.warning("could not keep the interrupted run's bill in %s", output.out, exc_info=True)
        raise
    if pending.resume or result.stopped is not None:
        result.earlier = _earlier_bill(pending, output)
    if pending.resume:
        # a failed id --retry-errors did not score again (no longer in the input) keeps its old report in OUT
        result.failures_kept = sorted(pending.existing.failed - output.writer.rescored)
    record_spent(output.out, result, resume=pending.resume)
    return result


def _earlier_bill(pending: Pending, output: RunOutput) -> Usage | None:
    """OUT's earlier runs' bill (``OUT.spent.json``), which goes on while OUT is theirs: resumed, or a fresh run
    stopped or interrupted before its first report replaced it (its bill is added, never written over theirs)."""
    replaced = not pending.resume and output.writer.rows > 0
    return None if replaced else read_spent(output.out)


def score_file(
    input: str | Path,
    out: str | Path,
    config: Config | Evaluator,
    *,
    engine: str = "local",
    resume: bool = False,
    retry_errors: bool = False,
    columns: Mapping[str, str] | None = None,
    batch_size: int = 32,
    progress: Callable[[int], None] | None = None,
    address: str | None = None,
    actors: int | None = None,
    num_gpus: float | None = None,
    window: int | None = None,
) -> RunResult:
    """Score a JSONL, CSV or Parquet file (or a folder of Parquet files) and write one report per row to ``out``,
    as ``groundjudge score`` does, on either engine.

    Args:
        input: the rows (a path, or a URI pyarrow reads); columns are mapped as :func:`groundjudge.io.read_rows`
            maps them.
        out: the report JSONL. Without ``resume`` it is replaced (when the first report is written).
        config: a Config, or an Evaluator to reuse (its model and cache; the Ray engine takes its config).
        engine: ``local`` or ``ray`` (``pip install 'groundjudge[ray]'``).
        resume: skip ids that already have a report in ``out`` and append (damaged lines are moved to
            ``out.damaged``, a torn last line is cut); refused when the reports ``out`` keeps were made with other
            settings (their mode and versions: :meth:`~groundjudge.runs.out.Pending.check_made_with`).
        retry_errors: with ``resume``, score again the rows whose report failed, replacing it.
        columns: explicit column mapping ``{field: column}``.
        batch_size: rows evaluated together (NLI batches across them).
        progress: called after each report with the number of reports this run has written so far.
        address, actors, num_gpus, window: the Ray engine's cluster, pool and rows shipped at a time
            (:func:`groundjudge.runs.ray.score_rows`); ignored by the local engine.

    Returns:
        The run's :class:`~groundjudge.runs.out.RunResult` (``.summary``: the summary of the rows it scored;
        ``.spent()``: what its ledger billed, when the rows' usage does not show all of it).

    Raises:
        RunStopped: a budget stop, a cache-only miss, a pending provider batch (or another GroundjudgeError) ended
            the run after every report that finished was written; it has ``cause``, ``result`` and ``summary``,
            and is also an instance of the cause's class (``except BudgetExceededError`` catches a budget stop).
        ConfigError, InputError: bad arguments, an unreadable input or one with no rows, or (``resume``) an
            ``out`` whose reports were made with other settings, before anything is written and before any call.
    """

    def score(pending: Pending, output: RunOutput) -> RunResult:
        return _score(pending, output, config, engine, batch_size, address, actors, num_gpus, window)

    return score_input(input, out, score, columns=columns, resume=resume, retry_errors=retry_errors, progress=progress)
