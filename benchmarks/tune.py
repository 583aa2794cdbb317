"""What `groundjudge tune` buys: the shared model tuned on half the dev claims, measured on the other half.

    python benchmarks/tune.py                       # factcheckgpt-stance + wice-dev, gold and 10%-flipped labels
    python benchmarks/tune.py --skip-tune           # the shared model with and without a verdict head (seconds)
    python benchmarks/tune.py --cv 3 --grid '[{"lr": 3e-5}, {"lr": 5e-5, "distill": 0}]'   # choose settings
    python benchmarks/tune.py --lines 3             # the head's decision lines, cross-validated (a minute)
    python benchmarks/tune.py --sizes 100,200,400,1000 --draws 20   # what a labelled sample of n buys (2 minutes)
    python benchmarks/tune.py --splits 10           # how far the shared model + head moves with the halving alone

Each dev file is split into a train and an eval half BY CLAIM TEXT (seeded), so that no claim is on both sides.
The shared model is tuned on the train halves twice: with the gold labels standing in for judge verdicts, and with
``--flip`` of them changed to another label, as a real judge errs. Tuning holds out its own slice of the train half to
calibrate the thresholds it stores with the model; the eval half is never seen. On each eval half, before (the base
model with its shipped thresholds) and after (the tuned model with its stored thresholds): NLI-only balanced
accuracy, cascade escalation rate and local precision, local contradiction precision and recall, seconds. "oracle"
columns refit the thresholds on the eval half itself (the best the scores allow at the target; not a fair number).

Verdict head rows (``groundjudge.checker.head``), measured the same way on each eval half: "shared model + head" (JSON
``before_head``) is a head fitted on the base model's scores of the POOLED train halves of all datasets, with the
thresholds it carries; "tuned + head" (``gold_head``, ``noisy_head``) applies the head ``groundjudge tune`` stored
beside the tuned model (fitted on its held-out slice of the train half). ``--skip-tune`` runs only the base model's
rows, with and without the head: no training, seconds to minutes. The shared model's head is also measured with its
thresholds fitted by the other readings of ``CutoffRule.lines`` (``before_head_shift``, ``before_head_before``).

``--cv K`` instead cross-validates the settings in ``--grid`` over K claim-disjoint folds of the train half only.
Within a fold the oracle numbers (thresholds fitted on the validation fold itself) are what they were; beside them,
the same fold without and with a head, both honest: without, thresholds cross-fitted over two halves of the fold
(``crossfit_*``); with, a head fitted on the fold's validation claims as ``tune`` fits one on its held-out slice,
measured on its out-of-fold probabilities with cross-fitted thresholds (``head_*``, ``build_head``'s
``out_of_fold``). A fold too small for a head counts in ``head_folds`` as missing, not as zero. The pooled folds
are mostly Factcheck-GPT's claims, so each setting is also measured per dev file (``factcheckgpt``, ``wice``: the
entailment's ROC-AUC ``auc``; with a head fitted out of fold on the whole validation fold, its ``head_auc`` and
``head_true_escalation``, the escalation at cut-offs where that file's claims' own local precision is the target).

Every row also draws escalation against local precision on its eval half (``escalation_curve``: claims decided
most confident first, at each share escalated, with Wilson intervals; what the scores allow, read on the rows it is
drawn on), around the cascade's line where a head carries one, else the nli mode's cut-off.

``--lines N`` instead cross-validates the verdict head's decision lines over the POOLED train halves only (the eval
halves are never read): for each of N seeds, 5 folds disjoint by claim text; a head and its thresholds fitted on
four (as ``build_head`` fits them: the thresholds on the head's out-of-fold probabilities there), measured on the
fifth; each way of reading the head at the labelled mix (``CutoffRule.lines``: ``fitted``, Platt scaling on the
labelled claims; ``shift``, moved to their share of SUPPORTED; ``before``, the shift with the cascade's line at the
head's own 0.5 and the nli mode's cut-off fitted for balanced accuracy) on the same heads. Per rule and seed:
escalation, local precision with its interval, the share right among the ``min_decided`` held-out claims nearest
each cut, nli-mode balanced accuracy.

``--sizes N,...`` instead measures what ``calibrate`` stores from a labelled sample of n rows (a claim with its
sources; Factcheck-GPT has several rows per claim text): the dev files' rows pooled (train and eval halves of every
file), the sample drawn by claim text (every row of a drawn claim) ``--draws`` times per n, seeded by ``--seed``; on
each sample the thresholds as calibrate fits them (on the raw entailment, counted; a head read ``fitted``, the
default, and ``shift``), measured on every row the sample left out (no claim text on both sides); beside the
local precision reached there, what the fit said to expect (its cross-fitted ``local_precision`` and
``local_precision_ci``, which calibrate and tune print) and whether the interval held it.

The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import SHARED, default_nli_model, print_table, read_rows
from benchmarks.accuracy import CURVE, escalation_curve
from benchmarks.nli_throughput import roc_auc
from groundjudge.cache import Cache
from groundjudge.checker.head import Sources, VerdictHead, claim_features, claim_folds, fit_head
from groundjudge.checker.nli import NLIModel, NLIScorer
from groundjudge.checker.profile import profile_for, read_model_head
from groundjudge.io.labels import CLAIM_LABELS
from groundjudge.learn.calibrate import (
    CutoffRule,
    build_head,
    crossfit_measure_scores,
    crossfit_raw,
    fit_profile,
    fit_thresholds,
    head_scored,
    measure,
)
from groundjudge.learn.tune import (
    TuneExample,
    TuneSettings,
    attach_base_probabilities,
    build_pairs,
    claim_key,
    examples_head,
    score_claims,
    train,
    tune,
)
from groundjudge.models import ClaimNLI, LocalThresholds
from groundjudge.review.metrics import balanced_accuracy
from groundjudge.review.stats import wilson
from groundjudge.stages.route import decide_locally

DATASETS = ("factcheckgpt-stance", "wice-dev")
LINES = ("fitted", "shift", "before")  # CutoffRule.lines, compared by --lines


def halves(rows: list[dict[str, Any]], seed: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(train, eval) halves of the rows, disjoint by claim text."""
    keys = sorted({claim_key(r["claim"]) for r in rows})
    random.Random(seed).shuffle(keys)
    train_keys = set(keys[: len(keys) // 2])
    return [r for r in rows if claim_key(r["claim"]) in train_keys], [
        r for r in rows if claim_key(r["claim"]) not in train_keys
    ]


def flip(rows: list[dict[str, Any]], share: float, seed: int) -> list[dict[str, Any]]:
    """The rows with ``share`` of their labels changed to another label at random (a judge's errors)."""
    rng = random.Random(seed)
    out = [dict(r) for r in rows]
    for r in rng.sample(out, round(share * len(out))):
        r["label"] = rng.choice([x for x in CLAIM_LABELS if x != r["label"]])
    return out


def examples(rows: list[dict[str, Any]]) -> list[TuneExample]:
    return [TuneExample(str(r["id"]), r["claim"], r["contexts"], r["label"], "gold") for r in rows]


def write(rows: list[dict[str, Any]], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


Scores = dict[str, list[ClaimNLI]]


def score(model: NLIModel, evals: dict[str, list[TuneExample]], settings: TuneSettings, cache: Cache) -> Scores:
    """Each eval half's claims scored by the model, as the pipeline scores them."""
    return {name: score_claims(model, exs, settings, cache) for name, exs in evals.items()}


def headed(head: VerdictHead, scored: Scores, evals: dict[str, list[TuneExample]]) -> Scores:
    """Copies of the scores with the head's probability set (what the pipeline's NLI stage does with a head)."""
    out: Scores = {}
    for name, exs in evals.items():
        copies = [r.model_copy() for r in scored[name]]
        sources: dict[tuple[str, ...], Sources] = {}
        for e, r in zip(exs, copies, strict=True):
            head.apply([e.claim], [r], Sources.memo(sources, e.contexts))
        out[name] = copies
    return out


def metrics(
    scored: Scores, evals: dict[str, list[TuneExample]], profile: dict[str, LocalThresholds], settings: TuneSettings
) -> dict[str, Any]:
    """Per dataset: metrics with the given thresholds (stored, shipped or a head's), and with thresholds refit there."""
    out: dict[str, Any] = {}
    for name, exs in evals.items():
        nli = scored[name]
        labels = [e.label for e in exs]
        m = measure(nli, labels, profile)
        oracle = oracle_measure(nli, labels, settings)
        m["oracle_escalation_rate"] = oracle["escalation_rate"]
        m["oracle_local_precision"] = oracle["local_precision"]
        m["oracle_nli_balanced_accuracy"] = oracle["nli_balanced_accuracy"]
        m["head_scored"] = sum(x.supported is not None for x in nli)  # claims the head's probability decided
        m["escalation_curve"] = curve(nli, labels, profile)
        out[name] = m
    return out


def oracle_measure(nli: list[ClaimNLI], labels: list[str], settings: TuneSettings) -> dict[str, Any]:
    """The claims measured at thresholds fitted on themselves for the target: what the scores allow ("oracle";
    its escalation is the tables' "escalation at a true 90%")."""
    return measure(nli, labels, fit_profile(nli, labels, settings.cutoffs))


def curve(nli: list[ClaimNLI], labels: list[str], profile: dict[str, LocalThresholds]) -> list[dict[str, Any]]:
    """Escalation against local precision on these claims, around the cascade's line where a head's thresholds
    carry one, else the nli mode's cut-off (``benchmarks.accuracy.escalation_curve``)."""
    line = profile["cascade"].line if profile["cascade"].line is not None else profile["nli"].t_support
    support = [x.support if x.error is None and x.passages_scored else None for x in nli]
    return escalation_curve(support, ["SUPPORTED" if g == "SUPPORTED" else "NOT" for g in labels], line)


def line_cv(
    model: NLIModel, train_exs: list[TuneExample], settings: TuneSettings, cache: Cache, seeds: int, folds: int = 5
) -> dict[str, Any]:
    """The verdict head's decision lines, cross-validated over claim-disjoint folds of the train halves (see the
    module's ``--lines``): per rule, per seed and their mean."""
    nli = score_claims(model, train_exs, settings, cache)
    ok = [i for i, r in enumerate(nli) if r.error is None and r.passages_scored]
    memo: dict[tuple[str, ...], Sources] = {}
    x = np.array([claim_features(train_exs[i].claim, nli[i], Sources.memo(memo, train_exs[i].contexts)) for i in ok])
    results = [nli[i] for i in ok]
    labels = [train_exs[i].label for i in ok]
    sup = np.array([g == "SUPPORTED" for g in labels])
    groups = [claim_key(train_exs[i].claim) for i in ok]
    base = CutoffRule(settings.target, settings.contradiction_target, expected=True)
    rules = {name: replace(base, lines=name) for name in LINES}
    band = base.min_decided
    out: dict[str, Any] = {"claims": len(ok), "supported": int(sup.sum()), "folds": folds, "target": settings.target}
    per: dict[str, list[dict[str, Any]]] = {name: [] for name in rules}
    for seed in range(seeds):
        fold = np.asarray(claim_folds(groups, folds, seed + 101))
        tally = {name: {"decided": 0, "right": 0, "near": 0, "near_right": 0} for name in rules}
        preds = {name: [""] * len(ok) for name in rules}
        for f in range(folds):
            fit_rows, test_rows = np.flatnonzero(fold != f), np.flatnonzero(fold == f)
            fitted = fit_head(x[fit_rows].tolist(), sup[fit_rows].tolist(), [groups[i] for i in fit_rows], seed=seed)
            scored = head_scored([results[i] for i in fit_rows], fitted.out_of_fold)
            fit_labels = [labels[i] for i in fit_rows]
            for name, rule in rules.items():
                profile = fit_profile(scored, fit_labels, rule)
                p = fitted.head(profile).probabilities(x[test_rows])
                t, tn, tl = profile["cascade"], profile["nli"], tally[name]
                near: dict[str, list[tuple[float, bool]]] = {"SUPPORTED": [], "NOT": []}
                for i, prob in zip(test_rows, p, strict=True):
                    r = results[i].model_copy(update={"supported": float(prob)})
                    local = decide_locally(r, t.t_support, t.t_contradict, t.t_unsupported, t.line)
                    nli_label = decide_locally(r, tn.t_support, tn.t_contradict, None, tn.line)
                    preds[name][i] = "SUPPORTED" if nli_label == "SUPPORTED" else "NOT"
                    if local is None:
                        continue
                    right = (local == "SUPPORTED") == bool(sup[i])
                    tl["decided"] += 1
                    tl["right"] += right
                    if local == "SUPPORTED":
                        near["SUPPORTED"].append((float(prob), right))
                    else:
                        near["NOT"].append((-float(prob), right))
                for claims in near.values():  # the held-out claims nearest each cut (lowest distance first)
                    nearest = sorted(claims)[:band]
                    tl["near"] += len(nearest)
                    tl["near_right"] += sum(r for _, r in nearest)
        for name, tl in tally.items():
            iv = wilson(tl["right"], tl["decided"])
            gold = ["SUPPORTED" if s else "NOT" for s in sup]
            per[name].append(
                {
                    "seed": seed,
                    "escalation_rate": round(1 - tl["decided"] / len(ok), 4),
                    "local_precision": iv.value,
                    "local_precision_ci": iv.ci,
                    "nearest_right": round(tl["near_right"] / tl["near"], 4) if tl["near"] else None,
                    "nli_balanced_accuracy": round(100 * balanced_accuracy(gold, preds[name], ["SUPPORTED", "NOT"]), 2),
                }
            )
    for name, rows in per.items():
        mean = {
            k: round(sum(r[k] for r in rows) / len(rows), 4)
            for k in ("escalation_rate", "local_precision", "nearest_right", "nli_balanced_accuracy")
            if all(r[k] is not None for r in rows)
        }
        out[name] = {"mean": mean, "seeds": rows}
    return out


def size_study(
    model: NLIModel,
    exs: list[TuneExample],
    settings: TuneSettings,
    cache: Cache,
    sizes: list[int],
    draws: int,
    seed: int = 0,
) -> dict[str, Any]:
    """What a labelled sample of n rows buys (see the module's ``--sizes``): for each n, ``draws`` samples of the
    pooled rows ``exs`` (whole claims: every row of a drawn claim text, until n rows), thresholds fitted on each as
    ``tune`` and ``calibrate`` fit them (raw entailment, counted, by ``fit_profile`` as tune stores them and by
    ``fit_thresholds`` as calibrate does; a head, each reading of ``CutoffRule.lines``), measured on
    every row the sample left out (no claim text on both sides), beside the local precision the fit says to expect
    (its cross-fitted numbers, which ``calibrate`` and ``tune`` print)."""
    all_nli = score_claims(model, exs, settings, cache)
    memo: dict[tuple[str, ...], Sources] = {}
    by_claim: dict[str, list[int]] = {}
    for i, e in enumerate(exs):
        by_claim.setdefault(claim_key(e.claim), []).append(i)
    keys = sorted(by_claim)
    rules = ("raw", "calibrate raw", *LINES[:2])  # raw: as tune stores them (fit_profile); calibrate's own fit
    out: dict[str, Any] = {
        "target": settings.target,
        "rows": len(exs),
        "claim_texts": len(keys),
        "draws": draws,
        "sizes": {},
    }
    for n in sizes:
        per: dict[str, list[dict[str, Any]]] = {r: [] for r in rules}
        for d in range(draws):
            rng = random.Random(f"{seed}:{n}:{d}")
            order = keys[:]
            rng.shuffle(order)
            rows: list[int] = []
            for k in order:
                if len(rows) >= n:
                    break
                rows += by_claim[k]
            taken = set(rows)
            rest = [i for i in range(len(exs)) if i not in taken]
            sample_texts = {claim_key(exs[i].claim) for i in rows}
            rest_nli, rest_exs = [all_nli[i] for i in rest], [exs[i] for i in rest]
            rest_labels = [e.label for e in rest_exs]
            nli, labels = [all_nli[i] for i in rows], [exs[i].label for i in rows]
            where = {
                "rows": len(rows),
                "claim_texts": len(sample_texts),
                "measured_rows": len(rest),
                "texts_on_both_sides": len(sample_texts & {claim_key(e.claim) for e in rest_exs}),
            }
            for name in rules:
                try:
                    if name == "raw":
                        rule = settings.cutoffs
                        profile = fit_profile(nli, labels, rule)
                        groups = [claim_key(exs[i].claim) for i in rows]
                        told = crossfit_measure_scores(nli, labels, groups, rule, settings.seed)
                        scored = rest_nli
                    elif name == "calibrate raw":  # calibrate --no-head: fit_thresholds, and what it prints
                        groups = [claim_key(exs[i].claim) for i in rows]
                        local = fit_thresholds(
                            [x.entailment for x in nli],
                            [x.contradiction for x in nli],
                            [g == "SUPPORTED" for g in labels],
                            target=settings.target,
                        ).local
                        profile = {"cascade": local, "nli": local}
                        told = crossfit_raw(nli, labels, groups, settings.target)
                        scored = rest_nli
                    else:
                        head = build_head(
                            [exs[i].claim for i in rows],
                            [exs[i].contexts for i in rows],
                            nli,
                            labels,
                            model.identity,
                            target=settings.target,
                            contradiction_target=settings.contradiction_target,
                            seed=d,
                            lines=name,
                        )
                        profile, told = head.thresholds, head.meta["out_of_fold"]
                        scored = [r.model_copy() for r in rest_nli]
                        for e, r in zip(rest_exs, scored, strict=True):
                            head.apply([e.claim], [r], Sources.memo(memo, e.contexts))
                except ValueError as exc:  # too few claims of a kind for a head
                    per[name].append({"draw": d, **where, "error": str(exc)})
                    continue
                m = measure(scored, rest_labels, profile)
                told_ci = told.get("local_precision_ci")
                per[name].append(
                    {
                        "draw": d,
                        **where,
                        "escalation_rate": m["escalation_rate"],
                        "local_precision": m["local_precision"],
                        "told_local_precision": told.get("local_precision"),
                        "told_escalation_rate": told.get("escalation_rate"),
                        "told_ci": told_ci,
                        "covered": None
                        if told_ci is None or m["local_precision"] is None
                        else told_ci[0] <= m["local_precision"] <= told_ci[1],
                    }
                )
        summary: dict[str, Any] = {}
        for name, runs in per.items():
            ok = [r for r in runs if "error" not in r and r["local_precision"] is not None]
            summary[name] = {
                "fits": len(ok),
                "no_fit": len(runs) - len(ok),
                "escalation_rate": _mean(r["escalation_rate"] for r in ok),
                "local_precision": _mean(r["local_precision"] for r in ok),
                "under_target": _mean(float(r["local_precision"] < settings.target) for r in ok),
                "worst": min((r["local_precision"] for r in ok), default=None),
                "told": _mean(r["told_local_precision"] for r in ok if r["told_local_precision"] is not None),
                "told_ci_covers": _mean(float(r["covered"]) for r in ok if r["covered"] is not None),
                "told_ci_width": _mean(r["told_ci"][1] - r["told_ci"][0] for r in ok if r["told_ci"] is not None),
                # how far what calibrate says to expect lands from what the fit reached on the rows no fit saw
                "told_precision_error": _mean(
                    abs(r["told_local_precision"] - r["local_precision"])
                    for r in ok
                    if r["told_local_precision"] is not None
                ),
                "told_escalation_error": _mean(
                    abs(r["told_escalation_rate"] - r["escalation_rate"])
                    for r in ok
                    if r["told_escalation_rate"] is not None
                ),
                "runs": runs,
            }
        out["sizes"][str(n)] = summary
        print(f"n={n}: " + "; ".join(f"{k} {_brief(v)}" for k, v in summary.items()), flush=True)
    return out


def _mean(values: Any) -> float | None:
    xs = [float(v) for v in values]
    return round(sum(xs) / len(xs), 4) if xs else None


def _brief(s: dict[str, Any]) -> str:
    return (
        f"precision {s['local_precision']} (told {s['told']}, its interval covers {s['told_ci_covers']}, width "
        f"{s['told_ci_width']}, off by {s['told_precision_error']}; under target {s['under_target']}, worst "
        f"{s['worst']}), escalation {s['escalation_rate']} (told off by {s['told_escalation_error']}), {s['fits']} fits"
    )


def fit_base_head(
    model: NLIModel, train_exs: list[TuneExample], settings: TuneSettings, cache: Cache
) -> VerdictHead | str:
    """A head fitted on the model's scores of the pooled train halves, or why none could be (too few claims)."""
    nli = score_claims(model, train_exs, settings, cache)
    try:
        meta = {"tool": "benchmarks/tune.py", "fitted_on": "pooled train halves"}
        return examples_head(train_exs, nli, model.identity, settings, meta)
    except ValueError as exc:
        return str(exc)


def dataset_of(example: TuneExample) -> str:
    """The dev file a claim comes from, by its id (``factcheckgpt-0002``, ``wice-dev-0001``)."""
    return example.id.split("-", 1)[0]


def per_dataset(val: list[TuneExample], nli: list[ClaimNLI], settings: TuneSettings) -> dict[str, dict[str, Any]]:
    """One validation fold's claims measured per dev file: the entailment's ROC-AUC, and with a head fitted out of
    fold on the whole fold (as tune fits one on its held-out slice), its ROC-AUC and the escalation at cut-offs
    where these claims' own local precision is the target (what the scores allow: "escalation at a true 90%")."""
    ok = [i for i, r in enumerate(nli) if r.error is None and r.passages_scored]
    memo: dict[tuple[str, ...], Sources] = {}
    x = [claim_features(val[i].claim, nli[i], Sources.memo(memo, val[i].contexts)) for i in ok]
    sup = [val[i].label == "SUPPORTED" for i in ok]
    try:
        oof: list[float] | None = fit_head(
            x, sup, [claim_key(val[i].claim) for i in ok], seed=settings.seed
        ).out_of_fold
    except ValueError:
        oof = None
    out: dict[str, dict[str, Any]] = {}
    for name in sorted({dataset_of(val[i]) for i in ok}):
        idx = [j for j, i in enumerate(ok) if dataset_of(val[i]) == name]
        gold = [sup[j] for j in idx]
        m: dict[str, Any] = {"claims": len(idx), "auc": roc_auc(gold, [nli[ok[j]].entailment for j in idx])}
        if oof is not None:
            m["head_auc"] = roc_auc(gold, [oof[j] for j in idx])
            scored = head_scored([nli[ok[j]] for j in idx], [oof[j] for j in idx])
            labels = [val[ok[j]].label for j in idx]
            m["head_true_escalation"] = oracle_measure(scored, labels, settings)["escalation_rate"]
        out[name] = m
    return out


def cross_validate(
    train_rows: list[dict[str, Any]],
    base: str,
    grid: list[dict[str, Any]],
    folds: int,
    settings: TuneSettings,
    work: Path,
    cache: Cache,
) -> list[dict[str, Any]]:
    """Each setting of the grid, trained on K-1 claim-disjoint folds of the train half, measured on the last."""
    exs = examples(train_rows)
    keys = sorted({claim_key(e.claim) for e in exs})
    random.Random(settings.seed + 7).shuffle(keys)
    fold_of = {k: i % folds for i, k in enumerate(keys)}
    base_model = NLIModel(base)
    scorer = NLIScorer(base_model, cache)
    results = []
    for g, values in enumerate(grid):
        s = replace(settings, **values)
        scores = []
        for f in range(folds):
            fit = [e for e in exs if fold_of[claim_key(e.claim)] != f]
            val = [e for e in exs if fold_of[claim_key(e.claim)] == f]
            pairs = build_pairs(fit, base_model, scorer, s)
            if s.distill > 0:
                attach_base_probabilities(pairs, base_model, s)
            out = work / f"cv-{g}-{f}"
            train(base, pairs, out, s, checkpoint_every=0, reader=base_model)  # the model it holds, not one per fold
            nli = score_claims(NLIModel(str(out)), val, s, cache)
            labels = [e.label for e in val]
            # within a fold, thresholds fit on its own validation claims (the held-out slice's role in tune)
            m = measure(nli, labels, fit_profile(nli, labels, s.cutoffs))
            groups = [claim_key(e.claim) for e in val]
            honest = crossfit_measure_scores(nli, labels, groups, s.cutoffs, s.seed)
            m.update({f"crossfit_{k}": honest[k] for k in ("nli_balanced_accuracy", "escalation_rate")})
            try:  # the head tune would fit on this fold's scores, and what it measured out of fold
                oof = build_head(
                    [e.claim for e in val],
                    [e.contexts for e in val],
                    nli,
                    labels,
                    "",
                    target=s.target,
                    contradiction_target=s.contradiction_target,
                    seed=s.seed,
                ).meta["out_of_fold"]
                m.update({f"head_{k}": oof[k] for k in ("nli_balanced_accuracy", "escalation_rate")})
            except ValueError:
                pass
            m["per_dataset"] = per_dataset(val, nli, s)
            scores.append(m)
        mean: dict[str, Any] = {
            k: sum(m[k] or 0 for m in scores) / folds
            for k in (
                "nli_balanced_accuracy",
                "escalation_rate",
                "crossfit_nli_balanced_accuracy",
                "crossfit_escalation_rate",
            )
        }
        with_head = [m for m in scores if "head_nli_balanced_accuracy" in m]
        for k in ("head_nli_balanced_accuracy", "head_escalation_rate"):
            mean[k] = sum(m[k] or 0 for m in with_head) / len(with_head) if with_head else None
        mean["head_folds"] = len(with_head)
        for name in sorted({n for m in scores for n in m["per_dataset"]}):  # each dev file apart: the pooled folds
            cells = [m["per_dataset"][name] for m in scores if name in m["per_dataset"]]  # are mostly Factcheck-GPT's
            measured = dict.fromkeys(k for c in cells for k in c)  # a fold without a head lacks its keys: no zero
            # (None where no fold has it, or only a one-class slice's NaN AUC)
            mean[name] = {k: _mean(c[k] for c in cells if k in c and not math.isnan(c[k])) for k in measured}
            mean[name]["folds"] = len(cells)  # (claims: per fold; the head's keys: over the folds that had one)
            mean[name]["head_folds"] = sum("head_auc" in c for c in cells)
        results.append({"settings": values, **mean})
        print(f"cv {values}: {mean}", flush=True)
    return results


def split_spread(
    model: NLIModel, rows: dict[str, list[dict[str, Any]]], settings: TuneSettings, cache: Cache, splits: int
) -> dict[str, Any]:
    """How far "escalation at a true target" moves with the halving alone: the shared model's head fitted on the
    pooled train halves and measured on the eval halves, as the table's "shared + head" row, over ``splits`` seeds of
    the claim-disjoint halving from ``settings.seed`` (the first is the table's); per dev file, each seed's number,
    the mean and the range."""
    per: dict[str, list[dict[str, Any]]] = {name: [] for name in rows}
    for seed in range(settings.seed, settings.seed + splits):
        cut = {name: halves(r, seed) for name, r in rows.items()}
        evals = {name: examples(ev) for name, (_, ev) in cut.items()}
        head = fit_base_head(model, [e for tr, _ in cut.values() for e in examples(tr)], settings, cache)
        if isinstance(head, str):
            continue
        measured = metrics(headed(head, score(model, evals, settings, cache), evals), evals, head.thresholds, settings)
        for name, exs in evals.items():
            share = sum(e.label == "SUPPORTED" for e in exs) / len(exs)
            m = measured[name]
            at = {round(c["escalation"], 2): c["precision"] for c in m["escalation_curve"]}
            per[name].append(
                {
                    "seed": seed,
                    "supported_share": round(share, 3),
                    "oracle": m["oracle_escalation_rate"],
                    "precision_at_30": at.get(0.3),  # local precision with 30% escalated, most confident decided
                }
            )
    out: dict[str, Any] = {}
    for name, cells in per.items():
        values = [c["oracle"] for c in cells if c["oracle"] is not None]
        at_30 = [c["precision_at_30"] for c in cells if c["precision_at_30"] is not None]
        out[name] = {
            "seeds": cells,
            "mean": _mean(values),
            "range": [min(values), max(values)] if values else None,
            "precision_at_30_range": [round(min(at_30), 4), round(max(at_30), 4)] if at_30 else None,
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", nargs="+", default=list(DATASETS), help="dev file names in ../shared/benchmarks")
    ap.add_argument("--base", default=None, help="model to tune [default: the shared model]")
    ap.add_argument("--limit", type=int, default=None, help="first N rows of each file (smoke runs)")
    ap.add_argument("--flip", type=float, default=0.1, help="share of labels flipped in the noisy run")
    ap.add_argument("--variants", default="gold,noisy")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--epochs", type=int, default=TuneSettings.epochs)
    ap.add_argument("--lr", type=float, default=TuneSettings.lr)
    ap.add_argument("--distill", type=float, default=TuneSettings.distill)
    ap.add_argument("--l2sp", type=float, default=TuneSettings.l2sp)
    ap.add_argument("--batch-size", type=int, default=None)
    ap.add_argument(
        "--holdout", type=float, default=TuneSettings.holdout, help="share tune holds out (and fits its head on)"
    )
    ap.add_argument("--skip-tune", action="store_true", help="only the base model's rows, with and without a head")
    ap.add_argument("--cv", type=int, default=0, help="cross-validate --grid over K folds of the train half")
    ap.add_argument("--grid", default='[{"distill": 0.5}, {"distill": 0.0}]', help="JSON list of setting overrides")
    ap.add_argument(
        "--lines", type=int, default=0, metavar="N", help="cross-validate the head's decision lines over N seeds"
    )
    ap.add_argument(
        "--sizes", default=None, help="labelled-sample sizes (comma-separated) whose fitted thresholds are measured"
    )
    ap.add_argument("--draws", type=int, default=10, help="samples drawn at each of --sizes")
    ap.add_argument(
        "--splits",
        type=int,
        default=0,
        metavar="N",
        help="shared model + head over N halvings from --seed",
    )
    ap.add_argument("--work", default=None, help="where models go [default: a temporary folder]")
    ap.add_argument("--cache-dir", default=None)
    args = ap.parse_args()

    base = args.base or default_nli_model()
    settings = TuneSettings(
        epochs=args.epochs,
        lr=args.lr,
        distill=args.distill,
        l2sp=args.l2sp,
        batch_size=args.batch_size,
        holdout=args.holdout,
        seed=args.seed,
    )
    cache = Cache(args.cache_dir)
    tmp = tempfile.TemporaryDirectory(prefix="gj-tune-") if args.work is None else None
    work = Path(args.work or (tmp.name if tmp else "."))
    train_rows: dict[str, list[dict[str, Any]]] = {}
    evals: dict[str, list[TuneExample]] = {}
    for name in args.data:
        rows = read_rows(SHARED / "benchmarks" / f"{name}.jsonl", args.limit)
        tr, ev = halves(rows, args.seed)
        train_rows[name], evals[name] = tr, examples(ev)
    out: dict[str, Any] = {
        "benchmark": "tune",
        "base": Path(base).name,
        "seed": args.seed,
        "settings": {k: v for k, v in vars(settings).items()},
        "train_rows": {k: len(v) for k, v in train_rows.items()},
        "eval_rows": {k: len(v) for k, v in evals.items()},
    }
    if args.cv:
        grid = json.loads(args.grid)
        all_train = [r for rows in train_rows.values() for r in rows]
        out["cv"] = cross_validate(all_train, base, grid, args.cv, settings, work, cache)
        print(json.dumps(out))
        return

    if args.sizes:
        every = [e for rows in train_rows.values() for e in examples(rows)] + [e for x in evals.values() for e in x]
        sizes = [int(x) for x in args.sizes.split(",")]
        out["sizes"] = size_study(NLIModel(base), every, settings, cache, sizes, args.draws, args.seed)
        print(json.dumps(out))
        return

    if args.splits:
        whole = {name: read_rows(SHARED / "benchmarks" / f"{name}.jsonl", args.limit) for name in args.data}
        out["splits"] = split_spread(NLIModel(base), whole, settings, cache, args.splits)
        print_table(
            ["eval half", "seed", "SUPPORTED share", "escalation at a true target", "precision at 30% escalated"],
            [
                [n, c["seed"], c["supported_share"], c["oracle"], c["precision_at_30"]]
                for n, v in out["splits"].items()
                for c in v["seeds"]
            ],
        )
        print(json.dumps(out))
        return

    if args.lines:
        pooled = [e for rows in train_rows.values() for e in examples(rows)]
        out["lines"] = line_cv(NLIModel(base), pooled, settings, cache, args.lines)
        print_table(
            ["rule", "seed", "escalation", "local prec.", "95% CI", "nearest right", "nli bal.acc"],
            [[name, r["seed"], *_line_cells(r)] for name in LINES for r in out["lines"][name]["seeds"]],
        )
        print(json.dumps(out))
        return

    start = time.perf_counter()
    base_model = NLIModel(base)
    base_scores = score(base_model, evals, settings, cache)
    out["before"] = metrics(base_scores, evals, profile_for(base_model.name), settings)
    out["before"]["seconds"] = round(time.perf_counter() - start, 1)
    table = [["before", name, *_cells(m)] for name, m in out["before"].items() if name in evals]

    start = time.perf_counter()
    pooled = [e for rows in train_rows.values() for e in examples(rows)]
    head = fit_base_head(base_model, pooled, settings, cache)
    if isinstance(head, str):
        out["before_head"] = {"error": head}
        print(f"shared model + head: no head ({head})", flush=True)
    else:
        out["before_head"] = metrics(headed(head, base_scores, evals), evals, head.thresholds, settings)
        out["before_head"]["head"] = head.summary()
        table += [["shared + head", name, *_cells(m)] for name, m in out["before_head"].items() if name in evals]
    out["before_head"]["seconds"] = round(time.perf_counter() - start, 1)  # scoring the train halves + fitting
    if not isinstance(head, str):  # the same head's weights, its thresholds fitted by the other readings
        train_nli = score_claims(base_model, pooled, settings, cache)
        for lines in LINES[1:]:
            other = build_head(
                [e.claim for e in pooled],
                [e.contexts for e in pooled],
                train_nli,
                [e.label for e in pooled],
                base_model.identity,
                target=settings.target,
                contradiction_target=settings.contradiction_target,
                seed=settings.seed,
                lines=lines,
            )
            key = f"before_head_{lines}"
            out[key] = metrics(headed(other, base_scores, evals), evals, other.thresholds, settings)
            out[key]["head"] = other.summary()
            table += [[f"shared + head, {lines}", name, *_cells(m)] for name, m in out[key].items() if name in evals]

    for variant in [] if args.skip_tune else args.variants.split(","):
        files = []
        for name, rows in train_rows.items():
            rows = flip(rows, args.flip, args.seed) if variant == "noisy" else rows
            files.append(write(rows, work / f"data-{variant}" / f"{name}.jsonl"))
        start = time.perf_counter()
        result = tune(
            files,
            base,
            work / f"model-{variant}",
            settings,
            cache=cache,
            overwrite=True,
            log=lambda m: print(m, flush=True),
        )
        tuned = NLIModel(str(work / f"model-{variant}"))
        tuned_scores = score(tuned, evals, settings, cache)
        m = metrics(tuned_scores, evals, profile_for(tuned.name), settings)
        m["seconds"] = round(time.perf_counter() - start, 1)
        m["tune_seconds"] = result["seconds"]
        m["train_seconds"] = result["training"]["seconds"]
        m["thresholds"] = result["thresholds"]
        m["held_out"] = {"before": result["before"], "after": result["after"], "n": result["n_held_out"]}
        out[variant] = m
        table += [[variant, name, *_cells(x)] for name, x in m.items() if name in evals]
        start = time.perf_counter()
        stored = read_model_head(tuned.name)  # the head tune stored beside the weights, as the pipeline finds it
        if stored is None:
            out[f"{variant}_head"] = {"error": f"tune stored no head: {result['head'].get('reason')}"}
        else:
            tuned_head = VerdictHead(**stored)
            tuned_head.check_model(tuned.identity, tuned.name)
            mh = metrics(headed(tuned_head, tuned_scores, evals), evals, tuned_head.thresholds, settings)
            mh["head"] = tuned_head.summary()
            out[f"{variant}_head"] = mh
            table += [[f"{variant} + head", name, *_cells(x)] for name, x in mh.items() if name in evals]
        out[f"{variant}_head"]["seconds"] = round(time.perf_counter() - start, 1)  # applying the head and measuring
    print_table(
        [
            "model",
            "eval half",
            "n",
            "NLI bal.acc",
            "escalation",
            "local prec.",
            "contra P",
            "contra R",
            "oracle esc.",
            "oracle prec.",
        ],
        table,
    )
    curves = [
        [row, name, *(_pct(x["precision"]) for x in m["escalation_curve"])]
        for row, key in (("before", "before"), ("shared + head", "before_head"), *_tuned_rows(out))
        for name, m in out[key].items()
        if name in evals and m.get("escalation_curve")
    ]
    print("local precision at each share escalated (claims decided most confident first, on the eval half):")
    print_table(["model", "eval half", *(f"{x:.0%}" for x in CURVE)], curves)
    print(json.dumps(out))


def _tuned_rows(out: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (f"{v}{h}", f"{v}{k}")
        for v in ("gold", "noisy")
        for h, k in (("", ""), (" + head", "_head"))
        if f"{v}{k}" in out
    ]


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _line_cells(r: dict[str, Any]) -> list[Any]:
    lo, hi = r["local_precision_ci"]
    return [
        _pct(r["escalation_rate"]),
        _pct(r["local_precision"]),
        f"{100 * lo:.1f}-{100 * hi:.1f}",
        _pct(r["nearest_right"]),
        f"{r['nli_balanced_accuracy']:.1f}",
    ]


def _cells(m: dict[str, Any]) -> list[Any]:
    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.1f}%"

    return [
        m["n"],
        f"{m['nli_balanced_accuracy']:.1f}",
        pct(m["escalation_rate"]),
        pct(m["local_precision"]),
        pct(m["contradiction_precision"]),
        pct(m["contradiction_recall"]),
        pct(m["oracle_escalation_rate"]),
        pct(m["oracle_local_precision"]),
    ]


if __name__ == "__main__":
    main()
