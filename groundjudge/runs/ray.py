"""Scoring on Ray Data: the same reports, resume and cache as the local engine, on one machine or a cluster.

``pip install groundjudge[ray]``. Two entry points:

- :func:`score_dataset` takes a ``ray.data.Dataset`` of input rows and returns a Dataset with one row per report
  (``row``, ``id``, ``verdict`` and ``report``, the exact JSON line the local engine writes);
- :func:`score_rows` (the engine's half of the one engine contract, :mod:`groundjudge.runs.engines`; from Python
  call ``groundjudge.runs.score_file(..., engine="ray")``) scores the pending rows of a JSONL, CSV or Parquet input
  (a local path or a URI pyarrow reads: ``s3://``, ``gs://``, ...) on Ray and writes the same report JSONL as
  ``groundjudge score``, row for row, in input order. ``score_file`` here is its deprecated older face.

How it runs: every stage of a batch (claims, NLI, judge, QA, scores) runs in an actor that builds ONE
:class:`~groundjudge.pipeline.Evaluator` per run, so the NLI model is loaded once per actor; with GPUs in the cluster
each actor holds one (``num_gpus=1``). :func:`score_dataset` runs a Ray Data actor pool (``map_batches(...,
compute=ActorPoolStrategy(size=n))``); :func:`score_rows` keeps its actors for the next run after a run that finished
or stopped (:data:`KEEP_ACTORS_S`; :func:`release_actors`), so a second run on the same cluster does not load the
model again. Inside an actor the rows stream through the stages as in the local engine
(:mod:`groundjudge.pipeline.flow`): ``Config.concurrency`` calls in flight per actor, all actors at once, each call to
an actor a window of whole local batches. A failure in one row becomes that row's ERROR report, exactly as locally; a
budget stop or a cache-only miss stops the run after the finished rows are written.

What is shared across workers:

- the budget: one named Ray actor holds the run's :class:`~groundjudge.llm.accounting.Ledger`; every worker's LLM
  client reserves and settles through it, so ``budget_usd`` and ``max_calls`` cap the whole cluster, not each
  worker (each call in flight holds its worst case there, as locally);
- the provider's rate limits: ``rpm`` and ``tpm`` are the run's; each actor's clients (the judge's and the second
  judge's) take their share (the run's divided by the number of actors). Concurrency and its adaptation to 429s
  are each actor's own (``Config.concurrency`` calls in flight at most per actor);
- the cache: keys are the local engine's. ``cache_dir`` on a filesystem every node mounts (NFS, a shared disk) is
  shared by all workers and by the local engine (diskcache is safe across processes); left unset, the driver's
  ``$GROUNDJUDGE_CACHE_DIR`` is used if set, else each node's own default cache (shared by the workers of that
  node only). ``cache_mode="only"`` keeps its meaning: a miss on any worker stops the run.

Workers need groundjudge installed (or shipped with a Ray ``runtime_env``), the NLI model at the same path or hub
id, and the provider's API key in their environment.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from groundjudge.config import Config
from groundjudge.errors import BudgetExceededError, CacheMissError, ConfigError, GroundjudgeError, InputError
from groundjudge.io.ids import id_text
from groundjudge.io.made_with import MadeWith
from groundjudge.io.reports import dumps, finite_report
from groundjudge.io.rows import batches
from groundjudge.io.tables import ColumnMap, InvalidRow
from groundjudge.llm import Ledger
from groundjudge.llm.registry import server_for
from groundjudge.models import AnswerReport, Usage
from groundjudge.pipeline import Evaluator
from groundjudge.pipeline.fallback import RUN_STOPS, describe, evaluate_guarded
from groundjudge.pipeline.flow import default_window
from groundjudge.runs.out import Pending, RunOutput, RunResult, deprecated, score_input
from groundjudge.tally import RunSummary

try:
    import ray
    import ray.data
except ImportError as _exc:  # pragma: no cover - the extra is not installed
    raise ConfigError("the Ray engine needs Ray Data: pip install 'groundjudge[ray]'") from _exc

log = logging.getLogger(__name__)

__all__ = ["LedgerProxy", "release_actors", "score_dataset", "score_file", "score_rows"]

# The columns of the rows the driver ships to the workers: row number, the row as JSON, or an input error.
_ROW, _JSON, _ERROR, _FIELD = "_gj_row", "_gj_json", "_gj_error", "_gj_field"
# The columns of the result: one report a row; a row with ``stop`` set is no report: the run stopped there.
RESULT_COLUMNS = ("row", "id", "verdict", "report", "stop")
_WINDOW = 20_000  # rows shipped to Ray at a time by score_file (bounds the driver's memory)


# -- the cluster's one ledger -----------------------------------------------------------------------------------


class _LedgerCore:
    """The run's :class:`Ledger`, living in one Ray actor; errors come back as values, not Ray exceptions."""

    def __init__(self, budget_usd: float | None, max_calls: int | None) -> None:
        self.ledger = Ledger(budget_usd=budget_usd, max_calls=max_calls)

    def reserve(self, estimate_usd: float, calls: int = 1) -> tuple[str, float, int] | None:
        try:
            self.ledger.reserve(estimate_usd, calls)
        except BudgetExceededError as exc:
            return str(exc), exc.spent_usd, exc.calls
        return None

    def settle(self, estimate_usd: float, usage: Usage, calls: int = 1) -> None:
        self.ledger.settle(estimate_usd, usage, calls)

    def record(self, usage: Usage) -> None:
        self.ledger.record(usage)

    def total(self) -> Usage:
        return self.ledger.total

    def billed(self) -> Usage:
        return self.ledger.total + self.ledger.in_flight()


# num_cpus=0: the ledger must never take a CPU an actor or a read task needs (a full cluster would deadlock)
_LedgerActor = ray.remote(num_cpus=0)(_LedgerCore)


def make_ledger(budget_usd: float | None = None, max_calls: int | None = None) -> Any:
    """A named ledger actor for one run (``groundjudge-ledger-<hex>``); its handle goes to :class:`LedgerProxy`."""
    return _LedgerActor.options(name=f"groundjudge-ledger-{uuid.uuid4().hex[:12]}").remote(budget_usd, max_calls)


class LedgerProxy:
    """A :class:`Ledger` look-alike for :class:`~groundjudge.llm.client.LLMClient`: every call goes to the actor.

    Args:
        handle: the ledger actor (from :func:`make_ledger`).
        budget_usd, max_calls: the actor's caps (the client reads ``budget_usd`` to check that a price is known).
    """

    def __init__(self, handle: Any, budget_usd: float | None, max_calls: int | None) -> None:
        self.handle = handle
        self.budget_usd = budget_usd
        self.max_calls = max_calls

    def reserve(self, estimate_usd: float, calls: int = 1) -> None:
        """Hold the call's worst case on the cluster's ledger, or raise :class:`BudgetExceededError`."""
        refused = ray.get(self.handle.reserve.remote(estimate_usd, calls))
        if refused is not None:
            message, spent, made = refused
            raise BudgetExceededError(message, spent_usd=spent, calls=made)

    def settle(self, estimate_usd: float, usage: Usage, calls: int = 1) -> None:
        """Replace a reservation by what the call cost."""
        ray.get(self.handle.settle.remote(estimate_usd, usage, calls))

    def record(self, usage: Usage) -> None:
        """Count usage that held no reservation (cache hits). Not waited for: a replay of a million cached rows must
        not make a million round trips; an actor runs one caller's calls in order, so ``total`` still sees it."""
        self.handle.record.remote(usage)

    record_cached = record

    @property
    def total(self) -> Usage:
        """Everything every worker spent so far."""
        return ray.get(self.handle.total.remote())

    def billed(self) -> Usage:
        """What the run is billed for once its actors are gone: :attr:`total`, and the calls still held (sent by an
        actor killed before their reply: :meth:`~groundjudge.llm.accounting.Ledger.in_flight`, each at its worst
        case, unsettled), as the local engine counts a send stopped by Ctrl-C."""
        return ray.get(self.handle.billed.remote())


# -- the workers -------------------------------------------------------------------------------------------------


def _resolved(config: Config) -> Config:
    """The config the workers get: cache directory, NLI model and the judges' servers (``OPENAI_BASE_URL``,
    ``ANTHROPIC_BASE_URL``: :func:`~groundjudge.llm.registry.server_for`) taken from the driver's environment if
    unset, so that every worker uses the same ones (an unset value would be read from each worker's own
    environment: on another machine, another server, and reports naming it)."""
    values = config.model_dump(exclude_unset=True)
    if config.cache_dir is None and os.environ.get("GROUNDJUDGE_CACHE_DIR"):
        values["cache_dir"] = os.environ["GROUNDJUDGE_CACHE_DIR"]
    if config.nli_model is None and os.environ.get("GROUNDJUDGE_NLI_MODEL"):
        values["nli_model"] = os.environ["GROUNDJUDGE_NLI_MODEL"]
    for model, server in (("llm", "base_url"), ("second_judge", "second_judge_base_url")):
        spec = getattr(config, model)
        if spec and getattr(config, server) is None and (url := server_for(spec)) is not None:
            values[server] = url
    return Config.make(**values)


def _check_fitted_for(config: Config) -> None:
    """A verdict head, or thresholds, that do not fit (fitted for another model, entailment thresholds beside a
    head) stop the run here, in the driver, before Ray starts: in an actor it would surface as an actor failure.
    Only with a head in force, or thresholds that name their model (the config's, or those stored beside the
    weights for the run's mode), is the model loaded here, once, to compare identities."""
    fitted = bool(config.fitted_thresholds())  # thresholds that name their model
    mode = config.resolved_mode
    if mode == "llm":
        return
    # the NLI side alone: no judge, so no second judge either (it needs a first)
    second = [name for name in Config.model_fields if name.startswith("second_judge")]  # every one, new ones too
    off = {"llm": None, "mode": "nli", "batch_api": False, **dict.fromkeys(second)}
    local = Config.make(**{**config.model_dump(exclude_unset=True), **off})
    evaluator = Evaluator(local)
    if evaluator.head is not None or fitted:
        _ = evaluator.nli
    evaluator.check_stored_thresholds(mode)  # those beside the weights, for the run's mode (loads where they name one)


class _Scorer:
    """The callable class of the actor pool: one :class:`Evaluator` (one NLI model) per actor."""

    def __init__(
        self, config: Config, ledger: LedgerProxy | None, threads: int | None, batch_size: int, actors: int = 1
    ) -> None:
        if threads:
            import torch

            torch.set_num_threads(threads)
        # the cluster's ledger for both judges, and this actor's share of the run's rpm and tpm
        self.evaluator = Evaluator(config, ledger=ledger, rate_share=1.0 / actors)  # type: ignore[arg-type]
        self.batch_size = batch_size
        _ = self.evaluator.nli  # the model is loaded once, here

    def __call__(self, batch: Any) -> dict[str, list[Any]]:
        rows = batch.to_pylist()
        out: dict[str, list[Any]] = {k: [] for k in RESULT_COLUMNS}
        self._score([[_from_wire(r) for r in rows]], out)
        return out

    def _score(self, groups: list[list[tuple[int, Any]]], out: dict[str, list[Any]]) -> bool:
        """Reports of ``groups`` (each one batch of the local engine: its NLI batch) into ``out``, streamed through
        the local engine (:meth:`Evaluator.evaluate_batches`); False when the run must stop (a stop row is in
        ``out``)."""
        done: set[int] = set()
        items = [item for group in groups for item in group]

        def emit(report: Any) -> None:
            report = finite_report(report)  # a NaN or Infinity makes the row an ERROR, never the file
            out["row"].append(report.row)
            out["id"].append(report.id)
            out["verdict"].append(report.verdict)
            out["report"].append(dumps(report))
            out["stop"].append("")
            done.add(report.row)

        def stop(exc: BaseException, row: int) -> None:
            out["row"].append(row)
            out["id"].append("")
            out["verdict"].append("")
            out["report"].append("")
            out["stop"].append(describe(exc))

        try:
            # a group is one cut batch: cut alone with room for all of it, it comes back whole; a batch that breaks
            # outside any one row is scored row by row (the pipeline's fallback, as in the local engine)
            cuts = (next(batches(group, max(self.batch_size, len(group)))) for group in groups if group)
            for report in evaluate_guarded(self.evaluator, cuts):
                emit(report)
            return True
        except RUN_STOPS as exc:
            stop(exc, min((n for n, _ in items if n not in done), default=-1))
            return False


# -- the actors score_rows keeps between runs ----------------------------------------------------------------------


class _Worker:
    """An actor of :func:`score_rows`: one :class:`_Scorer` (one Evaluator) per run, in a process that outlives
    the run. The NLI model is loaded once per process (:meth:`~groundjudge.checker.nli.NLIModel.shared`), so a
    later run on the same cluster, with actors of the same shape, starts without loading it again."""

    def __init__(self, threads: int | None) -> None:
        if threads:
            import torch

            torch.set_num_threads(threads)
        self.run = ""
        self.scorer: _Scorer | None = None

    def ready(self) -> int:
        """The actor's process id, once it is up."""
        return os.getpid()

    def score(
        self, run: str, config: Config, ledger: LedgerProxy | None, batch_size: int, actors: int, groups: list[str]
    ) -> dict[str, list[Any]]:
        """The reports (and a stop row, if the run must stop) of ``groups``: each the wire rows of one local batch."""
        scorer = self._scorer(run, config, ledger, batch_size, actors)
        out: dict[str, list[Any]] = {k: [] for k in RESULT_COLUMNS}
        scorer._score([[_from_wire(w) for w in json.loads(g)] for g in groups], out)
        return out

    def made_with(
        self, run: str, config: Config, ledger: LedgerProxy | None, batch_size: int, actors: int
    ) -> tuple[str, dict[str, str]]:
        """The mode and versions this run's reports will carry (its Evaluator's, built as :meth:`score` builds it:
        the model loaded on the actor's device), for the driver's resume check; makes no call."""
        evaluator = self._scorer(run, config, ledger, batch_size, actors).evaluator
        return evaluator.mode, evaluator.versions()

    def _scorer(self, run: str, config: Config, ledger: LedgerProxy | None, batch_size: int, actors: int) -> _Scorer:
        if self.scorer is None or run != self.run:  # a new run: its own Evaluator (client, cache, ledger, rates)
            self.scorer = _Scorer(config, ledger, None, batch_size, actors)
            self.run = run
        return self.scorer


_WorkerActor = ray.remote(_Worker)

KEEP_ACTORS_S = 60.0
"""Seconds the actors of a run that ended (finished or stopped, not failed) stay up for the next run, with the model
loaded and their CPUs or GPUs held; :func:`release_actors` lets them go at once."""


class _Pool:
    """The actors of one run: each call to an actor is one list of groups; results come back as calls finish."""

    def __init__(self, key: tuple[Any, ...], actors: list[Any]) -> None:
        self.key = key
        self.actors = actors

    def run(
        self,
        calls: list[list[str]],
        run: str,
        config: Config,
        ledger: LedgerProxy | None,
        batch_size: int,
        halt: Callable[[], bool] = lambda: False,
    ) -> Iterator[dict[str, list[Any]]]:
        """Each call's result, in the order calls finish; one call in flight per actor. Once ``halt()`` is true no
        call starts, and the calls in flight are still waited for (their finished reports are the run's)."""
        todo = list(reversed(calls))
        idle = list(self.actors)
        running: dict[Any, Any] = {}
        while (todo and not halt()) or running:
            while idle and todo and not halt():
                actor = idle.pop()
                ref = actor.score.remote(run, config, ledger, batch_size, len(self.actors), todo.pop())
                running[ref] = actor
            done, _ = ray.wait(list(running), num_returns=1)
            idle.append(running.pop(done[0]))
            yield ray.get(done[0])

    def give_back(self, clean: bool) -> None:
        """Keep the actors for the next run (``clean``), or let them go."""
        global _kept, _timer
        if not clean:
            _kill(self.actors)
            return
        with _lock:
            old, _kept = _kept, self
            if _timer is not None:
                _timer.cancel()
            _timer = threading.Timer(KEEP_ACTORS_S, release_actors)
            _timer.daemon = True
            _timer.start()
        if old is not None and old.key[0] == self.key[0]:  # another shape on this cluster: one kept pool at most
            _kill(old.actors)


_lock = threading.Lock()
_kept: _Pool | None = None
_timer: threading.Timer | None = None


def _kill(actors: list[Any]) -> None:
    for actor in actors:
        try:
            ray.kill(actor)
        except Exception:  # an actor already gone is what we want
            log.debug("actor already gone", exc_info=True)


def _cluster() -> str:
    """This driver's Ray: a node id is new with every Ray start, a job id with every connection."""
    ctx = ray.get_runtime_context()
    return f"{ctx.get_node_id()}/{ctx.get_job_id()}"


def _take_pool(n_actors: int, per_cpu: float, per_gpu: float, threads: int | None) -> _Pool:
    """The kept actors when they are of this shape on this Ray, else new ones (waited for: a run starts with every
    actor up, so that the cluster's work is shared from the first call)."""
    global _kept
    key = (_cluster(), n_actors, per_cpu, per_gpu, threads)
    with _lock:
        kept, _kept = _kept, None
    if kept is not None and kept.key == key:
        try:
            ray.get([a.ready.remote() for a in kept.actors])
            return kept
        except ray.exceptions.RayError:  # one died while kept (a node went, memory ran out): new ones
            log.info("a kept actor is gone; starting new ones", exc_info=True)
    if kept is not None and kept.key[0] == key[0]:
        _kill(kept.actors)  # another shape: their CPUs or GPUs go back before new actors ask for them
    options: dict[str, Any] = {"num_cpus": per_cpu}
    if per_gpu:
        options["num_gpus"] = per_gpu
    actors: list[Any] = [_WorkerActor.options(**options).remote(threads) for _ in range(n_actors)]
    wait = float(getattr(ray.data.DataContext.get_current(), "wait_for_min_actors_s", 600) or 600)
    try:
        ray.get([a.ready.remote() for a in actors], timeout=wait)
    except ray.exceptions.GetTimeoutError:
        _kill(actors)
        raise ConfigError(
            f"Ray did not start {n_actors} actor(s) of {per_cpu} CPU(s)"
            + (f" and {per_gpu} GPU(s)" if per_gpu else "")
            + f" each in {wait:.0f} s: the cluster has {ray.cluster_resources()}; ask for fewer actors or GPUs"
        ) from None
    return _Pool(key, actors)


def release_actors() -> None:
    """Let the actors kept from the last :func:`score_rows` run go now (they go on their own after
    :data:`KEEP_ACTORS_S` seconds, or when the driver ends)."""
    global _kept
    with _lock:
        kept, _kept = _kept, None
    if kept is not None and ray.is_initialized() and kept.key[0] == _cluster():
        _kill(kept.actors)


JSON_VALUES = (str, int, float, bool, dict, list, type(None))


def _wire_id(rid: Any) -> Any:
    """A row's id as JSON carries it: as it is when JSON holds it, else (a Parquet decimal, a date, a UUID) its text
    under the one id rule (``io.ids.id_text``: what the local engine's report id is). Raises the rule's InputError."""
    return rid if isinstance(rid, JSON_VALUES) else id_text(rid)


def _to_wire(n: int, row: Any) -> dict[str, Any]:
    """A numbered input row (or an InputError) as the driver ships it: JSON text, ASCII-only (lone surrogates
    survive as escapes). An id JSON cannot hold is sent as its id text; a cell JSON cannot hold (only an id may be
    any value) is the row's InputError naming its field, never a failed run."""
    if isinstance(row, InputError):
        return {_ROW: n, _JSON: "", _ERROR: row.reason, _FIELD: row.field or ""}
    if isinstance(row, InvalidRow):  # a row the column mapping found bad: its id and its error travel
        error = row.error
        try:
            wired = {"id": _wire_id(row["id"])} if "id" in row else {}
        except InputError:
            wired = {}  # no id: row-N, as io.rows.row_id makes of an id the rule refuses
        return {_ROW: n, _JSON: json.dumps(wired, ensure_ascii=True), _ERROR: error.reason, _FIELD: error.field or ""}
    if isinstance(row, dict) and not isinstance(row.get("id"), JSON_VALUES):
        try:
            row = {**row, "id": _wire_id(row["id"])}
        except InputError as exc:
            return _to_wire(n, InputError(exc.reason, row=n, field="id"))
    try:
        return {_ROW: n, _JSON: json.dumps(row, ensure_ascii=True, allow_nan=True), _ERROR: "", _FIELD: ""}
    except TypeError as exc:
        field = next((k for k, v in row.items() if not _json_holds(v)), None) if isinstance(row, dict) else None
        why = f"holds a value the Ray engine cannot send to its actors ({exc}); run it with --engine local"
        return _to_wire(n, InputError(why, row=n, field=field))


def _json_holds(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=True)
    except TypeError:
        return False
    return True


def _from_wire(w: dict[str, Any]) -> tuple[int, Any]:
    n = int(w[_ROW])
    if w[_ERROR]:
        error = InputError(w[_ERROR], row=n, field=w[_FIELD] or None)
        return n, InvalidRow(json.loads(w[_JSON]).get("id"), error) if w[_JSON] else error
    return n, json.loads(w[_JSON])


def _wire_batch(batch: Any, row_column: str, columns: dict[str, str] | None = None) -> dict[str, list[Any]]:
    """User rows (a pyarrow batch) to wire rows, their columns mapped as the local engine maps a table's
    (:class:`~groundjudge.io.tables.ColumnMap`); the row number comes from ``row_column``. A batch that names a
    column it reads twice is a ConfigError (``to_pylist`` would keep one of the two cells), checked in every batch:
    a later file of the dataset may have a column the first lacks."""
    out: dict[str, list[Any]] = {_ROW: [], _JSON: [], _ERROR: [], _FIELD: []}
    cmap = ColumnMap(columns, decode_strings=True)
    cmap.check_unique(batch.schema.names, "a batch of the dataset")
    numbered = [(int(r.pop(row_column)), r) for r in batch.to_pylist()]
    for n, r in cmap.rows(numbered):
        for k, v in _to_wire(n, r).items():
            out[k].append(v)
    return out


# -- the cluster's shape -----------------------------------------------------------------------------------------


def _ensure_ray(address: str | None = None) -> None:
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=True)


def plan(actors: int | None, num_gpus: float | None) -> tuple[int, float, float, int | None]:
    """(actors, CPUs per actor, GPUs per actor, torch threads per actor) for the running cluster.

    With GPUs: one actor per GPU. Without: one actor per CPU but one, each with one CPU; together the actors
    reserve less than every CPU (a pool that holds every CPU leaves none for the tasks that feed it: a silent
    deadlock), and each actor's torch gets the CPUs of its share.
    """
    res = ray.cluster_resources()
    cpus = float(res.get("CPU", 1.0))
    gpus = float(res.get("GPU", 0.0))
    per_gpu = (1.0 if gpus >= 1 else 0.0) if num_gpus is None else num_gpus
    if actors is None:
        actors = max(1, int(gpus // per_gpu)) if per_gpu else max(1, int(cpus) - 1)
    # one CPU is left to the tasks that read and convert the rows (with less, they never start)
    per_cpu = 1.0 if actors <= cpus - 1 else max(0.05, math.floor(100 * max(cpus - 1, 0.5) / actors) / 100)
    node_cpus = max((float(n["Resources"].get("CPU", 0)) for n in ray.nodes() if n.get("Alive")), default=cpus)
    threads = None if per_gpu else max(1, min(int(node_cpus), int(cpus // actors)))
    return actors, per_cpu, per_gpu, threads


# -- public API --------------------------------------------------------------------------------------------------


def _score_wire(
    wire: Any,
    config: Config,
    *,
    batch_size: int,
    actors: int | None,
    num_gpus: float | None,
    ledger: Any,
) -> Any:
    n_actors, per_cpu, per_gpu, threads = plan(actors, num_gpus)
    cfg = config  # resolved (_resolved) and checked (_check_fitted_for) once by the caller, not once per window
    proxy = None
    if cfg.llm:
        handle = ledger if ledger is not None else make_ledger(cfg.budget_usd, cfg.max_calls)
        proxy = LedgerProxy(handle, cfg.budget_usd, cfg.max_calls)
    return wire.map_batches(
        _Scorer,
        batch_size=batch_size,
        batch_format="pyarrow",
        compute=ray.data.ActorPoolStrategy(size=n_actors),
        fn_constructor_kwargs={
            "config": cfg,
            "ledger": proxy,
            "threads": threads,
            "batch_size": batch_size,
            "actors": n_actors,
        },
        num_cpus=per_cpu,
        num_gpus=per_gpu or None,
    )


def score_dataset(
    ds: Any,
    config: Config,
    *,
    batch_size: int = 32,
    actors: int | None = None,
    num_gpus: float | None = None,
    row_column: str | None = None,
    ledger: Any = None,
    columns: dict[str, str] | None = None,
) -> Any:
    """Score a Dataset of input rows on Ray; a Dataset of reports comes back (lazy, as Ray Data is).

    Each result row has ``row`` (the input row number), ``id``, ``verdict`` and ``report``: the JSON line the local
    engine writes (``groundjudge.io.reports.dumps``; ``json.loads`` it for the report dict, or
    ``AnswerReport.model_validate_json``). A result row whose ``stop`` is set is not a report: the run stopped
    there (``"BudgetExceededError: ..."`` or ``"CacheMissError: ..."``) and rows not yet finished were not scored.
    Result order follows Ray's (set ``DataContext.execution_options.preserve_order`` or sort by ``row``).

    Args:
        ds: rows ``{id, contexts, answer | claim, question?, label?, metadata?}``.
        config: as for the local engine (the budget caps the whole cluster; see the module docstring for the
            cache).
        batch_size: rows evaluated together in one actor call (NLI batches across them).
        actors: actors in the pool; default one per GPU, else one per CPU but one.
        num_gpus: GPUs per actor; default 1 when the cluster has GPUs, else 0.
        row_column: a column that already holds 1-based row numbers; without it rows are numbered in dataset
            order (one counting pass over ``ds``), so that ``row`` and the ``row-N`` id fallback match the local
            engine's ``evaluate_many``.
        ledger: a ledger actor from :func:`make_ledger` to share one budget between several datasets.
        columns: explicit column mapping ``{field: column}``; else columns are mapped by name as the local engine
            maps a table's (groundjudge's, RAGAS' and DeepEval's names).
    """
    release_actors()  # kept actors would hold CPUs or GPUs this pool needs
    if row_column is None:
        row_column = "_gj_n"
        count = ds.count()
        numbers = ray.data.from_items([{row_column: n} for n in range(1, count + 1)])
        ds = ds.zip(numbers)
    wire = ds.map_batches(
        _wire_batch, batch_format="pyarrow", fn_kwargs={"row_column": row_column, "columns": columns}, num_cpus=0.5
    )
    cfg = _resolved(config)
    _check_fitted_for(cfg)
    return _score_wire(wire, cfg, batch_size=batch_size, actors=actors, num_gpus=num_gpus, ledger=ledger)


def _windows(rows: Iterable[Any], size: int) -> Iterator[list[Any]]:
    window: list[Any] = []
    for item in rows:
        window.append(item)
        if len(window) >= size:
            yield window
            window = []
    if window:
        yield window


def _stop_error(text: str, ledger: LedgerProxy | None) -> GroundjudgeError:
    kind, _, message = text.partition(": ")
    if kind == "BudgetExceededError":
        total = ledger.total if ledger is not None else Usage()
        return BudgetExceededError(message, spent_usd=total.cost_usd, calls=total.calls)
    if kind == "CacheMissError":
        return CacheMissError(message)
    return GroundjudgeError(text)


def score_rows(
    pending: Pending,
    output: RunOutput,
    config: Config,
    *,
    batch_size: int = 32,
    address: str | None = None,
    actors: int | None = None,
    num_gpus: float | None = None,
    window: int = _WINDOW,
) -> RunResult:
    """Score ``pending.rows`` on Ray and hand each report to ``output`` (OUT, the summary, the caller) as the local
    engine does, in input order.

    The driver reads the input in order with the local engine's reader (:func:`groundjudge.runs.out.pending_rows`:
    JSONL line numbers, bad lines, a BOM, the column mapping, duplicate ids; Parquet rows numbered from 1), cuts it
    into the local engine's batches (:func:`groundjudge.io.rows.batches`), ships them to its actors ``window`` rows at
    a time (the actors, and their loaded model, serve every window and are kept for the next run when this one
    finishes or stops: :data:`KEEP_ACTORS_S`), and appends each report to OUT through the local engine's writer,
    flushing each line, so a killed run loses nothing it wrote. A run stop starts no new actor call and ends the run
    after every finished report is written, those of the calls in flight on the other actors too; it is returned in
    the result, not raised.

    Args:
        pending: the rows to score and what OUT holds (:func:`groundjudge.runs.out.pending_rows`).
        output: where each report goes (:class:`~groundjudge.runs.out.RunOutput`: OUT, the summary, the caller).
        config: the evaluation config; ``budget_usd``/``max_calls`` cap the whole cluster.
        batch_size: rows evaluated together in one actor call.
        address: the Ray cluster (``ray://host:10001``, ``auto``); default: the running Ray, ``$RAY_ADDRESS`` or a
            new local one.
        actors, num_gpus: see :func:`score_dataset`.
        window: rows sent to Ray at a time (bounds the driver's memory).

    Raises:
        ConfigError: OUT's reports were made with other settings (``runs.out.Pending.check_made_with``; the
            first actor's Evaluator gives this run's), before any call and before OUT is touched.
    """
    if batch_size < 1 or window < 1:
        raise ConfigError("batch_size and window must be at least 1")
    cfg = _resolved(config)
    _check_fitted_for(cfg)  # a head that cannot run stops here, before a cluster starts
    _ensure_ray(address)
    handle = make_ledger(cfg.budget_usd, cfg.max_calls) if cfg.llm else None
    proxy = LedgerProxy(handle, cfg.budget_usd, cfg.max_calls) if handle is not None else None
    finished = False
    stopped: GroundjudgeError | None = None
    billed = Usage()
    # with an LLM, each actor call streams several batches (the local engine's window) so that its call slots stay
    # busy while one batch waits for its slowest call; without one, a batch a call spreads the NLI work best
    rows_per_call = cfg.window or default_window(cfg.concurrency, batch_size)
    groups_per_call = math.ceil(rows_per_call / batch_size) if cfg.llm else 1

    def write(line: str) -> None:
        output.write(AnswerReport.model_validate_json(line), line)

    def halted() -> bool:
        return stopped is not None

    n_actors, per_cpu, per_gpu, threads = plan(actors, num_gpus)
    run = uuid.uuid4().hex  # each actor builds one Evaluator for this run (its model stays loaded between runs)
    pool: _Pool | None = None
    clean = False
    try:
        pool = _take_pool(n_actors, per_cpu, per_gpu, threads)
        first = pool.actors[0]

        def made_with() -> MadeWith:  # what this run's reports will carry: the first actor's Evaluator says
            return MadeWith.of(*ray.get(first.made_with.remote(run, cfg, proxy, batch_size, n_actors)))

        try:  # OUT's reports made with other settings: refused before any call, OUT untouched, the actors kept
            pending.check_made_with(made_with, output.note)
        except ConfigError:
            clean = True
            raise
        # whole local batches, about ``window`` rows at a time (a window never cuts a batch)
        for window_batches in _windows(batches(pending.rows, batch_size), max(1, window // batch_size)):
            groups = [json.dumps([_to_wire(n, row) for n, row, _ in b]) for b in window_batches]
            per_call = min(groups_per_call, max(1, math.ceil(len(groups) / n_actors)))
            calls = [groups[i : i + per_call] for i in range(0, len(groups), per_call)]
            order = [n for b in window_batches for n, _, _ in b]
            waiting: dict[int, str] = {}
            nxt = 0
            # after a stop no call starts, but the other actors' calls in flight finish their answers (as the local
            # engine's answers in flight do): their reports are written too, and their calls are in the bill
            for out in pool.run(calls, run, cfg, proxy, batch_size, halt=halted):
                for row, report, stop in zip(out["row"], out["report"], out["stop"], strict=True):
                    if not stop:
                        waiting[int(row)] = str(report)
                    elif stopped is None:  # the first stop to arrive is the run's
                        stopped = _stop_error(str(stop), proxy)
                while nxt < len(order) and order[nxt] in waiting:  # calls finish out of order
                    write(waiting.pop(order[nxt]))
                    nxt += 1
            if stopped is None and (waiting or nxt < len(order)):
                stopped = GroundjudgeError(f"Ray returned {nxt + len(waiting)} reports of {len(order)} rows")
            if stopped is not None:
                for n in sorted(waiting):  # finished rows after one still missing: written, resume fills the gap
                    write(waiting[n])
                break
        else:
            finished = True
        # a stop keeps them too: no call of this run is left in flight
        clean = True
    finally:
        # after a failure, or the driver interrupted, calls still in flight could go on spending: the actors go
        if pool is not None:
            pool.give_back(clean)
        output.close(finished)
        if proxy is not None:
            # every worker's calls, those of rows that did not finish too; after an interrupt or a failure the
            # actors were killed with calls in flight: the provider may bill them, so they count at their worst case
            billed = proxy.billed()
            output.billed = billed  # also when Ctrl-C ends the run (runs.engines keeps it)
        if handle is not None:
            ray.kill(handle)
    at_stop = getattr(stopped, "calls", None)  # a budget stop: the cluster's calls when the driver saw it
    return output.result(stopped, billed, at_stop if isinstance(at_stop, int) else None)


def score_file(
    input: str,
    out: Path,
    config: Config,
    *,
    address: str | None = None,
    resume: bool = False,
    retry_errors: bool = False,
    columns: dict[str, str] | None = None,
    batch_size: int = 32,
    progress: Callable[[int], None] | None = None,
    actors: int | None = None,
    num_gpus: float | None = None,
    window: int = _WINDOW,
) -> RunSummary:
    """Deprecated: :func:`groundjudge.runs.score_file` with ``engine="ray"`` (it returns a RunResult and raises
    :class:`~groundjudge.runs.out.RunStopped`).

    Returns:
        The run summary of the rows scored by this run.

    Raises:
        RunStopped: after writing every report that finished before the stop (also an instance of its cause's
            class: BudgetExceededError, CacheMissError); its ``summary`` holds the run summary so far.
        ConfigError, InputError: bad arguments or an unreadable input, before a cluster starts.
    """
    deprecated("groundjudge.runs.ray.score_file", "groundjudge.runs.score_file(..., engine='ray')")

    def score(pending: Pending, output: RunOutput) -> RunResult:
        return score_rows(
            pending,
            output,
            config,
            address=address,
            actors=actors,
            num_gpus=num_gpus,
            batch_size=batch_size,
            window=window,
        )

    return score_input(
        input, out, score, columns=columns, resume=resume, retry_errors=retry_errors, progress=progress
    ).summary
