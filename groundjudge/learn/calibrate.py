"""Fitting the cascade's local thresholds on labelled claims.

Each threshold is the loosest one whose local verdicts still reach the target precision (SUPPORTED vs not, as the
benchmarks score claims) on at least ``min_decided`` claims:

- t_support: the lowest entailment at which "SUPPORTED" is right at least ``target`` of the time;
- t_contradict: the lowest contradiction at which "not SUPPORTED" is;
- t_unsupported: the highest entailment at or below which "not SUPPORTED" is.

Everything in between goes to the judge; the escalation rate that follows is reported.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from groundjudge.checker.evidence import score_claims
from groundjudge.checker.head import (
    MIN_CLAIMS,
    MIN_CLASS,
    Sources,
    VerdictHead,
    claim_features,
    claim_folds,
    claim_key,
    fit_head,
)
from groundjudge.errors import ArgumentError, InputError
from groundjudge.models import ClaimNLI, LocalThresholds
from groundjudge.review.metrics import balanced_accuracies, balanced_accuracy
from groundjudge.review.plots import ReliabilityBin
from groundjudge.stages.route import HEAD_MARGIN, decide_locally
from groundjudge.stats import wilson, z_value


def check_targets(target: float, min_decided: int = 1, contradiction_target: float = 0.0) -> None:
    """The one rule for what a fit can aim at: a precision target in (0, 1] (a cut-off for precision 0 or 1.5 means
    nothing; NaN was written into a config as invalid JSON), a contradiction target in [0, 1] (0: no demand beyond
    the precision target), and a cut-off resting on at least one claim.

    Raises:
        ArgumentError: a target outside its range, or ``min_decided`` below 1.
    """
    if not 0 < target <= 1:  # NaN fails this too
        raise ArgumentError(f"the precision target must be in (0, 1] (e.g. 0.9), not {target}")
    if not 0 <= contradiction_target <= 1:
        raise ArgumentError(f"the contradiction target must be in [0, 1] (e.g. 0.7), not {contradiction_target}")
    if min_decided < 1:
        raise ArgumentError(f"the fewest claims a cut-off rests on must be at least 1, not {min_decided}")


@dataclass
class Calibration:
    t_support: float | None  # None: no entailment level reaches the target; SUPPORTED is never decided locally
    t_contradict: float | None  # None: no contradiction level does
    t_unsupported: float | None
    escalation_rate: float
    local_precision: float | None
    decided: int
    n: int
    target: float

    def as_dict(self) -> dict[str, float | int | None]:
        return asdict(self)

    def config_values(self) -> dict[str, float | str | None]:
        """The thresholds as a config file takes them ("never" where no level reached the target)."""
        return {
            "t_support": "never" if self.t_support is None else self.t_support,
            "t_contradict": "never" if self.t_contradict is None else self.t_contradict,
            "t_unsupported": self.t_unsupported,
        }

    @property
    def local(self) -> LocalThresholds:
        return LocalThresholds(
            t_support=self.t_support, t_contradict=self.t_contradict, t_unsupported=self.t_unsupported
        )


MARGIN = 0.5  # the claims a cut-off decides last must be right at least this often: more likely than not


def lowest_threshold(
    scores: Sequence[float],
    good: Sequence[bool],
    target: float,
    min_decided: int,
    margin: float = MARGIN,
    floor: float | None = None,
    above: float | None = None,
) -> float | None:
    """Lowest threshold t with precision(score >= t) >= target over >= min_decided items, held at the margin.

    The average is not enough (an easy set reaches it however many sure misses are added at the bottom), so t also:

    - holds at the margin: the ``min_decided`` items nearest the cut (ties broken against it) are right at least
      ``margin`` of the time;
    - is where the evidence ends: the score of a right item, never one of a group of wrong items only below all
      right ones (those would add nothing but misses, and on new claims decide scores no right item ever had);
    - is at least ``floor`` and above ``above`` when given (a head's 0.5).
    """
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], not good[i]))  # in a tie, wrong ones nearest the cut
    band = max(min_decided, 1)
    hits = [0]
    for i in order:
        hits.append(hits[-1] + bool(good[i]))
    best, group_good = None, False
    for rank, i in enumerate(order, start=1):
        if rank == 1 or scores[order[rank - 2]] != scores[i]:
            group_good = bool(good[i])  # right ones come first in a tie
        last_of_tie = rank == len(order) or scores[order[rank]] != scores[i]
        if not (last_of_tie and group_good and rank >= min_decided and rank >= band):
            continue
        if (floor is not None and scores[i] < floor) or (above is not None and scores[i] <= above):
            continue
        if hits[rank] / rank >= target and (hits[rank] - hits[rank - band]) / band >= margin:
            best = scores[i]
    return best


@dataclass(frozen=True)
class _Cuts:
    t_support: float | None
    t_contradict: float | None
    t_unsupported: float | None


def _cascade_cuts(
    support: Sequence[float],
    contradiction: Sequence[float],
    supported: Sequence[bool],
    target: float,
    min_decided: int,
    unsupported: bool = True,
    head: bool = False,
    expected: tuple[float | None, float | None] | None = None,
    real: Sequence[bool] | None = None,
    contradiction_target: float = 0.0,
    line: float = HEAD_MARGIN,
) -> _Cuts:
    """The cascade's cut-offs, each fitted on exactly the claims :func:`decide_locally` lets it decide.

    In the order decide_locally applies the rules, each on the claims the earlier rules left over: SUPPORTED (without
    a head only where entailment >= contradiction; with a head only above ``line``), then CONTRADICTED and UNSUPPORTED
    (with a head only below ``line``).
    Every cut-off reaches ``target`` (with ``expected``, the (t_support, t_unsupported) a head's probabilities expect
    to reach it are the loosest allowed instead) and holds at the margin (:func:`lowest_threshold`). ``real``: which
    claims are real contradictions; CONTRADICTED then also needs ``contradiction_target`` of them.
    """
    n = len(supported)
    notsup = [not x for x in supported]
    above = line if head else None
    eligible = [i for i in range(n) if head or support[i] >= contradiction[i]]
    sub = [support[i] for i in eligible], [supported[i] for i in eligible]
    if expected is None:
        t_s = lowest_threshold(*sub, target, min_decided, above=above)
    else:
        t_s = None if expected[0] is None else lowest_threshold(*sub, 0.0, min_decided, floor=expected[0], above=above)
    can = set(eligible)
    rest = [
        i
        for i in range(n)
        if not (t_s is not None and support[i] >= t_s and i in can) and not (head and support[i] >= line)
    ]
    con = [contradiction[i] for i in rest]
    t_c = lowest_threshold(con, [notsup[i] for i in rest], target, min_decided)
    if real is not None and t_c is not None:
        t_real = lowest_threshold(con, [real[i] for i in rest], contradiction_target, 5, margin=0.0)
        both = None if t_real is None else max(t_c, t_real)
        # moved inwards: hold "not SUPPORTED" at the margin again
        t_c = None if both is None else lowest_threshold(con, [notsup[i] for i in rest], 0.0, min_decided, floor=both)
    # UNSUPPORTED only below every SUPPORTED score (a claim at t_support that contradiction kept from SUPPORTED
    # is left to the judge)
    left = [i for i in rest if (t_c is None or contradiction[i] < t_c) and (t_s is None or support[i] < t_s)]
    t_u = None
    if unsupported and left:
        neg = [-support[i] for i in left]
        good = [notsup[i] for i in left]
        below = None if above is None else -above
        if expected is None:
            cut = lowest_threshold(neg, good, target, min_decided, above=below)
        else:
            cut = (
                None
                if expected[1] is None
                else lowest_threshold(neg, good, 0.0, min_decided, floor=-expected[1], above=below)
            )
        t_u = None if cut is None else -cut
    return _Cuts(t_s, t_c, t_u)


def _tidy(cut: float | None, scores: Sequence[float], at_least: bool = True) -> float | None:
    """A cut-off as it is stored: the shortest decimal (four places or more) that decides every one of ``scores``
    as ``cut`` does (``at_least``: a score >= the cut-off is past it, else a score <= it). Rounded to the nearest
    four places, a cut-off moved past the claims beside it: the stored thresholds decided other claims than the
    ones their printed numbers were counted on (a claim at 0.840602 under a t_unsupported of 0.8406019 fell out
    at 0.8406)."""
    if cut is None:
        return None
    near = [x for x in scores if abs(x - cut) < 1e-3]  # only these can fall on the other side
    for places in range(4, 16):
        # the nearest decimal of that many places, then the next one inwards if it is past the cut-off (floor(cut *
        # 10**places) was off by one where the product fell short of a whole number: 0.7968 was stored as 0.7967)
        t = round(cut, places)
        if t > cut if at_least else t < cut:
            t = round(t - 10.0**-places if at_least else t + 10.0**-places, places)
        if all((x >= t) == (x >= cut) if at_least else (x <= t) == (x <= cut) for x in near):
            return float(t)
    return cut


def fit_thresholds(
    entailment: Sequence[float],
    contradiction: Sequence[float],
    supported: Sequence[bool],
    target: float = 0.95,
    min_decided: int = 10,
    unsupported: bool = True,
    head: bool = False,
) -> Calibration:
    """Thresholds from NLI scores (``head``: a verdict head's probabilities) and gold (SUPPORTED or not) of the same
    claims (see :func:`_cascade_cuts`).

    Raises:
        InputError: the labels are all of one kind (all SUPPORTED, or none): a threshold's precision cannot be
            measured without both, and nothing unmeasured is stored.
        ArgumentError: a ``target`` outside (0, 1] or a ``min_decided`` below 1 (:func:`check_targets`).
    """
    check_targets(target, min_decided)
    n = len(supported)
    kinds = sum(bool(s) for s in supported)
    if n and kinds in (0, n):
        which = "SUPPORTED" if kinds else "not SUPPORTED (UNSUPPORTED or CONTRADICTED)"
        raise InputError(
            f"all {n} labelled claims are {which}: a threshold's precision cannot be measured without claims of "
            "both kinds (every threshold would look perfect); label claims of both kinds"
        )
    cuts = _cascade_cuts(entailment, contradiction, supported, target, min_decided, unsupported, head)
    # counted with the cut-offs as stored (each a short decimal that decides these claims as the exact one does)
    t_support = _tidy(cuts.t_support, entailment)
    t_contradict = _tidy(cuts.t_contradict, contradiction)
    t_u = _tidy(cuts.t_unsupported, entailment, at_least=False)
    decided = correct = 0
    for e, c, s in zip(entailment, contradiction, supported, strict=True):
        nli = ClaimNLI(entailment=e, contradiction=c, passages_scored=1, supported=e if head else None)
        local = decide_locally(nli, t_support, t_contradict, t_u)
        if local is not None:
            decided += 1
            correct += (local == "SUPPORTED") == s
    return Calibration(
        t_support=t_support,
        t_contradict=t_contradict,
        t_unsupported=t_u,
        escalation_rate=1 - decided / n if n else 0.0,
        local_precision=correct / decided if decided else None,
        decided=decided,
        n=n,
        target=target,
    )


def reliability_bins(predicted: Sequence[float], supported: Sequence[bool], n_bins: int = 10) -> list[ReliabilityBin]:
    """Equal-width bins of the predicted probability over [0, 1]: count, mean prediction, observed share SUPPORTED.

    A prediction of exactly 1.0 falls in the last bin; non-finite or out-of-range predictions are left out.
    """
    if n_bins < 1:
        raise ArgumentError("n_bins must be at least 1")
    if len(predicted) != len(supported):
        raise ArgumentError("predicted and supported differ in length")
    sums = [0.0] * n_bins
    hits = [0] * n_bins
    counts = [0] * n_bins
    for p, s in zip(predicted, supported, strict=True):
        if not (isinstance(p, (int, float)) and 0.0 <= p <= 1.0):  # also False for NaN
            continue
        k = min(n_bins - 1, int(p * n_bins))
        counts[k] += 1
        sums[k] += p
        hits[k] += bool(s)
    return [
        ReliabilityBin(
            lo=k / n_bins,
            hi=(k + 1) / n_bins,
            count=counts[k],
            mean_predicted=sums[k] / counts[k] if counts[k] else None,
            observed=hits[k] / counts[k] if counts[k] else None,
        )
        for k in range(n_bins)
    ]


def expected_calibration_error(bins: Sequence[ReliabilityBin]) -> float | None:
    """Count-weighted mean gap between mean prediction and observed share (None without data)."""
    n = sum(b.count for b in bins)
    if not n:
        return None
    return sum(b.count * abs((b.mean_predicted or 0.0) - (b.observed or 0.0)) for b in bins if b.count) / n


# -- both modes' thresholds, measured honestly; the verdict head --------------------------------------------------


def _nli_prediction(nli: ClaimNLI, t: LocalThresholds) -> str:
    if nli.error is not None:
        return "ERROR"
    return decide_locally(nli, t.t_support, t.t_contradict, None, t.line) or "UNSUPPORTED"


def measure(nli: Sequence[ClaimNLI], labels: Sequence[str], profile: dict[str, LocalThresholds]) -> dict[str, Any]:
    """NLI-only balanced accuracy (SUPPORTED vs not), the cascade's escalation rate, local precision and local
    contradiction precision/recall, with the given thresholds."""
    gold = ["SUPPORTED" if g == "SUPPORTED" else "NOT" for g in labels]
    t_nli = profile["nli"]
    pred = ["SUPPORTED" if _nli_prediction(x, t_nli) == "SUPPORTED" else "NOT" for x in nli]
    t = profile["cascade"]
    local = [
        decide_locally(x, t.t_support, t.t_contradict, t.t_unsupported, t.line) if x.error is None else None
        for x in nli
    ]
    decided = [(g, x) for g, x in zip(labels, local, strict=True) if x is not None]
    correct = sum((x == "SUPPORTED") == (g == "SUPPORTED") for g, x in decided)
    called = [g for g, x in decided if x == "CONTRADICTED"]
    n_contra = sum(g == "CONTRADICTED" for g in labels)
    hits = sum(g == "CONTRADICTED" for g in called)
    return {
        "n": len(labels),
        "nli_balanced_accuracy": round(100 * balanced_accuracy(gold, pred, ["SUPPORTED", "NOT"]), 2),
        "escalation_rate": round(1 - len(decided) / len(labels), 4) if labels else None,
        "local_precision": round(correct / len(decided), 4) if decided else None,
        "local_decided": len(decided),
        "local_right": correct,
        "contradiction_precision": round(hits / len(called), 4) if called else None,
        "contradiction_recall": round(hits / n_contra, 4) if n_contra else None,
        "contradictions_called": len(called),
    }


@dataclass(frozen=True)
class MixCalibration:
    """A verdict head's probability p moved to a labelled set's mix: P(SUPPORTED) = sigmoid(a + b * logit p).

    The head is fitted with both classes weighing the same; at the labelled set's share s of SUPPORTED claims its
    odds are p / (1 - p) times s / (1 - s) (:meth:`shift`: a = log(s / (1 - s)), b = 1). :meth:`fit` also fits the
    slope on the labelled claims' out-of-fold probabilities (Platt scaling), held near the shift.
    """

    a: float
    b: float = 1.0

    @classmethod
    def shift(cls, supported_share: float) -> MixCalibration:
        share = min(max(supported_share, 1e-6), 1 - 1e-6)
        return cls(math.log(share / (1 - share)))

    @classmethod
    def fit(cls, probabilities: Sequence[float], supported: Sequence[bool], prior: float = 10.0) -> MixCalibration:
        """Platt scaling of the head's probabilities on labelled claims, penalised towards :meth:`shift` as if by
        ``prior`` claims (a few labelled claims, or claims the head separates perfectly, stay near it). A slope at or
        below 0.1 (the probabilities say nothing of the labels) falls back to the shift."""
        y = np.asarray(supported, dtype=np.float64)
        base = cls.shift(float(y.mean()) if len(y) else 0.5)
        if not len(y):
            return base
        z = _logits(probabilities)
        x = np.c_[np.ones_like(z), z]
        w0 = np.array([base.a, 1.0])

        def loss(w: np.ndarray) -> float:
            m = x @ w
            return float(np.sum(np.logaddexp(0, m) - y * m) + prior / 2 * np.sum((w - w0) ** 2))

        w = w0.copy()
        for _ in range(100):  # Newton's method, each step halved until the (convex) loss falls
            q = 1 / (1 + np.exp(-np.clip(x @ w, -50, 50)))
            grad = x.T @ (q - y) + prior * (w - w0)
            hess = (x * (q * (1 - q))[:, None]).T @ x + prior * np.eye(2)
            step = np.linalg.solve(hess, grad)
            now = loss(w)
            while loss(w - step) > now and np.abs(step).max() > 1e-12:
                step /= 2
            w -= step
            if np.abs(step).max() < 1e-10:
                break
        if not np.isfinite(w).all() or w[1] <= 0.1:
            return base
        return cls(float(w[0]), float(w[1]))

    def __call__(self, probabilities: Sequence[float] | np.ndarray) -> np.ndarray:
        """P(SUPPORTED) at the labelled mix."""
        return 1 / (1 + np.exp(-np.clip(self.a + self.b * _logits(probabilities), -50, 50)))

    @property
    def line(self) -> float:
        """The head's probability at which this says 0.5."""
        return 1 / (1 + math.exp(max(-50.0, min(50.0, self.a / self.b))))


def _logits(probabilities: Sequence[float] | np.ndarray) -> np.ndarray:
    p = np.clip(np.asarray(probabilities, dtype=np.float64), 1e-9, 1 - 1e-9)
    return np.asarray(np.log(p / (1 - p)))


def expected_cutoffs(
    probabilities: Sequence[float],
    supported_share: float,
    target: float,
    min_decided: int = 10,
    line: float | None = None,
    mix: MixCalibration | None = None,
) -> tuple[float | None, float | None]:
    """(t_support, t_unsupported) where the verdict head's own probabilities say the local verdicts are ``target``
    precise: the loosest cut-offs at which the mean probability of being right, over the claims they decide, reaches
    the target.

    The head is fitted with both classes weighing the same, so its probabilities are first moved to the labelled
    set's mix (``mix``; default :meth:`MixCalibration.shift`: odds times pos/neg). Counting labels instead
    (:func:`fit_thresholds`) picks the loosest cut-off at which a noisy running precision last touches the target,
    and on new rows lands 1-2 points under it (cross-validated over claim-disjoint folds of the dev train halves:
    88.4-89.0% for a 90% target, against 90.2-90.7% this way).

    Each cut-off stays on its side of ``line`` (default: where the moved probability is 0.5): SUPPORTED only above
    it, UNSUPPORTED only below it, so every claim a cut-off decides is more likely its verdict than not at the
    labelled mix.
    """
    p = np.clip(np.asarray(probabilities, dtype=np.float64), 1e-9, 1 - 1e-9)
    mix = MixCalibration.shift(supported_share) if mix is None else mix
    q = mix(p)  # P(SUPPORTED) at the labelled mix

    band = max(min_decided, 1)

    def loosest(order: np.ndarray, right: np.ndarray, side: np.ndarray) -> float | None:
        count = np.arange(1, len(order) + 1)
        sums = np.cumsum(right[order])
        precision = sums / count
        # held at the margin: the min_decided claims nearest the cut are expected right more often than not
        nearest = (sums - np.concatenate([np.zeros(band), sums[:-band]])[: len(order)]) / band
        at = p[order]
        last_of_tie = np.r_[at[:-1] != at[1:], True]  # a cut-off decides every claim at its level
        ok = np.flatnonzero(
            (precision >= target) & (count >= min_decided) & (nearest >= MARGIN) & side[order] & last_of_tie
        )
        return float(at[ok.max()]) if ok.size else None

    # per class at the labelled mix: SUPPORTED above the line, not SUPPORTED below it
    line = mix.line if line is None else line
    t_s = loosest(np.argsort(-p, kind="stable"), q, p > line)
    rest = np.flatnonzero(p < t_s) if t_s is not None else np.arange(len(p))
    t_u = loosest(rest[np.argsort(p[rest], kind="stable")], 1 - q, p < line) if rest.size else None
    return (
        None if t_s is None else round(t_s, 4),
        None if t_u is None else round(t_u - 1e-4 if t_s is not None and t_u >= t_s else t_u, 4),
    )


@dataclass(frozen=True)
class CutoffRule:
    """How :func:`fit_profile` fits both modes' thresholds."""

    target: float = 0.9  # precision of the cascade's local verdicts
    contradiction_target: float = 0.7  # share of local CONTRADICTED calls that must be real contradictions
    expected: bool = False  # a verdict head's probabilities: cut where they expect the target (expected_cutoffs)
    min_decided: int = 10  # fewest claims a cascade cut-off may rest on
    unsupported: bool = True  # fit t_unsupported (else UNSUPPORTED is never decided locally)
    # how a verdict head's probabilities are read at the labelled mix (MixCalibration), for the expected precision
    # and the cascade's line (where they say 0.5); the nli mode's line is the head's own 0.5. "fitted": Platt
    # scaling on the labelled claims; "shift": moved to their share of SUPPORTED; "before": moved to the share, the
    # cascade's line at the head's own 0.5 and the nli mode's cut-off fitted for balanced accuracy (the rules
    # before issue 33). benchmarks/tune.py --lines compares them
    lines: str = "fitted"

    def __post_init__(self) -> None:
        check_targets(self.target, self.min_decided, self.contradiction_target)


def fit_profile(
    nli: Sequence[ClaimNLI], labels: Sequence[str], rule: CutoffRule = CutoffRule()
) -> dict[str, LocalThresholds]:
    """Thresholds for both modes from held-out claims.

    cascade: the cut-offs of :func:`fit_thresholds` at the rule's target (with ``rule.expected``, for a verdict
    head's probabilities, SUPPORTED and UNSUPPORTED no looser than :func:`expected_cutoffs`), each held at the
    margin on the labels; CONTRADICTED additionally needs the contradiction target as a contradiction (not only as
    "not supported"), else it is never called locally. A verdict head's cascade verdicts also stay on their side of
    its line, where its probability read at the labelled mix is 0.5 (``rule.lines``; carried as
    ``LocalThresholds.line``). nli: a head's own 0.5 (its balanced-accuracy line by construction), else the cut-off
    with the best balanced accuracy; and the contradiction cut-off of the real contradictions.
    """
    ok = [(x, g) for x, g in zip(nli, labels, strict=True) if x.error is None]
    ent = [x.support for x, _ in ok]
    con = [x.contradiction for x, _ in ok]
    sup = [g == "SUPPORTED" for _, g in ok]
    head = any(x.supported is not None for x, _ in ok)
    if rule.lines not in ("fitted", "shift", "before"):
        raise ArgumentError(f"lines must be fitted, shift or before, not {rule.lines!r}")
    share = sum(sup) / len(sup) if ok else 0.5
    mix = MixCalibration.fit(ent, sup) if head and ok and rule.lines == "fitted" else MixCalibration.shift(share)
    line = mix.line if head and rule.lines != "before" else HEAD_MARGIN
    expected = None
    if rule.expected and ok:
        expected = expected_cutoffs(ent, share, rule.target, rule.min_decided, line, mix)
    cuts = _cascade_cuts(
        ent,
        con,
        sup,
        rule.target,
        rule.min_decided,
        rule.unsupported,
        head,
        expected,
        real=[g == "CONTRADICTED" for _, g in ok],  # CONTRADICTED must also be a real contradiction often enough
        contradiction_target=rule.contradiction_target,
        line=line,
    )
    t_s, both, t_u = cuts.t_support, cuts.t_contradict, cuts.t_unsupported
    # the nli mode's contradiction cut-off: a real contradiction often enough among the claims not called SUPPORTED
    rest = [i for i in range(len(ok)) if t_s is None or not (ent[i] >= t_s and (head or ent[i] >= con[i]))]
    t_contra = lowest_threshold(
        [con[i] for i in rest], [ok[i][1] == "CONTRADICTED" for i in rest], rule.contradiction_target, 5, margin=0.0
    )
    cascade = LocalThresholds(
        t_support=_tidy(t_s, ent),
        t_contradict=_tidy(both, con),
        t_unsupported=_tidy(t_u, ent, at_least=False),
        line=line if head and rule.lines != "before" else None,
    )
    # nli mode: a head's own 0.5 is the balanced-accuracy line by construction (both classes weigh the same in its
    # fit); a cut-off fitted on the labelled claims is for raw scores, which have no such line
    best_t = HEAD_MARGIN if head and rule.lines != "before" else balanced_cut(ent, sup)
    nli_mode = LocalThresholds(t_support=max(1e-4, min(1.0, best_t)), t_contradict=t_contra)
    return {"nli": nli_mode, "cascade": cascade}


def balanced_cut(scores: Sequence[float], supported: Sequence[bool]) -> float:
    """The cut-off with the best balanced accuracy (SUPPORTED at or above it), the middle of the best range."""
    cands = sorted({round(e, 4) for e in scores} | {x / 20 for x in range(1, 20)})
    values = np.asarray(scores, dtype=np.float64)
    if np.isnan(values).any():  # a NaN is below no cut-off: counted one candidate at a time
        gold = ["SUPPORTED" if s else "NOT" for s in supported]
        bas = [
            balanced_accuracy(gold, ["SUPPORTED" if e >= c else "NOT" for e in scores], ["SUPPORTED", "NOT"])
            for c in cands
        ]
    else:  # every candidate's confusion matrix at once (counts from sorted scores), the same balanced accuracies
        sup = np.asarray(supported, dtype=bool)
        if sup.shape != values.shape:
            raise ArgumentError("gold and pred differ in length")
        pos, neg = np.sort(values[sup]), np.sort(values[~sup])
        at = np.asarray(cands, dtype=np.float64)
        pos_in = len(pos) - np.searchsorted(pos, at, side="left")  # SUPPORTED claims at or above each cut-off
        neg_in = len(neg) - np.searchsorted(neg, at, side="left")
        m = np.stack([pos_in, len(pos) - pos_in, neg_in, len(neg) - neg_in], axis=-1).reshape(-1, 2, 2)
        bas = [float(x) for x in balanced_accuracies(m)]
    ties = [c for c, ba in zip(cands, bas, strict=True) if ba >= max(bas) - 1e-9]
    return ties[len(ties) // 2]  # the middle of the best range, not its permissive end


# cuts of the labelled claims into halves that the numbers to expect are pooled over; their spread makes the interval
# (benchmarks/tune.py --sizes measures how often it holds the precision reached on new rows)
CROSSFIT_REPEATS = 10


Fitter = Callable[[Sequence[ClaimNLI], Sequence[str]], dict[str, LocalThresholds]]
"""Thresholds of both modes (``{"cascade": ..., "nli": ...}``) fitted on scored claims and their labels."""


def crossfit_measure_scores(
    nli: Sequence[ClaimNLI],
    labels: Sequence[str],
    groups: Sequence[str],
    rule: CutoffRule = CutoffRule(),
    seed: int = 0,
    repeats: int = CROSSFIT_REPEATS,
    fit: Fitter | None = None,
) -> dict[str, Any]:
    """:func:`measure` with thresholds that never saw the rows they are measured on: the claims are cut in two
    halves by ``groups`` (claim text), thresholds fitted on each half are measured on the other, and the two are
    pooled (rates weighted by size); ``repeats`` such cuts, each seeded, pooled alike. These are the numbers to
    expect of thresholds on new rows; ``local_precision_ci`` is where their local precision should land there
    (:func:`pooled_measure`). ``fit``: how thresholds are fitted (default :func:`fit_profile` with ``rule``). A cut
    drawn again (few claim texts have few ways to be halved: two have one) is used once: ``cuts`` counts distinct
    cuts, and the spread is over them, not over copies."""
    cuts, seen = [], set()
    for r in range(max(1, repeats)):
        fold = claim_folds(groups, 2, seed + 1 + r)
        halves = [[i for i, f in enumerate(fold) if f == side] for side in (0, 1)]
        key = frozenset(frozenset(half) for half in halves)  # a cut and its mirror are one cut
        if key not in seen:
            seen.add(key)
            cuts.append(halves)
    return pooled_measure(nli, labels, cuts, rule, fit)


def pooled_measure(
    nli: Sequence[ClaimNLI],
    labels: Sequence[str],
    cuts: Sequence[Sequence[Sequence[int]]],
    rule: CutoffRule,
    fitter: Fitter | None = None,
) -> dict[str, Any]:
    """Thresholds fitted on each half (row indices) of each cut into two halves, measured on the other half, pooled
    by size; except the escalation and the counts of calls, which are those of the thresholds fitted on all the
    claims (the stored ones), counted on them: on the dev files they land nearer what those thresholds reach on new
    rows (``benchmarks/tune.py --sizes``, raw cut-offs at 100-1,000 labelled rows: 0.020-0.049 off against the
    halves' 0.050-0.107; a head's about as near, 0.024-0.056 against 0.024-0.055), because a half's fit moves the
    cut-off itself while the share of claims past a given cut-off moves little between rows of one kind.

    ``local_precision_ci``: where the local precision of thresholds fitted on all these claims should land on new
    rows: the union of two 95%
    spreads around it, the Wilson interval of one cut's local calls (how much a count of that many calls moves) and
    1.96 standard deviations of the halves' own precisions over sqrt 2 (each half's number moves with its fit as well
    as with its count). The sqrt 2 rests on measurement, not on a derivation: on the dev files
    (``benchmarks/tune.py --sizes``: fits on 200-1,000 labelled rows, measured on the rows no fit saw) the interval
    held the precision reached in 90-100% of fits per setting (94-95% overall); the Wilson interval alone in 70-85%,
    the spread without the sqrt 2 in 90-100% at a third more width. None with fewer than two halves that made a local
    call."""

    def fit(rows: Sequence[int]) -> dict[str, LocalThresholds]:
        part, gold = [nli[i] for i in rows], [labels[i] for i in rows]
        return fit_profile(part, gold, rule) if fitter is None else fitter(part, gold)

    if not any(all(halves) for halves in cuts):
        return measure(nli, labels, fit(range(len(nli))))
    results = []
    for halves in cuts:
        if not all(halves):
            continue
        for fit_on, measure_on in (halves, halves[::-1]):
            profile = fit(fit_on)
            results.append(measure([nli[i] for i in measure_on], [labels[i] for i in measure_on], profile))
    cuts_made = len(results) // 2
    # the escalation and the calls to expect: the stored fit's own, counted here (see above)
    stored = fit(range(len(nli)))
    counted = measure(nli, labels, stored)
    pooled: dict[str, Any] = {
        "n": sum(r["n"] for r in results) // cuts_made,
        "crossfit": True,
        "cuts": cuts_made,
        "escalation_rate": counted["escalation_rate"],
        "escalation_measured": "in-sample: the stored thresholds' count",  # the rest is cross-fitted
        "local_decided": counted["local_decided"],
        "contradictions_called": counted["contradictions_called"],
    }
    # the rest: each half's rate weighted by its size (the halves are near equal); the local precision is what one
    # fit is expected to reach, each fit one draw of it (right calls over calls would lean towards the loosest fits;
    # counted on the claims it was fitted on, it is optimistic: by 0.01-0.03 on Factcheck-GPT, 0.2 on WiCE)
    for key in ("nli_balanced_accuracy", "local_precision", "contradiction_precision", "contradiction_recall"):
        values = [(r[key], r["n"]) for r in results if r[key] is not None]
        pooled[key] = round(sum(v * m for v, m in values) / sum(m for _, m in values), 4) if values else None
    decided = sum(r["local_decided"] for r in results) / cuts_made  # the calls one cut makes over all n claims
    pooled["local_precision_ci"] = _precision_spread(pooled["local_precision"], decided, results)
    whole = stored["cascade"]
    if whole.t_support is None and whole.t_contradict is None and whole.t_unsupported is None:
        # the cut-offs stored decide nothing (their count says escalation 100%): on new rows no claim is decided
        # locally, whatever the halves' own fits decided, so there is no precision to expect
        pooled.update(
            local_precision=None,
            local_precision_ci=None,
            contradiction_precision=None,
            contradiction_recall=counted["contradiction_recall"],
        )
    return pooled


def _precision_spread(value: float | None, decided: float, halves: Sequence[dict[str, Any]]) -> list[float] | None:
    """:func:`pooled_measure`'s interval of the local precision ``value`` (``decided``: one cut's calls, the mean
    over the cuts; see there)."""
    precisions = [r["local_precision"] for r in halves if r["local_precision"] is not None]
    if value is None or not decided or len(precisions) < 2:
        return None
    calls = max(1, round(decided))
    count = wilson(min(calls, round(value * calls)), calls)
    assert count.lo is not None and count.hi is not None
    half = z_value() * float(np.std(precisions, ddof=1)) / math.sqrt(2)
    lo, hi = min(count.lo, value - half), max(count.hi, value + half)
    return [round(max(0.0, min(lo, value)), 4), round(min(1.0, max(hi, value)), 4)]


def crossfit_raw(
    results: Sequence[ClaimNLI],
    labels: Sequence[str],
    groups: Sequence[str],
    target: float,
    min_decided: int = 10,
    unsupported: bool = True,
    seed: int = 0,
) -> dict[str, Any]:
    """What to expect on new rows of the raw cascade thresholds :func:`fit_thresholds` fits (calibrate without a
    head): :func:`crossfit_measure_scores` with that fitter (the local precision cross-fitted, the escalation the
    stored thresholds' own count); a half whose labels are all of one kind decides nothing.
    Its escalation, local precision and interval only (the nli mode's line is not what calibrate fits here)."""

    def fit(part: Sequence[ClaimNLI], gold: Sequence[str]) -> dict[str, LocalThresholds]:
        try:
            local = fit_thresholds(
                [x.entailment for x in part],
                [x.contradiction for x in part],
                [g == "SUPPORTED" for g in gold],
                target=target,
                min_decided=min_decided,
                unsupported=unsupported,
            ).local
        except InputError:
            local = LocalThresholds(t_support=None, t_contradict=None)
        return {"cascade": local, "nli": local}

    m = crossfit_measure_scores(results, labels, groups, seed=seed, fit=fit)
    keep = (
        "n",
        "cuts",
        "escalation_rate",
        "escalation_measured",
        "local_precision",
        "local_precision_ci",
        "local_decided",
    )
    if not m.get("crossfit"):  # one claim text: no cut keeps it on one side, and in-sample numbers are no forecast
        return {"measured": "not measured: every row has the same claim text", **{k: None for k in keep}}
    return {"measured": "cross-fitted", **{k: m.get(k) for k in keep}}


def head_scored(results: Sequence[ClaimNLI], probabilities: Sequence[float]) -> list[ClaimNLI]:
    """Copies of NLI results carrying the head's probabilities (for fitting and measuring thresholds)."""
    return [r.model_copy(update={"supported": float(p)}) for r, p in zip(results, probabilities, strict=True)]


def build_head(
    claims: Sequence[str],
    contexts: Sequence[Sequence[str]],
    results: Sequence[ClaimNLI],
    labels: Sequence[str],
    model_identity: str,
    target: float = 0.9,
    contradiction_target: float = 0.7,
    folds: int = 5,
    seed: int = 0,
    meta: dict[str, Any] | None = None,
    min_decided: int = 10,
    unsupported: bool = True,
    lines: str = "fitted",
) -> VerdictHead:
    """Fit a head and its thresholds on labelled claims (SUPPORTED / UNSUPPORTED / CONTRADICTED) scored by the model
    as the pipeline scores them under a head (every selected passage: no early exit).

    Claims the NLI stage could not score are left out. The thresholds of both modes are fitted on the out-of-fold
    probabilities (:func:`fit_profile`: the cascade's SUPPORTED / UNSUPPORTED where the head's own probabilities
    expect ``target`` precision, :func:`expected_cutoffs`, on at least ``min_decided`` claims, UNSUPPORTED only if
    ``unsupported``; CONTRADICTED, on the model's own contradiction score, only where ``contradiction_target`` of
    its calls are real contradictions). ``lines``: how the head is read at the labelled mix (``CutoffRule.lines``).
    """
    ok = [i for i, r in enumerate(results) if r.error is None and r.passages_scored]
    memo: dict[tuple[str, ...], Sources] = {}
    x = [claim_features(claims[i], results[i], Sources.memo(memo, contexts[i])) for i in ok]
    gold = [labels[i] for i in ok]
    groups = [claim_key(claims[i]) for i in ok]
    fit = fit_head(x, [g == "SUPPORTED" for g in gold], groups, folds=folds, seed=seed)
    scored = head_scored([results[i] for i in ok], fit.out_of_fold)
    rule = CutoffRule(target, contradiction_target, True, min_decided, unsupported, lines)
    profile = fit_profile(scored, gold, rule)
    measured = crossfit_measure_scores(scored, gold, groups, rule, seed)
    return fit.head(
        profile,
        model_identity,
        {
            **(meta or {}),
            "claims": len(ok),
            "supported": sum(g == "SUPPORTED" for g in gold),
            "folds": folds,
            "cv_log_loss": fit.cv_log_loss,
            "target": target,
            "out_of_fold": measured,
        },
    )


def score_for_fitting(evaluator: Any, claims: Sequence[str], contexts: Sequence[Sequence[str]]) -> list[ClaimNLI]:
    """The claims scored as thresholds and heads are fitted on: by ``evaluator``'s model, every selected passage, no
    early exit (:func:`groundjudge.checker.evidence.score_claims`; through its NLI cache, so mostly cache hits). A
    stored or just-made result may have stopped early: in nli mode at ``t_support``, in a cascade once nothing but
    the NLI part could change (``stages.route.settled_at``); a line fitted on such cut-short scores would be
    applied to scores of more evidence."""
    c = evaluator.config
    return score_claims(
        evaluator.nli,
        list(claims),
        [list(x) for x in contexts],
        k=c.evidence_k,
        passage_tokens=c.passage_tokens,
        passage_overlap=c.passage_overlap,
        cache=evaluator.cache,
    )


def fit_calibration_head(
    claims: list[str],
    contexts: list[list[str]],
    results: list[ClaimNLI],
    labels: list[str],
    load: Callable[[], Any],
    fingerprints: set[str],
    target: float,
    meta: dict[str, Any],
    min_decided: int = 10,
    unsupported: bool = True,
    rescored: bool = False,
) -> tuple[VerdictHead | None, str | None]:
    """Fit a verdict head on calibrate's labelled claims: ``(head, None)``, or ``(None, why not)``.

    ``load`` gives the nli-mode Evaluator whose model the head is tied to (loaded only when a head can be fitted):
    unless ``rescored`` (``results`` are :func:`score_for_fitting`'s already), the claims are scored again with it
    as the pipeline scores them under a head, every selected passage (a stored or just-made result may have stopped
    early; mostly cache hits); ``fingerprints`` are those of the models that scored a 'score' OUT's claims (empty:
    scored here).

    Raises:
        GroundjudgeError: the NLI model cannot be loaded.
    """
    scored = [i for i, r in enumerate(results) if r.error is None and r.passages_scored]
    supported = sum(labels[i] == "SUPPORTED" for i in scored)
    if len(scored) < MIN_CLAIMS or min(supported, len(scored) - supported) < MIN_CLASS:
        return None, (
            f"it needs at least {MIN_CLAIMS} scored claims with {MIN_CLASS} SUPPORTED and {MIN_CLASS} not; "
            f"got {len(scored)}, {supported} SUPPORTED"
        )
    evaluator = load()
    model = evaluator.nli
    other = foreign_fingerprints(fingerprints, model.identity)
    if other:  # a head is tied to the model whose scores it reads: fitted on another's, it would mislead
        return None, (
            f"the claims were scored by NLI model {other[0]}, not the one loaded here ({model.identity}); "
            "pass that model as --nli-model"
        )
    if not rescored:
        results = score_for_fitting(evaluator, claims, contexts)
    try:
        head = build_head(
            claims,
            contexts,
            results,
            labels,
            model.identity,
            target=target,
            meta=meta,
            min_decided=min_decided,
            unsupported=unsupported,
        )
        return head, None
    except ValueError as exc:
        return None, str(exc)


def same_weights(fingerprint: str, identity: str) -> bool:
    """Whether a report's ``nli_model`` fingerprint (``weights/kind/numerics``) is of the model with ``identity``
    (``digest/kind``): a local model's weights are ``folder@digest``, a hub model's ``id@revision`` (= its digest)."""
    return fingerprint.startswith(identity + "/") or f"@{identity}/" in fingerprint


def foreign_fingerprints(fingerprints: set[str], identity: str) -> list[str]:
    """The report fingerprints (``versions.nli_model``) that are not of the model with ``identity``, sorted:
    thresholds and heads fitted on their scores would mislead that model."""
    return sorted(fp for fp in fingerprints if fp and not same_weights(fp, identity))
