"""A stage's LLM calls through the provider's batch API (``Config.batch_api``).

Holds :func:`run_llm_stage`, which runs a stage that calls the LLM (collecting, in batch mode, the calls the cache
cannot answer and sending them as one provider batch first), and :func:`batch_runner`, the
:class:`~groundjudge.llm.batch.BatchRunner` the config asks for.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from groundjudge.config import Config
from groundjudge.llm import LLMClient
from groundjudge.llm.batch import BatchOutcome, BatchRunner
from groundjudge.models import Usage
from groundjudge.pipeline.work import RUN_STOPS, Work, describe

log = logging.getLogger(__name__)


def run_llm_stage(
    stage: Callable[[list[Work]], None],
    batch: list[Work],
    *,
    client: LLMClient | None,
    config: Config,
    progress: Callable[[int, int], None] | None,
    outcomes: list[BatchOutcome],
    fail: Callable[[Work, str], None] | None = None,
    charge: Callable[[Work, Usage], None] | None = None,
) -> None:
    """Run a stage that calls the LLM; in batch mode, first collect the calls the cache cannot answer, send them
    through the provider's batch API (half price; they land in the cache), then run the stage for the answers
    that waited: it reads the cache, and calls that failed in the batch are made directly (with re-asks).

    Args:
        stage: the stage, run on the whole batch (and again on the answers that waited for the provider batch).
        batch: the answers.
        client: the LLM client (without one, or without ``config.batch_api``, the stage simply runs).
        config: the batch settings.
        progress: called with (answered, total) while the provider batch is waited for.
        outcomes: what each provider batch did is appended here.
        fail: what a provider batch that failed as a whole does to an answer that waited for it (default: the
            answer fails, its report is ERROR; the second judge's stage records its own error instead).
        charge: what a call answered in the batch cost, to the answer that made it (default: added to its usage;
            the second judge's stage keeps it apart too).
    """
    if not config.batch_api or client is None:
        stage(batch)
        return
    with client.deferring() as deferred:
        stage(batch)
    waiting = [w for w in batch if w.deferred]
    if deferred:
        try:
            outcome = batch_runner(client, config, progress).run(deferred)
        except RUN_STOPS as exc:
            for w in waiting:
                w.stop = exc
            return
        except Exception as exc:  # the batch failed as a whole: these answers fail, the run goes on
            log.warning("the provider batch failed: %s", describe(exc), exc_info=True)
            for w in waiting:
                if fail is not None:
                    fail(w, f"provider batch: {describe(exc)}")
                else:
                    w.failed = f"provider batch: {describe(exc)}"
            return
        outcomes.append(outcome)
        charged: set[str] = set()
        for w in waiting:  # what the batch cost, to the answers it answered (a shared request to the first)
            for key in w.deferred:
                if key in outcome.usage_by_key and key not in charged:
                    charged.add(key)
                    if charge is not None:
                        charge(w, outcome.usage_by_key[key])
                    else:
                        w.usage = w.usage + outcome.usage_by_key[key]
        if outcome.failures:
            log.info("%d batch request(s) failed; calling them directly", len(outcome.failures))
    for w in waiting:
        w.deferred = []
    stage(waiting)


def batch_runner(client: LLMClient, config: Config, progress: Callable[[int, int], None] | None) -> BatchRunner:
    """The batch runner for ``client``: its state file, poll interval and longest wait from ``config``.

    The state file is ``config.batch_state``, else ``batches.json`` in the cache folder, shared by every job on that
    cache: jobs may share it (:mod:`groundjudge.llm.batch_state`), and a request two of them need is paid once.
    """
    from groundjudge.cache import default_cache_dir

    c = config
    state = c.batch_state or str(Path(c.cache_dir or default_cache_dir()) / "batches.json")
    return BatchRunner(
        client,
        state,
        poll_seconds=c.batch_poll_seconds,
        progress=progress,
        max_wait_seconds=c.batch_max_wait_hours * 3600,
    )
