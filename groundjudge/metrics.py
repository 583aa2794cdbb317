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
