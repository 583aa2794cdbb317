"""The one rule for a label a user's file gives (``gold_label``): a row's gold label, a label file's, a reviewer's
decision. The row contract (``io.rows.parse_sample``), the readers of scored reports' gold labels (``metrics``, the
run summary, ``compare``, ``calibrate``: :func:`report_label`), a labels file (``review.metrics.read_labels``), a
review line (``review.metrics.review_from_row``), the review service and ``tune`` all read a label through it.

Imports only ``errors``.
"""

from __future__ import annotations

from typing import Any

from groundjudge.errors import InputError

CLAIM_LABELS = ("SUPPORTED", "UNSUPPORTED", "CONTRADICTED")  # a claim's truth (a claim row's gold label, a review)
ANSWER_LABELS = ("consistent", "hallucinated")  # an answer's


def gold_label(value: Any, row: int | str | None = None, field: str = "label", *, claim: bool = False) -> str | None:
    """A label as a user's file gives it, in its one spelling: a claim label upper-case (SUPPORTED, UNSUPPORTED,
    CONTRADICTED), an answer label lower-case (consistent, hallucinated), whatever its case and the spaces or line
    ends around it (``"supported\\n"`` is SUPPORTED); None for no label (None, or text that is empty once trimmed).

    Args:
        value: the label as read.
        row, field: where it was read, for the error.
        claim: only a claim's label will do (a review, tune's claim rows).

    Raises:
        InputError: anything else, naming ``row`` and ``field``: a typo such as SUPORTED is never taken for no label
            (left out, it would move the precision measured or fitted on the labels).
    """
    if value is None:
        return None
    allowed = CLAIM_LABELS if claim else CLAIM_LABELS + ANSWER_LABELS
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return None
        if text.upper() in CLAIM_LABELS:
            return text.upper()
        if not claim and text.lower() in ANSWER_LABELS:
            return text.lower()
    shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
    raise InputError(f"{shown} is not one of {', '.join(allowed)}", row=row, field=field)


def claim_label(value: Any, row: int | str | None = None, field: str = "label") -> str:
    """:func:`gold_label` where a claim's label is required: no label is an InputError too."""
    label = gold_label(value, row, field, claim=True)
    if label is None:
        raise InputError(f"missing: give one of {', '.join(CLAIM_LABELS)}", row=row, field=field)
    return label


def report_label(report: Any) -> str | None:
    """The gold label a scored report carries (its input row's ``label``), by :func:`gold_label`; an error names the
    report's id (a report written before the rule may hold any text)."""
    return gold_label(report.label, f"id {report.id!r}")
