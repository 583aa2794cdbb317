"""The one place the stages join: sample -> passages -> claims -> NLI -> routes -> judge -> QA -> scores -> report.

:class:`Evaluator` is the surface: its construction (settings, judges' clients, NLI model, verdict head and
thresholds), its parts and the public API. Answers stream through :func:`groundjudge.pipeline.flow.stream`, which
drives the steps of :mod:`groundjudge.pipeline.steps`: in every run, provider batch mode
(:mod:`groundjudge.pipeline.batching`) and the dry run (:mod:`groundjudge.pipeline.estimate`) included. A failure
in one answer is recorded in its report and never stops the run; the run stops (:data:`~groundjudge.pipeline.work.
RUN_STOPS`) at the budget cap, a cache-only miss or a provider batch still running, after the answers already
finished are handed out.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from groundjudge.cache import Cache
from groundjudge.checker.evidence import MARGIN, ROUNDS, SENTENCES
from groundjudge.checker.head import VerdictHead
from groundjudge.checker.nli import NLIModel, NLIScorer, resolve_model_name
from groundjudge.checker.profile import check_stored_thresholds, read_model_head
from groundjudge.checker.windows import SHAPES
from groundjudge.config import Config
from groundjudge.errors import ConfigError, InputError
from groundjudge.io.rows import batches, row_id, unique_rows
from groundjudge.llm import Ledger, Limits, LLMClient, RetryPolicy, make_client, price_for
from groundjudge.llm.base import checked_reasoning_effort, shown_server
from groundjudge.llm.batch import BatchOutcome
from groundjudge.llm.registry import parse_model
from groundjudge.models import AnswerReport, LocalThresholds, Sample, Usage
from groundjudge.pipeline.batching import ProviderBatches
from groundjudge.pipeline.estimate import estimate
from groundjudge.pipeline.flow import stream
from groundjudge.pipeline.packing import PackedCalls
from groundjudge.pipeline.steps import StepContext, Steps
from groundjudge.pipeline.steps import in_second_sample as in_second_sample  # its home was here
from groundjudge.pipeline.work import RUN_STOPS, Work, error_report
from groundjudge.prompts import load_prompt
from groundjudge.review.notebook import Run
from groundjudge.stages.route import EvidenceRule

log = logging.getLogger(__name__)
SECOND_EFFORT = "second_judge_reasoning_effort"


def one_source_or_list(contexts: Sequence[str] | str) -> Any:
    """The Python API's one-source shorthand: a plain string is that one source (a row in a file must give a list
    under ``contexts``; see :func:`groundjudge.io.rows.parse_sample`). Also what a RAG guard's retriever returns."""
    return [contexts] if isinstance(contexts, str) else contexts


def _never(threshold: float | None) -> str:
    return "never" if threshold is None else str(threshold)


def describe_evidence(config: Config, rule: EvidenceRule) -> str:
    """The reports' ``versions.evidence``: how the claims' evidence was cut and which pieces were scored (two runs
    that differ here can give a claim a different support with the same model and thresholds). With no lines
    (``every piece``: a head or a local contradiction call reads every score) the rounds and margin play no part and
    are left out; with an empty list of lines (no line in force) only the free pieces are scored (``lines=none``)."""
    lines = rule["lines"]
    pieces = f"sentences={SENTENCES} shapes={'/'.join(SHAPES)}"
    if lines is None:
        scored = "lines=every piece"
    else:
        drawn = "/".join(map(str, lines)) if lines else "none"
        scored = f"rounds={'/'.join(map(str, ROUNDS))} margin={MARGIN} lines={drawn}"
    return (
        f"passages={config.passage_tokens}/{config.passage_overlap} k={config.evidence_k or 'all'} {pieces} "
        f"exit={_never(rule['early_exit'])} {scored} conflict_check={'on' if config.conflict_check else 'off'}"
    )


def describe_verdict(config: Config) -> str:
    """The reports' ``versions.verdict``: how the claims' labels become the scores and the PASS / WARN / FAIL verdict
    (:func:`groundjudge.stages.score.decide`): the verdict thresholds in force and where they come from (a preset,
    or the config's own ``thresholds``), the combined score's weights, the weak floor and the citation precision
    limit. Two runs that differ here give the same claims other verdicts."""
    t = config.effective_thresholds
    source = f"preset={config.preset}" if config.thresholds is None else "thresholds=config"
    weights = "/".join(f"{k}:{v:g}" for k, v in sorted(config.weights.items()))
    citations = "off" if config.min_citation_precision is None else f"{config.min_citation_precision:g}"
    return (
        f"min_grounded={t.min_grounded:g} warn={t.warn:g} max_contradicted={t.max_contradicted:g} {source} "
        f"weights={weights} weak_floor={config.weak_floor:g} min_citation_precision={citations}"
    )


def describe_scoring(config: Config, mode: str, *, qa: bool, second: bool) -> str:
    """The reports' ``versions.scoring``: the other settings that change what a report says, each only where it plays
    a part: how citation markers are read (the claims' text and their citations), the NLI window (which evidence
    windows are cut; ``model``: the model's own limit), the cascade's escalation of conflicts, the QA check's
    questions (``qa``: it runs) and the second judge's sample (``second``: there is one). Settings that change how
    a run goes but not what its reports say (budget, rates, concurrency, batch sizes, cache, retries, re-asks,
    packing, provider batches) are not here."""
    parts = [f"citation_style={config.citation_style}", f"nli_max_length={config.nli_max_length or 'model'}"]
    if mode == "cascade" and config.conflict_check:
        parts.append(f"escalate_conflicts={'on' if config.escalate_conflicts else 'off'}")
    if qa:
        parts.append(f"qa_questions={config.qa_questions}")
    if second:
        share = config.second_judge_sample
        parts.append(f"second_judge_sample={'flagged only' if share is None else format(share, 'g')}")
    return " ".join(parts)


def run_limits(config: Config, share: float = 1.0) -> Limits:
    """The limits of one LLM client of a run: its concurrency (and whether it adapts) and ``share`` of the run's
    ``rpm`` and ``tpm`` (1: all of them; a Ray actor: 1 / actors, so the cluster keeps to the run's rate)."""
    if not 0 < share <= 1:
        raise ConfigError(f"rate_share must be in (0, 1], not {share}")
    c = config
    return Limits(c.concurrency, c.rpm and c.rpm * share, c.tpm and c.tpm * share, c.adaptive_concurrency)


class Evaluator:
    """Evaluates answers against their sources.

    Args:
        config: a :class:`Config`; keyword overrides are applied on top (``Evaluator(llm="openai/gpt-4o-mini")``).
        nli: an already loaded :class:`NLIModel` to share between evaluators.
        client: an :class:`LLMClient` to use instead of building one from ``config.llm``.
        cache: a :class:`Cache` instead of one at ``config.cache_dir``.
        second_client: the second judge's client instead of one built from ``config.second_judge`` (which shares
            the first judge's ledger, so one budget caps both, and the cache).
        ledger: the ledger the clients built here reserve and settle on, instead of a new one from the config's
            ``budget_usd`` and ``max_calls`` (a Ray actor passes the cluster's).
        rate_share: this evaluator's share of the run's ``rpm`` and ``tpm``, for every client built here (a Ray
            actor's is 1 / actors, so the cluster keeps to the run's rate).
    """

    def __init__(
        self,
        config: Config | None = None,
        *,
        nli: NLIModel | None = None,
        client: LLMClient | None = None,
        cache: Cache | None = None,
        second_client: LLMClient | None = None,
        ledger: Ledger | None = None,
        rate_share: float = 1.0,
        **overrides: Any,
    ) -> None:
        base = config.model_dump(exclude_unset=True) if config is not None else {}
        self.config = Config.overridden(base, overrides)
        c = self.config
        self._built_with = c.model_dump()  # the settings its parts were built on (see check_config)
        self.cache = cache if cache is not None else Cache(c.cache_dir, mode=c.cache_mode)
        if client is None and c.llm:
            client = make_client(
                c.llm,
                base_url=c.base_url,
                timeout=c.timeout,
                cache=self.cache,
                ledger=ledger if ledger is not None else Ledger(budget_usd=c.budget_usd, max_calls=c.max_calls),
                retry=RetryPolicy(max_attempts=c.max_attempts),
                max_reasks=c.max_reasks,
                price=c.price,
                limits=run_limits(c, rate_share),
                reasoning_effort=c.reasoning_effort,
            )
        self.client = client
        self.mode = c.mode or ("cascade" if client is not None else "nli")
        if self.mode != "nli" and self.client is None:
            raise ConfigError(
                f"mode {self.mode!r} needs an LLM judge: give one as --llm provider/model (command line) or "
                "llm='provider/model' (Python), or use --mode nli"
            )
        if c.second_judge and (self.client is None or self.mode == "nli"):
            raise ConfigError(
                "second_judge (--second-judge) checks the first judge: it needs an LLM judge (--llm) and mode "
                "cascade or llm"
            )
        if second_client is None and c.second_judge and client is not None:
            if client.ledger.budget_usd is not None and c.second_judge_price is None and not price_for(c.second_judge):
                raise ConfigError(  # the client's own refusal names --price, which prices the first judge
                    f"no price known for the second judge {c.second_judge}, so a USD budget cannot be enforced: "
                    "give its price in USD per million input and output tokens with --second-judge-price IN,OUT "
                    "(--second-judge-price 0.5,1.5) or, in Python, second_judge_price={'input_per_mtok': 0.5, "
                    f"'output_per_mtok': 1.5}}; or register it once with groundjudge.llm.register_price("
                    f"{c.second_judge!r}, 0.5, 1.5); or cap the calls with --max-calls instead"
                )
            spec = parse_model(c.second_judge, c.second_judge_base_url)  # its own setting named if refused
            checked_reasoning_effort(spec.provider, spec.model, c.second_judge_reasoning_effort, SECOND_EFFORT)
            second_client = make_client(
                c.second_judge,
                base_url=c.second_judge_base_url,
                reasoning_effort=c.second_judge_reasoning_effort,
                timeout=c.timeout,
                cache=self.cache,
                ledger=client.ledger,  # one budget for both judges
                retry=RetryPolicy(max_attempts=c.max_attempts),
                max_reasks=c.max_reasks,
                price=c.second_judge_price,
                limits=run_limits(c, rate_share),
            )
        self.second_client = second_client if self.mode != "nli" else None
        second = self.second_client
        if (
            second is not None
            and client is not None
            and second.provider.identity() == client.provider.identity()
            and second.reasoning_effort == client.reasoning_effort  # another effort: other requests, other keys
        ):
            raise ConfigError(
                f"second_judge {second.model_id} is the first judge's model at the same server: at temperature 0 it "
                "would repeat the first verdicts (and replay them from the cache); name another model (a reasoning "
                "model may be its own second judge at another --second-judge-reasoning-effort)"
            )
        self._nli = nli
        self._scorer: NLIScorer | None = None
        self.batch_outcomes: list[BatchOutcome] = []  # batch mode: what each provider batch did
        self.batch_progress: Callable[[int, int], None] | None = None  # batch mode: (answered, total) while waiting
        self._versions: dict[str, str] | None = None
        self._model_name = nli.name if nli is not None else resolve_model_name(c.nli_model)
        self.head = self._find_head(self._model_name)
        # levels on the entailment; "never" and None (no local verdict) mean the same on any scale
        explicit = c.thresholds_given(("t_support", "t_unsupported"))  # the levels on the entailment
        if self.head is not None and explicit:
            raise ConfigError(
                f"{' and '.join(explicit)} given while a verdict head is in force ({self._head_source()}): thresholds "
                "fitted on the entailment do not apply to the head's probability. Drop them to use the head's own "
                "thresholds, or turn the head off (--no-head, use_head: false) to use them."
            )
        self.thresholds = self.local_thresholds(self.mode)
        if nli is not None:
            self._check_fitted_for(nli)

    def local_thresholds(self, mode: str) -> LocalThresholds:
        """The NLI decision thresholds for ``mode`` (nli, cascade): the config's explicit values, else the verdict
        head's (on its probability), else the model's profile (on the entailment)."""
        head = self.head.thresholds if self.head is not None else None
        return self.config.local_thresholds(mode, self._model_name, head)

    def _find_head(self, model_name: str) -> VerdictHead | None:
        """The verdict head in force: the config's, else the one stored beside the model's weights (unless
        ``use_head`` is off). Not used in llm mode, where nothing is decided locally."""
        c = self.config
        if not c.use_head or self.mode == "llm":
            return None
        data = c.head
        if data is None and Path(model_name).is_dir():
            data = read_model_head(model_name)
        return VerdictHead(**data) if data is not None else None

    def check_stored_thresholds(self, mode: str, model: NLIModel | None = None) -> None:
        """The stored thresholds' check (:func:`check_stored_thresholds`) where in force; the Ray driver's too."""
        if self.head is None and not self.config.local_thresholds_given():
            check_stored_thresholds(self._model_name, mode, lambda: (model or self.nli).identity)

    def _head_source(self) -> str:
        return "config 'head'" if self.config.head is not None else f"{self._model_name}/groundjudge.json"

    def _check_fitted_for(self, model: NLIModel) -> None:
        """Refuse a head, or thresholds (the config's, those beside the weights), fitted on another model's scores."""
        if self.head is not None:
            self.head.check_model(model.identity, self._head_source())
        self.check_stored_thresholds(self.mode, model)
        fitted_on, fitted = self.config.thresholds_model, self.config.fitted_thresholds()
        if fitted and fitted_on != model.identity:
            raise ConfigError(
                f"{' and '.join(fitted)} were fitted on the scores of NLI model {fitted_on} (the config's "
                f"thresholds_model), not {model.identity}: refit them for this model (groundjudge calibrate), give "
                "each of them yourself (a threshold given by hand, in Config.load(..., t_support=...) or as a keyword "
                "setting, is yours, not the fitted one), or use the model they were fitted for"
            )

    def check_config(self) -> None:
        """Refuse to run on settings changed after this evaluator was built (``ev.config.qa = False``): its judges,
        limits, budget and thresholds were built on the old ones and the reports' ``versions`` describe them, while
        the steps read some settings live, so a change would be half applied and the reports would misstate it.

        Raises:
            ConfigError: naming the changed settings; build a new Evaluator with them instead.
        """
        now = self.config.model_dump()
        if changed := [k for k in now if now[k] != self._built_with.get(k)]:
            shown = ", ".join(f"{k}={now[k]!r} (was {self._built_with.get(k)!r})" for k in changed)
            raise ConfigError(
                f"Evaluator.config was changed after the Evaluator was built: {shown}. An Evaluator's settings are "
                "fixed when it is built (its judges, thresholds and the reports' versions follow them): build a new "
                "one with the new settings, e.g. Evaluator(config, qa=False)"
            )

    # -- parts ----------------------------------------------------------------------------------------------

    @property
    def nli(self) -> NLIModel:
        """The NLI model, loaded on first use."""
        if self._nli is None:
            c = self.config
            nli = NLIModel.shared(
                c.nli_model,
                device=c.device,
                batch_size=c.batch_size,
                kind=c.nli_kind,
                supported_label=c.nli_supported_label,
                trust_remote_code=c.nli_trust_remote_code,
                max_length=c.nli_max_length,
            )
            self._check_fitted_for(nli)
            self._nli = nli  # kept once checked: else the next use would take a refused model unchecked
        return self._nli

    @property
    def scorer(self) -> NLIScorer:
        if self._scorer is None:
            self._scorer = NLIScorer(self.nli, self.cache)
        return self._scorer

    @property
    def usage(self) -> Usage:
        """Everything the LLM calls of this evaluator cost so far."""
        return self.client.ledger.total if self.client is not None else Usage()

    def versions(self) -> dict[str, str]:
        """The NLI model fingerprint, its decision thresholds, how the evidence was chosen (:func:`describe_evidence`),
        how the verdict was decided (:func:`describe_verdict`), the other settings that change a report
        (:func:`describe_scoring`), the LLM and the prompt versions behind the reports
        (the mode is the report's own ``mode``). ``groundjudge score --resume`` compares them with OUT's reports."""
        if self._versions is None:
            t = self.thresholds
            out = {
                "nli_model": self.nli.fingerprint,
                "thresholds": f"support>={_never(t.t_support)} contradict>={_never(t.t_contradict)} "
                f"unsupported<={_never(t.t_unsupported)}",
            }
            if self.head is not None:  # the thresholds above apply to its probability, not the entailment
                out["head"] = self.head.digest
            out["evidence"] = describe_evidence(self.config, self.steps.evidence_rule())
            out["verdict"] = describe_verdict(self.config)
            qa, second = self.steps.qa_expected, self.second_client is not None
            out["scoring"] = describe_scoring(self.config, self.mode, qa=qa, second=second)
            if self.client is not None:
                out["llm"] = self.client.model_id
                out["llm_server"] = shown_server(self.client.provider.base_url)  # another server may serve it apart
                if self.client.reasoning_effort is not None:  # how long the judge reasons changes its verdicts
                    out["reasoning_effort"] = self.client.reasoning_effort  # the client's: what it sends
                if self.second_client is not None:
                    out["second_judge"] = self.second_client.model_id
                    out["second_judge_server"] = shown_server(self.second_client.provider.base_url)
                    if self.second_client.reasoning_effort is not None:  # as the first judge's: what it sends
                        out["second_judge_reasoning_effort"] = self.second_client.reasoning_effort
                # every prompt a row of this evaluator may use (claim rows and answers without questions: judge)
                names = ["claims_qa", "verify", "judge"] if self.steps.qa_expected else ["claims", "judge"]
                out.update({f"prompt.{n}": load_prompt(n).version for n in names})
            self._versions = out
        return dict(self._versions)

    @property
    def steps(self) -> Steps:
        """The steps of an answer over this evaluator's parts (:mod:`groundjudge.pipeline.steps`), which the flow
        drives."""
        return Steps(self._context(self.client, self.second_client))

    def _context(self, client: LLMClient | None, second_client: LLMClient | None) -> StepContext:
        """The steps' context: this evaluator's settings, routing, model, scorer and versions, with these clients
        (the dry run's never send)."""
        return StepContext(
            config=self.config,
            client=client,
            second_client=second_client,
            mode=self.mode,
            head=self.head,
            thresholds=self.thresholds,
            nli=lambda: self.nli,
            scorer=lambda: self.scorer,
            versions=self.versions,
        )

    # -- public API -----------------------------------------------------------------------------------------

    def evaluate(
        self, answer: str, contexts: Sequence[str] | str, question: str | None = None, *, id: str = "answer"
    ) -> AnswerReport:
        """Evaluate one answer against its sources (one source may be given as a plain string)."""
        row = {"id": id, "answer": answer, "contexts": one_source_or_list(contexts), "question": question}
        return next(self.evaluate_many([row]))

    def evaluate_claim(self, claim: str, contexts: Sequence[str] | str, *, id: str = "claim") -> AnswerReport:
        """Evaluate one claim (no extraction) against its sources (one source may be given as a plain string)."""
        return next(self.evaluate_many([{"id": id, "claim": claim, "contexts": one_source_or_list(contexts)}]))

    def run(self, rows: Iterable[Sample | dict[str, Any]] | Any, batch_size: int = 32, *, columns: Any = None) -> Run:
        """Evaluate every row and keep the reports: for notebooks (shows as a table; says what was cached).

        ``rows`` as for :meth:`evaluate_many` (dicts, a pandas DataFrame or a ``datasets.Dataset``).

        Raises:
            BudgetExceededError, CacheMissError, BatchPendingError: the run's stop, with ``run`` set to the
                :class:`Run` of the answers finished before it (their calls are cached: a rerun reads them free).
            KeyboardInterrupt: Ctrl-C, with ``run`` set in the same way (the calls in flight at that moment are
                not waited for: they finish in the background and are cached, not counted in that ``run``).
        """
        llm_before = self.usage
        scorer = self.scorer
        computed_before, cached_before = scorer.pairs_computed, scorer.cache_hits  # this evaluator's own
        reports: list[AnswerReport] = []

        def so_far() -> Run:
            return Run(
                reports,
                self.usage - llm_before,
                scorer.pairs_computed - computed_before,
                scorer.cache_hits - cached_before,
            )

        try:
            for report in self.evaluate_many(rows, batch_size, columns=columns):
                reports.append(report)
        except RUN_STOPS as stop:  # the answers finished before the stop are handed out with it, never lost
            stop.run = so_far()
            raise
        except KeyboardInterrupt as interrupt:  # Ctrl-C in a notebook cell: so are the answers finished before it
            interrupt.run = so_far()  # type: ignore[attr-defined]
            raise
        run = so_far()
        log.info("%s", run.cache_note)
        return run

    def evaluate_many(
        self, rows: Iterable[Sample | dict[str, Any]] | Any, batch_size: int = 32, *, columns: Any = None
    ) -> Iterator[AnswerReport]:
        """Reports in input order, a batch at a time; bad rows come back as ERROR reports naming row and field.

        ``rows``: dicts or samples, a pandas DataFrame or a ``datasets.Dataset``; RAGAS and DeepEval column names
        are recognised and ``columns`` maps others (``{"answer": "response"}``): see :mod:`groundjudge.io.tables`.
        A row that repeats an earlier row's id is its ERROR report (id ``row-N``), as in ``groundjudge score``
        (:func:`groundjudge.io.rows.unique_rows`).

        Raises:
            BudgetExceededError, CacheMissError: after yielding every answer finished before the stop.
        """
        from groundjudge.io.tables import read_rows

        return self.evaluate_numbered(unique_rows(read_rows(rows, columns), set()), batch_size)

    def evaluate_numbered(
        self, rows: Iterable[tuple[int, Sample | dict[str, Any] | InputError]], batch_size: int = 32
    ) -> Iterator[AnswerReport]:
        """As :meth:`evaluate_many`, for rows that carry their own row numbers (a row may be an InputError).

        ``batch_size``: valid rows whose claims the NLI stage scores together (the cut of
        :func:`groundjudge.io.rows.batches`).
        """
        return self.evaluate_batches(batches(rows, batch_size))

    def evaluate_batches(
        self, cuts: Iterable[list[tuple[int, Any, Sample | InputError]]], *, window: int | None = None
    ) -> Iterator[AnswerReport]:
        """Reports, in input order, of rows already cut into NLI batches (:func:`groundjudge.io.rows.batches`).

        Rows stream through the stages (:mod:`groundjudge.pipeline.flow`): up to ``window`` rows in flight (default
        ``Config.window``, else the larger of 8 x ``concurrency`` and 2 x the first batch), one pool of
        ``concurrency`` LLM calls shared by every stage, each batch's NLI run as soon as its claims are known, while
        calls are in flight. With the provider batch API (``Config.batch_api``) one batch is in flight at a time, and
        the calls each step of it defers go out as one provider batch (:mod:`groundjudge.pipeline.batching`).

        Raises:
            BudgetExceededError, CacheMissError, BatchPendingError: after yielding every answer finished before the
                stop (no new row starts once one has stopped; the rows in flight finish).
        """
        self.check_config()
        if self.head is not None and self.mode != "llm":
            _ = self.nli  # a head fitted for another model stops the run before any row, not row by row
        items = (self._items(cut) for cut in cuts)
        c = self.config
        if c.pack_answers > 1 and not c.batch_api and self.client is not None and self.client.cache is not None:
            # several answers per call: each step's deferred calls packed (groundjudge.pipeline.packing)
            packer = PackedCalls(self.client, c.pack_answers, c.concurrency)
            with packer.deferring():
                yield from stream(
                    items, self.steps, concurrency=c.concurrency, window=window or c.window, parking=packer
                )
            return
        if not c.batch_api or self.client is None:
            yield from stream(items, self.steps, concurrency=c.concurrency, window=window or c.window)
            return
        # provider batch mode: one cut batch at a time, each step's deferred calls one provider batch
        provider = ProviderBatches(self.client, self.second_client, c, self.batch_progress, self.batch_outcomes)
        with provider.deferring():
            yield from stream(items, self.steps, concurrency=c.concurrency, window=1, parking=provider)

    def _items(self, cut: list[tuple[int, Any, Sample | InputError]]) -> list[Work | AnswerReport]:
        """A cut batch as the engine carries it: work for each valid row, the ERROR report of each bad one."""
        return [
            error_report(parsed, n, row_id(row, n), self.mode)
            if isinstance(parsed, InputError)
            else Work(sample=parsed, row=n)
            for n, row, parsed in cut
        ]

    def estimate(self, rows: Iterable[Sample | dict[str, Any]] | Any) -> dict[str, Any]:
        """A dry run: the LLM calls scoring ``rows`` needs (exact where the cache holds the claims and their NLI
        scores, else an upper bound), how many the cache holds, the cost (None, and a ``cost`` note, when the model
        has no price: unknown, not 0), and a ``note`` saying it in words. Writes nothing and sends nothing; loads
        the NLI model only when some row's claims are known (a claim row, or a cached claims call).

        ``rows`` as for :meth:`evaluate_many`, read by the same reader (:func:`groundjudge.io.tables.read_rows`): a
        DataFrame or Dataset by its rows, one dict where rows go refused. See
        :func:`groundjudge.pipeline.estimate.estimate`.
        """
        from groundjudge.io.tables import read_rows

        self.check_config()
        return estimate(
            (row for _, row in read_rows(rows)),
            client=self.client,
            mode=self.mode,
            config=self.config,
            qa_expected=self.steps.qa_expected,
            cache=self.cache,
            context=lambda client, second: self._context(client, second),
            second_client=self.second_client,
        )
