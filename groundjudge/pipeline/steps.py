"""The steps of one answer through the stages (and one batch's NLI stage), over an explicit context.

:class:`Steps` implements the protocol :class:`groundjudge.pipeline.flow.Steps` that the flow drives: the claims
(``claims_local`` / ``claims_call``), the NLI stage and the routing of every claim (``nli_stage``), the one
sources-side call (``needs_verify`` / ``verify``), the QA check's comparison (``needs_compare``; ``compare`` for the
answers of a cut batch together), the second judge (``needs_second`` / ``second``) and the report (``report``). Every
part a step needs is in its :class:`StepContext`: the :class:`~groundjudge.pipeline.Evaluator` builds one over its
own parts, the dry run one over clients that never send and caches that are only read.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from groundjudge.checker.evidence import BM25, EvidenceSelector, stopped_hints
from groundjudge.checker.head import Sources, VerdictHead
from groundjudge.checker.nli import ENTAILMENT, NLIModel, NLIScorer
from groundjudge.chunking import chunk_documents
from groundjudge.config import Config
from groundjudge.errors import DeferredCallError, InputError
from groundjudge.llm import LLMClient
from groundjudge.models import AnswerReport, Claim, ClaimNLI, LocalThresholds, Passage, QAResult, Usage
from groundjudge.pipeline.assemble import failed_report, final_report
from groundjudge.pipeline.citing import attach_citations, cited_hints, cited_map, citing_of, route_cited, score_cited
from groundjudge.pipeline.work import RUN_STOPS, SecondPlan, Work, describe, each
from groundjudge.stages.claims import claim_from_input, claims_from_llm, claims_from_sentences
from groundjudge.stages.judge import JudgedClaim, Source, judge_claims, select_sources
from groundjudge.stages.qa import AGREE_AT, check_qa
from groundjudge.stages.route import EvidenceRule, evidence_rule, local_contradiction, route_claim

log = logging.getLogger(__name__)


def in_second_sample(row_id: str, share: float | None) -> bool:
    """Whether the answer ``row_id`` is in the second judge's sample of ``share`` of the answers: a hash of the id
    (SHA-256, its first 8 bytes as a fraction of 2**64) below ``share``, so every rerun and both engines pick the
    same answers whatever the order or batching."""
    if not share:
        return False
    digest = hashlib.sha256(row_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < share


@dataclass(frozen=True)
class StepContext:
    """What the steps need: the settings, the judges' clients, the mode, the verdict head and thresholds in force,
    the NLI model and scorer (got when a step first needs them, so the model loads only then) and the versions
    written into each report."""

    config: Config
    client: LLMClient | None
    second_client: LLMClient | None
    mode: str
    head: VerdictHead | None
    thresholds: LocalThresholds
    nli: Callable[[], NLIModel]
    scorer: Callable[[], NLIScorer]
    versions: Callable[[], dict[str, str]]


class Steps:
    """The steps of one answer (and one batch's NLI stage) over ``ctx``; see the module docstring."""

    def __init__(self, ctx: StepContext) -> None:
        self.ctx = ctx

    @property
    def nli(self) -> NLIModel:
        return self.ctx.nli()

    @property
    def scorer(self) -> NLIScorer:
        return self.ctx.scorer()

    def claims_local(self, w: Work) -> bool:
        """Claims that need no LLM (a claim row, sentences in nli mode, an empty answer): set them and say True;
        False when the claims call must run (:meth:`claims_call`)."""
        s = w.sample
        text = citing_of(w, self.ctx.config.citation_style).text  # citation markers stripped (kept as citations)
        if s.claim is not None:
            w.claims = claim_from_input(text if text.strip() else s.claim)
        elif self.ctx.client is None or self.ctx.mode == "nli":  # nli mode: no LLM at all
            w.claims = claims_from_sentences(text)
        elif not text.strip():
            w.claims = []
        else:
            return False
        attach_citations(w)
        return True

    def claims_call(self, w: Work) -> None:
        """The call that reads only the answer: its claims (and, with QA, its questions and replies)."""
        assert self.ctx.client is not None
        n_questions = self.ctx.config.qa_questions if self.qa_expected else 0
        text = citing_of(w, self.ctx.config.citation_style).text
        try:
            w.claims, w.questions, usage = claims_from_llm(self.ctx.client, text, w.sample.question, n_questions)
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
            self._score_nli(live)
            self._route(live)

    def report(self, w: Work) -> AnswerReport:
        """The report of an answer that went through every stage (ERROR if it failed on the way or here)."""
        try:
            return final_report(
                w,
                mode=self.ctx.mode,
                config=self.ctx.config,
                versions=self.ctx.versions,
                qa_expected=self.qa_expected_for(w),
            )
        except Exception as exc:  # one answer's failure never ends the run
            log.exception("report of row %s failed", w.row)
            w.failed = w.failed or describe(exc)
            return failed_report(w, self.ctx.mode)

    def _score_nli(self, batch: list[Work]) -> None:
        c = self.ctx.config

        cut: dict[tuple[str, ...], list[Passage]] = {}  # answers about the same sources are cut once

        def chunk(w: Work) -> None:
            key = tuple(w.sample.contexts)
            if key not in cut:
                cut[key] = chunk_documents(w.sample.contexts, self.nli.tokenizer, c.passage_tokens, c.passage_overlap)
            w.passages = cut[key]

        each(batch, chunk)
        selector = EvidenceSelector(self.scorer, k=c.evidence_k, **self.evidence_rule())
        sources: dict[tuple[str, ...], Sources] = {}

        def check(works: list[Work]) -> None:
            results = selector.check([([cl.text for cl in w.claims], w.passages) for w in works])
            for w, res in zip(works, results, strict=True):
                if self.ctx.head is not None:
                    self.ctx.head.apply([cl.text for cl in w.claims], res, Sources.memo(sources, w.sample.contexts))
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
            assert self.ctx.head is not None
            self.ctx.head.apply(claims, res, Sources.memo(sources, w.sample.contexts))

        # each cited source alone, for the citation verdicts (pipeline.citing)
        judge = head if self.ctx.head else None
        each([w for w in live if w.live and w.cites], lambda w: score_cited([w], selector, judge))

    def evidence_rule(self) -> EvidenceRule:
        """Which pieces a claim is scored on (early exit, decision lines, conflict rule): :func:`stages.route.
        evidence_rule` for this run's mode, thresholds, head and settings (the reports' ``versions.evidence`` names
        it)."""
        c = self.ctx.config
        return evidence_rule(
            self.ctx.mode,
            self.ctx.thresholds,
            reads_every_score=self._local_contradiction or self.ctx.head is not None,
            conflict_check=c.conflict_check,
            weak_floor=c.weak_floor,
        )

    def _route(self, batch: list[Work]) -> None:
        c = self.ctx.config

        def route(w: Work) -> None:
            contradiction = self._local_contradiction
            w.decisions = [
                route_claim(
                    cl,
                    r,
                    mode=self.ctx.mode,
                    thresholds=self.ctx.thresholds,
                    local_contradiction=contradiction,
                    conflict_check=c.conflict_check,
                    escalate_conflicts=c.escalate_conflicts,
                )
                for cl, r in zip(w.claims, w.nli, strict=True)
            ]
            if w.cites:
                route_cited(w, mode=self.ctx.mode, thresholds=self.ctx.thresholds)

        each(batch, route)

    @property
    def _local_contradiction(self) -> bool:
        """Whether the NLI stage can call CONTRADICTED at all with the thresholds (and model) in force."""
        return local_contradiction(self.ctx.thresholds, self.nli)

    def _judge_hints(
        self,
        w: Work,
        escalated: Sequence[tuple[Claim, ClaimNLI]],
        shown: Sequence[tuple[Claim, ClaimNLI]],
        qa: bool,
    ) -> list[Passage]:
        """Passages to show the judge when the contexts are too long to show whole: those the NLI stage found for
        each escalated claim (with ``qa``, for every claim of ``shown``: the questions may be about any), then, for
        escalated claims it could not score, the best ``evidence_k`` BM25 passages, and for the claims of ``shown``
        it stopped early, the best BM25 passage it left unscored (:func:`~groundjudge.checker.evidence.
        stopped_hints`, given the index the unscored claims built, if any)."""
        unscored = [cl for cl, r in escalated if not r.passages_scored]
        stopped = [(cl.text, r) for cl, r in shown]
        ranked = BM25([p.text for p in w.passages]).rank if unscored and w.passages else None
        k = self.ctx.config.evidence_k or 4
        hints = [p for _, r in escalated for p in (r.entailment_passage, r.contradiction_passage) if p is not None]
        hints += [w.passages[i] for cl in unscored for i in ranked(cl.text)[:k]] if ranked else []
        if qa:
            hints += [p for _, r in shown for p in (r.entailment_passage, r.contradiction_passage) if p is not None]
        return hints + stopped_hints(stopped, w.passages, ranked)

    def _judge_sources(self, w: Work, pairs: Sequence[tuple[Claim, ClaimNLI]], qa: bool) -> list[Source]:
        """The sources the judge sees for the claims of ``pairs`` (with ``qa``, the evidence of every claim too)."""
        shown = list(zip(w.claims, w.nli, strict=False)) if qa else list(pairs)  # the claims the judge is asked about
        hints = self._judge_hints(w, pairs, shown, qa) + cited_hints(w, {cl.id for cl, _ in shown})
        sources = select_sources(w.sample.contexts, hints)
        if not sources:
            raise InputError("no source passage could be selected for the judge", field="contexts")
        return sources

    def needs_verify(self, w: Work) -> bool:
        """Whether the answer needs its sources-side call: an escalated claim, or the QA check."""
        return self.ctx.client is not None and (any(d.route == "judge" for d in w.decisions) or self.qa_expected_for(w))

    def verify(self, w: Work) -> None:
        """The one sources-side call of an answer: verdicts on its escalated claims and, with QA on, the sources'
        answers to its verification questions (blind: never the answer's replies)."""
        assert self.ctx.client is not None
        pairs = [(cl, r) for cl, r, d in zip(w.claims, w.nli, w.decisions, strict=True) if d.route == "judge"]
        escalated = [cl for cl, _ in pairs]
        qa = self.qa_expected_for(w)
        answers: dict[str, str] = {}
        try:
            if escalated or (qa and w.questions):
                sources = self._judge_sources(w, pairs, qa)
                questions = w.questions if qa else ()
                cited = cited_map(w, escalated)
                w.judged, answers, usage = judge_claims(self.ctx.client, escalated, sources, questions, cited)
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

    def compare(self, works: list[Work]) -> None:
        """The QA check's comparison of each question's two replies, for the answers of one cut batch whose replies
        wait (the flow hands them over together, in input order, once none of the batch's sources-side calls is
        still out, so the batch never depends on timing): the words settle what they can (:func:`check_qa`), the
        model scores the other pairs of every answer in one sorted batch (cached like the evidence). A local step:
        the engine runs it on the NLI thread, so a call slot never waits for the CPU. If the shared batch fails,
        each answer is compared alone, so a failure lands in the answer it belongs to (as the sources-side call's
        error: the answer goes on, its QA check counted failed)."""
        live = [w for w in works if w.live and w.qa_replies is not None]
        try:
            checks = [check_qa(w.questions, w.qa_replies or {}) for w in live]
            pairs = [p for c in checks for p in c.pairs]
            scores = self._answers_agree(pairs) if pairs else []
        except RUN_STOPS:
            raise
        except Exception as exc:
            if len(live) > 1:
                log.warning("the QA comparison of %d answers failed; comparing each alone", len(live), exc_info=True)
                for w in live:
                    self.compare([w])
            else:  # recorded in this answer (its QA check counts as failed); the answer goes on
                log.warning("row %s: the QA comparison failed: %s", live[0].row, describe(exc), exc_info=True)
                live[0].qa_replies = None
                live[0].errors.append(describe(exc))
            return
        at = 0
        for w, check in zip(live, checks, strict=True):
            n = len(check.pairs)
            w.qa, w.qa_replies = check.result(scores[at : at + n]), None
            at += n
            if w.qa.error:
                w.errors.append(f"QA: {w.qa.error}")

    # -- the second judge (README "Second judge"): after verify, never scored --------------------------------

    def needs_second(self, w: Work) -> bool:
        """Whether the second judge looks at the answer (and which claims: ``w.second``): a flagged answer (its
        verdict FAIL, a CONTRADICTED claim, or a judged claim whose verdict the local model disagrees with:
        :attr:`~groundjudge.models.ClaimVerdict.nli_disagrees`) or one in the sample (:func:`in_second_sample`). It
        judges the claims the first judge judged; a flagged answer with none judges its claims not SUPPORTED. An
        answer that failed, or has nothing to judge, gets no second look."""
        if self.ctx.second_client is None or not w.live:
            return False
        if w.second is None:
            w.second = self._second_plan(w, self.ctx.second_client.model_id)
        return w.second is not None and not w.second.judged and w.second.error is None

    def _second_plan(self, w: Work, model: str) -> SecondPlan | None:
        try:  # the report as the first judge left it (no versions: not written)
            first = final_report(
                w, mode=self.ctx.mode, config=self.ctx.config, versions=dict, qa_expected=self.qa_expected_for(w)
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
        if in_second_sample(w.sample.id, self.ctx.config.second_judge_sample):
            why.append("sample")
        ids = [c.claim.id for c in first.claims if c.route == "judge" and c.label != "ERROR"]
        if not ids and flagged:
            ids = [c.claim.id for c in first.claims if c.label in ("CONTRADICTED", "UNSUPPORTED")]
        return SecondPlan(model, why, ids) if why and ids else None

    def second(self, w: Work) -> None:
        """The second judge's call: the claims of ``w.second`` with the judge prompt and the sources the first
        judge saw. A failure is the second judge's error (in ``w.second``), never the answer's: the answer is
        scored by the first judge alone. The budget and a cache-only miss stop the run as any call does."""
        assert self.ctx.second_client is not None and w.second is not None
        plan = w.second
        wanted = set(plan.claim_ids)
        claims = [cl for cl in w.claims if cl.id in wanted]
        escalated = [(cl, r) for cl, r, d in zip(w.claims, w.nli, w.decisions, strict=True) if d.route == "judge"]
        # the first judge's sources: from its escalated claims (and QA evidence); else from these claims
        pairs = escalated or [(cl, r) for cl, r in zip(w.claims, w.nli, strict=True) if cl.id in wanted]
        try:
            sources = self._judge_sources(w, pairs, bool(escalated) and self.qa_expected_for(w))
            plan.judged, _, usage = judge_claims(self.ctx.second_client, claims, sources, (), cited_map(w, claims))
        except (*RUN_STOPS, DeferredCallError):
            raise
        except Exception as exc:  # recorded as the second judge's error; the answer goes on unharmed
            log.info("row %s: the second judge failed: %s", w.row, describe(exc))
            plan.error = describe(exc)
            usage = getattr(exc, "usage", None) or Usage()
        plan.usage = plan.usage + usage
        w.usage = w.usage + usage

    @property
    def qa_expected(self) -> bool:
        """Whether answers get the QA check (an LLM, QA on, not nli mode)."""
        return self.ctx.client is not None and self.ctx.config.qa and self.ctx.mode != "nli"

    def qa_expected_for(self, w: Work) -> bool:
        """QA runs on answers (not on claim rows) that have claims, with an LLM and QA on."""
        return self.qa_expected and w.sample.answer is not None and bool(w.claims)

    def _answers_agree(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """Entailment both ways between statement pairs, by the local NLI model (the QA check's comparison): the
        lower of the two, where it can reach :data:`~groundjudge.stages.qa.AGREE_AT`. Each pair is scored one way
        first; only a pair that passes there is scored the other way (a pair that fails one way fails both ways:
        its first score, already below the line, stands for the lower one)."""
        if not pairs:
            return []
        first = self.scorer.score(list(pairs))
        scores = [float(p[ENTAILMENT]) for p in first]
        passed = [i for i, s in enumerate(scores) if s >= AGREE_AT]
        if passed:
            back = self.scorer.score([(pairs[i][1], pairs[i][0]) for i in passed])
            for i, p in zip(passed, back, strict=True):
                scores[i] = min(scores[i], float(p[ENTAILMENT]))
        return scores
