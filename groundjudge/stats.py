"""Intervals and corrections for the figures groundjudge reports: one place for every estimator (below ``review/``
and ``runs/``: the run summary, :mod:`groundjudge.tally`, uses them; ``groundjudge.review.stats`` is the old path).

- :func:`wilson`: the Wilson score interval of a share (k of n).
- :func:`bootstrap_mean`: a percentile bootstrap interval of a mean over answers.
- :func:`clustered_mean`: the same for anything averaged over claims: answers are resampled with all their claims,
  so a long answer does not count as many independent claims. :func:`share` picks Wilson when every answer holds
  one item and the clustered bootstrap otherwise.
- :func:`minimum_detectable_difference` and :func:`answers_needed`: what a paired comparison could detect
  (normal approximation, 80% power, two-sided alpha 0.05 by default).
- :func:`rogan_gladen` and :func:`corrected_rate`: a rate corrected for the checker's measured sensitivity and
  specificity, with an interval from a bootstrap over both the scored and the labelled items, or, with too few
  labels, no number and how many more labels it needs. :func:`corrected_difference`: the difference of two runs'
  corrected (and raw) rates, with an interval from one bootstrap over the answers both runs have (paired).

Every bootstrap is seeded (``seed``) and vectorised: a resample is a row of counts (how often each answer was
drawn) and every statistic is that row times a matrix of per-answer sums, so 2,000 resamples of a few thousand
claims take milliseconds. Intervals are percentile intervals, widened to hold the point estimate if a skewed or
clipped statistic leaves it outside. Pure numpy and the standard library.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np

from groundjudge.errors import ArgumentError

RESAMPLES = 2000
LEVEL = 0.95
# The corrected rate prints a number only with at least this many labelled items of each class (truly not
# supported, truly supported) and a checker that separates them: sensitivity + specificity - 1 >= MIN_YOUDEN.
MIN_PER_CLASS = 20
MIN_YOUDEN = 0.3
_BLOCK = 2_000_000  # resample-count cells built at once (caps memory at a few tens of MB)


def z_value(level: float = LEVEL) -> float:
    """The two-sided normal quantile of ``level`` (1.959964 for 0.95)."""
    if not 0 < level < 1:
        raise ArgumentError(f"level must lie strictly between 0 and 1, not {level}")
    return NormalDist().inv_cdf((1 + level) / 2)


@dataclass(frozen=True)
class Interval:
    """A point estimate and its interval. ``value`` is None when there is nothing to estimate from (n = 0); the
    interval then spans everything possible (``[0, 1]`` for a share, ``None`` ends for a mean)."""

    value: float | None
    lo: float | None
    hi: float | None
    n: int
    method: str
    level: float = LEVEL

    @property
    def ci(self) -> list[float | None]:
        return [self.lo, self.hi]

    def as_dict(self) -> dict[str, Any]:
        return {"value": self.value, "ci": self.ci, "n": self.n, "method": self.method}


def wilson(k: int, n: int, level: float = LEVEL) -> Interval:
    """Wilson score interval of the share ``k / n`` (Wilson 1927; Newcombe 1998, method 3):
    ``(p + z²/2n ± z·sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n)``. With ``n = 0`` the value is None and the
    interval ``[0, 1]``."""
    if n < 0 or not 0 <= k <= n:
        raise ArgumentError(f"need 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return Interval(None, 0.0, 1.0, 0, "wilson", level)
    z = z_value(level)
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    lo = 0.0 if k == 0 else max(0.0, centre - half)
    hi = 1.0 if k == n else min(1.0, centre + half)
    return Interval(p, lo, hi, n, "wilson", level)


# -- the resampler ---------------------------------------------------------------------------------------------


def resample_counts(n: int, resamples: int, rng: np.random.Generator) -> Iterator[np.ndarray]:
    """Blocks of bootstrap resamples, ``(rows, n)`` counts each: how often each of ``n`` units is drawn (each row
    sums to ``n``); ``resamples`` rows in all, in blocks small enough to keep memory bounded."""
    rows = max(1, _BLOCK // max(n, 1))
    for start in range(0, resamples, rows):
        b = min(rows, resamples - start)
        idx = rng.integers(0, n, size=(b, n)) + (np.arange(b) * n)[:, None]
        yield np.bincount(idx.ravel(), minlength=b * n).reshape(b, n).astype(np.float64)


def resampled_sums(per_unit: np.ndarray, resamples: int = RESAMPLES, seed: int = 0) -> np.ndarray:
    """Bootstrap over units (answers): ``per_unit`` is ``(n, k)`` sums of each unit; returns ``(resamples, k)``,
    the column sums of each resample. Units with their whole row of sums go together (the clustered bootstrap)."""
    per_unit = np.asarray(per_unit, dtype=np.float64)
    if per_unit.ndim == 1:
        per_unit = per_unit[:, None]
    rng = np.random.default_rng(seed)
    # einsum without BLAS: a multithreaded BLAS call is several times slower on a busy machine, and its spinning
    # threads slow the numpy work after it
    return np.concatenate(
        [np.einsum("bn,nk->bk", counts, per_unit) for counts in resample_counts(len(per_unit), resamples, rng)]
    )


def percentile_interval(
    point: float, draws: np.ndarray, level: float = LEVEL, *, undefined_lo: float = 0.0, undefined_hi: float = 1.0
) -> tuple[float, float]:
    """The percentile interval of bootstrap ``draws`` around ``point``, widened to hold ``point``. A NaN draw (a
    resample where the statistic is undefined) counts as ``undefined_lo`` for the lower end and ``undefined_hi``
    for the upper one, so undefined resamples only ever widen the interval."""
    a = (1 - level) / 2
    draws = np.asarray(draws, dtype=np.float64)
    bad = np.isnan(draws)
    lo = float(np.quantile(np.where(bad, undefined_lo, draws), a))
    hi = float(np.quantile(np.where(bad, undefined_hi, draws), 1 - a))
    return min(lo, point), max(hi, point)


def _finite_values(values: Sequence[float], what: str) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.size and not np.isfinite(arr).all():
        raise ArgumentError(f"{what}: every value must be finite (leave missing ones out)")
    return arr


def bootstrap_mean(
    values: Sequence[float], *, resamples: int = RESAMPLES, seed: int = 0, level: float = LEVEL
) -> Interval:
    """Percentile bootstrap interval of the mean of ``values`` (one per answer). Empty: value None."""
    arr = _finite_values(values, "bootstrap_mean")
    if not arr.size:
        return Interval(None, None, None, 0, "bootstrap", level)
    point = float(arr.mean())
    means = resampled_sums(arr, resamples, seed)[:, 0] / arr.size
    lo, hi = percentile_interval(point, means, level, undefined_lo=point, undefined_hi=point)
    return Interval(point, lo, hi, int(arr.size), "bootstrap", level)


def permutation_p(diffs: Sequence[float], n: int = 10000, seed: int = 0) -> float:
    """Two-sided paired sign-flip permutation test of mean difference = 0: exact over all ``2**len`` sign patterns
    when there are at most ``n`` of them, else ``n`` random ones (``(hits + 1) / (n + 1)``). A pattern counts when
    its absolute sum reaches the observed one (within 1e-12: an all-plus pattern is always a hit)."""
    d = np.asarray(diffs, dtype=np.float64)
    k = d.size
    observed = abs(float(d.sum()))
    if observed == 0:
        return 1.0
    exact = 2**k <= n
    total = 2**k if exact else n
    rng = np.random.default_rng(seed)
    rows = max(1, _BLOCK // max(k, 1))
    hits = 0
    for start in range(0, total, rows):
        b = min(rows, total - start)
        if exact:  # pattern m flips the signs of the differences whose bit is 0
            bits = (np.arange(start, start + b, dtype=np.int64)[:, None] >> np.arange(k)) & 1
        else:
            bits = rng.integers(0, 2, size=(b, k))
        # einsum, not a BLAS product: see resampled_sums
        sums = np.einsum("bk,k->b", (2 * bits - 1).astype(np.float64), d)
        hits += int(np.count_nonzero(np.abs(sums) >= observed - 1e-12))
    return hits / total if exact else (hits + 1) / (n + 1)


def clustered_mean(
    groups: Sequence[Sequence[float]], *, resamples: int = RESAMPLES, seed: int = 0, level: float = LEVEL
) -> Interval:
    """Mean over every item (claim) of ``groups`` (one sequence per answer), with a bootstrap interval that
    resamples answers, each with all its claims: the statistic is ``sum of values / number of items`` of each
    resample (a ratio estimator). Answers without items are left out (they carry no claim). ``n`` counts items."""
    sizes = np.array([len(g) for g in groups], dtype=np.float64)
    keep = sizes > 0
    totals = np.array([sum(map(float, g)) for g in groups], dtype=np.float64)
    if not np.isfinite(totals).all():  # a NaN or an infinity in a group makes its sum one
        raise ArgumentError("clustered_mean: every value must be finite (leave missing ones out)")
    sizes, totals = sizes[keep], totals[keep]
    if not sizes.size:
        return Interval(None, None, None, 0, "clustered bootstrap", level)
    point = float(totals.sum() / sizes.sum())
    sums = resampled_sums(np.column_stack([totals, sizes]), resamples, seed)
    lo, hi = percentile_interval(point, sums[:, 0] / sums[:, 1], level, undefined_lo=point, undefined_hi=point)
    return Interval(point, lo, hi, int(sizes.sum()), "clustered bootstrap", level)


def share(
    groups: Sequence[Sequence[bool]], *, resamples: int = RESAMPLES, seed: int = 0, level: float = LEVEL
) -> Interval:
    """The share of True items over ``groups`` (one sequence per answer): Wilson when no answer holds more than one
    item (the items are independent), else :func:`clustered_mean` (claims of one answer are not)."""
    if all(len(g) <= 1 for g in groups):
        flat = [bool(x) for g in groups for x in g]
        return wilson(sum(flat), len(flat), level)
    return clustered_mean([[float(x) for x in g] for g in groups], resamples=resamples, seed=seed, level=level)


# -- paired comparisons ------------------------------------------------------------------------------------------


def _power_z(alpha: float, power: float) -> float:
    if not 0 < alpha < 1 or not 0 < power < 1:
        raise ArgumentError("alpha and power must lie strictly between 0 and 1")
    return NormalDist().inv_cdf(1 - alpha / 2) + NormalDist().inv_cdf(power)


def fewest_pairs(alpha: float = 0.05) -> int:
    """The fewest paired answers with which the exact sign-flip test (:func:`permutation_p`) can reach ``alpha``:
    its smallest p-value over ``n`` pairs is ``2 / 2**n`` (all signs as observed, or all flipped), so ``n`` must
    satisfy ``2**(1 - n) < alpha`` (6 at 0.05). Below it no difference is detectable, whatever its size."""
    if not 0 < alpha < 1:
        raise ArgumentError("alpha must lie strictly between 0 and 1")
    n = 1
    while 2.0 ** (1 - n) >= alpha:
        n += 1
    return n


def paired_sd(diffs: Sequence[float]) -> float | None:
    """Sample standard deviation (n - 1) of paired differences; None with fewer than two."""
    arr = _finite_values(diffs, "paired differences")
    return float(arr.std(ddof=1)) if arr.size >= 2 else None


def minimum_detectable_difference(diffs: Sequence[float], alpha: float = 0.05, power: float = 0.8) -> float | None:
    """The smallest mean paired difference a two-sided test at ``alpha`` detects with probability ``power`` over
    these ``n`` pairs (normal approximation): ``(z_{1-alpha/2} + z_power) * sd / sqrt(n)``; None with fewer than
    :func:`fewest_pairs` (the sign-flip test cannot reach ``alpha`` with so few: none is detectable). For the
    defaults the factor is 1.959964 + 0.841621 = 2.801585."""
    sd = paired_sd(diffs)
    if sd is None or len(diffs) < fewest_pairs(alpha):
        return None
    return _power_z(alpha, power) * sd / math.sqrt(len(diffs))


def answers_needed(
    diffs: Sequence[float], difference: float | None = None, alpha: float = 0.05, power: float = 0.8
) -> int | None:
    """How many paired answers a two-sided test at ``alpha`` needs to detect ``difference`` (default: the observed
    mean difference) with probability ``power``, at the spread these differences show:
    ``ceil(((z_{1-alpha/2} + z_power) * sd / |difference|)^2)``. None with fewer than two pairs or a zero
    difference (no number of answers detects no difference); at least :func:`fewest_pairs` (the normal
    approximation would promise 2 for differences with no spread, where the sign-flip test needs 6 at 0.05)."""
    sd = paired_sd(diffs)
    if sd is None:
        return None
    d = float(np.mean(diffs)) if difference is None else difference
    if d == 0 or not math.isfinite(d):
        return None
    return max(fewest_pairs(alpha), math.ceil((_power_z(alpha, power) * sd / abs(d)) ** 2 - 1e-9))


# -- the rate corrected for the checker's error -------------------------------------------------------------------


def rogan_gladen(raw: float, sensitivity: float, specificity: float) -> float:
    """Prevalence corrected for a test's error (Rogan and Gladen 1978):
    ``(raw + specificity - 1) / (sensitivity + specificity - 1)``, clipped to ``[0, 1]``. Written as
    ``(raw - (1 - sp)) / (se - (1 - sp))`` so a perfect checker (se = sp = 1) returns ``raw`` exactly.
    Raises ``ValueError`` when ``sensitivity + specificity <= 1`` (the checker does not separate the classes)."""
    false_rate = 1 - specificity
    youden = sensitivity - false_rate
    if youden <= 0:
        raise ArgumentError(f"sensitivity + specificity - 1 = {youden:.3f}: the checker does not separate the classes")
    return min(1.0, max(0.0, (raw - false_rate) / youden))


@dataclass(frozen=True)
class Item:
    """One scored or labelled item (a claim or an answer) for :func:`corrected_rate`.

    ``flagged``: the checker says not supported (UNSUPPORTED, CONTRADICTED or a claim it could not decide; for an
    answer, hallucinated). ``truth``: the label says not supported (None: unlabelled). ``cluster``: the answer's
    id (an answer's items are resampled together). ``route``: who decided it ("nli" locally, "judge").
    """

    cluster: Hashable
    flagged: bool
    route: str = "all"
    truth: bool | None = None


@dataclass
class CorrectedRate:
    """The raw rate of flagged items, the checker's measured error, and the corrected rate with its interval.

    ``value`` is None when the labels are too few (``needs`` says how many more of each class) or the checker
    separates the classes too little (``reason``). ``by`` is "route" when each route's sensitivity and
    specificity correct that route's items, "pooled" when one pair corrects all. ``not_rated``: at the answer
    level, the answers left out of the rate by verdict (NO_CLAIMS, ERROR: no answer-level prediction to count,
    neither among the scored items nor among the labelled ones); None at the claim level.
    """

    value: float | None
    lo: float | None
    hi: float | None
    raw: Interval
    sensitivity: Interval
    specificity: Interval
    positives: int  # labelled items that truly are not supported
    negatives: int  # labelled items that truly are supported
    by: str = "pooled"
    needs: dict[str, int] | None = None
    reason: str | None = None
    routes: dict[str, dict[str, Any]] = field(default_factory=dict)
    undefined_resamples: int = 0
    level: float = LEVEL
    not_rated: dict[str, int] | None = None
    # what :func:`corrected_difference` needs to resample this rate beside another: its items and its strata
    scored: list[Item] = field(default_factory=list, repr=False, compare=False)
    labelled: list[Item] = field(default_factory=list, repr=False, compare=False)
    strata: list[str] = field(default_factory=list, repr=False, compare=False)

    def as_json(self, level: str) -> dict[str, Any]:
        """The JSON form: ``{"value", "ci", "raw", "raw_ci", "sensitivity", "specificity", "labels", ...}``."""
        out: dict[str, Any] = {
            "value": self.value,
            "ci": [self.lo, self.hi],
            "raw": self.raw.value,
            "raw_ci": self.raw.ci,
            "sensitivity": self.sensitivity.value,
            "sensitivity_ci": self.sensitivity.ci,
            "specificity": self.specificity.value,
            "specificity_ci": self.specificity.ci,
            "labels": {"level": level, "positives": self.positives, "negatives": self.negatives},
            "n": self.raw.n,
            "by": self.by,
        }
        if self.routes:
            out["routes"] = self.routes
        if self.not_rated is not None:
            out["not_rated"] = dict(self.not_rated)
        if self.needs is not None:
            out["needs"] = self.needs
        if self.reason is not None:
            out["reason"] = self.reason
        return out


def _check_labels(
    pos: int, neg: int, se: float | None, sp: float | None, min_per_class: int, min_youden: float
) -> str | None:
    """Why these labels give no number (None: they do)."""
    if pos < min_per_class or neg < min_per_class:
        return f"too few labels: {pos} truly not supported and {neg} truly supported, {min_per_class} of each needed"
    assert se is not None and sp is not None
    if se + sp - 1 < min_youden:
        return (
            f"the checker barely separates the classes (sensitivity + specificity - 1 = {se + sp - 1:.2f} < "
            f"{min_youden}): a correction would only amplify noise, and more labels will not change that"
        )
    return None


def _rg_array(raw: np.ndarray, se: np.ndarray, sp: np.ndarray) -> np.ndarray:
    """:func:`rogan_gladen` over arrays; NaN where ``se + sp <= 1`` or a rate is undefined (0 of 0)."""
    false_rate = 1 - sp
    youden = se - false_rate
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.clip((raw - false_rate) / youden, 0.0, 1.0)
    return np.where(youden > 0, out, np.nan)


def corrected_rate(
    scored: Sequence[Item],
    labelled: Sequence[Item],
    *,
    resamples: int = RESAMPLES,
    seed: int = 0,
    level: float = LEVEL,
    min_per_class: int = MIN_PER_CLASS,
    min_youden: float = MIN_YOUDEN,
    not_rated: Mapping[str, int] | None = None,
) -> CorrectedRate:
    """The share of ``scored`` items the checker flags, corrected for its error measured on ``labelled`` items.

    Sensitivity = flagged share of the labelled items that truly are not supported; specificity = unflagged
    share of those that truly are supported. Each route ("nli", "judge") gets its own pair when every route among
    the scored items has enough labels (``min_per_class`` of each class and sensitivity + specificity - 1 >=
    ``min_youden``); the corrected rate is then the item-weighted mean of each route's :func:`rogan_gladen`.
    Otherwise one pooled pair corrects all; if the pooled labels fall short too, ``value`` is None, ``needs``
    holds how many more labelled items of each class it takes (``positives``: truly not supported,
    ``negatives``: truly supported) and ``reason`` why.

    The interval: ``resamples`` bootstrap draws over both samples, each correcting as above: a draw resamples the
    scored answers with their items and the labels on them (labels of the scored file are a subsample of its
    items, so one draw moves both), and, independently, the labelled answers that are not among the scored
    ones. A draw whose checker does not
    separate the classes counts against both ends (:func:`percentile_interval`). Labelled items should be a
    random sample within each class: items picked because the checker flagged them bias both rates.

    ``not_rated`` (answer level): the answers the caller left out of ``scored`` and ``labelled`` because they have
    no answer-level prediction (NO_CLAIMS, ERROR), by verdict; carried into the result to be shown beside the rate.
    """
    labelled = [x for x in labelled if x.truth is not None]
    pos = sum(bool(x.truth) for x in labelled)
    neg = len(labelled) - pos
    tp = sum(bool(x.truth) and x.flagged for x in labelled)
    tn = sum(not x.truth and not x.flagged for x in labelled)
    clusters: dict[Hashable, list[bool]] = {}
    for x in scored:
        clusters.setdefault(x.cluster, []).append(x.flagged)
    raw = share(list(clusters.values()), resamples=resamples, seed=seed, level=level)
    se_iv, sp_iv = wilson(tp, pos, level), wilson(tn, neg, level)
    result = CorrectedRate(None, None, None, raw, se_iv, sp_iv, pos, neg, level=level)
    result.not_rated = None if not_rated is None else {k: v for k, v in not_rated.items() if v}
    result.scored, result.labelled = list(scored), labelled
    reason = _check_labels(pos, neg, se_iv.value, sp_iv.value, min_per_class, min_youden)
    if reason is not None or raw.value is None:
        result.needs = {"positives": max(0, min_per_class - pos), "negatives": max(0, min_per_class - neg)}
        result.reason = reason or "no scored item"
        return result

    routes = sorted({x.route for x in scored})
    counts = {r: _route_counts(r, scored, labelled) for r in routes}
    by_route = (
        len(routes) > 1
        and {x.route for x in labelled} <= set(routes)
        and all(
            _check_labels(c["positives"], c["negatives"], c["sensitivity"], c["specificity"], min_per_class, min_youden)
            is None
            for c in counts.values()
        )
    )
    strata = routes if by_route else ["all"]
    result.strata = strata
    main = {c: i for i, c in enumerate(clusters)}
    outside = {c: i for i, c in enumerate(dict.fromkeys(x.cluster for x in labelled if x.cluster not in main))}
    joint, extra = _design(scored, labelled, strata, main, outside)
    total = joint.sum(axis=0)
    draws_sums = resampled_sums(joint, resamples, seed)
    if outside:
        total[2 * len(strata) :] += extra.sum(axis=0)
        draws_sums[:, 2 * len(strata) :] += resampled_sums(extra, resamples, seed + 1)
    point = float(_estimate(total[None, :], len(strata))[0])
    draws = _estimate(draws_sums, len(strata))
    result.value = point
    result.lo, result.hi = percentile_interval(point, draws, level)
    result.undefined_resamples = int(np.isnan(draws).sum())
    result.by = "route" if by_route else "pooled"
    for r, c in counts.items():
        if by_route:
            c["corrected"] = rogan_gladen(c["raw"], c["sensitivity"], c["specificity"])
        result.routes[r] = c
    return result


def _design(
    scored: Sequence[Item],
    labelled: Sequence[Item],
    strata: Sequence[str],
    main: dict[Hashable, int],
    outside: dict[Hashable, int],
) -> tuple[np.ndarray, np.ndarray]:
    """Per-answer sums for the bootstrap of a corrected rate with ``k = len(strata)`` strata (``["all"]``: pooled,
    else one route each): ``(len(main), 6k)`` for the answers ``main`` indexes (scored items and flagged items of
    each stratum, then labelled positives, true positives, negatives and true negatives of each stratum) and
    ``(len(outside), 4k)``, the label columns alone, for labelled answers ``outside`` indexes. A labelled item of an
    answer in ``main`` rides with it (labels are a subsample of the scored items: one resample draws both)."""
    k = len(strata)
    col = {s: i for i, s in enumerate(strata)}
    joint = np.zeros((len(main), 6 * k))
    extra = np.zeros((len(outside), 4 * k))
    # np.add.at, not a loop over items: the sums are counts (exact in float64), so the order does not matter
    rows = np.fromiter((main[x.cluster] for x in scored), np.intp, len(scored))
    stratum = np.fromiter((col.get(x.route, 0) for x in scored), np.intp, len(scored))
    flagged = np.fromiter((bool(x.flagged) for x in scored), np.float64, len(scored))
    np.add.at(joint, (rows, stratum), 1.0)
    np.add.at(joint, (rows, k + stratum), flagged)
    for table, index, offset, keep in (
        (joint, main, 2 * k, [x for x in labelled if x.cluster in main]),
        (extra, outside, 0, [x for x in labelled if x.cluster not in main]),
    ):
        rows = np.fromiter((index[x.cluster] for x in keep), np.intp, len(keep))
        stratum = np.fromiter((col.get(x.route, 0) for x in keep), np.intp, len(keep))
        flagged = np.fromiter((bool(x.flagged) for x in keep), np.float64, len(keep))
        truth = np.fromiter((bool(x.truth) for x in keep), bool, len(keep))
        # positives: count, flagged; negatives: count, not flagged
        np.add.at(table, (rows, offset + np.where(truth, 0, 2 * k) + stratum), 1.0)
        np.add.at(table, (rows, offset + np.where(truth, k, 3 * k) + stratum), np.where(truth, flagged, 1.0 - flagged))
    return joint, extra


def _estimate(sums: np.ndarray, k: int) -> np.ndarray:
    """The corrected rate of each row of :func:`_design`'s column sums: pooled (``k == 1``), exactly the corrected
    raw rate (a perfect checker gives the raw rate, bit for bit); by route, the item-weighted mean of each route's
    correction. NaN where a checker does not separate the classes or a rate is 0 of 0."""
    n_items, n_flag, lab = sums[:, :k], sums[:, k : 2 * k], sums[:, 2 * k :]
    with np.errstate(divide="ignore", invalid="ignore"):
        se = lab[:, k : 2 * k] / lab[:, :k]
        sp = lab[:, 3 * k :] / lab[:, 2 * k : 3 * k]
        corrected = _rg_array(n_flag / n_items, se, sp)
    if k == 1:
        return corrected[:, 0]
    corrected = np.where(n_items > 0, corrected, 0.0)  # an empty stratum weighs nothing
    return (corrected * n_items).sum(axis=1) / n_items.sum(axis=1)


def corrected_difference(
    a: CorrectedRate, b: CorrectedRate, *, resamples: int = RESAMPLES, seed: int = 0, level: float = LEVEL
) -> dict[str, Any]:
    """The difference B - A of two corrected rates of the same answers (two runs compared), and of their raw rates,
    each with a bootstrap interval: a draw resamples the answers once for both runs, each answer with both runs'
    items and labels on it, and corrects each run as its own rate did (same strata). Labels on the same answers
    (``paired``: the same labelled answers in both runs) then measure both checkers on the same draw, and what the
    two runs share cancels in the difference; labelled answers that neither run scored are resampled apart, once
    for both. A draw where either checker does not separate the classes counts against both ends.

    Returns ``{"value", "ci", "raw", "raw_ci", "paired", "n", "method"}``; ``value`` and ``ci`` are None when either
    rate has no number (too few labels)."""
    paired = {x.cluster for x in a.labelled} == {x.cluster for x in b.labelled}
    main = {c: i for i, c in enumerate(dict.fromkeys(x.cluster for x in (*a.scored, *b.scored)))}
    labels = (x.cluster for x in (*a.labelled, *b.labelled) if x.cluster not in main)
    outside = {c: i for i, c in enumerate(dict.fromkeys(labels))}
    out: dict[str, Any] = {
        "value": None,
        "ci": [None, None],
        "raw": None,
        "raw_ci": [None, None],
        "paired": paired,
        "n": len(main),
        "method": "paired bootstrap over answers",
    }
    if a.raw.value is None or b.raw.value is None:
        return out
    # raw rates: share of flagged items among each run's items, resampled by answer together
    ra, rb = (_design(r.scored, [], ["all"], main, {})[0][:, :2] for r in (a, b))
    corrected = a.value is not None and b.value is not None
    designs = [_design(r.scored, r.labelled, r.strata, main, outside) for r in (a, b)] if corrected else []
    # one draw of the answers for both: the raw columns beside the corrected ones (the same counts the two
    # bootstraps drew apart from the same seed; every column holds counts, so each sum is exact either way)
    sums = resampled_sums(np.hstack([ra, rb, *(d[0] for d in designs)]), resamples, seed)
    raw_sums, sums = sums[:, :4], sums[:, 4:]
    with np.errstate(divide="ignore", invalid="ignore"):
        raw_draws = raw_sums[:, 3] / raw_sums[:, 2] - raw_sums[:, 1] / raw_sums[:, 0]
    out["raw"] = b.raw.value - a.raw.value
    lo, hi = percentile_interval(out["raw"], raw_draws, level, undefined_lo=-1.0, undefined_hi=1.0)
    out["raw_ci"] = [lo, hi]
    if a.value is None or b.value is None:
        return out
    widths = [d[0].shape[1] for d in designs]
    parts = [sums[:, : widths[0]], sums[:, widths[0] :]]
    if outside:
        extra = resampled_sums(np.hstack([designs[0][1], designs[1][1]]), resamples, seed + 1)
        cut = designs[0][1].shape[1]
        for part, add, k in zip(parts, (extra[:, :cut], extra[:, cut:]), (len(a.strata), len(b.strata)), strict=True):
            part[:, 2 * k :] += add
    draws = _estimate(parts[1], len(b.strata)) - _estimate(parts[0], len(a.strata))
    out["value"] = b.value - a.value
    lo, hi = percentile_interval(out["value"], draws, level, undefined_lo=-1.0, undefined_hi=1.0)
    out["ci"] = [lo, hi]
    return out


def _route_counts(route: str, scored: Sequence[Item], labelled: Sequence[Item]) -> dict[str, Any]:
    """One route's scored items, raw rate, labelled items of each class, sensitivity and specificity."""
    mine = [x.flagged for x in scored if x.route == route]
    n, flagged = len(mine), sum(mine)
    sub = [x for x in labelled if x.route == route]
    pos = sum(bool(x.truth) for x in sub)
    tp = sum(bool(x.truth) and x.flagged for x in sub)
    tn = sum(not x.truth and not x.flagged for x in sub)
    return {
        "n": n,
        "raw": flagged / n,
        "positives": pos,
        "negatives": len(sub) - pos,
        "sensitivity": tp / pos if pos else None,
        "specificity": tn / (len(sub) - pos) if len(sub) > pos else None,
    }
