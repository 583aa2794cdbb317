"""The verdict head: a small logistic model over the NLI scores and cheap text signals, learnt from labelled claims.

A cross-encoder's entailment is one signal of whether a claim is grounded; others cost nothing once the pipeline has
the claim, its best passage and the sources: how many of the claim's words, word pairs, numbers and names the
sources contain, whether the best passage disagrees on a number or a month, whether one side is negated. The head
combines them into the probability that the claim is SUPPORTED, fitted on claims someone already decided (gold
rows, the judge's verdicts, reviewers' decisions: ``groundjudge calibrate``, ``groundjudge tune``), so that every
judged claim teaches the local stage. The cascade's SUPPORTED / UNSUPPORTED thresholds then apply to that
probability; CONTRADICTED stays on the model's contradiction score.

A head belongs to one NLI model (its features are that model's scores): it records the model's identity and
carries the thresholds fitted on its own out-of-fold probabilities, so neither can be paired with the wrong model
or the wrong scale by accident. Fitting chooses the L2 strength by cross-validation over folds disjoint by claim
text; the thresholds are fitted on out-of-fold probabilities (never on rows the head was fitted on).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from groundjudge.checker import signals
from groundjudge.errors import ArgumentError, ConfigError
from groundjudge.models import ClaimNLI, LocalThresholds

HEAD_FORMAT = 1
FEATURES: tuple[str, ...] = (
    "entailment",  # logits of the NLI probabilities of the claim's best passage
    "contradiction",
    "neutral",
    "passage_coverage",  # share of the claim's content words in the best passage
    "source_coverage",  # ... anywhere in the sources
    "bigram_coverage",  # share of the claim's adjacent content-word pairs in the sources
    "numbers_missing",  # share of the claim's numbers the sources do not contain
    "conflict",  # the best passage shares the claim's words but gives other numbers or months
    "name_coverage",  # share of the claim's capitalised words (not sentence-initial) in the sources
    "negation_mismatch",  # one of claim and best passage is negated, the other not
    "claim_terms",  # log(1 + content words of the claim)
    "source_terms",  # log(1 + content words of the sources)
    "verbatim",  # the claim stands in the sources word for word (case, punctuation and whitespace aside)
    "ordered_terms",  # most of the claim's content words one source sentence holds in the claim's order (share)
    "passage_name_coverage",  # share of the claim's names in the best passage (a name that differs: counter-evidence)
)
LAMBDAS: tuple[float, ...] = (0.1, 1.0, 10.0, 100.0)
MIN_CLAIMS = 60  # fewer labelled claims than this (or 15 of either class) is too few to fit a head
MIN_CLASS = 15

_NEGATION = frozenset("not no never none nobody nothing neither nor without cannot n't".split())
_WORD = re.compile(r"[a-z']+")
_NAME = re.compile(r"(?<=[\s,;:(\"'])[A-Z][\w-]+")


def _logit(p: float) -> float:
    p = min(max(float(p), 1e-4), 1 - 1e-4)
    return math.log(p / (1 - p))


def _negated(text: str) -> bool:
    words = set(_WORD.findall(text.lower()))
    return bool(words & _NEGATION) or any(w.endswith("n't") for w in words)


@dataclass
class Sources:
    """What the features need from one sample's sources, computed once for all its claims."""

    text: str
    lower: str
    terms: frozenset[str]
    bigrams: frozenset[tuple[str, str]]
    numbers: frozenset[str]
    n_terms: int
    plain: str = ""  # the sources as signals.plain_words writes them, between spaces
    sentences: tuple[tuple[str, ...], ...] = ()  # each sentence's content words, in order

    @classmethod
    def memo(cls, seen: dict[tuple[str, ...], Sources], contexts: Sequence[str]) -> Sources:
        """:meth:`of`, computed once per distinct sources in ``seen`` (answers about the same sources share it)."""
        key = tuple(contexts)
        if key not in seen:
            seen[key] = cls.of(contexts)
        return seen[key]

    @classmethod
    def of(cls, contexts: Sequence[str]) -> Sources:
        text = "\n\n".join(contexts)
        terms = signals.terms(text)
        return cls(
            text=text,
            lower=text.lower(),
            terms=frozenset(terms),
            bigrams=frozenset(itertools.pairwise(terms)),
            numbers=frozenset(signals.numbers(text)),
            n_terms=len(terms),
            plain=f" {signals.plain_words(text)} ",
            sentences=tuple(tuple(signals.terms(s)) for c in contexts for s in signals.rough_sentences(c)),
        )


def claim_features(claim: str, nli: ClaimNLI, sources: Sources) -> list[float]:
    """The head's inputs for one scored claim, in :data:`FEATURES` order."""
    passage = nli.entailment_passage.text if nli.entailment_passage is not None else sources.text
    terms = signals.terms(claim)
    words = set(terms)
    passage_words = set(signals.terms(passage))
    bigrams = set(itertools.pairwise(terms))
    numbers = signals.numbers(claim)
    names = {m.group(0).lower() for m in _NAME.finditer(claim)}
    conflict = any(
        signals.find_conflict(claim, p.text)
        for p in (nli.entailment_passage, nli.contradiction_passage)
        if p is not None
    )
    return [
        _logit(nli.entailment),
        _logit(nli.contradiction),
        _logit(nli.neutral),
        len(words & passage_words) / len(words) if words else 0.0,
        len(words & sources.terms) / len(words) if words else 0.0,
        len(bigrams & sources.bigrams) / len(bigrams) if bigrams else 0.0,
        len(numbers - sources.numbers) / len(numbers) if numbers else 0.0,
        1.0 if conflict else 0.0,
        sum(n in sources.lower for n in names) / len(names) if names else 1.0,
        1.0 if _negated(claim) != _negated(passage) else 0.0,
        math.log1p(len(terms)),
        math.log1p(sources.n_terms),
        1.0 if (plain := signals.plain_words(claim)) and f" {plain} " in sources.plain else 0.0,
        signals.ordered_share(terms, sources.sentences),
        sum(n in passage.lower() for n in names) / len(names) if names else 1.0,
    ]


class VerdictHead(BaseModel):
    """A fitted head: standardisation, weights, the model it belongs to and the thresholds fitted on its output."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: int = HEAD_FORMAT
    features: list[str] = Field(default_factory=lambda: list(FEATURES))
    mean: list[float]
    scale: list[float]
    coef: list[float]
    intercept: float
    l2: float
    model: str = ""  # the NLI model's identity (weights and kind; not its folder name, device or dtype)
    thresholds: dict[str, LocalThresholds]  # "nli" and "cascade", on the head's probability
    meta: dict[str, Any] = Field(default_factory=dict)  # how it was fitted and what it measured out of fold

    @model_validator(mode="after")
    def _check(self) -> VerdictHead:
        if self.format != HEAD_FORMAT:
            raise ArgumentError(f"verdict head format {self.format} is not {HEAD_FORMAT}")
        if self.features != list(FEATURES):
            raise ArgumentError(f"verdict head features {self.features} are not this version's {list(FEATURES)}")
        n = len(self.features)
        if not (len(self.mean) == len(self.scale) == len(self.coef) == n):
            raise ArgumentError("verdict head: mean, scale and coef need one value per feature")
        values = [*self.mean, *self.scale, *self.coef, self.intercept]
        if not all(math.isfinite(v) for v in values) or any(s <= 0 for s in self.scale):
            raise ArgumentError("verdict head: weights must be finite and scales above 0")
        if set(self.thresholds) != {"nli", "cascade"}:
            raise ArgumentError("verdict head: thresholds for both modes, nli and cascade")
        return self

    @property
    def digest(self) -> str:
        """A short content hash (reports record it beside the thresholds it brought)."""
        payload = json.dumps(self.model_dump(exclude={"meta"}), sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:12]

    def summary(self) -> dict[str, Any]:
        """What a result says of a head: digest, claims it learnt from, L2, thresholds, out-of-fold numbers."""
        return {
            "digest": self.digest,
            "claims": self.meta.get("claims"),
            "l2": self.l2,
            "thresholds": {m: t.model_dump() for m, t in self.thresholds.items()},
            "out_of_fold": self.meta.get("out_of_fold"),
        }

    def probabilities(self, rows: np.ndarray) -> np.ndarray:
        """P(SUPPORTED) for rows of features."""
        z = (np.asarray(rows, dtype=np.float64) - np.asarray(self.mean)) / np.asarray(self.scale)
        return _sigmoid(z @ np.asarray(self.coef) + self.intercept)

    def apply(self, claims: Sequence[str], results: Sequence[ClaimNLI], sources: Sources) -> None:
        """Set ``supported`` on each scored claim's NLI result (errored or unscored ones are left alone)."""
        live = [i for i, r in enumerate(results) if r.error is None and r.passages_scored]
        if not live:
            return
        probs = self.probabilities(np.array([claim_features(claims[i], results[i], sources) for i in live]))
        for i, p in zip(live, probs, strict=True):
            results[i].supported = float(p)

    def check_model(self, identity: str, where: str) -> None:
        """Refuse a head fitted on another model's scores."""
        if not self.model:
            raise ConfigError(f"{where}: the verdict head does not say which NLI model it was fitted for")
        if self.model != identity:
            raise ConfigError(
                f"{where}: the verdict head was fitted on the scores of NLI model {self.model}, not {identity}; "
                "refit it for this model (groundjudge calibrate) or use the model it was fitted for"
            )


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(z, -50, 50)))


def _standardise(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-9] = 1.0  # a constant feature (a binary checker's contradiction) stays inert
    return mean, scale


def _fit_logistic(z: np.ndarray, y: np.ndarray, l2: float, weights: np.ndarray) -> tuple[np.ndarray, float]:
    """L2-penalised logistic regression by Newton's method on standardised features (intercept not penalised)."""
    a = np.c_[np.ones(len(z)), z]
    b = np.zeros(a.shape[1])
    penalty = np.r_[0.0, np.full(z.shape[1], l2)]
    for _ in range(100):
        p = _sigmoid(a @ b)
        grad = a.T @ (weights * (p - y)) + penalty * b
        hess = (a * (weights * p * (1 - p))[:, None]).T @ a + np.diag(penalty + 1e-9)
        step = np.linalg.solve(hess, grad)
        b -= step
        if np.abs(step).max() < 1e-8:
            break
    return b[1:], float(b[0])


def _balanced_weights(y: np.ndarray) -> np.ndarray:
    """Each class weighs the same in total: the head's 0.5 then means 'as likely one as the other' on balanced
    accuracy's terms, whatever the share of SUPPORTED claims in the labelled set."""
    pos = y.sum()
    neg = len(y) - pos
    return np.where(y == 1, len(y) / (2 * pos), len(y) / (2 * neg))


def _fit(x: np.ndarray, y: np.ndarray, l2: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    mean, scale = _standardise(x)
    coef, intercept = _fit_logistic((x - mean) / scale, y, l2, _balanced_weights(y))
    return mean, scale, coef, intercept


def _predict(fitted: tuple[np.ndarray, np.ndarray, np.ndarray, float], x: np.ndarray) -> np.ndarray:
    mean, scale, coef, intercept = fitted
    return _sigmoid(((x - mean) / scale) @ coef + intercept)


def claim_key(text: str) -> str:
    """What makes two claims the same claim for claim-disjoint splits (Factcheck-GPT repeats a claim over rows)."""
    return " ".join(text.lower().split())


def claim_folds(groups: Sequence[str], k: int, seed: int) -> list[int]:
    """A fold number per row; rows of one group (claim text) always share a fold."""
    keys = sorted(set(groups))
    random.Random(seed).shuffle(keys)
    fold = {key: i % k for i, key in enumerate(keys)}
    return [fold[g] for g in groups]


@dataclass
class HeadFit:
    """A fitted head's parameters, with the out-of-fold probabilities its thresholds are fitted on."""

    mean: list[float]
    scale: list[float]
    coef: list[float]
    intercept: float
    l2: float
    out_of_fold: list[float]  # each row's probability from a head that never saw its claim
    cv_log_loss: dict[str, float]  # per L2 strength tried

    def head(
        self, thresholds: dict[str, LocalThresholds], model: str = "", meta: dict[str, Any] | None = None
    ) -> VerdictHead:
        """The head these parameters make, with ``thresholds`` fitted on its out-of-fold probabilities."""
        return VerdictHead(
            mean=self.mean,
            scale=self.scale,
            coef=self.coef,
            intercept=self.intercept,
            l2=self.l2,
            model=model,
            thresholds=thresholds,
            meta=meta or {},
        )


def fit_head(
    features: Sequence[Sequence[float]],
    supported: Sequence[bool],
    groups: Sequence[str],
    folds: int = 5,
    lambdas: Sequence[float] = LAMBDAS,
    seed: int = 0,
) -> HeadFit:
    """Fit the head on labelled claims: the L2 strength with the lowest cross-validated (balanced) log-loss over
    ``folds`` folds disjoint by ``groups`` (claim text), then the final weights on every row.

    Raises:
        ValueError: too few claims, too few of either class, or claims of fewer than two texts, to fit and validate
            a head.
    """
    x = np.asarray(features, dtype=np.float64)
    y = np.asarray(supported, dtype=np.float64)
    pos = int(y.sum())
    if len(y) < MIN_CLAIMS or min(pos, len(y) - pos) < MIN_CLASS:
        raise ArgumentError(
            f"a verdict head needs at least {MIN_CLAIMS} labelled claims with {MIN_CLASS} of each kind (SUPPORTED "
            f"and not); got {len(y)} claims, {pos} SUPPORTED"
        )
    if x.ndim != 2 or x.shape[0] != len(y) or not np.isfinite(x).all():
        raise ArgumentError("features must be one finite row per label")
    if len(groups) != len(y):
        raise ArgumentError(f"one group (claim text) per label: got {len(groups)} groups for {len(y)} labels")
    texts = len(set(groups))
    if texts < 2:  # one fold would hold every claim and another none: nothing is measured out of fold
        raise ArgumentError(
            f"a verdict head is measured on claims it never saw, in folds by claim text: it needs claims of at "
            f"least 2 different texts; these {len(y)} claims have {texts}"
        )
    k = max(2, min(folds, texts))
    fold = np.asarray(claim_folds(groups, k, seed))
    one_kind = [f for f in range(k) if len(set(y[fold != f])) < 2]
    if one_kind:  # a head fitted on one kind predicts nothing: its out-of-fold numbers would measure no head
        raise ArgumentError(
            f"a verdict head is measured on claims it never saw, in {k} folds by claim text, and the claims outside "
            f"fold {one_kind[0] + 1} are all of one kind (SUPPORTED or not): label both kinds over more claim texts"
        )
    losses: dict[str, float] = {}
    oof_by_l2: dict[float, np.ndarray] = {}
    for l2 in lambdas:
        oof = np.zeros(len(y))
        for f in range(k):
            train, test = fold != f, fold == f
            oof[test] = _predict(_fit(x[train], y[train], l2), x[test])
        p = np.clip(oof, 1e-6, 1 - 1e-6)
        w = _balanced_weights(y)
        losses[str(l2)] = float(-(w * (y * np.log(p) + (1 - y) * np.log(1 - p))).sum() / w.sum())
        oof_by_l2[l2] = oof
    best = min(lambdas, key=lambda v: (losses[str(v)], -v))  # ties: the stronger penalty
    mean, scale, coef, intercept = _fit(x, y, best)
    return HeadFit(
        mean=mean.tolist(),
        scale=scale.tolist(),
        coef=coef.tolist(),
        intercept=intercept,
        l2=best,
        out_of_fold=oof_by_l2[best].tolist(),
        cv_log_loss=losses,
    )
