"""What `groundjudge tune` buys: the shared model tuned on half the dev claims, measured on the other half.

    python benchmarks/tune.py                       # factcheckgpt-stance + wice-dev, gold and 10%-flipped labels
    python benchmarks/tune.py --cv 3 --grid '[{"lr": 3e-5}, {"lr": 5e-5, "distill": 0}]'   # choose settings

Each dev file is split into a train and an eval half BY CLAIM TEXT (seeded), so that no claim is on both sides.
The shared model is tuned on the train halves twice: with the gold labels standing in for judge verdicts, and with
``--flip`` of them changed to another label, as a real judge errs. Tuning holds out its own slice of the train half to
calibrate the thresholds it stores with the model; the eval half is never seen. On each eval half, before (the base
model with its shipped thresholds) and after (the tuned model with its stored thresholds): NLI-only balanced
accuracy, cascade escalation rate and local precision, local contradiction precision and recall, seconds. "oracle"
columns refit the thresholds on the eval half itself (the best the scores allow at the target; not a fair number).

``--cv K`` instead cross-validates the settings in ``--grid`` over K claim-disjoint folds of the train half only.
The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import SHARED, default_nli_model, print_table, read_rows
from groundjudge.cache import Cache
from groundjudge.config import profile_for
from groundjudge.nli import NLIModel, NLIScorer
from groundjudge.tune import (
    LABELS,
    TuneExample,
    TuneSettings,
    attach_base_probabilities,
    build_pairs,
    claim_key,
    fit_profile,
    measure,
    score_claims,
    train,
    tune,
)

DATASETS = ("factcheckgpt-stance", "wice-dev")


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
        r["label"] = rng.choice([x for x in LABELS if x != r["label"]])
    return out


def examples(rows: list[dict[str, Any]]) -> list[TuneExample]:
    return [TuneExample(str(r["id"]), r["claim"], r["contexts"], r["label"], "gold") for r in rows]


def write(rows: list[dict[str, Any]], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def evaluate(model: NLIModel, evals: dict[str, list[TuneExample]], settings: TuneSettings, cache: Cache) -> dict:
    """Per dataset: metrics with the model's own thresholds (stored or shipped), and with thresholds refit there."""
    out = {}
    profile = profile_for(model.name)
    for name, exs in evals.items():
        nli = score_claims(model, exs, settings, cache)
        labels = [e.label for e in exs]
        m = measure(nli, labels, profile)
        oracle = measure(nli, labels, fit_profile(nli, labels, settings.target, settings.contradiction_target))
        m["oracle_escalation_rate"] = oracle["escalation_rate"]
        m["oracle_local_precision"] = oracle["local_precision"]
        m["oracle_nli_balanced_accuracy"] = oracle["nli_balanced_accuracy"]
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
            train(base, pairs, out, s, checkpoint_every=0)
            nli = score_claims(NLIModel(str(out)), val, s, cache)
            labels = [e.label for e in val]
            # within a fold, thresholds fit on its own validation claims (the held-out slice's role in tune)
            m = measure(nli, labels, fit_profile(nli, labels, s.target, s.contradiction_target))
            scores.append(m)
        mean = {k: sum(m[k] or 0 for m in scores) / folds for k in ("nli_balanced_accuracy", "escalation_rate")}
        results.append({"settings": values, **mean})
        print(f"cv {values}: {mean}", flush=True)
    return results


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
    ap.add_argument("--cv", type=int, default=0, help="cross-validate --grid over K folds of the train half")
    ap.add_argument("--grid", default='[{"distill": 0.5}, {"distill": 0.0}]', help="JSON list of setting overrides")
    ap.add_argument("--work", default=None, help="where models go [default: a temporary folder]")
    ap.add_argument("--cache-dir", default=None)
    args = ap.parse_args()

    base = args.base or default_nli_model()
    settings = TuneSettings(
        epochs=args.epochs, lr=args.lr, distill=args.distill, l2sp=args.l2sp, batch_size=args.batch_size, seed=args.seed
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

    start = time.perf_counter()
    base_model = NLIModel(base)
    out["before"] = evaluate(base_model, evals, settings, cache)
    out["before"]["seconds"] = round(time.perf_counter() - start, 1)
    table = [["before", name, *_cells(m)] for name, m in out["before"].items() if name != "seconds"]
    for variant in args.variants.split(","):
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
        metrics = evaluate(tuned, evals, settings, cache)
        metrics["seconds"] = round(time.perf_counter() - start, 1)
        metrics["tune_seconds"] = result["seconds"]
        metrics["train_seconds"] = result["training"]["seconds"]
        metrics["thresholds"] = result["thresholds"]
        metrics["held_out"] = {"before": result["before"], "after": result["after"], "n": result["n_held_out"]}
        out[variant] = metrics
        table += [[variant, name, *_cells(m)] for name, m in metrics.items() if name in evals]
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
    print(json.dumps(out))


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
