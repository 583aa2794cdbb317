"""Agreement with gold labels: confusion matrix, balanced accuracy, per-label P/R/F1, Cohen's kappa.

Also agreement with reviewers: the JSONL of decisions the review page exports (:func:`read_reviews`), joined to
the scored file they were made on (:func:`join_reviews`), scored by :func:`review_metrics`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from groundjudge.errors import InputError
from groundjudge.models import Usage


def confusion(gold: Sequence[str], pred: Sequence[str], labels: Sequence[str]) -> list[list[int]]:
    """``m[i][j]`` = rows whose gold is ``labels[i]`` and prediction ``labels[j]``."""
    if len(gold) != len(pred):
        raise ValueError("gold and pred differ in length")
    index = {label: i for i, label in enumerate(labels)}
    m = [[0] * len(labels) for _ in labels]
    for g, p in zip(gold, pred, strict=True):
        m[index[g]][index[p]] += 1
    return m


def balanced_accuracy(gold: Sequence[str], pred: Sequence[str], labels: Sequence[str] | None = None) -> float:
    """Mean recall over the labels present in ``gold`` (0.0 when there are no rows)."""
    labels = list(labels) if labels is not None else sorted(set(gold) | set(pred))
    m = confusion(gold, pred, labels)
    recalls = [m[i][i] / sum(row) for i, row in enumerate(m) if sum(row)]
    return sum(recalls) / len(recalls) if recalls else 0.0


def cohen_kappa(gold: Sequence[str], pred: Sequence[str], labels: Sequence[str] | None = None) -> float:
    """Agreement beyond chance; 0.0 when chance agreement is total."""
    labels = list(labels) if labels is not None else sorted(set(gold) | set(pred))
    m = confusion(gold, pred, labels)
    n = sum(map(sum, m))
    if not n:
        return 0.0
    observed = sum(m[i][i] for i in range(len(labels))) / n
    expected = sum(sum(m[i]) * sum(row[i] for row in m) for i in range(len(labels))) / (n * n)
    return (observed - expected) / (1 - expected) if expected < 1 else 0.0


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
    """Every number above in one dict."""
    return {
        "n": len(gold),
        "labels": list(labels),
        "confusion": confusion(gold, pred, labels),
        "balanced_accuracy": balanced_accuracy(gold, pred, labels),
        "kappa": cohen_kappa(gold, pred, labels),
        "per_label": per_label(gold, pred, labels),
    }


CLAIM_LABELS = ["SUPPORTED", "UNSUPPORTED", "CONTRADICTED"]
ANSWER_LABELS = ["consistent", "hallucinated"]


def answer_prediction(report: Any) -> str:
    """The response rule, the one place it is written: an answer is consistent when every claim was judged and
    judged SUPPORTED (a claim that could not be judged counts against it); else ``hallucinated``, the one meaning
    of the word (README "Quantities": the run summary's ``answers_not_supported_share`` counts these answers among
    those with claims)."""
    s = report.scores
    return "consistent" if s.n_claims and s.n_supported == s.n_claims else "hallucinated"


def _block(gold: Sequence[str], pred: Sequence[str], labels: Sequence[str]) -> dict[str, Any]:
    present = list(labels) + sorted({p for p in pred if p not in labels})  # ERROR predictions show up as a column
    out = summary(gold, pred, present)
    out["balanced_accuracy"] = balanced_accuracy(gold, pred, present)
    return out


def label_metrics(reports: Sequence[Any]) -> dict[str, Any]:
    """Agreement of scored reports with the gold labels they carry (claim or answer level), overall and by route.

    Claim level: the headline ``balanced_accuracy`` is SUPPORTED vs not (as the benchmarks define it); the
    3-way numbers are under ``three_way``. Answer level: consistent vs hallucinated by :func:`answer_prediction`.
    """
    claim_rows = [r for r in reports if r.label is not None and r.label.upper() in CLAIM_LABELS and r.claims]
    answer_rows = [r for r in reports if r.label is not None and r.label.lower() in ANSWER_LABELS]
    if not claim_rows and not answer_rows:
        raise ValueError(
            "no report carries a gold label (SUPPORTED/UNSUPPORTED/CONTRADICTED or consistent/hallucinated)"
        )
    level = "claim" if len(claim_rows) >= len(answer_rows) else "answer"
    rows = claim_rows if level == "claim" else answer_rows

    def binary(label: str) -> str:
        return "SUPPORTED" if label == "SUPPORTED" else "NOT_SUPPORTED"

    def evaluate(subset: Sequence[Any]) -> dict[str, Any]:
        if level == "claim":
            gold3 = [r.label.upper() for r in subset]
            pred3 = [r.claims[0].label for r in subset]
            out = _block(
                [binary(g) for g in gold3],
                [binary(p) if p != "ERROR" else "ERROR" for p in pred3],
                ["SUPPORTED", "NOT_SUPPORTED"],
            )
            out["three_way"] = _block(gold3, pred3, CLAIM_LABELS)
        else:
            out = _block([r.label.lower() for r in subset], [answer_prediction(r) for r in subset], ANSWER_LABELS)
        return out

    result: dict[str, Any] = {"level": level, **evaluate(rows)}
    routes: dict[str, list[Any]] = {"nli": [], "judge": []}
    for r in rows:
        routes["judge" if any(c.route == "judge" for c in r.claims) else "nli"].append(r)
    result["by_route"] = {k: evaluate(v) for k, v in routes.items() if v}
    claims = [c for r in rows for c in r.claims]
    result["escalation_rate"] = sum(c.route == "judge" for c in claims) / len(claims) if claims else None
    usage = sum((r.usage for r in rows), Usage())
    result["cost_usd"] = usage.known_cost()  # None when a call had no price: unknown, not 0
    result["cost"] = usage.cost_text()
    result["calls"] = usage.calls
    result["unlabelled"] = len(reports) - len(rows)
    return result


# -- reviewer decisions -----------------------------------------------------------------------------------------

REVIEW_LABELS = ("SUPPORTED", "CONTRADICTED", "UNSUPPORTED")


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


def _review(obj: Any, line: int) -> Review:
    if not isinstance(obj, dict):
        raise InputError("a review line must be a JSON object", row=line)
    for name in ("id", "claim_id", "claim", "label"):
        if not isinstance(obj.get(name), str):
            raise InputError("missing or not a string", row=line, field=name)
    label = obj["label"].upper()
    if label not in REVIEW_LABELS:
        raise InputError(f"{obj['label']!r} is not one of {', '.join(REVIEW_LABELS)}", row=line, field="label")
    for name in ("groundjudge_label", "route", "note", "reviewer", "decided_at"):
        if obj.get(name) is not None and not isinstance(obj[name], str):
            raise InputError("not a string", row=line, field=name)
    return Review(
        id=obj["id"],
        claim_id=obj["claim_id"],
        claim=obj["claim"],
        label=label,
        groundjudge_label=obj.get("groundjudge_label"),
        route=obj.get("route"),
        note=obj.get("note") or "",
        reviewer=obj.get("reviewer"),
        decided_at=obj.get("decided_at"),
        line=line,
    )


def parse_reviews(lines: Iterable[str]) -> list[Review]:
    """Reviews from JSONL text lines; a later decision on the same (id, claim_id) replaces an earlier one."""
    latest: dict[tuple[str, str], Review] = {}
    for n, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except ValueError as exc:
            raise InputError(f"not JSON: {exc}", row=n) from exc
        r = _review(obj, n)
        latest.pop((r.id, r.claim_id), None)
        latest[(r.id, r.claim_id)] = r
    return list(latest.values())


def read_reviews(path: str | Path) -> list[Review]:
    """Reviews from a JSONL file exported by the review page (see :func:`parse_reviews`)."""
    try:
        with open(path, encoding="utf-8-sig") as fh:
            return parse_reviews(fh)
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read reviews {path}: {exc}") from exc


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


def review_metrics(reports: Sequence[Any], reviews: Sequence[Review]) -> dict[str, Any]:
    """Agreement of groundjudge's claim verdicts (predicted) with reviewer labels (gold), overall and by route.

    The headline is 3-way (SUPPORTED / CONTRADICTED / UNSUPPORTED; an ERROR verdict shows as its own column);
    ``binary`` is SUPPORTED vs not, as the benchmarks score claims. Raises ``ValueError`` when no review matches.
    """
    join = join_reviews(reports, reviews)
    if not join.matched:
        raise ValueError(
            f"none of the {len(reviews)} reviews matches a claim of this file (same answer id, claim id and text)"
        )

    def binary(label: str) -> str:
        return label if label in ("SUPPORTED", "ERROR") else "NOT_SUPPORTED"

    def evaluate(subset: Sequence[ReviewedClaim]) -> dict[str, Any]:
        gold = [m.review.label for m in subset]
        pred = [m.verdict.label for m in subset]
        out = _block(gold, pred, CLAIM_LABELS)
        out["agreement"] = sum(g == p for g, p in zip(gold, pred, strict=True)) / len(gold)
        out["binary"] = _block([binary(g) for g in gold], [binary(p) for p in pred], ["SUPPORTED", "NOT_SUPPORTED"])
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
    return result
