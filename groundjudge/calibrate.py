"""Fitting the cascade's local thresholds on labelled claims.

Each threshold is the loosest one whose local verdicts still reach the target precision (SUPPORTED vs not, as the
benchmarks score claims) on at least ``min_decided`` claims:

- t_support: the lowest entailment at which "SUPPORTED" is right at least ``target`` of the time;
- t_contradict: the lowest contradiction at which "not SUPPORTED" is;
- t_unsupported: the highest entailment at or below which "not SUPPORTED" is.

Everything in between goes to the judge; the escalation rate that follows is reported.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

from groundjudge.config import LocalThresholds
from groundjudge.models import ClaimNLI
from groundjudge.pipeline import decide_locally
from groundjudge.plots import ReliabilityBin


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


def lowest_threshold(scores: Sequence[float], good: Sequence[bool], target: float, min_decided: int) -> float | None:
    """Lowest threshold t with precision(score >= t) >= target over >= min_decided items."""
    order = sorted(range(len(scores)), key=lambda i: -scores[i])
    best, hits = None, 0
    for rank, i in enumerate(order, start=1):
        hits += good[i]
        last_of_tie = rank == len(order) or scores[order[rank]] != scores[i]
        if last_of_tie and rank >= min_decided and hits / rank >= target:
            best = scores[i]
    return best


def fit_thresholds(
    entailment: Sequence[float],
    contradiction: Sequence[float],
    supported: Sequence[bool],
    target: float = 0.95,
    min_decided: int = 10,
    unsupported: bool = True,
) -> Calibration:
    """Thresholds from NLI scores and gold (SUPPORTED or not) of the same claims."""
    n = len(supported)
    idx = range(n)
    # Fit in the order decide_locally applies the rules, each on the claims the earlier rules left over, so that
    # every group of local verdicts, and hence all of them together, reaches the target.
    t_support = lowest_threshold(entailment, supported, target, min_decided)
    left = [
        i for i in idx if t_support is None or not (entailment[i] >= t_support and entailment[i] >= contradiction[i])
    ]
    t_contradict = lowest_threshold(
        [contradiction[i] for i in left], [not supported[i] for i in left], target, min_decided
    )
    left = [i for i in left if t_contradict is None or contradiction[i] < t_contradict]
    t_u = None
    if unsupported and left:
        neg = lowest_threshold([-entailment[i] for i in left], [not supported[i] for i in left], target, min_decided)
        t_u = -neg if neg is not None else None
    if t_u is not None and t_support is not None and t_u >= t_support:
        t_u = t_support - 1e-4  # both regions are precise enough to meet: nothing in between to escalate
    decided = correct = 0
    for e, c, s in zip(entailment, contradiction, supported, strict=True):
        local = decide_locally(ClaimNLI(entailment=e, contradiction=c, passages_scored=1), t_support, t_contradict, t_u)
        if local is not None:
            decided += 1
            correct += (local == "SUPPORTED") == s
    return Calibration(
        t_support=None if t_support is None else round(t_support, 4),
        t_contradict=None if t_contradict is None else round(t_contradict, 4),
        t_unsupported=None if t_u is None else round(t_u, 4),
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
        raise ValueError("n_bins must be at least 1")
    if len(predicted) != len(supported):
        raise ValueError("predicted and supported differ in length")
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
