"""Agreement with gold labels: confusion matrix, balanced accuracy, per-label P/R/F1, Cohen's kappa."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


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
    judged SUPPORTED (a claim that could not be judged counts against it)."""
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
    result["cost_usd"] = sum(r.usage.cost_usd for r in rows)
    result["calls"] = sum(r.usage.calls for r in rows)
    result["unlabelled"] = len(reports) - len(rows)
    return result
