"""Agreement with gold labels: confusion matrix, balanced accuracy, per-label P/R/F1, Cohen's kappa.

Also agreement with reviewers: the JSONL of decisions the review page exports (:func:`read_reviews`), joined to
the scored file they were made on (:func:`join_reviews`), scored by :func:`review_metrics`.

Each block carries 95% intervals (``*_ci``): agreement by :func:`groundjudge.review.stats.share` (Wilson, or a
bootstrap over answers when an answer holds several labelled claims), kappa and balanced accuracy by a bootstrap
over answers. Both metrics also give the unsupported rate corrected for the checker's error measured on the labels
(:func:`unsupported_rate`, under ``corrected_unsupported_rate``), and, when a second judge ran (README "Second
judge"), the agreement of the two judges and each one's agreement with the labels (:func:`judges_agreement`, under
``judges``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from groundjudge.errors import ArgumentError, InputError
from groundjudge.io.ids import id_text
from groundjudge.io.jsonl import read_jsonl
from groundjudge.io.labels import ANSWER_LABELS, CLAIM_LABELS, claim_label, gold_label, report_label
from groundjudge.models import Usage
from groundjudge.stats import CorrectedRate, Item, corrected_rate, percentile_interval, resampled_sums, share
from groundjudge.tally import (
    answer_prediction,
    corrected_as_json,
    failed_whole,
    flagged,
    gold_items,
    label_level,
    rated_answer,
    scored_items,
)


def confusion(gold: Sequence[str], pred: Sequence[str], labels: Sequence[str]) -> list[list[int]]:
    """``m[i][j]`` = rows whose gold is ``labels[i]`` and prediction ``labels[j]``."""
    if len(gold) != len(pred):
        raise ArgumentError("gold and pred differ in length")
    index = {label: i for i, label in enumerate(labels)}
    m = [[0] * len(labels) for _ in labels]
    for g, p in zip(gold, pred, strict=True):
        m[index[g]][index[p]] += 1
    return m


def balanced_accuracies(m: Any) -> np.ndarray:
    """Balanced accuracy of confusion matrices ``m`` (``(..., L, L)``, gold rows): the mean recall over the labels
    present in gold (rows with a count); 0.0 for an empty matrix."""
    m = np.asarray(m, dtype=np.float64)
    rows = m.sum(axis=-1)
    diag = np.diagonal(m, axis1=-2, axis2=-1)
    present = rows > 0
    recalls = np.where(present, diag / np.where(present, rows, 1.0), 0.0)
    count = present.sum(axis=-1)
    return np.where(count > 0, recalls.sum(axis=-1) / np.maximum(count, 1), 0.0)


def kappas(m: Any, undefined: float = 0.0) -> np.ndarray:
    """Cohen's kappa of confusion matrices ``m`` (``(..., L, L)``): ``(observed - expected) / (1 - expected)``;
    ``undefined`` (0.0) for an empty matrix or when chance agreement is total."""
    m = np.asarray(m, dtype=np.float64)
    n = m.sum(axis=(-2, -1))
    safe = np.where(n > 0, n, 1.0)
    observed = np.diagonal(m, axis1=-2, axis2=-1).sum(axis=-1) / safe
    expected = (m.sum(axis=-1) * m.sum(axis=-2)).sum(axis=-1) / (safe * safe)
    ok = (n > 0) & (expected < 1)
    return np.where(ok, (observed - expected) / np.where(ok, 1 - expected, 1.0), undefined)


def balanced_accuracy(gold: Sequence[str], pred: Sequence[str], labels: Sequence[str] | None = None) -> float:
    """Mean recall over the labels present in ``gold`` (0.0 when there are no rows)."""
    labels = list(labels) if labels is not None else sorted(set(gold) | set(pred))
    return float(balanced_accuracies(confusion(gold, pred, labels)))


def cohen_kappa(gold: Sequence[str], pred: Sequence[str], labels: Sequence[str] | None = None) -> float:
    """Agreement beyond chance; 0.0 when chance agreement is total."""
    labels = list(labels) if labels is not None else sorted(set(gold) | set(pred))
    return float(kappas(confusion(gold, pred, labels)))


def agreement_intervals(
    gold: Sequence[str], pred: Sequence[str], labels: Sequence[str], clusters: Sequence[Any], seed: int = 0
) -> dict[str, Any]:
    """95% intervals of a block's agreement (share of items where gold == pred: :func:`stats.share`), kappa and
    balanced accuracy (a bootstrap over ``clusters``, the answer of each item, resampled with all its items;
    resamples without a kappa are left out of its interval)."""
    index = {label: i for i, label in enumerate(labels)}
    size = len(labels)
    units: dict[Any, int] = {}
    for c in clusters:
        units.setdefault(c, len(units))
    cells = np.zeros((len(units), size * size))
    same: list[list[bool]] = [[] for _ in units]
    for g, p, c in zip(gold, pred, clusters, strict=True):
        cells[units[c], index[g] * size + index[p]] += 1
        same[units[c]].append(g == p)
    point = cells.sum(axis=0).reshape(size, size)
    draws = resampled_sums(cells, seed=seed).reshape(-1, size, size)
    agreement = share(same, seed=seed)
    out: dict[str, Any] = {"agreement": agreement.value, "agreement_ci": agreement.ci}
    kappa = float(kappas(point, undefined=np.nan))
    if np.isnan(kappa):  # chance agreement is total (one label only): no kappa, so no interval either
        out["kappa_ci"] = [None, None]
    for key, value, spread in (
        # a resample with one gold class has no kappa (chance agreement is total): it is left out
        ("kappa_ci", kappa, kappas(draws, undefined=np.nan)),
        ("balanced_accuracy_ci", float(balanced_accuracies(point)), balanced_accuracies(draws)),
    ):
        if np.isnan(value):
            continue
        spread = spread[~np.isnan(spread)]
        out[key] = list(percentile_interval(value, spread)) if spread.size else [value, value]
    return out


def per_label(gold: Sequence[str], pred: Sequence[str], labels: Sequence[str]) -> dict[str, dict[str, float]]:
    """Precision, recall, F1 and support of each label."""
    m = confusion(gold, pred, labels)
    out = {}
    for i, label in enumerate(labels):
        tp = m[i][i]
        predicted = sum(row[i] for row in m)
        actual = sum(m[i])
        p = tp / predicted if predicted else 0.0
        r = tp / actual if actual else 0.0
        out[label] = {"precision": p, "recall": r, "f1": 2 * p * r / (p + r) if p + r else 0.0, "support": actual}
    return out


def summary(gold: Sequence[str], pred: Sequence[str], labels: Sequence[str]) -> dict[str, Any]:
    """Every number above in one dict; ``kappa`` None where chance agreement is total (one label only, or no rows):
    there is no kappa to give, and 0.0 would read as no agreement beyond chance."""
    kappa = float(kappas(confusion(gold, pred, labels), undefined=np.nan))
    return {
        "n": len(gold),
        "labels": list(labels),
        "confusion": confusion(gold, pred, labels),
        "balanced_accuracy": balanced_accuracy(gold, pred, labels),
        "kappa": None if np.isnan(kappa) else kappa,
        "per_label": per_label(gold, pred, labels),
    }


def not_rated_answers(reports: Iterable[Any]) -> dict[str, int]:
    """The answers :func:`rated_answer` leaves out, by verdict (NO_CLAIMS, ERROR)."""
    out: dict[str, int] = {}
    for r in reports:
        if not rated_answer(r):
            out[r.verdict] = out.get(r.verdict, 0) + 1
    return out


def _block(
    gold: Sequence[str], pred: Sequence[str], labels: Sequence[str], clusters: Sequence[Any] | None = None
) -> dict[str, Any]:
    present = list(labels) + sorted({p for p in pred if p not in labels})  # ERROR predictions show up as a column
    out = summary(gold, pred, present)
    out["balanced_accuracy"] = balanced_accuracy(gold, pred, present)
    if clusters is not None:
        out.update(agreement_intervals(gold, pred, present, clusters))
    return out


# -- the unsupported rate corrected for the checker's error --------------------------------------------------------


def unsupported_rate(
    reports: Sequence[Any], level: str, reviewed: Sequence[ReviewedClaim] = (), *, seed: int = 0
) -> CorrectedRate:
    """The raw share of ``level`` items (claims or answers) groundjudge says are not supported, and that share
    corrected for its sensitivity and specificity (:func:`groundjudge.review.stats.corrected_rate`) measured on
    the labels: reviewer decisions (``reviewed``, claim level) and gold rows of the same level on the items no
    reviewer decided."""
    labelled = [
        Item(m.report.id, flagged(m.verdict.label), m.verdict.route, m.review.label != "SUPPORTED") for m in reviewed
    ]
    labelled += gold_items(reports, level, {(m.report.id, m.verdict.claim.id) for m in reviewed})
    not_rated = not_rated_answers(reports) if level == "answer" else None
    return corrected_rate(scored_items(reports, level), labelled, seed=seed, not_rated=not_rated)


def corrected_json(reports: Sequence[Any], level: str, reviewed: Sequence[ReviewedClaim] = ()) -> dict[str, Any]:
    """:func:`unsupported_rate` as the JSON ``corrected_unsupported_rate`` of ``metrics``."""
    return corrected_as_json(unsupported_rate(reports, level, reviewed), level, failed_whole(reports))


def labelled_prediction(report: Any, level: str) -> str:
    """What the checker predicted for a labelled ``report``, as the headline table of :func:`label_metrics` counts it
    (and the benchmarks' intervals, one rule): claim level SUPPORTED or NOT_SUPPORTED, an ERROR claim (or a claim row
    left without its claim) ``ERROR``; answer level :func:`answer_prediction` for a rated answer, else its verdict
    (ERROR, NO_CLAIMS: a column of its own, a miss for its gold label, never a detected hallucination)."""
    if level == "claim":
        label = report.claims[0].label if report.claims else "ERROR"
        return label if label in ("SUPPORTED", "ERROR") else "NOT_SUPPORTED"
    return answer_prediction(report) if rated_answer(report) else str(report.verdict)


def label_metrics(reports: Sequence[Any]) -> dict[str, Any]:
    """Agreement of scored reports with the gold labels they carry (claim or answer level), overall and by route.

    Claim level: the headline ``balanced_accuracy`` is SUPPORTED vs not (as the benchmarks define it); the
    3-way numbers are under ``three_way``. Answer level: consistent vs hallucinated by :func:`answer_prediction`;
    an answer it does not rate (:func:`rated_answer`: ERROR, NO_CLAIMS) is predicted as its verdict, a column of its
    own, as an ERROR claim is at the claim level: a failure counts as a miss for its gold label, never as a detected
    hallucination.
    """
    gold = {id(r): report_label(r) for r in reports}  # the one label rule: a typo stops here, naming the report
    claim_rows = [r for r in reports if gold[id(r)] in CLAIM_LABELS and r.claims]
    answer_rows = [r for r in reports if gold[id(r)] in ANSWER_LABELS]
    if not claim_rows and not answer_rows:
        raise ArgumentError(
            "no report carries a gold label (SUPPORTED/UNSUPPORTED/CONTRADICTED or consistent/hallucinated)"
        )
    level = label_level(len(claim_rows), len(answer_rows))
    rows = claim_rows if level == "claim" else answer_rows

    def binary(label: str) -> str:
        return "SUPPORTED" if label == "SUPPORTED" else "NOT_SUPPORTED"

    def evaluate(subset: Sequence[Any]) -> dict[str, Any]:
        units = list(range(len(subset)))  # one labelled item per row
        if level == "claim":
            gold3 = [str(gold[id(r)]) for r in subset]
            pred3 = [r.claims[0].label for r in subset]
            out = _block(
                [binary(g) for g in gold3],
                [labelled_prediction(r, level) for r in subset],
                ["SUPPORTED", "NOT_SUPPORTED"],
                units,
            )
            out["three_way"] = _block(gold3, pred3, CLAIM_LABELS, units)
        else:  # an answer with no prediction (ERROR, NO_CLAIMS) is its own column: a miss, never a detection
            pred = [labelled_prediction(r, level) for r in subset]
            out = _block([str(gold[id(r)]) for r in subset], pred, ANSWER_LABELS, units)
        return out

    result: dict[str, Any] = {"level": level, **evaluate(rows)}
    routes: dict[str, list[Any]] = {"nli": [], "judge": []}
    for r in rows:
        routes["judge" if any(c.route == "judge" for c in r.claims) else "nli"].append(r)
    result["by_route"] = {k: evaluate(v) for k, v in routes.items() if v}
    claims = [c for r in rows for c in r.claims]
    result["escalation_rate"] = sum(c.route == "judge" for c in claims) / len(claims) if claims else None
    result["escalation_rate_ci"] = share([[c.route == "judge" for c in r.claims] for r in rows]).ci
    result["corrected_unsupported_rate"] = corrected_json(reports, level)
    if level == "claim":
        people = [(r, r.claims[0], str(gold[id(r)])) for r in claim_rows]
        judges = judges_agreement(reports, people, labels_from="gold labels")
    else:
        judges = judges_agreement(reports)
    if judges is not None:
        result["judges"] = judges
    usage = sum((r.usage for r in rows), Usage())
    result["cost_usd"] = usage.known_cost()  # None when a call had no price: unknown, not 0
    result["cost"] = usage.cost_text()
    result["calls"] = usage.calls
    result["unlabelled"] = len(reports) - len(rows)
    return result


# -- reviewer decisions -----------------------------------------------------------------------------------------

REVIEW_LABELS = ("SUPPORTED", "CONTRADICTED", "UNSUPPORTED")
# a claim's status in a ``review export``, on each of its lines: every reviewer who decided it gave one label
# (``agreed``), they gave different ones and no adjudicator settled it (``disputed``), or an adjudicator settled it
# (``adjudicated``: the line marked ``adjudicated`` holds the label)
REVIEW_STATUSES = ("agreed", "disputed", "adjudicated")


@dataclass(frozen=True)
class Review:
    """One reviewer decision on one claim, as the review page exports it (one JSON object a line)."""

    id: str
    claim_id: str
    claim: str
    label: str
    groundjudge_label: str | None = None
    route: str | None = None
    note: str = ""
    reviewer: str | None = None
    decided_at: str | None = None
    line: int = 0
    adjudicated: bool = False  # an adjudicator's label for a claim reviewers disagreed on (``review export``)
    status: str | None = None  # the claim's status in a ``review export`` (REVIEW_STATUSES); None: not said
    # a line whose label is null (label ""): no label; it withdraws its reviewer's earlier verdict on the claim (as
    # the service's cleared decision does), and only :func:`review_labels` reads it: it is in none of its lists
    cleared: bool = False
    # a line without a reviewer that replaced an earlier such line with another label (:func:`review_labels`
    # counts them: two unnamed reviewers' files put together read as one reviewer's change of mind)
    unnamed_change: bool = False


def answer_id(obj: dict[str, Any], line: int) -> str:
    """A label or review line's answer ``id``, read by the one id rule (:func:`groundjudge.io.ids.id_text`): a file
    written from input rows whose ids are numbers (``1``, or pandas' ``1.0``) names the answers their reports name
    ("1"), instead of being refused.

    Raises:
        InputError: no id, or one the rule refuses (row and field named)."""
    try:
        rid = id_text(obj.get("id"))
    except InputError as exc:
        raise InputError(str(exc), row=line, field="id") from exc
    if rid is None or rid == "":
        raise InputError("missing", row=line, field="id")
    return rid


def review_from_row(obj: Any, line: int) -> Review:
    """One review line (a JSON value already read) as a :class:`Review`: the one rule for its fields, which every
    reader of reviews (metrics, calibrate, compare, tune) goes through; ``line`` names it in errors. A line whose
    ``label`` is null (a note or citation choice made without a verdict, or a verdict cleared, which the review
    page and ``review export`` write too) is ``cleared``: no label, but its reviewer's latest decision on the claim,
    so it withdraws their earlier verdict (:func:`review_labels`, the only reader that sees it)."""
    if not isinstance(obj, dict):
        raise InputError("a review line must be a JSON object", row=line)
    rid = answer_id(obj, line)
    for name in ("claim_id", "claim"):
        if not isinstance(obj.get(name), str):
            raise InputError("missing or not a string", row=line, field=name)
    cleared = "label" in obj and obj["label"] is None
    if not cleared and not isinstance(obj.get("label"), str):
        raise InputError("missing or not a string", row=line, field="label")
    label = "" if cleared else claim_label(obj["label"], line)  # the one label rule, a claim's label
    for name in ("groundjudge_label", "route", "note", "reviewer", "decided_at"):
        if obj.get(name) is not None and not isinstance(obj[name], str):
            raise InputError("not a string", row=line, field=name)
    decided_time(obj.get("decided_at"), line)  # a time the latest decision cannot be told by is refused
    if not isinstance(obj.get("adjudicated", False), bool):
        raise InputError("not true or false", row=line, field="adjudicated")
    status = obj.get("status")
    if status is not None and status not in REVIEW_STATUSES:
        raise InputError(f"{status!r} is not one of {', '.join(REVIEW_STATUSES)}", row=line, field="status")
    return Review(
        id=rid,
        claim_id=obj["claim_id"],
        claim=obj["claim"],
        label=label,
        groundjudge_label=obj.get("groundjudge_label"),
        route=obj.get("route"),
        note=obj.get("note") or "",
        reviewer=obj.get("reviewer"),
        decided_at=obj.get("decided_at"),
        line=line,
        adjudicated=obj.get("adjudicated", False),
        status=status,
        cleared=cleared,
    )


def decided_time(text: str | None, line: int | str | None = None) -> datetime | None:
    """When a review line's decision was made: its ``decided_at`` (ISO 8601, as the review page and the service
    write it; a time without a zone is UTC; a final ``Z``, UTC, as a browser's ``toISOString`` writes it, on every
    Python: 3.10's ``fromisoformat`` refuses it), None without one.

    Raises:
        InputError: text that is no ISO 8601 time, naming ``line`` and the field (read as no time, it would let an
            older decision override a newer one)."""
    if text is None or not text.strip():
        return None
    try:
        written = text.strip()
        at = datetime.fromisoformat(written[:-1] + "+00:00" if written[-1:] in ("Z", "z") else written)
    except ValueError:
        raise InputError(f"{text!r} is not an ISO 8601 time", row=line, field="decided_at") from None
    return at if at.tzinfo is not None else at.replace(tzinfo=timezone.utc)


def _per_reviewer(
    reviews: Iterable[Review],
) -> tuple[dict[tuple[str, str, str], dict[tuple[str, bool], Review]], dict[int, int]]:
    """Claim (answer id, claim id, claim text) -> each reviewer's latest decision on it, and the latest adjudication
    (under ``("", True)``: a later adjudicator's settles the claim again), a claim placed by the line that last
    changed it; and each kept line's place in ``reviews`` (by ``id``). The latest decision is the one with the
    latest ``decided_at``; of equal times, and for a line without one, the later line (a line without a time counts
    as made after the lines before it): so a line older than one already read (two exports put together, team
    members' files merged, lines out of order) changes nothing. Lines without a reviewer are one reviewer's (the
    static page's export before it named them). A cleared line (null label) withdraws its reviewer's earlier line
    and is kept by none."""
    out: dict[tuple[str, str, str], dict[tuple[str, bool], Review]] = {}
    newest: dict[tuple[tuple[str, str, str], tuple[str, bool]], datetime | None] = {}  # the latest time read
    place: dict[int, int] = {}
    for n, r in enumerate(reviews):
        claim = (r.id, r.claim_id, r.claim)
        who = ("", True) if r.adjudicated else (r.reviewer or "", False)
        at, latest = decided_time(r.decided_at, r.line or None), newest.get((claim, who))
        if at is not None and latest is not None and at < latest:  # an older decision than one read: not the latest
            kept = out.get(claim, {}).get(who)
            if who == ("", False) and kept is not None and not r.cleared and r.label != kept.label:
                out[claim][who] = replace(kept, unnamed_change=True)
                place[id(out[claim][who])] = place[id(kept)]
            continue
        newest[(claim, who)] = latest if at is None else at  # not before ``latest``: an older one was passed over
        lines = out.pop(claim, {})
        earlier = lines.pop(who, None)
        if not r.cleared:
            changed = (
                who == ("", False) and earlier is not None and (earlier.unnamed_change or earlier.label != r.label)
            )
            lines[who] = replace(r, unnamed_change=True) if changed else r
            place[id(lines[who])] = n
        if lines:
            out[claim] = lines
    return out, place


def parse_reviews(lines: Iterable[str], per_reviewer: bool = False) -> list[Review]:
    """Reviews from JSONL text lines. A line without a verdict (``"label": null``: a note or citation choice the
    review page exported alone, or a verdict its reviewer cleared) is no label: it withdraws that reviewer's
    earlier verdict on the claim, as the service's cleared decision does (:func:`review_labels`).

    ``per_reviewer``: each reviewer's own latest decision on each claim and its latest adjudication, as the review
    service exports them: what :func:`reviewers_agreement` reads. Without it the labels they teach, one per claim
    (:func:`review_labels`: the adjudicated label, else the label every reviewer gave; a claim reviewers disagree on
    with no adjudication is left out)."""
    every: list[Review] = []
    for n, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except ValueError as exc:
            raise InputError(f"not JSON: {exc}", row=n) from exc
        every.append(review_from_row(obj, n))  # a cleared line (null label) is read by review_labels alone
    settled = review_labels(every)
    return settled.every if per_reviewer else settled.labels


@dataclass(frozen=True)
class ReviewLabels:
    """What reviews teach (:func:`review_labels`): one label per claim, and the claims left out."""

    labels: list[Review]  # the adjudicated line, else the latest line of a claim every reviewer gave one label
    disputed: list[Review]  # a claim's latest line, for each claim reviewers disagree on with no adjudication
    every: list[Review]  # each reviewer's latest line on each claim and its latest adjudication, in file order
    unnamed_changes: int = 0  # claims whose lines without a reviewer give different labels (the latest one counts)

    def note(self, name: str, also: str = "") -> str | None:
        """What was left out and how to settle it (``also`` added to that sentence), and what was read as one
        unnamed reviewer's change of mind (None when neither): for the commands to say."""
        notes = []
        if n := len(self.disputed):
            notes.append(
                f"{n} claim{'s' * (n != 1)} in {name} left out: reviewers gave {'them' if n != 1 else 'it'} different "
                "labels and no adjudication settles " + ("them" if n != 1 else "it") + " (a disputed label teaches "
                "nothing). An adjudicator settles them on the review service's team page (/team) or with POST "
                "/api/adjudications; then run 'groundjudge review export' again (in a file of your own: add a line "
                'with the settled label and "adjudicated": true)' + also
            )
        if u := self.unnamed_changes:
            notes.append(
                f"{u} claim{'s' * (u != 1)} in {name} {'have' if u != 1 else 'has'} lines without a reviewer that give "
                "different labels: read as one reviewer who changed their mind, the latest line counting. If they are "
                "different reviewers' files put together, name each line's reviewer (the page's reviewer box before "
                'exporting, or a "reviewer" field) so that a claim they disagree on is left out, not taught the last '
                "file's label"
            )
        return "\n".join(notes) or None


def review_labels(every: Sequence[Review]) -> ReviewLabels:
    """The one rule for what reviews teach (metrics, calibrate, tune, compare, the review pages): per claim (answer
    id, claim id and text), the latest adjudication where there is one; else, when every reviewer's latest decision
    gives one label, that label (a reviewer who changed their mind counts once, with their latest); else the claim
    is disputed and left out, as is a claim the export marks ``disputed`` (or ``adjudicated`` with no adjudication
    line: a file cut down to some reviewers' lines). ``every`` in file order; "latest" is by ``decided_at`` (of
    equal times, or without one, the later line: :func:`_per_reviewer`), so files put together in any order read
    alike; a line whose label is null (``cleared``) withdraws its reviewer's earlier verdict on the claim (the
    service's rule for a cleared decision) and is in none of the lists returned."""
    labels: list[Review] = []
    disputed: list[Review] = []
    claims, place = _per_reviewer(every)
    for lines in claims.values():
        adjudication = lines.get(("", True))
        if adjudication is not None:
            labels.append(adjudication)
            continue
        last = max(lines.values(), key=lambda r: place[id(r)])  # the claim's decision read last of those kept
        unsettled = {r.status for r in lines.values()} & {"disputed", "adjudicated"}
        if len({r.label for r in lines.values()}) > 1 or unsettled:
            disputed.append(last)
        else:
            labels.append(last)
    kept = [r for lines in claims.values() for r in lines.values()]
    changes = sum(r.unnamed_change for r in kept)
    return ReviewLabels(labels, disputed, sorted(kept, key=lambda r: place[id(r)]), changes)


def read_reviews(path: str | Path, per_reviewer: bool = False) -> list[Review]:
    """Reviews from a JSONL file exported by the review page or ``review export`` (see :func:`parse_reviews`)."""
    try:
        with open(path, encoding="utf-8-sig") as fh:
            return parse_reviews(fh, per_reviewer)
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read reviews {path}: {exc}") from exc


def reviewers_agreement(reports: Sequence[Any], every: Sequence[Review]) -> dict[str, Any] | None:
    """How well reviewers agree with each other (the review service's overlap share): every pair of reviewers who
    decided the same claim of ``reports`` (same answer id, claim id and text; adjudications left out) is one
    item: ``n`` pairs on ``claims`` claims of ``answers`` answers, ``agreement`` and Cohen's ``kappa`` (3-way) with
    95% intervals from a bootstrap over answers (:func:`agreement_intervals`), the ``confusion``, ``disagree``, and
    ``adjudicated`` (claims an adjudicator settled). None when no claim has two reviewers."""
    texts = {(r.id, c.claim.id): c.claim.text for r in reports for c in r.claims}
    by_claim: dict[tuple[str, str], dict[str, str]] = {}
    settled = 0
    for rev in every:
        if texts.get((rev.id, rev.claim_id)) != rev.claim:
            continue
        if rev.adjudicated:
            settled += 1
        elif rev.reviewer:
            by_claim.setdefault((rev.id, rev.claim_id), {})[rev.reviewer] = rev.label
    first: list[str] = []
    second: list[str] = []
    units: list[str] = []
    claims = 0
    for (rid, _), labels in by_claim.items():
        names = sorted(labels)
        claims += len(names) > 1
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                first.append(labels[a])
                second.append(labels[b])
                units.append(rid)
    if not first:
        return None
    reviewers = sorted({name for labels in by_claim.values() if len(labels) > 1 for name in labels})
    return {
        "compared": "reviewer vs reviewer",
        **_pair_block(first, second, units),
        "claims": claims,
        "reviewers": reviewers,
        "adjudicated": settled,
        "labels": list(CLAIM_LABELS),
    }


def read_labels(path: str | Path) -> dict[str, str]:
    """Gold labels by answer id from a JSONL file of rows with ``id`` and ``label`` (input rows, or scored reports):
    a claim label (SUPPORTED / UNSUPPORTED / CONTRADICTED) or an answer label (consistent / hallucinated), read as
    :func:`gold_items` reads a scored row's label (the one label rule, :func:`groundjudge.io.labels.gold_label`:
    trimmed, in its one case). Rows whose label is null, missing or empty are skipped; a later row of the same id
    replaces an earlier one.

    Raises:
        InputError: the file cannot be read, or a row that is not an object, or has no ``id`` (read by the one id
            rule: :func:`answer_id`) or an unknown ``label`` (the row and field are named).
    """
    out: dict[str, str] = {}
    try:
        for n, row in read_jsonl(Path(path)):
            if isinstance(row, InputError):
                raise row
            if not isinstance(row, dict):
                raise InputError("a label line must be a JSON object", row=n)
            label = gold_label(row.get("label"), n)  # the one label rule
            if label is None:
                continue
            out[answer_id(row, n)] = label
    except OSError as exc:
        raise InputError(f"cannot read labels {path}: {exc}") from exc
    return out


@dataclass(frozen=True)
class ReviewedClaim:
    """A reviewer's decision next to the claim verdict it was made on."""

    review: Review
    report: Any  # AnswerReport
    verdict: Any  # ClaimVerdict


@dataclass
class ReviewJoin:
    """Reviews matched to a scored file, and what could not be matched."""

    matched: list[ReviewedClaim]
    unmatched: list[Review]  # no such answer or claim id, or the claim's text differs (a different run)
    changed_since_review: int  # matched, but groundjudge's label now differs from the one the reviewer saw


def join_reviews(reports: Sequence[Any], reviews: Sequence[Review]) -> ReviewJoin:
    """Match each review to its claim by answer id and claim id; the claim text must be the same too."""
    claims = {(r.id, c.claim.id): (r, c) for r in reports for c in r.claims}
    matched, unmatched, changed = [], [], 0
    for rev in reviews:
        hit = claims.get((rev.id, rev.claim_id))
        if hit is None or hit[1].claim.text != rev.claim:
            unmatched.append(rev)
            continue
        matched.append(ReviewedClaim(rev, hit[0], hit[1]))
        changed += rev.groundjudge_label is not None and rev.groundjudge_label != hit[1].label
    return ReviewJoin(matched, unmatched, changed)


def review_metrics(
    reports: Sequence[Any], reviews: Sequence[Review], every: Sequence[Review] | None = None
) -> dict[str, Any]:
    """Agreement of groundjudge's claim verdicts (predicted) with reviewer labels (gold), overall and by route.

    The headline is 3-way (SUPPORTED / CONTRADICTED / UNSUPPORTED; an ERROR verdict shows as its own column);
    ``binary`` is SUPPORTED vs not, as the benchmarks score claims. Raises ``ValueError`` when no review matches.
    ``every``: each reviewer's own decisions (:func:`parse_reviews` ``per_reviewer``); where two reviewers decided
    a claim, their agreement with each other is under ``reviewers_agreement`` (:func:`reviewers_agreement`), and
    ``disputed`` counts the claims of ``reports`` they disagree on with no adjudication (no label: left out of
    ``reviews``, :func:`review_labels`).
    """
    join = join_reviews(reports, reviews)
    if not reviews and every:
        raise ArgumentError(
            "no claim has a label to measure against: reviewers disagree on every claim they decided and no "
            "adjudication settles one"
        )
    if not join.matched:
        raise ArgumentError(
            f"none of the {len(reviews)} reviews matches a claim of this file (same answer id, claim id and text)"
        )

    def binary(label: str) -> str:
        return label if label in ("SUPPORTED", "ERROR") else "NOT_SUPPORTED"

    def evaluate(subset: Sequence[ReviewedClaim]) -> dict[str, Any]:
        gold = [m.review.label for m in subset]
        pred = [m.verdict.label for m in subset]
        units = [m.report.id for m in subset]  # an answer's reviewed claims are resampled together
        out = _block(gold, pred, CLAIM_LABELS, units)
        out["agreement"] = sum(g == p for g, p in zip(gold, pred, strict=True)) / len(gold)
        out["binary"] = _block(
            [binary(g) for g in gold], [binary(p) for p in pred], ["SUPPORTED", "NOT_SUPPORTED"], units
        )
        return out

    result: dict[str, Any] = {"level": "review", **evaluate(join.matched)}
    routes: dict[str, list[ReviewedClaim]] = {"nli": [], "judge": []}
    for m in join.matched:
        routes.setdefault(m.verdict.route, []).append(m)
    result["by_route"] = {k: evaluate(v) for k, v in routes.items() if v}
    result["n_reviews"] = len(reviews)
    result["unmatched"] = len(join.unmatched)
    result["changed_since_review"] = join.changed_since_review
    result["reviewers"] = sorted({m.review.reviewer for m in join.matched if m.review.reviewer})
    result["with_note"] = sum(bool(m.review.note.strip()) for m in join.matched)
    result["corrected_unsupported_rate"] = corrected_json(reports, "claim", join.matched)
    judges = judges_agreement(reports, [(m.report, m.verdict, m.review.label) for m in join.matched])
    if judges is not None:
        result["judges"] = judges
    people = reviewers_agreement(reports, every) if every is not None else None
    if people is not None:
        result["reviewers_agreement"] = people
    if every is not None:  # the claims of this file reviewers disagree on with no adjudication: no label, left out
        result["disputed"] = len(join_reviews(reports, review_labels(every).disputed).matched)
    return result


# -- two judges (README "Second judge") ---------------------------------------------------------------------------


def _kappa(a: Sequence[str], b: Sequence[str]) -> float | None:
    """Cohen's kappa of two raters over the claim labels; None where it is undefined (both gave one same label to
    every claim: chance agreement is total), never 0.0, which would read as agreement no better than chance."""
    k = float(kappas(confusion(a, b, CLAIM_LABELS), undefined=np.nan))
    return None if np.isnan(k) else k


def _pair_block(first: list[str], second: list[str], units: list[str]) -> dict[str, Any]:
    """n, answers, disagreements, agreement and kappa with intervals, and the confusion of two raters' labels."""
    out: dict[str, Any] = {
        "n": len(first),
        "answers": len(set(units)),
        "disagree": sum(a != b for a, b in zip(first, second, strict=True)),
    }
    if first:
        out["kappa"] = _kappa(first, second)
        out["confusion"] = confusion(first, second, CLAIM_LABELS)
        out.update(agreement_intervals(first, second, CLAIM_LABELS, units))
        out.pop("balanced_accuracy_ci", None)  # neither rater is gold
        if out["kappa"] is None:
            out["kappa_ci"] = [None, None]
    else:
        out.update({"kappa": None, "kappa_ci": [None, None], "agreement": None, "agreement_ci": [None, None]})
    return out


def judges_agreement(
    reports: Sequence[Any], people: Sequence[tuple[Any, Any, str]] = (), labels_from: str = "reviewers"
) -> dict[str, Any] | None:
    """How well the second judge agrees with the first verdict, judge with judge and local model with judge, over
    every claim both gave a verdict on (SUPPORTED, CONTRADICTED or UNSUPPORTED). None when no claim has a second
    verdict.

    At the top (``compared``: ``"first judge vs second judge"``): the claims the first judge decided (route
    ``judge``): ``n`` claims of ``answers`` answers, ``agreement`` and Cohen's ``kappa`` (3-way), each with a 95%
    interval from a bootstrap over answers (an answer's claims resampled together: :func:`agreement_intervals`),
    the ``confusion`` (rows: first judge, columns: second) and ``disagree``. ``local_vs_judge`` (``compared``:
    ``"local model vs second judge"``): the same for the claims the local model decided (route ``nli``), which a
    second judge may also be asked about; it is never mixed into the judges' numbers. ``claims_judged``,
    ``second_judge_errors`` and ``answers_disagree`` count every claim and answer.

    ``people``: (report, claim verdict, label) of labelled claims, ``labels_from`` naming where the labels came
    from (``"reviewers"``, or ``"gold labels"``); on those the second judge also judged, ``vs_people`` gives each
    one's agreement and kappa with the labels (the same claims for both, so the two are comparable): ``first``
    is the report's verdict, ``first_is`` says whose (``"judge"``, ``"local model"`` or ``"judge or local
    model"``).
    """
    pairs: dict[str, tuple[list[str], list[str], list[str]]] = {"judge": ([], [], []), "nli": ([], [], [])}
    judged = errors = 0
    for r in reports:
        for c in r.claims:
            if c.second_judge is None:
                continue
            judged += 1
            errors += c.second_judge.label == "ERROR"
            if c.label in CLAIM_LABELS and c.second_judge.label in CLAIM_LABELS:
                first, second, units = pairs["judge" if c.route == "judge" else "nli"]
                first.append(c.label)
                second.append(c.second_judge.label)
                units.append(r.id)
    if not judged:
        return None
    out: dict[str, Any] = {
        "compared": "first judge vs second judge",
        **_pair_block(*pairs["judge"]),
        "claims_judged": judged,
        "second_judge_errors": errors,
        "answers_disagree": sum(bool(r.judges_disagree) for r in reports),
        "labels": list(CLAIM_LABELS),
    }
    if pairs["nli"][0]:
        out["local_vs_judge"] = {"compared": "local model vs second judge", **_pair_block(*pairs["nli"])}
    both = [
        (r.id, c.label, c.second_judge.label, label, c.route)
        for r, c, label in people
        if c.second_judge is not None and c.label in CLAIM_LABELS and c.second_judge.label in CLAIM_LABELS
    ]
    if both:
        routes = {route for *_, route in both}
        first_is = (
            "judge" if routes == {"judge"} else "local model" if "judge" not in routes else "judge or local model"
        )
        vs: dict[str, Any] = {"n": len(both), "labels_from": labels_from, "first_is": first_is}
        gold = [g for _, _, _, g, _ in both]
        clusters = [rid for rid, *_ in both]
        for name, pred in (("first", [a for _, a, *_ in both]), ("second", [b for _, _, b, *_ in both])):
            block = agreement_intervals(gold, pred, CLAIM_LABELS, clusters)
            kappa = _kappa(gold, pred)
            vs[name] = {
                "agreement": block["agreement"],
                "agreement_ci": block["agreement_ci"],
                "kappa": kappa,
                "kappa_ci": block["kappa_ci"] if kappa is not None else [None, None],
            }
        out["vs_people"] = vs
    return out
