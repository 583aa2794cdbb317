"""The run summary: what a run of many answers found (:class:`RunSummary`), counted one report at a time by
:class:`Summarizer` (a dataset of any size), and the rules it counts by: which answers an answer-level rate rates
(:func:`rated_answer`), an answer's prediction (:func:`answer_prediction`), the items of the corrected rate.

Below ``runs/`` and ``review/``, so that both engines summarize their run without importing ``review/`` (which reads
finished reports), and ``review/`` shows and compares summaries with the same code. Imports only ``models``,
``io.reports``, ``io.labels`` (the label rule) and ``stats``; ``groundjudge.review.summary`` and
``groundjudge.review.metrics`` keep their names.
"""

from __future__ import annotations

import heapq
import math
from array import array
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, Field

from groundjudge.io.labels import ANSWER_LABELS, CLAIM_LABELS, report_label
from groundjudge.io.reports import is_finite
from groundjudge.models import AnswerReport, Usage
from groundjudge.stats import CorrectedRate, Item, corrected_rate, percentile_interval, resampled_sums, wilson


def answer_prediction(report: Any) -> str:
    """The response rule, the one place it is written (:func:`every_claim_supported`): an answer is consistent when
    every claim was judged and judged SUPPORTED (a claim that could not be judged counts against it); else
    ``hallucinated``, the one meaning of the word (README "Quantities": the run summary's
    ``answers_not_supported_share`` counts these answers among the rated ones, :func:`rated_answer`)."""
    s = report.scores
    return "consistent" if every_claim_supported(s.n_claims, s.n_supported) else "hallucinated"


def every_claim_supported(n_claims: int, n_supported: int) -> bool:
    """:func:`answer_prediction`'s rule on an answer's counts (the benchmarks' replays count decided labels without
    a report): at least one claim, and every one SUPPORTED."""
    return n_claims > 0 and n_supported == n_claims


def rated_answer(report: Any) -> bool:
    """Whether an answer counts in the answer-level rates: it has claims and its verdict is not ERROR. A NO_CLAIMS
    or ERROR answer has no answer-level prediction; it is left out of the rate's items and its labels, and counted
    beside it (:func:`groundjudge.review.metrics.not_rated_answers`), never as hallucinated."""
    return bool(report.scores.n_claims) and report.verdict != "ERROR"


# -- the items of the unsupported rate corrected for the checker's error ----------------------------------------


def flagged(label: str) -> bool:
    """What "positive" means for the corrected rate: the checker says not supported (UNSUPPORTED or
    CONTRADICTED), or could not decide (ERROR counts against the claim, as :func:`answer_prediction` does)."""
    return label != "SUPPORTED"


def _answer_route(report: Any) -> str:
    return "judge" if any(c.route == "judge" for c in report.claims) else "nli"


def scored_items(reports: Sequence[Any], level: str) -> list[Item]:
    """Every scored claim (``level`` "claim", grouped by answer) or answer ("answer", flagged when
    :func:`answer_prediction` says hallucinated; only :func:`rated_answer` answers): the population whose
    unsupported rate is estimated. An answer that failed whole has no claims, so it is in no claim-level rate
    (:func:`failed_whole` counts them)."""
    if level == "answer":
        return [
            Item(r.id, answer_prediction(r) == "hallucinated", _answer_route(r)) for r in reports if rated_answer(r)
        ]
    return [Item(r.id, flagged(c.label), c.route) for r in reports for c in r.claims]


SCORE_KEYS = (
    "combined",
    "claims",
    "nli",
    "qa",
    "coverage",
    "contradicted_share",
    "not_supported_share",
    "citation_precision",
    "citation_recall",
)
"""The per-answer scores a run summary averages (and :func:`non_finite_scores` checks)."""


def non_finite_scores(report: Any) -> list[str]:
    """The scores of ``report`` (:data:`SCORE_KEYS`) that are no number: NaN or an infinity (never written by a run:
    a file another tool wrote, a hand edit)."""
    return [key for key in SCORE_KEYS if not is_finite(getattr(report.scores, key))]


def failed_row(report: Any) -> bool:
    """The one rule of a failed row: ERROR, a stage that was meant to run and failed (named in ``errors``; the QA
    check's, a claim not judged: a WARN or FAIL at best), or a score that is no number (:func:`non_finite_scores`).
    What the run summary counts in ``rows_failed`` (``score``'s exit 1) and ``compare``'s gate counts against B
    (:func:`groundjudge.review.compare.lost_answers`)."""
    return report.verdict == "ERROR" or bool(report.errors) or bool(non_finite_scores(report))


def is_judged(report: Any) -> bool:
    """Whether ``report`` is a real judgement: a PASS, WARN or FAIL with a finite combined score (not an ERROR, not
    NO_CLAIMS, not a score that is missing or not a number); what an adapter scores. What a gate may pair asks more
    (:func:`vouches`: no stage failed either)."""
    combined = report.scores.combined
    return report.verdict in ("PASS", "WARN", "FAIL") and combined is not None and math.isfinite(combined)


def vouches(report: Any) -> bool:
    """Whether ``report`` is a judgement a gate's paired tests may pair with another run's: :func:`is_judged`, and
    not a :func:`failed_row` (no stage that was meant to run failed, every score a number). A failed QA check counts
    0, a claim not judged counts against the answer: a score at its worst value, which, paired, would let a later run
    look no worse than a failure (in B) or better than one (in A). A row with errors never vouches, in either gate
    (:func:`groundjudge.review.compare.gate_rows`)."""
    return is_judged(report) and not failed_row(report)


def failed_whole(reports: Sequence[Any]) -> int:
    """Answers that failed before their claims were known (verdict ERROR, no claim)."""
    return sum(r.verdict == "ERROR" and not r.claims for r in reports)


def gold_items(reports: Sequence[Any], level: str, skip: Collection[tuple[str, str]] = ()) -> list[Item]:
    """The gold-labelled items of ``level``, as :func:`groundjudge.review.metrics.label_metrics` reads them: a
    claim row's label is its first claim's truth; an answer row's label (consistent / hallucinated) the answer's.
    ``skip``: (answer id, claim id) decided otherwise (a reviewer). Labels by the one rule
    (:func:`groundjudge.io.labels.report_label`): an unknown one is an InputError, never an unlabelled row."""
    out = []
    for r in reports:
        label = report_label(r)
        if label is None:
            continue
        if level == "claim" and label in CLAIM_LABELS and r.claims:
            c = r.claims[0]
            if (r.id, c.claim.id) not in skip:
                out.append(Item(r.id, flagged(c.label), c.route, label != "SUPPORTED"))
        elif level == "answer" and label in ANSWER_LABELS and rated_answer(r):
            out.append(Item(r.id, answer_prediction(r) == "hallucinated", _answer_route(r), label != "consistent"))
    return out


def corrected_as_json(rate: CorrectedRate, level: str, failed_answers: int) -> dict[str, Any]:
    """A :class:`CorrectedRate` as the JSON ``corrected_unsupported_rate`` (``metrics``, the run summary,
    ``compare``); at the claim level it counts the answers that failed whole (their claims are in no rate)."""
    out = rate.as_json(level)
    if level == "claim":
        out["failed_answers"] = failed_answers
    return out


def label_level(claim_labels: int, answer_labels: int) -> str:
    """The level a file's gold labels are read at: claims when at least as many rows carry a claim label as an
    answer label, else answers."""
    return "claim" if claim_labels >= answer_labels else "answer"


# -- the summary ---------------------------------------------------------------------------------------------------


# The summary's figures with a 95% interval: the key of the figure, beside it the key of its interval
# (``<key>_ci``). Shares of answers take Wilson's interval; means over answers and the share of claims escalated
# take the bootstrap over answers (stats.resampled_sums: an answer is resampled with all its claims).
CI = list[float | None]


def _ci(share: bool = False, claims: bool = False) -> Any:
    """The field of a figure's 95% interval ``[lo, hi]``; with nothing to estimate from, ``[0, 1]`` for a share and
    ``[null, null]`` for a mean."""
    how = (
        "Wilson, or the bootstrap over answers when an answer holds several claims"
        if claims
        else ("Wilson" if share else "bootstrap over answers")
    )
    return Field(default_factory=lambda: [0.0, 1.0] if share else [None, None], description=f"95% interval ({how})")


class RunSummary(BaseModel):
    """What a run of many answers found; each share is named for what it counts (README "Quantities")."""

    n: int = 0
    verdicts: dict[str, int] = Field(default_factory=dict)
    rows_failed: int = 0
    score_threshold: float = Field(0.8, description="the combined score answers_below_threshold_share counts below")
    answers_below_threshold_share: float | None = Field(
        None, description="share of scored answers whose combined score is below score_threshold"
    )
    answers_below_threshold_share_ci: CI = _ci(share=True)
    answers_scored: int = Field(0, description="answers with a finite combined score")
    answers_contradicted_share: float | None = Field(
        None,
        description="share of answers with a judged claim that have a CONTRADICTED claim; an ERROR answer counts only "
        "when one of its judged claims is CONTRADICTED (its other claims are unknown: left out, it never lowers the "
        "share)",
    )
    answers_contradicted_share_ci: CI = _ci(share=True)
    answers_not_supported_share: float | None = Field(
        None,
        description="share of the rated answers (answers_rated) that have a claim not SUPPORTED (contradicted, "
        "unsupported, or not judged)",
    )
    answers_not_supported_share_ci: CI = _ci(share=True)
    answers_with_claims: int = Field(0, description="answers with at least one claim")
    answers_rated: int = Field(
        0,
        description="answers the answer-level rates count (answers_not_supported_share, the answer-level corrected "
        "rate): with claims, verdict not ERROR",
    )
    answers_not_rated: dict[str, int] = Field(
        default_factory=dict,
        description="answers left out of the answer-level rates, by verdict (NO_CLAIMS, ERROR): no answer-level "
        "prediction, so counted here and never as not supported",
    )
    mean_contradicted_share: float | None = Field(None, description="mean of the answers' contradicted_share")
    mean_contradicted_share_ci: CI = _ci()
    mean_not_supported_share: float | None = Field(None, description="mean of the answers' not_supported_share")
    mean_not_supported_share_ci: CI = _ci()
    mean_combined: float | None = Field(None, description="mean combined score")
    mean_combined_ci: CI = _ci()
    p10_combined: float | None = Field(None, description="10th percentile of the combined score")
    mean_claim_score: float | None = None
    mean_claim_score_ci: CI = _ci()
    mean_nli_score: float | None = None
    mean_nli_score_ci: CI = _ci()
    mean_qa_score: float | None = None
    mean_qa_score_ci: CI = _ci()
    mean_coverage: float | None = None
    mean_coverage_ci: CI = _ci()
    claims: int = 0
    escalation_rate: float | None = Field(None, description="share of claims sent to the LLM judge")
    escalation_rate_ci: CI = _ci(share=True, claims=True)
    corrected_unsupported_rate: dict[str, Any] | None = Field(
        None,
        description="with gold labels in the rows: the unsupported rate raw and corrected for the checker's measured "
        "error (metrics' corrected_unsupported_rate, at the level of the labels), or how many more labels it needs",
    )
    nli_pairs: int = 0
    contradiction_unchecked: int = Field(0, description="claims decided without a check for contradiction")
    mean_citation_precision: float | None = Field(None, description="mean citation precision of the answers citing")
    mean_citation_recall: float | None = Field(None, description="mean citation recall of the answers that cite")
    mean_citation_precision_ci: CI = _ci()
    mean_citation_recall_ci: CI = _ci()
    answers_citing: int = Field(0, description="answers with at least one citation marker")
    citations: dict[str, int] = Field(
        default_factory=dict, description="claims of citing answers by citation label (CITED_SUPPORTS ...)"
    )
    error_types: dict[str, int] = Field(
        default_factory=dict, description="claims not SUPPORTED by kind of error (number, date, entity ...)"
    )
    usage: Usage = Field(default_factory=Usage)
    second_judge: dict[str, Any] | None = Field(
        None,
        description="with a second judge (README 'Second judge'): answers it judged, answers and claims where the "
        "judges disagree, claims compared, its failures and its cost (in usage too); None without one",
    )
    worst: list[tuple[str, float]] = Field(default_factory=list, description="lowest combined scores (id, score)")
    failures: list[str] = Field(default_factory=list, description="the first failed rows and why (at most 10)")
    not_passed: list[str] = Field(
        default_factory=list,
        description="the first answers that did not PASS (nor ERROR: see failures), and why (at most 10)",
    )


class Summarizer:
    """Accumulates :class:`AnswerReport` objects one at a time (a dataset of any size).

    Means are running sums; the 10th percentile of the combined score comes from a 1000-bin histogram (scores
    live in [0, 1]), so it is exact to 0.001. For the intervals it keeps a few numbers per answer and one byte per
    claim (about 80 bytes an answer, in flat arrays): shares of answers take Wilson's interval from the counts,
    means over answers and the share of claims escalated a bootstrap over answers (one seeded resample for all of
    them, :func:`groundjudge.review.stats.resampled_sums`; an answer is resampled with all its claims). With gold
    labels in the rows it also gives the unsupported rate corrected for the checker's error, as ``metrics`` does.
    """

    # the summary field of each mean of _KEYS
    _MEANS: ClassVar[dict[str, str]] = {
        "combined": "mean_combined",
        "claims": "mean_claim_score",
        "nli": "mean_nli_score",
        "qa": "mean_qa_score",
        "coverage": "mean_coverage",
        "contradicted_share": "mean_contradicted_share",
        "not_supported_share": "mean_not_supported_share",
        "citation_precision": "mean_citation_precision",
        "citation_recall": "mean_citation_recall",
    }

    _KEYS = SCORE_KEYS
    _BINS = 1000

    def __init__(self, worst: int = 5, threshold: float = 0.8) -> None:
        self._worst_k = worst
        self.threshold = threshold
        self.below_threshold = 0
        self.contradiction_unchecked = 0
        self._worst: list[tuple[float, str]] = []  # heap of (-score, id): the lowest scores
        self.n = 0
        self.verdicts: Counter[str] = Counter()
        self.rows_failed = 0
        self.with_contradiction = 0
        self.with_claims = 0
        self.rated = 0
        self.not_rated: Counter[str] = Counter()
        self.not_all_supported = 0
        self.not_passed: list[str] = []
        self.scored = 0
        self.sums = dict.fromkeys(self._KEYS, 0.0)
        self.counts = dict.fromkeys(self._KEYS, 0)
        self.histogram = [0] * (self._BINS + 1)
        self.claims = 0
        self.escalated = 0
        self.nli_pairs = 0
        self.usage = Usage()
        self.failures: list[str] = []
        # per answer, for the intervals: each mean's value (NaN: none), its claims and escalated claims
        self._values = {key: array("d") for key in self._KEYS}
        self._n_claims, self._n_escalated = array("q"), array("q")
        # for the corrected rate: each scored claim's and rated answer's answer and (route, flagged) code, the gold
        # items (cluster: the answer's place in the run), the answers that failed whole
        self._routes: list[str] = []
        self._claim_owner, self._claim_code = array("q"), array("B")
        self._answer_owner, self._answer_code = array("q"), array("B")  # rated answers only (metrics.rated_answer)
        self._gold: dict[str, list[Item]] = {"claim": [], "answer": []}
        self._failed_whole = 0
        self.citations: Counter[str] = Counter()
        self.error_types: Counter[str] = Counter()
        self.second: dict[str, Any] | None = None  # the second judge's counts, from its first report

    def _add_second(self, r: AnswerReport) -> None:
        """Count what the second judge did for one answer (README "Second judge")."""
        j = r.second_judge
        if j is None:
            return
        s = self.second = self.second or {
            "model": j.model,
            "answers": 0,
            "answers_disagree": 0,
            "claims": 0,
            "claims_compared": 0,
            "claims_disagree": 0,
            "errors": 0,
            "usage": Usage(),
        }
        s["answers"] += 1
        s["answers_disagree"] += bool(r.judges_disagree)
        s["claims"] += j.claims
        s["claims_compared"] += sum(c.judges_disagree is not None for c in r.claims)
        s["claims_disagree"] += sum(bool(c.judges_disagree) for c in r.claims)
        s["errors"] += j.error is not None
        if is_finite(j.usage.cost_usd):
            s["usage"] = s["usage"] + j.usage

    def _code(self, item: Item) -> int:
        if item.route not in self._routes:
            self._routes.append(item.route)
        return 2 * self._routes.index(item.route) + item.flagged

    def _keep(self, r: AnswerReport, non_finite: list[str]) -> None:
        """What the intervals and the corrected rate need of one report."""
        index = self.n - 1
        for key in self._KEYS:
            value = getattr(r.scores, key)
            self._values[key].append(math.nan if value is None or key in non_finite else float(value))
        self._n_claims.append(r.scores.n_claims)
        self._n_escalated.append(r.scores.n_escalated)
        for item in scored_items([r], "claim"):
            self._claim_owner.append(index)
            self._claim_code.append(self._code(item))
        for item in scored_items([r], "answer"):
            self._answer_owner.append(index)
            self._answer_code.append(self._code(item))
        for level, gold in self._gold.items():
            gold.extend(Item(index, x.flagged, x.route, x.truth) for x in gold_items([r], level))
        self._failed_whole += failed_whole([r])

    def add(self, r: AnswerReport) -> None:
        """Count one report; a non-finite score is skipped and makes the row a failed one."""
        self.n += 1
        self.verdicts[r.verdict] += 1
        s = r.scores
        non_finite = non_finite_scores(r)
        if failed_row(r):
            self.rows_failed += 1
            if len(self.failures) < 10:
                why = (list(r.errors) or [x for x in r.verdict_reasons if x.startswith("ERROR")]) + [
                    f"non-finite score {', '.join(non_finite)}"
                ] * bool(non_finite)
                self.failures.append(f"{r.id}: {'; '.join(why) or 'no claim could be judged'}")
        for key in self._KEYS:
            value = getattr(s, key)
            if value is not None and key not in non_finite:
                self.sums[key] += value
                self.counts[key] += 1
        if s.n_judged and (r.verdict != "ERROR" or s.n_contradicted):  # a failed answer counts by what it shows
            self.scored += 1
            self.with_contradiction += s.n_contradicted > 0
        self.with_claims += bool(s.n_claims)
        if rated_answer(r):
            self.rated += 1
            self.not_all_supported += answer_prediction(r) == "hallucinated"
        else:
            self.not_rated[r.verdict] += 1
        if r.verdict not in ("PASS", "ERROR") and r.verdict_reasons and len(self.not_passed) < 10:
            self.not_passed.append(f"{r.id}: {'; '.join(r.verdict_reasons)}")
        if s.combined is not None and "combined" not in non_finite:
            self.histogram[min(self._BINS, max(0, round(s.combined * self._BINS)))] += 1
            self.below_threshold += s.combined < self.threshold
            item = (-s.combined, r.id)
            if len(self._worst) < self._worst_k:
                heapq.heappush(self._worst, item)
            else:
                heapq.heappushpop(self._worst, item)
        self.claims += s.n_claims
        self.escalated += s.n_escalated
        self.contradiction_unchecked += s.n_contradiction_unchecked
        self.nli_pairs += r.nli_pairs
        self.citations.update(c.citation for c in r.claims if c.citation is not None)
        self.error_types.update(c.error_type for c in r.claims if c.error_type is not None)
        self._add_second(r)
        if is_finite(r.usage.cost_usd):
            self.usage = self.usage + r.usage
        self._keep(r, non_finite)

    def _intervals(self) -> dict[str, CI]:
        """The ``*_ci`` fields of the summary."""
        out: dict[str, CI] = {
            "answers_below_threshold_share_ci": wilson(self.below_threshold, self.counts["combined"]).ci,
            "answers_contradicted_share_ci": wilson(self.with_contradiction, self.scored).ci,
            "answers_not_supported_share_ci": wilson(self.not_all_supported, self.rated).ci,
        }
        claims = np.frombuffer(self._n_claims, dtype=np.int64).astype(np.float64)
        escalated = np.frombuffer(self._n_escalated, dtype=np.int64).astype(np.float64)
        # each mean is sum of values / answers with a value over the resampled answers (an answer without the value
        # weighs nothing), the escalation rate escalated / claims: the clustered bootstrap's ratio
        columns = [escalated, claims]
        for key in self._KEYS:
            values = np.frombuffer(self._values[key], dtype=np.float64)
            present = ~np.isnan(values)
            columns += [np.where(present, values, 0.0), present.astype(np.float64)]
        draws = resampled_sums(np.column_stack(columns)) if self.n else np.zeros((0, len(columns)))
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios = draws[:, 0::2] / draws[:, 1::2]
        for i, key in enumerate(self._KEYS, start=1):
            point = self._mean(key)
            out[f"{self._MEANS[key]}_ci"] = (
                [None, None]
                if point is None
                else list(percentile_interval(point, ratios[:, i], undefined_lo=point, undefined_hi=point))
            )
        if not self.claims or claims.max() <= 1:  # one claim an answer at most: independent items (stats.share)
            out["escalation_rate_ci"] = wilson(self.escalated, self.claims).ci
        else:
            rate = self.escalated / self.claims
            out["escalation_rate_ci"] = list(
                percentile_interval(rate, ratios[:, 0], undefined_lo=rate, undefined_hi=rate)
            )
        return out

    def _corrected(self) -> dict[str, Any] | None:
        """The unsupported rate corrected for the checker's error measured on the rows' gold labels (None: none)."""
        level = label_level(len(self._gold["claim"]), len(self._gold["answer"]))
        if not self._gold[level]:
            return None
        routes = self._routes
        if level == "claim":
            scored = [
                Item(owner, bool(code & 1), routes[code >> 1])
                for owner, code in zip(self._claim_owner, self._claim_code, strict=True)
            ]
        else:
            scored = [
                Item(owner, bool(code & 1), routes[code >> 1])
                for owner, code in zip(self._answer_owner, self._answer_code, strict=True)
            ]
        not_rated = dict(self.not_rated) if level == "answer" else None
        rate = corrected_rate(scored, self._gold[level], not_rated=not_rated)
        return corrected_as_json(rate, level, self._failed_whole)

    def _mean(self, key: str) -> float | None:
        return self.sums[key] / self.counts[key] if self.counts[key] else None

    def _quantile(self, q: float) -> float | None:
        total = self.counts["combined"]
        if not total:
            return None
        rank, seen = int(q * (total - 1)), 0
        for b, count in enumerate(self.histogram):
            seen += count
            if seen > rank:
                return b / self._BINS
        return 1.0  # pragma: no cover

    def summary(self) -> RunSummary:
        return RunSummary(
            n=self.n,
            verdicts=dict(self.verdicts),
            rows_failed=self.rows_failed,
            score_threshold=self.threshold,
            answers_below_threshold_share=(
                self.below_threshold / self.counts["combined"] if self.counts["combined"] else None
            ),
            answers_scored=self.counts["combined"],
            answers_contradicted_share=self.with_contradiction / self.scored if self.scored else None,
            answers_not_supported_share=self.not_all_supported / self.rated if self.rated else None,
            answers_with_claims=self.with_claims,
            answers_rated=self.rated,
            answers_not_rated=dict(self.not_rated),
            mean_contradicted_share=self._mean("contradicted_share"),
            mean_not_supported_share=self._mean("not_supported_share"),
            mean_combined=self._mean("combined"),
            p10_combined=self._quantile(0.1),
            mean_claim_score=self._mean("claims"),
            mean_nli_score=self._mean("nli"),
            mean_qa_score=self._mean("qa"),
            mean_coverage=self._mean("coverage"),
            claims=self.claims,
            escalation_rate=self.escalated / self.claims if self.claims else None,
            nli_pairs=self.nli_pairs,
            contradiction_unchecked=self.contradiction_unchecked,
            mean_citation_precision=self._mean("citation_precision"),
            mean_citation_recall=self._mean("citation_recall"),
            answers_citing=self.counts["citation_precision"],
            citations=dict(sorted(self.citations.items())),
            error_types=dict(self.error_types.most_common()),
            usage=self.usage,
            second_judge=(
                None if self.second is None else {**self.second, "usage": self.second["usage"].model_dump(mode="json")}
            ),
            worst=[(rid, -neg) for neg, rid in sorted(self._worst, reverse=True)],
            failures=list(self.failures),
            not_passed=list(self.not_passed),
            corrected_unsupported_rate=self._corrected(),
            **self._intervals(),
        )


def summarize(reports: Iterable[AnswerReport], worst: int = 5, threshold: float = 0.8) -> RunSummary:
    """The :class:`RunSummary` of ``reports``; ``threshold``: the combined score below which an answer counts in
    ``answers_below_threshold_share``."""
    s = Summarizer(worst, threshold)
    for r in reports:
        s.add(r)
    return s.summary()
