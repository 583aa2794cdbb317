"""review/stats.py: every estimator against worked examples, coverage of the 95% intervals by simulation, and the
corrected rate's invariants as properties."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from groundjudge.review.stats import (
    Item,
    answers_needed,
    bootstrap_mean,
    clustered_mean,
    corrected_difference,
    corrected_rate,
    minimum_detectable_difference,
    percentile_interval,
    rogan_gladen,
    share,
    wilson,
    z_value,
)

# -- worked examples -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("k", "n", "lo", "hi"),
    [
        # Newcombe (1998), "Two-sided confidence intervals for the single proportion", Table I, method 3 (Wilson)
        (81, 263, 0.2553, 0.3662),
        (15, 148, 0.0624, 0.1605),
        (0, 20, 0.0, 0.1611),
        (1, 29, 0.0061, 0.1718),
    ],
)
def test_wilson_matches_newcombes_table(k: int, n: int, lo: float, hi: float) -> None:
    iv = wilson(k, n)
    assert iv.value == pytest.approx(k / n)
    assert iv.lo == pytest.approx(lo, abs=5e-5) and iv.hi == pytest.approx(hi, abs=5e-5)


def test_wilson_by_the_formula_and_the_edges() -> None:
    # 8 of 10: p = 0.8, z = 1.959964; centre (0.8 + z²/20) / (1 + z²/10), half z·sqrt(0.016 + z²/400) / (1 + z²/10)
    z = 1.959963984540054
    denom = 1 + z * z / 10
    centre, half = (0.8 + z * z / 20) / denom, z * math.sqrt(0.8 * 0.2 / 10 + z * z / 400) / denom
    iv = wilson(8, 10)
    assert (iv.lo, iv.hi) == pytest.approx((centre - half, centre + half))
    assert (iv.lo, iv.hi) == pytest.approx((0.4902, 0.9433), abs=5e-5)
    assert wilson(10, 10).hi == 1.0 and wilson(0, 10).lo == 0.0
    empty = wilson(0, 0)
    assert empty.value is None and empty.ci == [0.0, 1.0] and empty.n == 0
    assert z_value(0.95) == pytest.approx(z) and z_value(0.9) == pytest.approx(1.644854, abs=1e-6)
    with pytest.raises(ValueError):
        wilson(3, 2)
    with pytest.raises(ValueError):
        z_value(1.0)


def test_bootstrap_mean_worked_examples() -> None:
    # a constant sample has no spread to resample
    assert bootstrap_mean([0.7] * 30).ci == [pytest.approx(0.7), pytest.approx(0.7)]
    # two values 0 and 1: a resample's mean is 0, 0.5 or 1 with chances 1/4, 1/2, 1/4, so the 2.5% and 97.5%
    # percentiles are 0 and 1
    iv = bootstrap_mean([0.0, 1.0])
    assert iv.value == 0.5 and iv.ci == [0.0, 1.0]
    # 400 values, half ones: the bootstrap interval is the normal one, 0.5 ± 1.96·sqrt(0.25/400) = 0.5 ± 0.049
    iv = bootstrap_mean([0.0, 1.0] * 200)
    assert iv.lo == pytest.approx(0.451, abs=0.006) and iv.hi == pytest.approx(0.549, abs=0.006)
    # seeded: the same seed the same interval
    values = list(np.random.default_rng(3).random(50))
    assert bootstrap_mean(values, seed=4) == bootstrap_mean(values, seed=4)
    assert bootstrap_mean(values, seed=4) != bootstrap_mean(values, seed=5)
    assert bootstrap_mean([]).value is None
    with pytest.raises(ValueError, match="finite"):
        bootstrap_mean([0.1, float("nan")])
    with pytest.raises(ValueError, match="finite"):
        clustered_mean([[0.1], [float("inf"), 0.2]])


def test_clustered_bootstrap_keeps_an_answers_claims_together() -> None:
    values = list(np.random.default_rng(0).random(40))
    # one claim per answer: the clustered bootstrap is the plain one, draw for draw
    plain, clustered = bootstrap_mean(values, seed=2), clustered_mean([[v] for v in values], seed=2)
    assert (clustered.value, clustered.lo, clustered.hi) == pytest.approx((plain.value, plain.lo, plain.hi))
    # ten identical claims per answer: the claims add no information, so the interval is that of the 40 answers'
    # values, where a claim-level interval (400 "independent" claims) would be about sqrt(10) times narrower
    grouped = clustered_mean([[v] * 10 for v in values], seed=2)
    assert grouped.value == pytest.approx(plain.value) and grouped.n == 400
    assert (grouped.lo, grouped.hi) == pytest.approx((plain.lo, plain.hi))
    naive = bootstrap_mean([v for v in values for _ in range(10)], seed=2)
    width = (grouped.hi - grouped.lo) / (naive.hi - naive.lo)
    assert 2.5 < width < 4.0
    # the statistic is a ratio: all claims' sum over all claims' count, answers of any length; empty answers
    # carry no claim
    iv = clustered_mean([[1.0, 1.0, 1.0], [0.0], []])
    assert iv.value == pytest.approx(0.75) and iv.n == 4
    assert clustered_mean([[], []]).value is None


def test_share_picks_wilson_for_independent_items_and_the_clustered_bootstrap_otherwise() -> None:
    assert share([[True], [False], [True], []]) == wilson(2, 3)
    iv = share([[True, True], [False]])
    assert iv.method == "clustered bootstrap" and iv.value == pytest.approx(2 / 3)


def test_percentile_interval_holds_the_point_and_counts_undefined_draws_against_both_ends() -> None:
    draws = np.linspace(0.2, 0.4, 1001)
    assert percentile_interval(0.1, draws) == pytest.approx((0.1, 0.395))  # widened to hold the point
    with_nan = np.concatenate([np.full(100, 0.3), np.full(10, np.nan)])  # 9% undefined: the ends go to 0 and 1
    assert percentile_interval(0.3, with_nan) == (0.0, 1.0)


def test_paired_power_worked_example() -> None:
    # 20 paired differences, ten 1s and ten 0s: sd (n - 1) = sqrt(20 · 0.25 / 19) = 0.512989;
    # z_0.975 + z_0.8 = 1.959964 + 0.841621 = 2.801585
    diffs = [1.0] * 10 + [0.0] * 10
    # MDD = 2.801585 · 0.512989 / sqrt(20) = 0.321364
    assert minimum_detectable_difference(diffs) == pytest.approx(0.321364, abs=1e-6)
    # to detect 0.1: (2.801585 · 0.512989 / 0.1)² = 206.55, so 207 answers
    assert answers_needed(diffs, 0.1) == 207
    # the observed difference (0.5) by default: (2.801585 · 0.512989 / 0.5)² = 8.26, so 9
    assert answers_needed(diffs) == 9
    assert minimum_detectable_difference([0.3]) is None and answers_needed([0.3]) is None
    assert answers_needed([0.1, -0.1]) is None  # no observed difference: no number of answers detects it
    # a stricter test and more power need more answers
    assert answers_needed(diffs, 0.1, alpha=0.01, power=0.9) > 207


def test_answers_needed_gives_the_promised_power() -> None:
    # with n = answers_needed pairs of sd 1 and true mean 0.25, a two-sided z test at 0.05 rejects ~80% of the time
    rng = np.random.default_rng(7)
    sd, d = 1.0, 0.25
    n = answers_needed(list(rng.normal(0, sd, 5000)), d)
    assert n is not None and 115 < n < 140  # (2.801585 / 0.25)² = 125.6 at sd 1
    trials = rng.normal(d, sd, size=(2000, n))
    z = trials.mean(axis=1) / (trials.std(axis=1, ddof=1) / math.sqrt(n))
    assert 0.77 < float(np.mean(np.abs(z) > 1.959964)) < 0.83


def test_rogan_gladen_worked_examples() -> None:
    # (0.3 + 0.8 - 1) / (0.9 + 0.8 - 1) = 0.1 / 0.7
    assert rogan_gladen(0.3, 0.9, 0.8) == pytest.approx(1 / 7)
    assert rogan_gladen(0.1, 0.9, 0.8) == 0.0  # (0.1 - 0.2) / 0.7 < 0: clipped
    assert rogan_gladen(0.95, 0.9, 0.95) == 1.0  # (0.95 - 0.05) / 0.85 > 1: clipped
    assert rogan_gladen(0.1, 1.0, 1.0) == 0.1  # a perfect checker: the raw rate, exactly
    with pytest.raises(ValueError, match="does not separate"):
        rogan_gladen(0.3, 0.5, 0.5)


def _items(cluster: str, flagged: int, total: int, route: str = "nli") -> list[Item]:
    return [Item(f"{cluster}{i}", i < flagged, route) for i in range(total)]


def _labelled(prefix: str, pos_flagged: int, pos: int, neg_clean: int, neg: int, route: str = "nli") -> list[Item]:
    """``pos`` items truly not supported (``pos_flagged`` of them flagged), ``neg`` truly supported
    (``neg_clean`` of them not flagged)."""
    return [Item(f"{prefix}p{i}", i < pos_flagged, route, True) for i in range(pos)] + [
        Item(f"{prefix}n{i}", i >= neg_clean, route, False) for i in range(neg)
    ]


def test_corrected_rate_pooled_worked_example() -> None:
    # sensitivity 20/25 = 0.8, specificity 45/50 = 0.9, raw 60/200 = 0.3: (0.3 - 0.1) / (0.8 - 0.1) = 0.285714
    c = corrected_rate(_items("a", 60, 200), _labelled("l", 20, 25, 45, 50))
    assert c.raw.value == pytest.approx(0.3) and c.raw.ci == wilson(60, 200).ci
    assert c.sensitivity.value == pytest.approx(0.8) and c.specificity.value == pytest.approx(0.9)
    assert c.value == pytest.approx(0.2 / 0.7) and c.by == "pooled" and c.needs is None
    assert c.lo is not None and c.hi is not None and c.lo < c.value < c.hi
    # the interval carries the labels' uncertainty too: wider than the raw rate's
    assert c.hi - c.lo > c.raw.ci[1] - c.raw.ci[0]  # type: ignore[operator]
    j = c.as_json("claim")
    assert j["value"] == c.value and j["ci"] == [c.lo, c.hi] and j["raw"] == pytest.approx(0.3)
    assert j["labels"] == {"level": "claim", "positives": 25, "negatives": 50} and "needs" not in j


def test_corrected_rate_per_route_worked_example() -> None:
    # nli: sensitivity 16/20, specificity 19/20, raw 20/100: (0.2 - 0.05) / (0.8 - 0.05) = 0.2
    # judge: sensitivity 18/20, specificity 16/20, raw 50/100: (0.5 - 0.2) / (0.9 - 0.2) = 0.428571
    # weighted by items: (100 · 0.2 + 100 · 0.428571) / 200 = 0.314286
    # (pooled it would be sensitivity 34/40, specificity 35/40, raw 0.35: 0.310345)
    scored = _items("n", 20, 100, "nli") + _items("j", 50, 100, "judge")
    labelled = _labelled("n", 16, 20, 19, 20, "nli") + _labelled("j", 18, 20, 16, 20, "judge")
    c = corrected_rate(scored, labelled)
    assert c.by == "route" and c.value == pytest.approx((0.2 + 0.3 / 0.7) / 2)
    assert c.routes["nli"]["corrected"] == pytest.approx(0.2) and c.routes["judge"]["corrected"] == pytest.approx(
        0.3 / 0.7
    )
    # one route short of labels (19 judge positives): one pooled pair corrects all, sensitivity 34/39,
    # specificity 35/40, raw 70/200: (0.35 - 0.125) / (34/39 - 0.125) = 0.301288
    c = corrected_rate(scored, _labelled("n", 16, 20, 19, 20, "nli") + _labelled("j", 18, 19, 16, 20, "judge"))
    assert c.by == "pooled" and c.value == pytest.approx(0.225 / (34 / 39 - 0.125))
    assert "corrected" not in c.routes["judge"] and c.routes["judge"]["positives"] == 19


def test_too_few_labels_say_how_many_more() -> None:
    c = corrected_rate(_items("a", 60, 200), _labelled("l", 8, 10, 45, 50))
    assert c.value is None and c.lo is None and c.needs == {"positives": 10, "negatives": 0}
    assert c.raw.value == pytest.approx(0.3) and "too few labels" in (c.reason or "")
    j = c.as_json("answer")
    assert j["value"] is None and j["needs"] == {"positives": 10, "negatives": 0}
    assert corrected_rate(_items("a", 60, 200), []).needs == {"positives": 20, "negatives": 20}
    # enough labels, but a checker that barely separates the classes: sensitivity 0.6, specificity 0.6
    weak = corrected_rate(_items("a", 60, 200), _labelled("l", 15, 25, 15, 25))
    assert weak.value is None and weak.needs == {"positives": 0, "negatives": 0}
    assert "barely separates" in (weak.reason or "")


def _run(truth: list[bool], flagged: set[int], labelled: set[int], route: str = "all") -> tuple[list[Item], list[Item]]:
    """One run over answers 0..n-1 (one claim each): its scored items and the labelled ones among them."""
    items = [Item(i, i in flagged, route, t) for i, t in enumerate(truth)]
    return [Item(x.cluster, x.flagged, route) for x in items], [x for x in items if x.cluster in labelled]


def test_corrected_difference_worked_example() -> None:
    # 200 answers, 0-59 truly not supported; both runs' labels on answers 0-24 (positives) and 100-149 (negatives)
    # A flags 0-19 (20/25 labelled positives), 25-59, 100-104 (5/50 labelled negatives): raw 60/200 = 0.3,
    #   sensitivity 0.8, specificity 0.9: (0.3 - 0.1) / (0.8 - 0.1) = 0.285714
    # B flags 0-22 (23/25), 25-59, 100-101 (2/50) and 150-159 (unlabelled): raw 70/200 = 0.35,
    #   sensitivity 0.92, specificity 0.96: (0.35 - 0.04) / (0.92 - 0.04) = 0.352273
    # B - A: corrected 0.066558, raw 0.05
    truth = [i < 60 for i in range(200)]
    labelled = set(range(25)) | set(range(100, 150))
    a = corrected_rate(*_run(truth, set(range(20)) | set(range(25, 60)) | set(range(100, 105)), labelled))
    b = corrected_rate(*_run(truth, set(range(23)) | set(range(25, 60)) | {100, 101} | set(range(150, 160)), labelled))
    assert a.value == pytest.approx(0.2 / 0.7) and b.value == pytest.approx(0.31 / 0.88)
    d = corrected_difference(a, b)
    assert d["value"] == pytest.approx(0.31 / 0.88 - 0.2 / 0.7) and d["raw"] == pytest.approx(0.05)
    assert d["paired"] is True and d["n"] == 200
    lo, hi = d["ci"]
    assert lo < d["value"] < hi and d["raw_ci"][0] < 0.05 < d["raw_ci"][1]
    # paired: the shared labels and answers cancel, so the difference is surer than either rate
    assert hi - lo < min(a.hi - a.lo, b.hi - b.lo)  # type: ignore[operator]
    # the same with B's labels on other answers: not paired
    other = set(range(25, 50)) | set(range(150, 200))
    c = corrected_rate(*_run(truth, set(range(23)) | set(range(25, 60)) | {100, 101} | set(range(150, 160)), other))
    assert corrected_difference(a, c)["paired"] is False


def test_corrected_difference_without_a_number_keeps_the_raw_one() -> None:
    truth = [i < 60 for i in range(200)]
    a = corrected_rate(*_run(truth, set(range(50)), set(range(25)) | set(range(100, 150))))
    b = corrected_rate(*_run(truth, set(range(70)), set(range(5))))  # 5 labels: no number
    d = corrected_difference(a, b)
    assert b.value is None and d["value"] is None and d["ci"] == [None, None]
    assert d["raw"] == pytest.approx(0.1) and d["raw_ci"][0] < 0.1 < d["raw_ci"][1]


# -- coverage by simulation ----------------------------------------------------------------------------------------

RUNS = 1000


def _coverage(hits: list[bool]) -> float:
    assert len(hits) == RUNS
    return sum(hits) / RUNS


def test_wilson_covers_95_percent() -> None:
    rng = np.random.default_rng(11)
    ps, ns = rng.uniform(0.05, 0.95, RUNS), rng.integers(20, 300, RUNS)
    ks = rng.binomial(ns, ps)
    hits = []
    for p, n, k in zip(ps, ns, ks, strict=True):
        iv = wilson(int(k), int(n))
        hits.append(iv.lo <= p <= iv.hi)  # type: ignore[operator]
    assert 0.93 <= _coverage(hits) <= 0.97


def test_bootstrap_mean_covers_95_percent() -> None:
    # 1,000 runs of 100 answers' scores (a skewed Beta(2, 5), mean 2/7); 1,000 resamples each (not 2,000) to keep the
    # test at a few seconds
    rng = np.random.default_rng(12)
    hits = []
    for run in range(RUNS):
        iv = bootstrap_mean(list(rng.beta(2, 5, 100)), resamples=1000, seed=run)
        hits.append(iv.lo <= 2 / 7 <= iv.hi)  # type: ignore[operator]
    assert 0.93 <= _coverage(hits) <= 0.97


def test_clustered_bootstrap_covers_95_percent_where_claim_level_wilson_does_not() -> None:
    # 1,000 runs of 150 answers with 1 to 8 claims; an answer's claims share its own hallucination rate (Beta(2, 6),
    # mean 0.25), so they are not independent. 500 resamples each (not 2,000) to keep the test at a few seconds.
    rng = np.random.default_rng(13)
    clustered, naive = [], []
    for run in range(RUNS):
        rates, sizes = rng.beta(2, 6, 150), rng.integers(1, 9, 150)
        flagged = rng.binomial(sizes, rates)
        groups = [[1.0] * int(k) + [0.0] * int(m - k) for k, m in zip(flagged, sizes, strict=True)]
        iv = clustered_mean(groups, resamples=500, seed=run)
        clustered.append(iv.lo <= 0.25 <= iv.hi)  # type: ignore[operator]
        w = wilson(int(flagged.sum()), int(sizes.sum()))
        naive.append(w.lo <= 0.25 <= w.hi)  # type: ignore[operator]
    assert 0.93 <= _coverage(clustered) <= 0.97
    assert _coverage(naive) < 0.91  # counting each claim as independent is overconfident


def test_corrected_rate_covers_the_true_prevalence() -> None:
    # 1,000 runs: 400 answers, truly hallucinated with p = 0.3; a checker with sensitivity 0.85 and specificity 0.9
    # flags them; 120 labelled answers measure its error: in even runs a random subsample of the 400 (as gold rows
    # or reviews of the scored file are), in odd runs a separate labelled sample. The raw rate estimates
    # 0.3 · 0.85 + 0.7 · 0.1 = 0.325, not 0.3. 300 resamples each (not 2,000) to keep the test at a few seconds.
    rng = np.random.default_rng(14)
    p, se, sp = 0.3, 0.85, 0.9

    def answers(n: int, first: int) -> list[Item]:
        truth = rng.random(n) < p
        flagged = np.where(truth, rng.random(n) < se, rng.random(n) >= sp)
        return [Item(first + i, bool(f), truth=bool(t)) for i, (f, t) in enumerate(zip(flagged, truth, strict=True))]

    corrected, raw = [], []
    for run in range(RUNS):
        items = answers(400, 0)
        labelled = [items[i] for i in rng.choice(400, 120, replace=False)] if run % 2 == 0 else answers(120, 400)
        c = corrected_rate([Item(x.cluster, x.flagged) for x in items], labelled, resamples=300, seed=run)
        assert c.value is not None
        corrected.append(c.lo <= p <= c.hi)  # type: ignore[operator]
        raw.append(c.raw.lo <= p <= c.raw.hi)  # type: ignore[operator]
    assert 0.93 <= _coverage(corrected) <= 0.97
    # each half on its own: resampling the labels apart from the answers they belong to covers 98.8% in the first
    assert 0.925 <= sum(corrected[0::2]) / 500 <= 0.975 and 0.925 <= sum(corrected[1::2]) / 500 <= 0.975
    assert _coverage(raw) < 0.8


def test_corrected_difference_covers_the_true_difference() -> None:
    # 1,000 comparisons of two runs over the same 400 answers (one claim each). Even runs: two checkers (sensitivity
    # 0.85 / specificity 0.9 and 0.75 / 0.95) score the SAME answers (p = 0.3 not supported), labelled on the same
    # 200 answers (a label file): the true difference is 0, while the raw rates differ by 0.26 - 0.325 = -0.065.
    # Odd runs: B's answers are another prompt's (p = 0.2, each answer's truth tied to A's), each run's 200 labels on
    # its own random answers: the true difference is -0.1 (raw: 0.19 - 0.325 = -0.135). 300 resamples each.
    rng = np.random.default_rng(15)
    n, hits, raw_hits = 400, [], []
    for run in range(RUNS):
        truth_a = rng.random(n) < 0.3
        truth_b = truth_a if run % 2 == 0 else np.where(truth_a, rng.random(n) < 2 / 3, False)
        flags_a = np.where(truth_a, rng.random(n) < 0.85, rng.random(n) >= 0.9)
        flags_b = np.where(truth_b, rng.random(n) < 0.75, rng.random(n) >= 0.95)
        lab_a = set(rng.choice(n, 200, replace=False).tolist())
        lab_b = lab_a if run % 2 == 0 else set(rng.choice(n, 200, replace=False).tolist())
        rates = []
        for truth, flags, lab in ((truth_a, flags_a, lab_a), (truth_b, flags_b, lab_b)):
            flagged = set(np.flatnonzero(flags).tolist())
            # each rate's own interval is not used here: one resample keeps the test at seconds
            rates.append(corrected_rate(*_run(truth.tolist(), flagged, lab), resamples=1, seed=run))
        assert rates[0].value is not None and rates[1].value is not None
        d = corrected_difference(*rates, resamples=300, seed=run)
        true = 0.0 if run % 2 == 0 else -0.1
        hits.append(d["ci"][0] <= true <= d["ci"][1])
        raw_hits.append(d["raw_ci"][0] <= true <= d["raw_ci"][1])
    assert 0.93 <= _coverage(hits) <= 0.97
    assert 0.925 <= sum(hits[0::2]) / 500 <= 0.975 and 0.925 <= sum(hits[1::2]) / 500 <= 0.975
    assert _coverage(raw_hits) < 0.8  # the raw difference carries the checkers' different errors


# -- properties ----------------------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None, database=None)
@given(
    raw=st.floats(0, 1),
    se=st.floats(0, 1),
    sp=st.floats(0, 1),
)
@example(raw=0.5, se=0.1, sp=0.9)  # se + sp - 1 is 0.0 in floats, se - (1 - sp) 2.8e-17: ask as rogan_gladen does
def test_rogan_gladen_is_a_rate(raw: float, se: float, sp: float) -> None:
    if se - (1 - sp) <= 0:  # sensitivity + specificity - 1, computed as rogan_gladen computes it
        with pytest.raises(ValueError):
            rogan_gladen(raw, se, sp)
        return
    assert 0.0 <= rogan_gladen(raw, se, sp) <= 1.0
    assert rogan_gladen(raw, 1.0, 1.0) == raw


@settings(max_examples=60, deadline=None, database=None)
@given(
    scored=st.lists(st.tuples(st.integers(0, 12), st.booleans(), st.sampled_from(["nli", "judge"])), max_size=60),
    labelled=st.lists(
        st.tuples(st.integers(0, 30), st.booleans(), st.booleans(), st.sampled_from(["nli", "judge"])), max_size=60
    ),
    perfect=st.booleans(),
    seed=st.integers(0, 3),
)
def test_corrected_rate_is_a_rate_holding_its_point(
    scored: list[tuple[int, bool, str]], labelled: list[tuple[int, bool, bool, str]], perfect: bool, seed: int
) -> None:
    items = [Item(c, f, r) for c, f, r in scored]
    # a label on cluster 0-12 rides with that scored answer; one on 13-30 is an answer outside the scored ones
    labels = [Item(c, t if perfect else f, r, t) for c, f, t, r in labelled]
    c = corrected_rate(items, labels, resamples=200, seed=seed, min_per_class=2, min_youden=0.05)
    for iv in (c.raw, c.sensitivity, c.specificity):
        if iv.value is not None:
            assert 0.0 <= iv.lo <= iv.value <= iv.hi <= 1.0  # type: ignore[operator]
    if c.value is None:
        assert c.needs is not None and c.reason
        return
    assert c.lo is not None and c.hi is not None
    assert 0.0 <= c.lo <= c.value <= c.hi <= 1.0
    if perfect:  # sensitivity = specificity = 1: nothing to correct
        assert c.value == pytest.approx(c.raw.value, abs=1e-12)
        if c.by == "pooled":
            assert c.value == c.raw.value


def _design_by_loop(scored, labelled, strata, main, outside):  # type: ignore[no-untyped-def]
    """The definition of the bootstrap's per-answer sums, item by item (stats._design before it used np.add.at)."""
    k = len(strata)
    col = {s: i for i, s in enumerate(strata)}
    joint, extra = np.zeros((len(main), 6 * k)), np.zeros((len(outside), 4 * k))
    for x in scored:
        s = col.get(x.route, 0)
        joint[main[x.cluster], s] += 1
        joint[main[x.cluster], k + s] += x.flagged
    for x in labelled:
        s = col.get(x.route, 0)
        i = main.get(x.cluster)
        row = joint[i, 2 * k :] if i is not None else extra[outside[x.cluster]]
        if x.truth:
            row[s] += 1
            row[k + s] += x.flagged
        else:
            row[2 * k + s] += 1
            row[3 * k + s] += not x.flagged
    return joint, extra


ITEM = st.tuples(st.integers(0, 6), st.booleans(), st.sampled_from(["nli", "judge", "other"]), st.booleans())


@settings(max_examples=150, deadline=None, database=None)
@given(scored=st.lists(ITEM, max_size=30), labelled=st.lists(ITEM, max_size=30), by_route=st.booleans())
def test_the_bootstraps_sums_are_those_of_each_item_added_in_turn(
    scored: list[tuple[int, bool, str, bool]], labelled: list[tuple[int, bool, str, bool]], by_route: bool
) -> None:
    from groundjudge.stats import Item, _design

    strata = ["nli", "judge"] if by_route else ["all"]
    s_items = [Item(f"a{c}", f, r) for c, f, r, _ in scored]
    l_items = [Item(f"a{c}" if c < 4 else f"b{c}", f, r, t) for c, f, r, t in labelled]
    main = {c: i for i, c in enumerate(dict.fromkeys(x.cluster for x in s_items))}
    outside = {c: i for i, c in enumerate(dict.fromkeys(x.cluster for x in l_items if x.cluster not in main))}
    got, want = (
        _design(s_items, l_items, strata, main, outside),
        _design_by_loop(s_items, l_items, strata, main, outside),
    )
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


# -- the paired permutation test and the difference's interval (review/compare.py) ---------------------------------


def _sign_flip_oracle(diffs: list[float]) -> float:
    """Every sign pattern, one at a time: the exact two-sided sign-flip p-value."""
    observed = abs(sum(diffs))
    if observed == 0:
        return 1.0
    k = len(diffs)
    hits = sum(
        abs(sum(d if (mask >> i) & 1 else -d for i, d in enumerate(diffs))) >= observed - 1e-12 for mask in range(2**k)
    )
    return hits / 2**k


DIFFS = st.lists(st.sampled_from([0.0, 0.5, -0.5, 1.0, -0.25, 0.125]) | st.floats(-1, 1, width=32), max_size=11)


@settings(deadline=None, max_examples=150, database=None)
@given(DIFFS)
@example([1.0, 1.0, 1.0])  # only all-plus and all-minus reach the observed sum
@example([0.5, -0.5])  # observed sum 0
def test_permutation_p_is_the_exact_sign_flip_test_when_every_pattern_can_be_counted(diffs: list[float]) -> None:
    from groundjudge.stats import permutation_p

    assert permutation_p(diffs) == pytest.approx(_sign_flip_oracle(diffs), abs=1e-12)


def test_permutation_p_samples_patterns_close_to_the_exact_value_past_n() -> None:
    """16 differences: 65,536 patterns, more than the 10,000 drawn; the drawn p-value is near the exact one."""
    from groundjudge.stats import permutation_p

    rng = np.random.default_rng(7)
    samples = [list(rng.normal(0.15, 0.5, 16)) for _ in range(5)]
    assert permutation_p(samples[0], n=2**16) == pytest.approx(_sign_flip_oracle(samples[0]), abs=1e-12)
    reseeded = []
    for diffs in samples:
        exact = permutation_p(diffs, n=2**16)  # n reaches every pattern: the exact branch
        drawn = permutation_p(diffs)
        assert abs(drawn - exact) < 0.02 and 0 < drawn <= 1
        assert permutation_p(diffs) == drawn  # the same seed, the same patterns
        reseeded.append(permutation_p(diffs, seed=1) != drawn)
    assert any(reseeded)  # another seed draws other patterns (two draws may still hit the same count)


@settings(deadline=None, max_examples=60, database=None)
@given(st.lists(st.floats(-1, 1, width=32), min_size=2, max_size=40))
def test_the_difference_interval_holds_the_mean_difference(diffs: list[float]) -> None:
    from groundjudge.review.compare import bootstrap_ci

    lo, hi = bootstrap_ci(diffs)
    mean = sum(diffs) / len(diffs)
    assert lo <= mean + 1e-12 and mean - 1e-12 <= hi and min(diffs) - 1e-12 <= lo and hi <= max(diffs) + 1e-12


def _smallest_p(n: int) -> float:
    """The smallest p-value the exact sign-flip test gives over ``n`` pairs: every difference alike (the oracle
    above counts the patterns; past 12 pairs, 2 of 2**n)."""
    return _sign_flip_oracle([1.0] * n) if n <= 12 else 2.0 ** (1 - n)


@settings(deadline=None, max_examples=150, database=None)
@given(
    st.lists(st.sampled_from([0.1, 0.2, -0.1, 0.0]) | st.floats(-1, 1, width=32), min_size=2, max_size=9),
    st.sampled_from([0.01, 0.05, 0.1, 0.2]),
)
@example([0.1, 0.1, 0.1], 0.05)  # no spread: the normal approximation promised 2 answers and an MDD of 0
@example([0.1, 0.2], 0.05)  # two pairs: p is at least 0.5, yet it promised 2 answers
def test_the_power_figures_only_promise_what_the_sign_flip_test_can_reach(diffs: list[float], alpha: float) -> None:
    """compare's MDD and answers_needed speak of the test compare runs (:func:`permutation_p`): an MDD only for
    pairs with which that test can reach ``alpha`` at all, and never fewer answers than it needs to."""
    mdd = minimum_detectable_difference(diffs, alpha=alpha)
    assert mdd is None or _smallest_p(len(diffs)) < alpha
    needed = answers_needed(diffs, alpha=alpha)
    assert needed is None or _smallest_p(needed) < alpha


def test_compare_says_three_alike_differences_need_more_answers_than_three() -> None:
    from groundjudge.stats import permutation_p

    diffs = [0.1, 0.1, 0.1]
    assert permutation_p(diffs) == 0.25  # 2 of 8 sign patterns: not significant at 0.05
    assert minimum_detectable_difference(diffs) is None  # 3 pairs detect nothing at 0.05
    assert answers_needed(diffs) == 6  # 2 / 2**6 = 0.031 < 0.05; 2 / 2**5 = 0.0625 is not


def _kappa_oracle(gold: list[str], pred: list[str]) -> float | None:
    """Cohen's kappa in exact fractions; None where chance agreement is total (no kappa exists)."""
    from fractions import Fraction

    n = len(gold)
    if not n:
        return None
    observed = Fraction(sum(g == p for g, p in zip(gold, pred, strict=True)), n)
    expected = sum(Fraction(gold.count(x) * pred.count(x), n * n) for x in set(gold) | set(pred))
    return None if expected == 1 else float((observed - expected) / (1 - expected))


@settings(deadline=None, max_examples=80, database=None)
@given(st.lists(st.tuples(st.sampled_from("SN"), st.sampled_from("SN")), max_size=12))
@example([("S", "S")] * 5)  # one label only: kappa was printed as 0.000 [0.000, 0.000]
def test_kappa_is_none_where_chance_agreement_is_total_and_else_lies_in_its_interval(
    rows: list[tuple[str, str]],
) -> None:
    from groundjudge.review.metrics import agreement_intervals, summary

    gold, pred = [g for g, _ in rows], [p for _, p in rows]
    kappa = summary(gold, pred, ["S", "N"])["kappa"]
    expected = _kappa_oracle(gold, pred)
    assert kappa == (None if expected is None else pytest.approx(expected, abs=1e-12))
    if not rows:
        return
    lo, hi = agreement_intervals(gold, pred, ["S", "N"], list(range(len(rows))))["kappa_ci"]
    assert (lo, hi) == (None, None) if kappa is None else lo <= kappa <= hi
