"""The one place the stages join: sample -> passages -> claims -> NLI -> routes -> judge -> QA -> scores -> report.

:class:`Evaluator` runs a batch of samples stage by stage: the NLI stage scores every claim of every sample of the
batch in one batched call; LLM calls (claims, judge, QA) run concurrently, bounded by ``concurrency``. A failure in
one answer is recorded in its report and never stops the run; only the budget cap and a cache-only miss stop it,
after the answers already finished are handed out.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from groundjudge.cache import Cache
from groundjudge.chunking import chunk_documents
from groundjudge.claims import claim_from_input, claims_from_llm, claims_from_sentences
from groundjudge.config import Config
from groundjudge.errors import BudgetExceededError, CacheMissError, ConfigError, GroundjudgeError, InputError
from groundjudge.evidence import EvidenceSelector
from groundjudge.judge import JudgedClaim, judge_claims, select_sources
from groundjudge.llm import Ledger, LLMClient, RetryPolicy, make_client
from groundjudge.models import (
    AnswerReport,
    Claim,
    ClaimNLI,
    ClaimVerdict,
    Message,
    Passage,
    QAResult,
    Sample,
    Scores,
    Usage,
)
from groundjudge.nli import NLIModel, NLIScorer, resolve_model_name
from groundjudge.prompts import load_prompt
from groundjudge.qa import qa_consistency
from groundjudge.report import Run
from groundjudge.score import compute_scores, decide

log = logging.getLogger(__name__)

# Conditions of the whole run, not of one answer: they end evaluate_many after the finished answers.
RUN_STOPS = (BudgetExceededError, CacheMissError)


def decide_locally(
    nli: ClaimNLI, t_support: float, t_contradict: float, t_unsupported: float | None = None
) -> str | None:
    """The verdict the NLI stage is confident enough to give alone, else None (escalate).

    SUPPORTED at entailment >= t_support, CONTRADICTED at contradiction >= t_contradict, and, when t_unsupported
    is set, UNSUPPORTED when no scored passage entails the claim above t_unsupported.
    """
    if not nli.passages_scored:
        return None
    if nli.entailment >= t_support and nli.entailment >= nli.contradiction:
        return "SUPPORTED"
    if nli.contradiction >= t_contradict:
        return "CONTRADICTED"
    if t_unsupported is not None and nli.entailment <= t_unsupported:
        return "UNSUPPORTED"
    return None


def row_id(row: Any, row_number: int | None) -> str:
    """The id a row's report gets: its own "id", else ``row-N`` (so that --resume recognises it)."""
    rid = row.get("id") if isinstance(row, dict) else None
    if rid is None or isinstance(rid, (dict, list)) or str(rid).strip() == "":
        return f"row-{row_number}"
    return str(rid)


def parse_sample(row: Any, row_number: int | None = None) -> Sample:
    """A validated :class:`Sample` from an input row; a bad row is an :class:`InputError` naming row and field."""
    if isinstance(row, Sample):
        return row
    if not isinstance(row, dict):
        raise InputError(f"a row must be a JSON object, not {type(row).__name__}", row=row_number)
    if isinstance(row.get("id"), (dict, list)):
        raise InputError("must be a string or a number", row=row_number, field="id")
    contexts = row.get("contexts", row.get("context"))
    if isinstance(contexts, str):
        contexts = [contexts]
    if not isinstance(contexts, list) or not all(isinstance(c, str) for c in contexts):
        raise InputError("must be a list of strings", row=row_number, field="contexts")
    if not any(c.strip() for c in contexts):
        raise InputError("is empty: there is nothing to check the answer against", row=row_number, field="contexts")
    answer, claim = row.get("answer"), row.get("claim")
    if answer is None and claim is None:
        raise InputError("a row needs an 'answer' or a 'claim'", row=row_number, field="answer")
    if answer is not None and claim is not None:
        raise InputError("give either 'answer' or 'claim', not both", row=row_number, field="claim")
    for name, value in (("answer", answer), ("claim", claim), ("question", row.get("question"))):
        if value is not None and not isinstance(value, str):
            raise InputError(f"must be a string, not {type(value).__name__}", row=row_number, field=name)
    if claim is not None and not claim.strip():
        raise InputError("is empty", row=row_number, field="claim")
    metadata = row.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise InputError("must be an object", row=row_number, field="metadata")
    label = row.get("label")
    return Sample(
        id=row_id(row, row_number),
        contexts=contexts,
        answer=answer,
        claim=claim,
        question=row.get("question"),
        label=None if label is None else str(label),
        metadata=metadata,
    )


def error_report(error: InputError, row: int | None, rid: str | None = None, mode: str = "") -> AnswerReport:
    """The report of a row that could not be evaluated at all."""
    return AnswerReport(
        id=rid if rid is not None else f"row-{row}",
        verdict="ERROR",
        mode=mode,
        scores=Scores(),
        errors=[str(error)],
        row=row,
    )


@dataclass
class _Work:
    sample: Sample
    row: int | None
    claims: list[Claim] = field(default_factory=list)
    passages: list[Passage] = field(default_factory=list)
    nli: list[ClaimNLI] = field(default_factory=list)
    judged: dict[str, JudgedClaim] = field(default_factory=dict)
    qa: QAResult | None = None
    usage: Usage = field(default_factory=Usage)
    errors: list[str] = field(default_factory=list)
    stop: GroundjudgeError | None = None


class Evaluator:
    """Evaluates answers against their sources.

    Args:
        config: a :class:`Config`; keyword overrides are applied on top (``Evaluator(llm="openai/gpt-4o-mini")``).
        nli: an already loaded :class:`NLIModel` to share between evaluators.
        client: an :class:`LLMClient` to use instead of building one from ``config.llm``.
        cache: a :class:`Cache` instead of one at ``config.cache_dir``.
    """

    def __init__(
        self,
        config: Config | None = None,
        *,
        nli: NLIModel | None = None,
        client: LLMClient | None = None,
        cache: Cache | None = None,
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
                ledger=Ledger(budget_usd=c.budget_usd, max_calls=c.max_calls),
                retry=RetryPolicy(max_attempts=c.max_attempts),
                max_reasks=c.max_reasks,
            )
        self.client = client
        self.mode = c.mode or ("cascade" if client is not None else "nli")
        if self.mode != "nli" and self.client is None:
            raise ConfigError(f"mode {self.mode!r} needs an LLM: pass llm='provider/model' or a client")
        self._nli = nli
        self._scorer: NLIScorer | None = None
        self._versions: dict[str, str] | None = None
        self.thresholds = c.local_thresholds(
            self.mode, nli.name if nli is not None else resolve_model_name(c.nli_model)
        )

    # -- parts ----------------------------------------------------------------------------------------------

    @property
    def nli(self) -> NLIModel:
        """The NLI model, loaded on first use."""
        if self._nli is None:
            c = self.config
            self._nli = NLIModel.shared(c.nli_model, device=c.device, batch_size=c.batch_size)
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
                "thresholds": f"support>={t.t_support} contradict>={t.t_contradict} unsupported<={t.t_unsupported}",
            }
            if self.client is not None:
                out["llm"] = self.client.model_id
                names = ["claims", "judge"] + (["qa_questions", "qa_check"] if self.config.qa else [])
                out.update({f"prompt.{n}": load_prompt(n).version for n in names})
            self._versions = out
        return dict(self._versions)

    # -- public API -----------------------------------------------------------------------------------------

    def evaluate(
        self, answer: str, contexts: Sequence[str] | str, question: str | None = None, *, id: str = "answer"
    ) -> AnswerReport:
        """Evaluate one answer against its sources."""
        row = {"id": id, "answer": answer, "contexts": contexts, "question": question}
        return next(self.evaluate_many([row]))

    def evaluate_claim(self, claim: str, contexts: Sequence[str] | str, *, id: str = "claim") -> AnswerReport:
        """Evaluate one claim (no extraction) against its sources."""
        return next(self.evaluate_many([{"id": id, "claim": claim, "contexts": contexts}]))

    def run(self, rows: Iterable[Sample | dict[str, Any]], batch_size: int = 32) -> Run:
        """Evaluate every row and keep the reports: for notebooks (shows as a table; says what was cached)."""
        llm_before = self.usage
        scorer = self.scorer
        computed_before, cached_before = scorer.model.pairs_scored, scorer.cache_hits
        reports = list(self.evaluate_many(rows, batch_size))
        run = Run(
            reports,
            self.usage - llm_before,
            scorer.model.pairs_scored - computed_before,
            scorer.cache_hits - cached_before,
        )
        log.info("%s", run.cache_note)
        return run

    def evaluate_many(self, rows: Iterable[Sample | dict[str, Any]], batch_size: int = 32) -> Iterator[AnswerReport]:
        """Reports in input order, a batch at a time; bad rows come back as ERROR reports naming row and field.

        Raises:
            BudgetExceededError, CacheMissError: after yielding every answer finished before the stop.
        """
        return self.evaluate_numbered(enumerate(rows, start=1), batch_size)

    def evaluate_numbered(
        self, rows: Iterable[tuple[int, Sample | dict[str, Any] | InputError]], batch_size: int = 32
    ) -> Iterator[AnswerReport]:
        """As :meth:`evaluate_many`, for rows that carry their own row numbers (a row may be an InputError)."""
        batch: list[_Work] = []
        order: list[_Work | AnswerReport] = []
        for n, row in rows:
            try:
                if isinstance(row, InputError):
                    raise row
                work = _Work(sample=parse_sample(row, n), row=n)
            except InputError as exc:
                order.append(error_report(exc, n, row_id(row, n), self.mode))
            else:
                batch.append(work)
                order.append(work)
            if len(batch) >= batch_size:
                yield from self._run_batch(batch, order)
                batch, order = [], []
        yield from self._run_batch(batch, order)

    def estimate(self, rows: Iterable[Sample | dict[str, Any]]) -> dict[str, Any]:
        """A dry run: how many LLM calls scoring ``rows`` may need at most, how many the cache holds, the cost.

        Exact for claim extraction and for judging single-claim rows; for answer rows the judge and QA calls are
        counted as if every answer escalated (an upper bound: the cascade decides some claims locally).
        """
        from groundjudge.claims import ExtractedClaims, claims_messages
        from groundjudge.judge import JudgeReply, judge_messages

        out = {"rows": 0, "bad_rows": 0, "llm_calls_upper_bound": 0, "cached_calls": 0, "estimated_cost_usd": 0.0}
        client = self.client
        for n, row in enumerate(rows, start=1):
            try:
                s = parse_sample(row, n)
            except InputError:
                out["bad_rows"] += 1
                continue
            out["rows"] += 1
            if client is None or self.mode == "nli":
                continue
            sources = select_sources(s.contexts, [])
            calls: list[tuple[list[Message], type[BaseModel], str]]
            if s.claim is not None:
                calls = [(judge_messages(claim_from_input(s.claim), sources), JudgeReply, "judge")]
            else:
                stand_in = [Claim(id="c1", text=s.answer or "")]
                calls = [
                    (claims_messages(s.answer or "", s.question), ExtractedClaims, "claims"),
                    (judge_messages(stand_in, sources), JudgeReply, "judge"),
                ]
                if self.config.qa:  # two QA calls, each about the size of a judge call over the same sources
                    calls += [(judge_messages(stand_in, sources), JudgeReply, "qa_check")] * 2
            for messages, schema, name in calls:
                exact = name == "claims" or s.claim is not None
                if exact and client.is_cached(messages, schema, load_prompt(name).ref):
                    out["cached_calls"] += 1
                else:
                    out["llm_calls_upper_bound"] += 1
                    out["estimated_cost_usd"] += client.estimate_cost(messages)
        out["estimated_cost_usd"] = round(float(out["estimated_cost_usd"]), 6)
        return out

    # -- stages ---------------------------------------------------------------------------------------------

    def _run_batch(self, batch: list[_Work], order: list[_Work | AnswerReport]) -> Iterator[AnswerReport]:
        if batch:
            self._stage_claims(batch)
            self._stage_nli(batch)
            self._stage_judge(batch)
            self._stage_qa(batch)
        stop: GroundjudgeError | None = None
        for item in order:
            if isinstance(item, AnswerReport):
                yield item
            elif item.stop is not None:
                stop = stop or item.stop
            else:
                yield self._report(item)
        if stop is not None:
            raise stop

    def _concurrently(self, works: list[_Work], fn: Callable[[_Work], None]) -> None:
        """Run ``fn`` on each work item, ``concurrency`` at a time; per-item errors land in the item."""

        def guarded(w: _Work) -> None:
            if w.stop is not None:
                return
            try:
                fn(w)
            except RUN_STOPS as exc:
                w.stop = exc
            except GroundjudgeError as exc:
                w.errors.append(f"{type(exc).__name__}: {exc}")
                usage = getattr(exc, "usage", None)
                if usage is not None:
                    w.usage = w.usage + usage

        if len(works) <= 1 or self.config.concurrency == 1:
            for w in works:
                guarded(w)
            return
        with ThreadPoolExecutor(max_workers=self.config.concurrency) as pool:
            list(pool.map(guarded, works))

    def _stage_claims(self, batch: list[_Work]) -> None:
        llm = []
        for w in batch:
            s = w.sample
            if s.claim is not None:
                w.claims = claim_from_input(s.claim)
            elif self.client is None or self.mode == "nli":  # nli mode: no LLM at all
                w.claims = claims_from_sentences(s.answer or "")
            elif not (s.answer or "").strip():
                w.claims = []
            else:
                llm.append(w)

        def extract(w: _Work) -> None:
            assert self.client is not None
            try:
                w.claims, usage = claims_from_llm(self.client, w.sample.answer or "", w.sample.question)
            except RUN_STOPS:
                raise
            except GroundjudgeError:
                w.claims = claims_from_sentences(w.sample.answer or "")
                raise  # recorded as an error; the sentence claims are still checked
            w.usage = w.usage + usage

        self._concurrently(llm, extract)

    def _stage_nli(self, batch: list[_Work]) -> None:
        c = self.config
        live = [w for w in batch if w.stop is None]
        for w in live:
            w.passages = chunk_documents(w.sample.contexts, self.nli.tokenizer, c.passage_tokens, c.passage_overlap)
        selector = EvidenceSelector(self.scorer, k=c.evidence_k, early_exit=self.thresholds.t_support)
        results = selector.check([([cl.text for cl in w.claims], w.passages) for w in live])
        for w, res in zip(live, results, strict=True):
            w.nli = res

    def _route(self, nli: ClaimNLI) -> tuple[str, str]:
        """(label, route) decided locally, or ("", "judge") to escalate."""
        if nli.error is not None and self.mode == "nli":
            return "ERROR", "nli"  # NLI could not score it and there is no judge; with one, the judge may
        t = self.thresholds
        local = decide_locally(nli, t.t_support, t.t_contradict, t.t_unsupported) if self.mode != "llm" else None
        if local is not None:
            return local, "nli"
        if self.mode == "nli":
            return "UNSUPPORTED", "nli"
        return "", "judge"

    def _stage_judge(self, batch: list[_Work]) -> None:
        if self.client is None:
            return
        todo = [w for w in batch if w.stop is None and any(self._route(r)[1] == "judge" for r in w.nli)]

        def run(w: _Work) -> None:
            assert self.client is not None
            pairs = [(cl, r) for cl, r in zip(w.claims, w.nli, strict=True) if self._route(r)[1] == "judge"]
            escalated = [cl for cl, _ in pairs]
            hints = [p for _, r in pairs for p in (r.entailment_passage, r.contradiction_passage) if p is not None]
            sources = select_sources(w.sample.contexts, hints)
            try:
                w.judged, usage = judge_claims(self.client, escalated, sources)
            except RUN_STOPS:
                raise
            except GroundjudgeError as exc:
                for cl in escalated:
                    w.judged[cl.id] = JudgedClaim(label="ERROR", error=f"{type(exc).__name__}: {exc}")
                raise
            w.usage = w.usage + usage

        self._concurrently(todo, run)

    def _stage_qa(self, batch: list[_Work]) -> None:
        if self.client is None or not self.config.qa or self.mode == "nli":
            return
        todo = [w for w in batch if w.stop is None and w.sample.answer and w.claims]

        def run(w: _Work) -> None:
            assert self.client is not None
            hints = [p for r in w.nli for p in (r.entailment_passage, r.contradiction_passage) if p is not None]
            sources = select_sources(w.sample.contexts, hints)
            try:
                w.qa, usage = qa_consistency(
                    self.client, w.sample.answer or "", sources, w.sample.question, self.config.qa_questions
                )
            except RUN_STOPS:
                raise
            except GroundjudgeError as exc:
                w.qa = QAResult(error=f"{type(exc).__name__}: {exc}")
                raise
            w.usage = w.usage + usage

        self._concurrently(todo, run)

    def _report(self, w: _Work) -> AnswerReport:
        c = self.config
        verdicts: list[ClaimVerdict] = []
        for claim, nli in zip(w.claims, w.nli, strict=True):
            label, route = self._route(nli)
            judged = w.judged.get(claim.id)
            if route == "judge" and judged is None:
                judged = JudgedClaim(label="ERROR", error="not judged")
            flags = list(judged.flags) if judged else []
            if nli.passages_scored and nli.entailment < c.weak_floor and (judged is None or judged.label != "ERROR"):
                flags.append("weak")
            verdicts.append(
                ClaimVerdict(
                    claim=claim,
                    label=judged.label if judged else label,
                    route=route,
                    nli=nli,
                    reason=judged.reason if judged else "",
                    quotes=judged.quotes if judged else [],
                    flags=flags,
                    error=judged.error if judged else nli.error,
                )
            )
        scores = compute_scores(verdicts, w.qa, c.weights, c.weak_floor)
        s = w.sample
        return AnswerReport(
            id=s.id,
            verdict=decide(scores, c.effective_thresholds),
            mode=self.mode,
            scores=scores,
            claims=verdicts,
            qa=w.qa,
            usage=w.usage,
            errors=w.errors,
            question=s.question,
            answer=s.answer if s.answer is not None else s.claim,
            contexts=s.contexts,
            label=s.label,
            metadata=s.metadata,
            row=w.row,
            versions=self.versions(),
        )
