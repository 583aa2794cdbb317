"""Where the local checker's labels come from: gold rows, reviewer decisions, and the judge's own verdicts.

One rule for what a judge verdict may teach (:func:`judge_usable`, and why one may not: :func:`judge_left_out`;
a verdict the second judge disagreed with is no label), one for which claims the NLI stage scored
(:func:`scored`), :func:`collect_labels`, which gathers calibrate's labelled claims from scored reports, and
:func:`reviewed_claims`, tune's reviews joined to its score files.
Imports only ``models``, ``errors``, ``io.labels`` (the one label rule) and ``review``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from groundjudge.errors import InputError
from groundjudge.io.labels import CLAIM_LABELS, report_label
from groundjudge.models import AnswerReport, ClaimNLI, ClaimVerdict

if TYPE_CHECKING:
    from groundjudge.review.metrics import Review


# why a claim of a 'score' OUT did not teach, in the order they are told
LEFT_OUT = {
    "local": "decided locally (never judged)",
    "error": "judge errors",
    "unverified": "with an unverified quote",
    "no_quote": "SUPPORTED / CONTRADICTED without a quote",
    "no_nli": "without NLI scores",
    "judges_disagree": "disputed by the second judge (no reviewer decided them)",
    "failed": "answer(s) that failed whole (their claims are not in the file)",
}


def judge_left_out(v: ClaimVerdict) -> str | None:
    """Why a judge verdict may not teach (a key of :data:`LEFT_OUT`), None if it may: decided by the judge, no error,
    no unverified quote, evidence (verified quotes) for a SUPPORTED or CONTRADICTED, and no second judge that gave
    another verdict (``judges_disagree``: a label two judges disagree on is noise to fit a checker on; a reviewer's
    decision on the claim teaches it instead, which the callers put first). A second judge that failed or gave
    none leaves the verdict as it is (nothing to compare)."""
    if v.route != "judge":
        return "local"
    if v.error or v.label not in CLAIM_LABELS:
        return "error"
    if "unverified_quote" in v.flags:
        return "unverified"
    if v.label in ("SUPPORTED", "CONTRADICTED"):
        if any(not q.verified for q in v.quotes):
            return "unverified"
        if not v.quotes:
            return "no_quote"
    if v.judges_disagree:
        return "judges_disagree"
    return None


def judge_usable(v: ClaimVerdict) -> bool:
    """A judge verdict worth learning from (:func:`judge_left_out` finds no reason against it): calibrate's and
    tune's one rule."""
    return judge_left_out(v) is None


def scored(nli: ClaimNLI | None) -> bool:
    """Whether the NLI stage scored the claim: only those can teach thresholds (an unscored claim is escalated by
    the pipeline, so counting it as a local UNSUPPORTED would flatter the fit)."""
    return nli is not None and nli.error is None and nli.passages_scored > 0


def gold_claims(report: AnswerReport, label: str) -> list[ClaimVerdict]:
    """The claims a gold ``label`` teaches: the one claim of a claim row or of a one-claim answer; every claim of an
    answer labelled SUPPORTED (a grounded answer's claims are each grounded); none of an answer with several claims
    labelled UNSUPPORTED or CONTRADICTED (which claim is wrong is not known).
    Before, each answer's label taught its first sentence only, whatever it was."""
    if len(report.claims) == 1:
        return report.claims[:1]
    return list(report.claims) if label == "SUPPORTED" else []


def judge_labelled(
    reports: Sequence[AnswerReport], reviewed: set[tuple[str, str]]
) -> tuple[list[tuple[AnswerReport, ClaimVerdict]], Counter[str]]:
    """The claims of a 'score' OUT the judge decided well enough to learn from, as ``(report, verdict)``, and how many
    were left out by reason (keys of :data:`LEFT_OUT`); claims a reviewer decided are neither.

    Usable: :func:`judge_usable` (judge route, a real label, every quote verified for SUPPORTED / CONTRADICTED, no
    unverified_quote flag, no error, no second judge that disagreed) and NLI scores (no NLI error, passages scored).
    """
    usable: list[tuple[AnswerReport, ClaimVerdict]] = []
    left_out: Counter[str] = Counter()
    for r in reports:
        if r.verdict == "ERROR" and not r.claims:
            left_out["failed"] += 1
        for v in r.claims:
            if (r.id, v.claim.id) in reviewed:
                continue
            why = judge_left_out(v)
            if why is None and scored(v.nli):
                usable.append((r, v))
            else:
                left_out[why or "no_nli"] += 1
    return usable, left_out


def left_out_said(left_out: Counter[str]) -> str:
    """How many judge verdicts were left out for each reason (keys of :data:`LEFT_OUT`), in its order; "none"."""
    return ", ".join(f"{left_out[k]} {said}" for k, said in LEFT_OUT.items() if left_out[k]) or "none"


def judge_said(used: int, left_out: Counter[str], reviewed: bool) -> str:
    """One line: how many judge verdicts taught and why the others did not (calibrate's; tune says the same)."""
    return (
        f"No gold labels: {used} judge verdicts used as labels"
        + (" (for the claims no reviewer decided)" if reviewed else "")
        + f"; left out: {left_out_said(left_out)}."
    )


@dataclass
class LabelledClaims:
    """Claims with a 3-way label, what a threshold or a head is fitted on: the claim, its answer's sources, its NLI
    result and label; where each label came from; notes for the user (said, not raised)."""

    texts: list[str] = field(default_factory=list)
    sources: list[list[str]] = field(default_factory=list)
    results: list[ClaimNLI] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    fingerprints: set[str] = field(default_factory=set)  # the NLI models that scored the claims of a 'score' OUT
    taught: dict[str, int] = field(default_factory=dict)  # where the labels came from: gold, reviews, judge
    notes: list[str] = field(default_factory=list)

    def add(self, report: AnswerReport, verdict: ClaimVerdict, label: str, origin: str, from_out: bool) -> None:
        assert verdict.nli is not None
        self.texts.append(verdict.claim.text)
        self.sources.append(list(report.contexts))
        self.results.append(verdict.nli)
        self.labels.append(label)
        self.fingerprints.add(report.versions.get("nli_model", "") if from_out else "")
        self.taught[origin] = self.taught.get(origin, 0) + 1


def collect_labels(
    reports: Sequence[AnswerReport],
    *,
    from_out: bool,
    source: str,
    reviews: Sequence[Any] | None = None,
    reviews_name: str = "",
    disputed: Sequence[Any] = (),
) -> LabelledClaims:
    """calibrate's labelled claims from scored ``reports``: gold labels if the reports carry them, else the
    reviewer decisions (``reviews``, as :func:`groundjudge.review.metrics.read_reviews` gives them) and the judge's
    verdicts with verified quotes on the claims no reviewer decided.

    Args:
        reports: scored answers: a 'score' OUT (``from_out``) or claim rows just scored in nli mode.
        from_out: the reports come from a 'score' OUT (their NLI fingerprints are kept, for the head's check).
        source: the input's name, for messages.
        reviews: reviewer decisions on the claims of ``reports`` (None: no review file), one label per claim
            (:func:`groundjudge.review.metrics.review_labels`).
        reviews_name: the review file's name, for messages.
        disputed: the claims reviewers disagree on with no adjudication (``review_labels``' ``disputed``): they
            teach nothing, the judge's verdict on them neither (a disputed label is not a label).

    Raises:
        InputError: no label at all, or no review matches a scored claim; its ``notes`` hold what was said before.
    """
    found = LabelledClaims()
    try:
        _collect(
            found,
            reports,
            from_out=from_out,
            source=source,
            reviews=reviews,
            reviews_name=reviews_name,
            disputed=disputed,
        )
    except InputError as exc:
        exc.notes = found.notes  # type: ignore[attr-defined]
        raise
    return found


def _collect(
    found: LabelledClaims,
    reports: Sequence[AnswerReport],
    *,
    from_out: bool,
    source: str,
    reviews: Sequence[Any] | None,
    reviews_name: str,
    disputed: Sequence[Any],
) -> None:
    from groundjudge.review.metrics import join_reviews

    reviewed: set[tuple[str, str]] = set()  # (answer id, claim id) a reviewer decided: the judge's verdict yields
    for m in join_reviews(reports, disputed).matched:  # reviewers disagree: no label, and the judge's is no tiebreak
        reviewed.add((m.report.id, m.verdict.claim.id))
    if reviewed:
        found.notes.append(
            f"{len(reviewed)} claim(s) of {source} that reviewers disagree on taught nothing, nor did the judge's "
            "verdict on them"
        )
    if reviews is not None:
        joined = join_reviews(reports, reviews)
        for m in joined.matched:
            reviewed.add((m.report.id, m.verdict.claim.id))
            if scored(m.verdict.nli):
                found.add(m.report, m.verdict, m.review.label, "reviews", from_out)
        if joined.unmatched:
            found.notes.append(f"{len(joined.unmatched)} reviews match no claim of {source}")
        if not found.labels:
            raise InputError(f"no review in {reviews_name} matches a claim of {source} with NLI scores")
    gold = [report_label(r) for r in reports]  # the one label rule: a typo stops here, naming the report
    gold_labelled = any(label in CLAIM_LABELS for label in gold)
    if gold_labelled and reviews is None:
        unknown = 0  # answers labelled not SUPPORTED whose wrong claim cannot be told
        for r, label in zip(reports, gold, strict=True):
            if label not in CLAIM_LABELS or not r.claims:
                continue
            for v in gold_claims(r, str(label)):
                if scored(v.nli):
                    found.add(r, v, label, "gold", from_out)
            unknown += label != "SUPPORTED" and len(r.claims) > 1
        if unknown:
            found.notes.append(
                f"{unknown} answer(s) labelled UNSUPPORTED or CONTRADICTED have several claims and taught nothing: "
                "an answer's label does not say which of its claims is wrong (give claim rows, or review the claims "
                "on the review page); an answer labelled SUPPORTED teaches each of its claims"
            )
    elif from_out and not gold_labelled:  # no gold label: the judge's own verdicts teach (reviews win on theirs)
        usable, left_out = judge_labelled(reports, reviewed)
        for r, v in usable:
            found.add(r, v, v.label, "judge", from_out)
        # with reviews and no judge verdict to add, they teach alone, as they did (said if the judges disagreed)
        if usable or reviews is None or left_out["judges_disagree"]:
            found.notes.append(judge_said(len(usable), left_out, reviewed=bool(reviewed)))
        if usable and any(r.mode == "cascade" for r in reports):
            found.notes.append(
                "note: these answers were scored in cascade mode: only the escalated claims were judged, so the "
                "sample leans to the claims the local checker found hard; for calibration, score a sample with "
                "--mode llm (the judge sees every claim)."
            )
        if not found.labels:
            raise InputError(
                f"no labels in {source}: no answer carries a gold label (SUPPORTED / UNSUPPORTED / CONTRADICTED), "
                "and no claim was decided by the judge with verified quotes, no error and NLI scores"
            )
    if not found.labels:
        raise InputError("no claim rows with a gold label (SUPPORTED / UNSUPPORTED / CONTRADICTED)")


def reviewed_claims(
    reviews: Sequence[tuple[str, Review]], runs: Sequence[Sequence[AnswerReport]], log: Callable[[str], None]
) -> dict[tuple[str, str, str], str | None]:
    """tune's reviews: the label they teach on each claim (:func:`~groundjudge.review.metrics.review_labels`, lines
    in the order given; None where reviewers disagree with no adjudication), joined to each score file as ``metrics``
    and ``calibrate`` join them (:func:`~groundjudge.review.metrics.join_reviews`: answer id, claim id and text).

    Raises:
        InputError: a review that matches a claim of no score file (none with its ids, or one with another text: a
            review of another run), naming its row.
    """
    from groundjudge.review.metrics import join_reviews, review_labels

    settled = review_labels([rev for _, rev in reviews])
    disputed = {id(r) for r in settled.disputed}
    reviewed: dict[tuple[str, str, str], str | None] = {}
    matched: set[int] = set()
    for run in runs:
        for m in join_reviews(run, [*settled.labels, *settled.disputed]).matched:
            label = None if id(m.review) in disputed else m.review.label
            reviewed[(m.report.id, m.verdict.claim.id, m.verdict.claim.text)] = label
        matched.update(id(m.review) for m in join_reviews(run, [rev for _, rev in reviews]).matched)
    names = ", ".join(sorted({where.rsplit(":", 1)[0] for where, _ in reviews}))
    note = settled.note(names, also="; the judge's verdict on them teaches nothing either")
    if note:
        log(note)
    texts = {(r.id, v.claim.id): v.claim.text for run in runs for r in run for v in r.claims}
    for where, rev in reviews:
        if id(rev) in matched or rev.cleared:  # a null label is no label: no claim to look up
            continue
        if (rev.id, rev.claim_id) in texts:
            raise InputError(
                f"review of answer {rev.id!r} claim {rev.claim_id!r}: the claim reviewed ({rev.claim!r}) is not that "
                f"claim in the score files given ({texts[rev.id, rev.claim_id]!r}); is it a review of another run?",
                row=where,
                field="claim",
            )
        raise InputError(
            f"review of answer {rev.id!r} claim {rev.claim_id!r}: no such claim in the score files given", row=where
        )
    return reviewed
