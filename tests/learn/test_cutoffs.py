"""Local cut-offs hold at the margin (issue "Honest again"): a claim the local stage decides is more likely its
verdict than not, and a cut-off never sinks to where only sure misses lie.

Scores here are on a 1/1000 grid, so the thresholds' rounding to 4 places changes nothing.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groundjudge.errors import InputError
from groundjudge.learn.calibrate import CutoffRule, fit_profile, fit_thresholds
from groundjudge.models import ClaimNLI, LocalThresholds
from groundjudge.stages.route import decide_locally

MIN = 10


def _nli(e: float, c: float, head: bool) -> ClaimNLI:
    return ClaimNLI(entailment=e, contradiction=c, passages_scored=1, supported=e if head else None)


def well_separated(seed: int = 0) -> tuple[list[float], list[float], list[bool]]:
    """80 claims: 40 SUPPORTED at 0.9-1.0, 40 others at 0.0-0.05 (the issue's set)."""
    rng = random.Random(seed)
    ent = [rng.randint(900, 1000) / 1000 for _ in range(40)] + [rng.randint(0, 50) / 1000 for _ in range(40)]
    con = [rng.randint(0, 50) / 1000 for _ in range(80)]
    return ent, con, [True] * 40 + [False] * 40


def test_a_well_separated_set_escalates_a_claim_far_below_every_supported_one() -> None:
    ent, con, sup = well_separated()
    labels = ["SUPPORTED" if s else "UNSUPPORTED" for s in sup]
    for head in (False, True):
        fit = fit_thresholds(ent, con, sup, target=0.9, min_decided=MIN, head=head)
        assert fit.t_support is not None and fit.t_support >= min(e for e, s in zip(ent, sup, strict=True) if s), (
            head,
            fit,
        )
        new = _nli(0.005, 0.001, head)
        assert decide_locally(new, fit.t_support, fit.t_contradict, fit.t_unsupported) != "SUPPORTED", (head, fit)
        for rule in (CutoffRule(target=0.9), CutoffRule(target=0.9, expected=True)):
            t = fit_profile([_nli(e, c, head) for e, c in zip(ent, con, strict=True)], labels, rule)["cascade"]
            assert t.t_support is not None and t.t_support >= 0.9, (head, rule, t)
            assert decide_locally(new, t.t_support, t.t_contradict, t.t_unsupported) != "SUPPORTED", (head, rule, t)


def test_a_heads_probability_below_one_half_is_never_supported_locally() -> None:
    """Whatever thresholds a head carries (fitted before the margin rule: 0.0019), 0.005 is not SUPPORTED."""
    low, high = _nli(0.005, 0.0, True), _nli(0.7, 0.9, True)
    assert decide_locally(low, 0.0019, None, None) is None
    assert decide_locally(high, 0.9, 0.5, 0.8) is None  # 0.7: neither CONTRADICTED nor UNSUPPORTED
    assert decide_locally(_nli(0.3, 0.0, True), 0.2, None, 0.1) is None
    assert decide_locally(_nli(0.6, 0.0, True), 0.55, None, None) == "SUPPORTED"


def test_an_overlapping_set_holds_precision_at_the_margin() -> None:
    """Scores rising with the chance of support: the average reaches 90% far below where the claims at the cut
    are mostly supported; the cut stops where the nearest claims are still right more often than not."""
    rng = random.Random(3)
    ent, sup = [], []
    for _ in range(400):
        e = rng.randint(0, 1000) / 1000
        ent.append(e)
        sup.append(rng.random() < e**3)
    con = [0.0] * len(ent)
    for head in (False, True):
        fit = fit_thresholds(ent, con, sup, target=0.7, min_decided=MIN, head=head)
        check_margin(ent, con, sup, fit.t_support, fit.t_contradict, fit.t_unsupported, head)
        assert fit.t_support is not None


def decided_regions(
    ent: list[float], con: list[float], sup: list[bool], t: LocalThresholds, head: bool
) -> dict[str, list[tuple[float, bool]]]:
    """For each local verdict: (distance-ordering score, right) of the claims the thresholds decide so."""
    out: dict[str, list[tuple[float, bool]]] = {"SUPPORTED": [], "CONTRADICTED": [], "UNSUPPORTED": []}
    for e, c, s in zip(ent, con, sup, strict=True):
        v = decide_locally(_nli(e, c, head), t.t_support, t.t_contradict, t.t_unsupported)
        if v == "SUPPORTED":
            out[v].append((e, s))  # nearest the cut: lowest entailment
        elif v == "CONTRADICTED":
            out[v].append((c, not s))
        elif v == "UNSUPPORTED":
            out[v].append((-e, not s))
    return out


def check_margin(
    ent: list[float],
    con: list[float],
    sup: list[bool],
    t_s: float | None,
    t_c: float | None,
    t_u: float | None,
    head: bool,
) -> None:
    t = LocalThresholds(t_support=t_s, t_contradict=t_c, t_unsupported=t_u)
    regions = decided_regions(ent, con, sup, t, head)
    for verdict, claims in regions.items():
        if not claims:
            continue
        nearest = sorted(claims, key=lambda x: (x[0], x[1]))[:MIN]  # ties broken against the cut
        assert sum(r for _, r in nearest) / len(nearest) >= 0.5, (verdict, t, nearest)
    if head:
        assert t.t_support is None or t.t_support >= 0.5, t
        assert t.t_unsupported is None or t.t_unsupported <= 0.5, t
    if regions["SUPPORTED"] and regions["UNSUPPORTED"]:
        assert min(e for e, _ in regions["SUPPORTED"]) > max(-e for e, _ in regions["UNSUPPORTED"]), t


grid = st.integers(0, 1000).map(lambda k: k / 1000)


@st.composite
def labelled(draw: st.DrawFn) -> tuple[list[float], list[float], list[bool], list[str]]:
    """Claims whose entailment rises with the chance of support by a drawn amount (from none to clean)."""
    n = draw(st.integers(10, 120))
    sharpness = draw(st.sampled_from([0.0, 0.5, 1.0, 3.0, 10.0, 100.0]))
    ent, con, sup, labels = [], [], [], []
    for _ in range(n):
        e = draw(grid)
        u = draw(st.integers(0, 999)) / 1000
        p = 0.5 + (e - 0.5) * min(1.0, sharpness)
        if sharpness > 1:
            p = 1.0 if e > 0.5 else 0.0
            p = p if draw(st.integers(0, int(sharpness))) else 1 - p  # flip 1 in sharpness+1
        s = u < p
        c = draw(grid)
        ent.append(e)
        con.append(c)
        sup.append(s)
        labels.append("SUPPORTED" if s else ("CONTRADICTED" if c > 0.5 else "UNSUPPORTED"))
    return ent, con, sup, labels


targets = st.sampled_from([0.5, 0.7, 0.9, 0.95])


@settings(deadline=None, max_examples=100, database=None)
@given(labelled(), targets, st.booleans())
def test_fit_thresholds_holds_at_the_margin(data: tuple, target: float, head: bool) -> None:  # type: ignore[type-arg]
    ent, con, sup, _ = data
    if len({bool(x) for x in sup}) < 2:  # one kind only: no precision can be measured, so nothing is fitted
        with pytest.raises(InputError, match="of both kinds"):
            fit_thresholds(ent, con, sup, target=target, min_decided=MIN, head=head)
        return
    fit = fit_thresholds(ent, con, sup, target=target, min_decided=MIN, head=head)
    check_margin(ent, con, sup, fit.t_support, fit.t_contradict, fit.t_unsupported, head)


@settings(deadline=None, max_examples=100, database=None)
@given(labelled(), targets, st.booleans(), st.booleans())
def test_fit_profile_holds_at_the_margin(data: tuple, target: float, head: bool, expected: bool) -> None:  # type: ignore[type-arg]
    ent, con, sup, labels = data
    rule = CutoffRule(target=target, contradiction_target=0.5, expected=expected, min_decided=MIN)
    t = fit_profile([_nli(e, c, head) for e, c in zip(ent, con, strict=True)], labels, rule)["cascade"]
    check_margin(ent, con, sup, t.t_support, t.t_contradict, t.t_unsupported, head)
