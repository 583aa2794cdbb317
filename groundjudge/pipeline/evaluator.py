"""The one place the stages join: sample -> passages -> claims -> NLI -> routes -> judge -> QA -> scores -> report.

:class:`Evaluator` runs a batch of samples stage by stage: the NLI stage scores every claim of every sample of the
batch in one batched call; LLM calls (claims, judge, QA) run concurrently, bounded by ``concurrency``. A failure in
one answer is recorded in its report and never stops the run; only the budget cap and a cache-only miss stop it,
after the answers already finished are handed out.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from groundjudge.cache import Cache
from groundjudge.checker.evidence import BM25, EvidenceSelector
from groundjudge.checker.head import Sources, VerdictHead
from groundjudge.checker.nli import ENTAILMENT, NLIModel, NLIScorer, resolve_model_name
from groundjudge.checker.profile import read_model_head
from groundjudge.chunking import chunk_documents
from groundjudge.config import Config
from groundjudge.errors import ConfigError, DeferredCallError, GroundjudgeError, InputError
from groundjudge.io.rows import batches, row_id
from groundjudge.llm import Ledger, Limits, LLMClient, RetryPolicy, make_client, price_for
from groundjudge.llm.batch import BatchOutcome
from groundjudge.models import AnswerReport, Claim, ClaimNLI, LocalThresholds, Passage, QAResult, Sample, Usage
from groundjudge.pipeline.assemble import failed_report, final_report
from groundjudge.pipeline.batching import run_llm_stage
from groundjudge.pipeline.citing import attach_citations, cited_hints, cited_map, citing_of, route_cited, score_cited
from groundjudge.pipeline.estimate import Stages, estimate
from groundjudge.pipeline.flow import stream
from groundjudge.pipeline.work import (
    RUN_STOPS,
    SecondPlan,
    Work,
    concurrently,
    describe,
    each,
    error_report,
    run_call,
)
from groundjudge.prompts import load_prompt
from groundjudge.review.report import Run
from groundjudge.stages.claims import claim_from_input, claims_from_llm, claims_from_sentences
from groundjudge.stages.judge import JudgedClaim, Source, judge_claims, select_sources
from groundjudge.stages.qa import score_qa
from groundjudge.stages.route import route_claim

log = logging.getLogger(__name__)


def _as_list(contexts: Sequence[str] | str) -> Any:
    """The Python API's one-source shorthand: a plain string is that one source (a row in a file must give a list
    under ``contexts``; see :func:`groundjudge.io.rows.parse_sample`)."""
    return [contexts] if isinstance(contexts, str) else contexts


def _second_failed(w: Work, why: str) -> None:
    """A provider batch of second-judge calls failed as a whole: the second judge's error, not the answer's."""
    if w.second is not None:
        w.second.error = why


def _second_charged(w: Work, usage: Usage) -> None:
    """What a second-judge call answered in a provider batch cost: the answer's, and the second judge's apart."""
    w.usage = w.usage + usage
    if w.second is not None:
        w.second.usage = w.second.usage + usage


def _never(threshold: float | None) -> str:
    return "never" if threshold is None else str(threshold)


def in_second_sample(row_id: str, share: float | None) -> bool:
    """Whether the answer ``row_id`` is in the second judge's sample of ``share`` of the answers: a hash of the id
    (SHA-256, its first 8 bytes as a fraction of 2**64) below ``share``, so every rerun and both engines pick the
    same answers whatever the order or batching."""
    if not share:
        return False
    digest = hashlib.sha256(row_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < share


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
        self.config = Config.make(**{**base, **overrides})
        c = self.config
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
            second_client = make_client(
                c.second_judge,
                base_url=c.second_judge_base_url,
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
        if second is not None and client is not None and second.provider.identity() == client.provider.identity():
            raise ConfigError(
                f"second_judge {second.model_id} is the first judge's model at the same server: at temperature 0 it "
                "would repeat the first verdicts (and replay them from the cache); name another model"
            )
        self._nli = nli
        self._scorer: NLIScorer | None = None
        self.batch_outcomes: list[BatchOutcome] = []  # batch mode: what each provider batch did
        self.batch_progress: Callable[[int, int], None] | None = None  # batch mode: (answered, total) while waiting
        self._versions: dict[str, str] | None = None
        self._model_name = nli.name if nli is not None else resolve_model_name(c.nli_model)
        self.head = self._find_head(self._model_name)
        # levels on the entailment; "never" and None (no local verdict) mean the same on any scale
        explicit = [k for k in ("t_support", "t_unsupported") if getattr(c, k) not in (None, "never")]
        if self.head is not None and explicit:
            raise ConfigError(
                f"{' and '.join(explicit)} given while a verdict head is in force ({self._head_source()}): thresholds "
                "fitted on the entailment do not apply to the head's probability. Drop them to use the head's own "
                "thresholds, or turn the head off (--no-head, use_head: false) to use them."
            )
        self.thresholds = self.local_thresholds(self.mode)
        if nli is not None:
            self._check_head(nli)

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

    def _head_source(self) -> str:
        return "config 'head'" if self.config.head is not None else f"{self._model_name}/groundjudge.json"

    def _check_head(self, model: NLIModel) -> None:
        if self.head is not None:
            self.head.check_model(model.identity, self._head_source())

    # -- parts ----------------------------------------------------------------------------------------------

    @property
    def nli(self) -> NLIModel:
        """The NLI model, loaded on first use."""
        if self._nli is None:
            c = self.config
            self._nli = NLIModel.shared(
                c.nli_model,
                device=c.device,
                batch_size=c.batch_size,
                kind=c.nli_kind,
                supported_label=c.nli_supported_label,
                trust_remote_code=c.nli_trust_remote_code,
                max_length=c.nli_max_length,
            )
            self._check_head(self._nli)
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
        """The NLI model fingerprint, its decision thresholds, the LLM and the prompt versions behind the reports."""
        if self._versions is None:
            t = self.thresholds
            out = {
                "nli_model": self.nli.fingerprint,
                "thresholds": f"support>={_never(t.t_support)} contradict>={_never(t.t_contradict)} "
                f"unsupported<={_never(t.t_unsupported)}",
            }
            if self.head is not None:  # the thresholds above apply to its probability, not the entailment
                out["head"] = self.head.digest
            if self.client is not None:
                out["llm"] = self.client.model_id
                if self.second_client is not None:
                    out["second_judge"] = self.second_client.model_id
                # every prompt a row of this evaluator may use (claim rows and answers without questions: judge)
                names = ["claims_qa", "verify", "judge"] if self._qa_expected else ["claims", "judge"]
                out.update({f"prompt.{n}": load_prompt(n).version for n in names})
            self._versions = out
        return dict(self._versions)

    # -- public API -----------------------------------------------------------------------------------------

    def evaluate(
        self, answer: str, contexts: Sequence[str] | str, question: str | None = None, *, id: str = "answer"
    ) -> AnswerReport:
        """Evaluate one answer against its sources (one source may be given as a plain string)."""
        row = {"id": id, "answer": answer, "contexts": _as_list(contexts), "question": question}
        return next(self.evaluate_many([row]))

    def evaluate_claim(self, claim: str, contexts: Sequence[str] | str, *, id: str = "claim") -> AnswerReport:
        """Evaluate one claim (no extraction) against its sources (one source may be given as a plain string)."""
        return next(self.evaluate_many([{"id": id, "claim": claim, "contexts": _as_list(contexts)}]))

    def run(self, rows: Iterable[Sample | dict[str, Any]] | Any, batch_size: int = 32, *, columns: Any = None) -> Run:
        """Evaluate every row and keep the reports: for notebooks (shows as a table; says what was cached).

        ``rows`` as for :meth:`evaluate_many` (dicts, a pandas DataFrame or a ``datasets.Dataset``).
        """
        llm_before = self.usage
        scorer = self.scorer
        computed_before, cached_before = scorer.model.pairs_scored, scorer.cache_hits
        reports = list(self.evaluate_many(rows, batch_size, columns=columns))
        run = Run(
            reports,
            self.usage - llm_before,
            scorer.model.pairs_scored - computed_before,
            scorer.cache_hits - cached_before,
        )
        log.info("%s", run.cache_note)
        return run

    def evaluate_many(
        self, rows: Iterable[Sample | dict[str, Any]] | Any, batch_size: int = 32, *, columns: Any = None
    ) -> Iterator[AnswerReport]:
        """Reports in input order, a batch at a time; bad rows come back as ERROR reports naming row and field.

        ``rows``: dicts or samples, a pandas DataFrame or a ``datasets.Dataset``; RAGAS and DeepEval column names
        are recognised and ``columns`` maps others (``{"answer": "response"}``): see :mod:`groundjudge.io.tables`.

        Raises:
            BudgetExceededError, CacheMissError: after yielding every answer finished before the stop.
        """
        from groundjudge.io.tables import read_rows

        return self.evaluate_numbered(read_rows(rows, columns), batch_size)

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
        calls are in flight. With the provider batch API each batch goes stage by stage instead (a stage's calls are
        sent as one provider batch).

        Raises:
            BudgetExceededError, CacheMissError, BatchPendingError: after yielding every answer finished before the
                stop (no new row starts once one has stopped; the rows in flight finish).
        """
        if self.head is not None and self.mode != "llm":
            _ = self.nli  # a head fitted for another model stops the run before any row, not row by row
        items = (self._items(cut) for cut in cuts)
        if self.config.batch_api and self.client is not None:
            for group in items:
                yield from self._run_batch(group)
            return
        yield from stream(items, self, concurrency=self.config.concurrency, window=window or self.config.window)

    def _items(self, cut: list[tuple[int, Any, Sample | InputError]]) -> list[Work | AnswerReport]:
        """A cut batch as the engine carries it: work for each valid row, the ERROR report of each bad one."""
        return [
            error_report(parsed, n, row_id(row, n), self.mode)
            if isinstance(parsed, InputError)
            else Work(sample=parsed, row=n)
            for n, row, parsed in cut
        ]

    def estimate(self, rows: Iterable[Sample | dict[str, Any]]) -> dict[str, Any]:
        """A dry run: the LLM calls scoring ``rows`` needs (exact where the cache holds the claims and their NLI
        scores, else an upper bound), how many the cache holds, the cost (None, and a ``cost`` note, when the model
        has no price: unknown, not 0), and a ``note`` saying it in words. Writes nothing and sends nothing; loads
        the NLI model only when some row's claims are known (a claim row, or a cached claims call).

        See :func:`groundjudge.pipeline.estimate.estimate`.
        """
        return estimate(
            rows,
            client=self.client,
            mode=self.mode,
            config=self.config,
            qa_expected=self._qa_expected,
            cache=self.cache,
            stages=self._dry_stages,
            second_client=self.second_client,
        )

    def _dry_stages(
        self,
        client: LLMClient,
        cache: Cache,
        scorer: Callable[[NLIModel], NLIScorer],
        second_client: LLMClient | None = None,
    ) -> Stages:
        """The stage steps of a twin of this evaluator that calls ``client`` (and ``second_client`` as its second
        judge), reads ``cache`` and scores with ``scorer`` (made when the NLI stage first runs, so the model loads
        only then): for the dry run."""
        twin = Evaluator(self.config, nli=self._nli, client=client, cache=cache, second_client=second_client)
        twin.head, twin.thresholds = self.head, self.thresholds  # this evaluator's routing, whatever the twin found

        def nli(batch: list[Work]) -> None:
            if twin._scorer is None:
                twin._nli = self.nli  # loaded by this evaluator, which keeps it for the run
                twin._scorer = scorer(twin._nli)
            twin._stage_nli(batch)

        return Stages(
            claims=twin._stage_claims,
            nli=nli,
            route=twin._stage_route,
            verify=twin._stage_verify,
            second=twin._stage_second,
        )

    # -- stages ---------------------------------------------------------------------------------------------

    def _run_batch(self, order: list[Work | AnswerReport]) -> Iterator[AnswerReport]:
        """One batch stage by stage (provider batch mode: each stage's calls go out as one provider batch)."""
        batch = [w for w in order if isinstance(w, Work)]
        if batch:
            self._llm_stage(self._stage_claims, batch)
            try:
                self.nli_stage(batch)
            except RUN_STOPS as exc:
                for w in batch:
                    w.stop = w.stop or exc
            self._llm_stage(self._stage_verify, batch)
            if self.second_client is not None:
                run_llm_stage(
                    self._stage_second,
                    batch,
                    client=self.second_client,
                    config=self.config,
                    progress=self.batch_progress,
                    outcomes=self.batch_outcomes,
                    fail=_second_failed,  # never the answer's ERROR: the second judge is not scored
                    charge=_second_charged,
                )
        stop: GroundjudgeError | None = None
        for item in order:
            if isinstance(item, AnswerReport):
                yield item
            elif item.stop is not None:
                stop = stop or item.stop
            else:
                yield self.report(item)
        if stop is not None:
            raise stop

    def _llm_stage(self, stage: Callable[[list[Work]], None], batch: list[Work]) -> None:
        """Run a stage that calls the LLM (through the provider batch API in batch mode)."""
        run_llm_stage(
            stage,
            batch,
            client=self.client,
            config=self.config,
            progress=self.batch_progress,
            outcomes=self.batch_outcomes,
        )

    def _stage_claims(self, batch: list[Work]) -> None:
        llm: list[Work] = []

        def local(w: Work) -> None:
            if not self.claims_local(w):
                llm.append(w)

        each(batch, local)
        concurrently(llm, self.claims_call, self.config.concurrency)

    def _stage_verify(self, batch: list[Work]) -> None:
        todo = [w for w in batch if w.live and self.needs_verify(w)]
        concurrently(todo, self.verify, self.config.concurrency)
        for w in todo:  # in batch mode, once the provider batch has answered (before, verify deferred: no replies)
            if self.needs_compare(w):
                run_call(w, self.compare)

    def _stage_second(self, batch: list[Work]) -> None:
        todo = [w for w in batch if w.live and self.needs_second(w)]
        concurrently(todo, self.second, self.config.concurrency)

    # -- the steps of one answer (and one batch's NLI); pipeline.flow and _run_batch drive them ----------------

    def claims_local(self, w: Work) -> bool:
        """Claims that need no LLM (a claim row, sentences in nli mode, an empty answer): set them and say True;
        False when the claims call must run (:meth:`claims_call`)."""
        s = w.sample
        text = citing_of(w, self.config.citation_style).text  # citation markers stripped (kept as citations)
        if s.claim is not None:
            w.claims = claim_from_input(text if text.strip() else s.claim)
        elif self.client is None or self.mode == "nli":  # nli mode: no LLM at all
            w.claims = claims_from_sentences(text)
        elif not text.strip():
            w.claims = []
        else:
            return False
        attach_citations(w)
        return True

    def claims_call(self, w: Work) -> None:
        """The call that reads only the answer: its claims (and, with QA, its questions and replies)."""
        assert self.client is not None
        n_questions = self.config.qa_questions if self._qa_expected else 0
        text = citing_of(w, self.config.citation_style).text
        try:
            w.claims, w.questions, usage = claims_from_llm(self.client, text, w.sample.question, n_questions)
        except (*RUN_STOPS, DeferredCallError):
            raise
        except Exception:
            w.claims = claims_from_sentences(text, fallback=True)  # checked for review; the verdict is ERROR
            attach_citations(w)
            raise  # recorded as an error; the sentence claims are still checked
        attach_citations(w)
        w.usage = w.usage + usage

    def nli_stage(self, batch: list[Work]) -> None:
        """The NLI stage and the routing of every claim, for the live answers of one batch (scored together)."""
        live = [w for w in batch if w.live]
        if live:
            self._stage_nli(live)
            self._stage_route(live)

    def report(self, w: Work) -> AnswerReport:
        """The report of an answer that went through every stage (ERROR if it failed on the way or here)."""
        try:
            return final_report(
                w,
                mode=self.mode,
                config=self.config,
                versions=self.versions,
                qa_expected=self._qa_expected_for(w),
            )
        except Exception as exc:  # one answer's failure never ends the run
            log.exception("report of row %s failed", w.row)
            w.failed = w.failed or describe(exc)
            return failed_report(w, self.mode)

    def _stage_nli(self, batch: list[Work]) -> None:
        c = self.config

        cut: dict[tuple[str, ...], list[Passage]] = {}  # answers about the same sources are cut once

        def chunk(w: Work) -> None:
            key = tuple(w.sample.contexts)
            if key not in cut:
                cut[key] = chunk_documents(w.sample.contexts, self.nli.tokenizer, c.passage_tokens, c.passage_overlap)
            w.passages = cut[key]

        each(batch, chunk)
        # Stopping at the first passage that entails a claim is safe only when no later passage could make it
        # CONTRADICTED: with a contradiction threshold in force, every selected passage is scored.
        # With a verdict head, t_support is on the head's scale, not the entailment's: every selected passage is
        # scored too.
        early_exit = None if self._local_contradiction or self.head is not None else self.thresholds.t_support
        selector = EvidenceSelector(self.scorer, k=c.evidence_k, early_exit=early_exit)
        sources: dict[tuple[str, ...], Sources] = {}

        def check(works: list[Work]) -> None:
            results = selector.check([([cl.text for cl in w.claims], w.passages) for w in works])
            for w, res in zip(works, results, strict=True):
                if self.head is not None:
                    self.head.apply([cl.text for cl in w.claims], res, Sources.memo(sources, w.sample.contexts))
                w.nli = res

        live = [w for w in batch if w.live]
        try:
            check(live)
        except RUN_STOPS:
            raise
        except Exception:  # find the answer that broke the batch: each alone, the rest unharmed
            log.warning("the NLI batch failed; scoring its %d answers one by one", len(live), exc_info=True)
            each(live, lambda w: check([w]))

        def head(claims: list[str], res: list[ClaimNLI], w: Work) -> None:
            assert self.head is not None
            self.head.apply(claims, res, Sources.memo(sources, w.sample.contexts))

        # each cited source alone, for the citation verdicts (pipeline.citing)
        each([w for w in live if w.live and w.cites], lambda w: score_cited([w], selector, head if self.head else None))

    def _stage_route(self, batch: list[Work]) -> None:
        c = self.config

        def route(w: Work) -> None:
            local_contradiction = self._local_contradiction
            w.decisions = [
                route_claim(
                    cl,
                    r,
                    mode=self.mode,
                    thresholds=self.thresholds,
                    local_contradiction=local_contradiction,
                    conflict_check=c.conflict_check,
                    escalate_conflicts=c.escalate_conflicts,
                )
                for cl, r in zip(w.claims, w.nli, strict=True)
            ]
            if w.cites:
                route_cited(w, mode=self.mode, thresholds=self.thresholds)

        each(batch, route)

    @property
    def _local_contradiction(self) -> bool:
        """Whether the NLI stage can call CONTRADICTED at all with the thresholds (and model) in force."""
        return self.thresholds.t_contradict is not None and bool(getattr(self.nli, "has_contradiction", True))

    def _judge_hints(self, w: Work, escalated: Sequence[tuple[Claim, ClaimNLI]]) -> list[Passage]:
        """Passages to show the judge when the contexts are too long to show whole: those the NLI stage found
        for each claim, then, for claims it could not score, the best BM25 passages."""
        hints = [p for _, r in escalated for p in (r.entailment_passage, r.contradiction_passage) if p is not None]
        unscored = [cl for cl, r in escalated if not r.passages_scored]
        if unscored and w.passages:
            bm25 = BM25([p.text for p in w.passages])
            k = self.config.evidence_k or 4
            hints += [w.passages[i] for cl in unscored for i in bm25.rank(cl.text)[:k]]
        return hints

    def _judge_sources(self, w: Work, pairs: Sequence[tuple[Claim, ClaimNLI]], qa: bool) -> list[Source]:
        """The sources the judge sees for the claims of ``pairs`` (with ``qa``, the evidence of every claim too)."""
        hints = self._judge_hints(w, pairs)
        if qa:  # the questions may be about any claim: the evidence of every claim
            hints += [p for r in w.nli for p in (r.entailment_passage, r.contradiction_passage) if p]
        hints += cited_hints(w)
        sources = select_sources(w.sample.contexts, hints)
        if not sources:
            raise InputError("no source passage could be selected for the judge", field="contexts")
        return sources

    def needs_verify(self, w: Work) -> bool:
        """Whether the answer needs its sources-side call: an escalated claim, or the QA check."""
        return self.client is not None and (any(d.route == "judge" for d in w.decisions) or self._qa_expected_for(w))

    def verify(self, w: Work) -> None:
        """The one sources-side call of an answer: verdicts on its escalated claims and, with QA on, the sources'
        answers to its verification questions (blind: never the answer's replies)."""
        assert self.client is not None
        pairs = [(cl, r) for cl, r, d in zip(w.claims, w.nli, w.decisions, strict=True) if d.route == "judge"]
        escalated = [cl for cl, _ in pairs]
        qa = self._qa_expected_for(w)
        answers: dict[str, str] = {}
        try:
            if escalated or (qa and w.questions):
                sources = self._judge_sources(w, pairs, qa)
                questions = w.questions if qa else ()
                cited = cited_map(w, escalated)
                w.judged, answers, usage = judge_claims(self.client, escalated, sources, questions, cited)
                w.usage = w.usage + usage
        except (*RUN_STOPS, DeferredCallError):
            raise
        except Exception as exc:
            for cl in escalated:
                w.judged.setdefault(cl.id, JudgedClaim(label="ERROR", error=describe(exc)))
            if qa:
                w.qa = QAResult(items=list(w.questions), error=describe(exc))
            raise
        unjudged = [cid for cid, j in w.judged.items() if j.label == "ERROR"]
        if unjudged:
            w.errors.append(f"judge: no verdict for claim(s) {', '.join(unjudged)}")
        if qa:
            w.qa_replies = answers  # compared by the local model in compare(), off the call's slot

    def needs_compare(self, w: Work) -> bool:
        """Whether the answer's QA replies wait for their comparison (:meth:`compare`)."""
        return w.qa_replies is not None

    def compare(self, w: Work) -> None:
        """The QA check's comparison of each question's two replies by the local NLI model, pairs of this answer
        alone (so its scores never depend on which answers ran with it). A local step: the engine runs it on the NLI
        thread, so a call slot never waits for the CPU."""
        answers, w.qa_replies = w.qa_replies or {}, None
        w.qa = score_qa(w.questions, answers, self._answers_agree)
        if w.qa.error:
            w.errors.append(f"QA: {w.qa.error}")

    # -- the second judge (README "Second judge"): after verify, never scored --------------------------------

    def needs_second(self, w: Work) -> bool:
        """Whether the second judge looks at the answer (and which claims: ``w.second``): a flagged answer (its
        verdict FAIL, a CONTRADICTED claim, or a judged claim whose verdict the local model disagrees with:
        :attr:`~groundjudge.models.ClaimVerdict.nli_disagrees`) or one in the sample (:func:`in_second_sample`). It
        judges the claims the first judge judged; a flagged answer with none judges its claims not SUPPORTED. An
        answer that failed, or has nothing to judge, gets no second look."""
        if self.second_client is None or not w.live:
            return False
        if w.second is None:
            w.second = self._second_plan(w, self.second_client.model_id)
        return w.second is not None and not w.second.judged and w.second.error is None

    def _second_plan(self, w: Work, model: str) -> SecondPlan | None:
        try:  # the report as the first judge left it (no versions: not written)
            first = final_report(
                w, mode=self.mode, config=self.config, versions=dict, qa_expected=self._qa_expected_for(w)
            )
        except Exception:  # the report will say ERROR: nothing to check
            return None
        if first.verdict == "ERROR":
            return None
        why = ["FAIL"] if first.verdict == "FAIL" else []
        if any(c.label == "CONTRADICTED" for c in first.claims):
            why.append("contradicted")
        if any(c.nli_disagrees for c in first.claims):
            why.append("nli_disagrees")
        flagged = bool(why)
        if in_second_sample(w.sample.id, self.config.second_judge_sample):
            why.append("sample")
        ids = [c.claim.id for c in first.claims if c.route == "judge" and c.label != "ERROR"]
        if not ids and flagged:
            ids = [c.claim.id for c in first.claims if c.label in ("CONTRADICTED", "UNSUPPORTED")]
        return SecondPlan(model, why, ids) if why and ids else None

    def second(self, w: Work) -> None:
        """The second judge's call: the claims of ``w.second`` with the judge prompt and the sources the first
        judge saw. A failure is the second judge's error (in ``w.second``), never the answer's: the answer is
        scored by the first judge alone. The budget and a cache-only miss stop the run as any call does."""
        assert self.second_client is not None and w.second is not None
        plan = w.second
        wanted = set(plan.claim_ids)
        claims = [cl for cl in w.claims if cl.id in wanted]
        escalated = [(cl, r) for cl, r, d in zip(w.claims, w.nli, w.decisions, strict=True) if d.route == "judge"]
        # the first judge's sources: from its escalated claims (and QA evidence); else from these claims
        pairs = escalated or [(cl, r) for cl, r in zip(w.claims, w.nli, strict=True) if cl.id in wanted]
        try:
            sources = self._judge_sources(w, pairs, bool(escalated) and self._qa_expected_for(w))
            plan.judged, _, usage = judge_claims(self.second_client, claims, sources, (), cited_map(w, claims))
        except (*RUN_STOPS, DeferredCallError):
            raise
        except Exception as exc:  # recorded as the second judge's error; the answer goes on unharmed
            log.info("row %s: the second judge failed: %s", w.row, describe(exc))
            plan.error = describe(exc)
            usage = getattr(exc, "usage", None) or Usage()
        plan.usage = plan.usage + usage
        w.usage = w.usage + usage

    @property
    def _qa_expected(self) -> bool:
        return self.client is not None and self.config.qa and self.mode != "nli"

    def _qa_expected_for(self, w: Work) -> bool:
        """QA runs on answers (not on claim rows) that have claims, with an LLM and QA on."""
        return self._qa_expected and w.sample.answer is not None and bool(w.claims)

    def _answers_agree(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """Entailment both ways between statement pairs, by the local NLI model (the QA check's comparison)."""
        both = [*pairs, *((b, a) for a, b in pairs)]
        probs = self.scorer.score(both)
        n = len(pairs)
        return [float(min(probs[i][ENTAILMENT], probs[n + i][ENTAILMENT])) for i in range(n)]
