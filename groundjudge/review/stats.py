"""Moved to :mod:`groundjudge.stats` (below ``review/`` and ``runs/``, so that the run summary both use can live
below them too, in :mod:`groundjudge.tally`); this path keeps working."""

from __future__ import annotations

from groundjudge.stats import (
    LEVEL,
    MIN_PER_CLASS,
    MIN_YOUDEN,
    RESAMPLES,
    CorrectedRate,
    Interval,
    Item,
    answers_needed,
    bootstrap_mean,
    clustered_mean,
    corrected_difference,
    corrected_rate,
    minimum_detectable_difference,
    paired_sd,
    percentile_interval,
    resample_counts,
    resampled_sums,
    rogan_gladen,
    share,
    wilson,
    z_value,
)

__all__ = [
    "LEVEL",
    "MIN_PER_CLASS",
    "MIN_YOUDEN",
    "RESAMPLES",
    "CorrectedRate",
    "Interval",
    "Item",
    "answers_needed",
    "bootstrap_mean",
    "clustered_mean",
    "corrected_difference",
    "corrected_rate",
    "minimum_detectable_difference",
    "paired_sd",
    "percentile_interval",
    "resample_counts",
    "resampled_sums",
    "rogan_gladen",
    "share",
    "wilson",
    "z_value",
]
