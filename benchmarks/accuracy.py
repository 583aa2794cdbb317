"""Accuracy on labelled data: the real pipeline beside the seeds' method, on the same NLI model, in one run.

    python benchmarks/accuracy.py --data ../shared/benchmarks/factcheckgpt-stance.jsonl --mode nli
    python benchmarks/accuracy.py --data ../shared/benchmarks/faithbench-dev.jsonl --limit 100
    python benchmarks/accuracy.py --mode cascade --nli-model TUNED_DIR   # a tuned model, its stored thresholds

Claim rows (label SUPPORTED / UNSUPPORTED / CONTRADICTED) are scored SUPPORTED vs not; answer rows (label
consistent / hallucinated) by the response rule: consistent when every judged claim is SUPPORTED (the default;
the score-threshold variant is printed too). The seeds' method is each answer sentence or claim against each
whole context, truncated at the model's limit, best entailment wins, 0.5 threshold.

Without an LLM (the default here) the cascade's local share is measured: which claims NLI decides alone
(escalation_rate is the rest), how precise those local verdicts are, and how precise and complete its local
CONTRADICTED calls are; ``--mode cascade`` without an LLM runs the NLI stage alone for this. The thresholds are the
model's own (stored beside a tuned or calibrated model's weights) unless given. With --llm the judge runs for real.
The last line printed is one JSON object.

``--threshold-cv`` (nli mode's threshold) and ``--cascade-margin-cv`` (a fewer-pairs margin for the cascade's line)
replay the product's evidence rule and routing on stored scores of every planned piece, by claim-disjoint
cross-validation (docs/explanation/checker-reading.md has the numbers).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import CLAIM_FILES, SHARED, claim_sample, default_nli_model, print_table, read_rows
from groundjudge.cache import Cache
from groundjudge.checker import evidence
from groundjudge.checker.evidence import ClaimPlan, EvidenceSelector
from groundjudge.checker.head import claim_folds, claim_key
from groundjudge.checker.nli import ENTAILMENT, NLIModel, NLIScorer
from groundjudge.chunking import chunk_documents, claim_sentences, split_sentences
from groundjudge.config import Config
from groundjudge.errors import ArgumentError
from groundjudge.models import AnswerReport, Claim, LocalThresholds
from groundjudge.pipeline.evaluator import Evaluator
from groundjudge.review.metrics import (
    agreement_intervals,
    balanced_accuracies,
    balanced_accuracy,
    cohen_kappa,
    label_metrics,
    labelled_prediction,
)
from groundjudge.review.stats import wilson
from groundjudge.stages.citations import parse_citations
from groundjudge.stages.claims import claim_from_input, claims_from_sentences
from groundjudge.stages.route import Decision, decide_locally, evidence_rule, local_contradiction, route_claim
from groundjudge.stats import percentile_interval, resampled_sums
from groundjudge.tally import every_claim_supported

BINARY = ["SUPPORTED", "NOT_SUPPORTED"]
CURVE = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)  # shares escalated, for the escalation-precision curve
ANSWER = ["consistent", "hallucinated"]


def seeds_method(model: NLIModel, rows: list[dict[str, Any]]) -> list[bool]:
    """Each claim (or answer sentence) against each whole context, truncated; supported iff best entailment >= 0.5;
    an answer is consistent iff all its sentences are supported."""
    import torch

    out = []
    for r in rows:
        hyps = [r["claim"]] if "claim" in r else [s.text for s in claim_sentences(r["answer"])]
        ok = True
        for h in hyps:
            best = 0.0
            for ctx in r["contexts"]:
                enc = model.tokenizer(
                    ctx, h, truncation="only_first", max_length=model.max_length, return_tensors="pt"
                ).to(model.device)
                with torch.inference_mode():
                    probs = torch.softmax(model.model(**enc).logits.float(), -1)[0].cpu().numpy()
                col = model.columns[ENTAILMENT]
                best = max(best, float(probs[col])) if col is not None else best
            ok = ok and best >= 0.5
        out.append(ok)
    return out


def verbatim_rows(
    n: int, seed: int = 0, paths: Sequence[str | Path] = CLAIM_FILES, whole: bool = False
) -> list[dict[str, Any]]:
    """Rows whose claim is stated word for word in its source: ``n`` claim texts of the dev files (seeded), each put
    at a random place among 5-25 consecutive sentences of an unrelated row's context (one of another claim; with
    ``whole``, among all the sentences of an unrelated WiCE page, 8.4k characters on average). Gold is SUPPORTED for
    every row; ``at`` and ``sentences`` say where the claim stands. A fragment just before the claim that does not
    end a sentence gets a full stop, so that the claim is a sentence of its own."""
    rows = claim_sample(paths, None, seed)
    rng = random.Random(seed)
    claims = sorted({r["claim"] for r in rows})
    rng.shuffle(claims)
    pages = [r for r in rows if r["id"].startswith("wice")] if whole else rows
    out: list[dict[str, Any]] = []
    for i, claim in enumerate(claims[:n]):
        other = rng.choice([r for r in pages if r["claim"] != claim])
        sentences = split_sentences(rng.choice(other["contexts"]))
        first = 0 if whole else rng.randrange(max(1, len(sentences) - 25))
        piece = [s.text for s in sentences[first : len(sentences) if whole else first + rng.randint(5, 25)]]
        at = rng.randint(0, len(piece))
        if at and not piece[at - 1].rstrip("\"')]").endswith((".", "!", "?")):
            piece[at - 1] += "."  # the claim is a sentence of its own (scraped text has fragments that run on)
        piece.insert(at, claim)
        out.append(
            {
                "id": f"verbatim-{i:04d}",
                "claim": claim,
                "contexts": [" ".join(piece)],
                "label": "SUPPORTED",
                "at": at,
                "sentences": len(piece),
            }
        )
    return out


def balanced_accuracy_ci(rows: list[dict[str, Any]], reports: list[AnswerReport], claim_level: bool) -> list[float]:
    """95% interval of the balanced accuracy (in points), a bootstrap over claim texts (Factcheck-GPT repeats a claim
    over rows: its rows are resampled together) or over answers."""
    # each report's prediction as the headline (label_metrics) counts it: a failure is its own column, no detection
    pred = [labelled_prediction(rep, "claim" if claim_level else "answer") for rep in reports]
    if claim_level:
        gold = ["SUPPORTED" if r["label"] == "SUPPORTED" else "NOT_SUPPORTED" for r in rows]
        clusters: list[Any] = [claim_key(r["claim"]) for r in rows]
        labels = BINARY
    else:
        gold, labels = [r["label"] for r in rows], ANSWER
        clusters = list(range(len(rows)))
    labels = list(labels) + sorted({p for p in pred if p not in labels})  # as label_metrics' table shows them
    lo, hi = agreement_intervals(gold, pred, labels, clusters)["balanced_accuracy_ci"]
    return [round(100 * lo, 1), round(100 * hi, 1)]


def escalation_curve(
    support: Sequence[float | None], gold: Sequence[str], line: float | None, levels: Sequence[float] = CURVE
) -> list[dict[str, Any]]:
    """Local precision against escalation: claims decided most confident first (SUPPORTED at or above ``line``,
    not SUPPORTED below it, confidence the distance from the line in log-odds), at each share escalated. ``support``:
    each claim's support score (a verdict head's probability, else the entailment; None: not scored, left out).
    Drawn on the rows it is measured on: what the scores allow, for reading the trade-off, not a held-out number."""
    line = 0.5 if line is None else line
    scored = [(s, g) for s, g in zip(support, gold, strict=True) if s is not None]
    if not scored:
        return []

    def logit(p: float) -> float:
        p = min(max(p, 1e-6), 1 - 1e-6)
        return math.log(p / (1 - p))

    order = sorted(scored, key=lambda x: -abs(logit(x[0]) - logit(line)))
    out = []
    for level in levels:
        decided = order[: round((1 - level) * len(order))]
        right = sum((s >= line) == (g == "SUPPORTED") for s, g in decided)
        iv = wilson(right, len(decided))
        out.append({"escalation": level, "decided": len(decided), "precision": iv.value, "precision_ci": iv.ci})
    return out


def verbatim(ev: Evaluator, rows: list[dict[str, Any]], reports: list[AnswerReport], seconds: float, args: Any) -> None:
    """The --verbatim result: the share of claims stated word for word in their source that come out SUPPORTED."""
    called = [bool(r.claims) and r.claims[0].label == "SUPPORTED" for r in reports]
    share = wilson(sum(called), len(called))
    # evidence selection's recall: the claim's own sentence is in the window that entails it best
    best = [r.claims[0].nli.entailment_passage if r.claims and r.claims[0].nli else None for r in reports]
    found = wilson(sum(p is not None and row["claim"] in p.text for p, row in zip(best, rows, strict=True)), len(rows))
    out: dict[str, Any] = {
        "benchmark": f"verbatim-{args.verbatim}" + ("-whole-pages" if args.whole_pages else ""),
        "mode": ev.config.resolved_mode,
        "nli_model": ev.nli.name,
        "sentences": evidence.SENTENCES,
        "n": len(rows),
        "supported": share.value,
        "supported_ci": [share.lo, share.hi],
        "best_window_holds_claim": found.value,
        "best_window_holds_claim_ci": found.ci,
        "chars": round(sum(len(r["contexts"][0]) for r in rows) / len(rows)),
        "missed": [r["id"] for r, ok in zip(rows, called, strict=True) if not ok],
        "seconds": round(seconds, 1),
    }
    if not args.no_seed:
        seed = wilson(sum(seeds_method(ev.nli, rows)), len(rows))
        out["seed_supported"], out["seed_supported_ci"] = seed.value, [seed.lo, seed.hi]
    print(f"verbatim claims called SUPPORTED: {share.value:.3f} (95% CI {share.lo:.3f}-{share.hi:.3f}), n={len(rows)}")
    print(json.dumps(out))


# -- --threshold-cv: the nli-mode threshold by claim-disjoint cross-validation on replayed scores ------------------


class StoredScorer(NLIScorer):
    """Scores looked up in a table of every pair a replay planned (the NLI model is never run): the real selector
    (``EvidenceSelector.run``) replays its rule on them, counting the pairs it asks for."""

    def __init__(self, model: NLIModel, table: dict[tuple[str, str], np.ndarray]) -> None:
        super().__init__(model)
        self.table = table
        self.asked = 0

    def score(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        self.asked += len(pairs)
        return np.array([self.table[p] for p in pairs], dtype=np.float32).reshape(len(pairs), 3)


@dataclass
class Replay:
    """One file's rows planned as the pipeline plans them, every piece of every claim scored once."""

    name: str
    rows: list[dict[str, Any]]
    claims: list[list[Claim]]  # each row's claims (its one claim, or its answer's sentences)
    plans: list[ClaimPlan]
    table: dict[tuple[str, str], np.ndarray]

    @property
    def claim_level(self) -> bool:
        return "claim" in self.rows[0]


def plan_and_score(name: str, rows: list[dict[str, Any]], model: NLIModel, cache: Cache, config: Config) -> Replay:
    """Plan every claim of ``rows`` as nli mode does (claims, passages, ``EvidenceSelector.plan``), and score each
    planned piece once, with early exit and the fewer-pairs rule off, through the NLI score cache."""
    claims: list[list[Claim]] = []
    items: list[tuple[list[str], list[Any]]] = []
    cut: dict[tuple[str, ...], list[Any]] = {}
    for r in rows:
        if "claim" in r:
            cl = claim_from_input(r["claim"])
        else:  # nli mode: the answer's sentences, citation markers stripped (pipeline.steps.claims_local)
            parsed = parse_citations(r["answer"], len(r["contexts"]), None, config.citation_style)
            cl = claims_from_sentences(parsed.text)
        key = tuple(r["contexts"])
        if key not in cut:
            cut[key] = chunk_documents(list(key), model.tokenizer, config.passage_tokens, config.passage_overlap)
        claims.append(cl)
        items.append(([c.text for c in cl], cut[key]))
    scorer = NLIScorer(model, cache)
    plans = EvidenceSelector(scorer, k=config.evidence_k).plan(items)
    pairs = list(dict.fromkeys((p.text, pl.claim) for pl in plans for p in pl.pieces))
    table: dict[tuple[str, str], np.ndarray] = {}
    start = time.perf_counter()
    for i in range(0, len(pairs), 256):  # chunks: progress shown, and the cache keeps what a stopped run scored
        chunk = pairs[i : i + 256]
        table.update(zip(chunk, scorer.score(chunk), strict=True))
        print(
            f"{name}: {min(i + 256, len(pairs))}/{len(pairs)} pairs, {time.perf_counter() - start:.0f} s",
            file=sys.stderr,
        )
    return Replay(name, rows, claims, plans, table)


def replay_rule(
    rp: Replay, model: NLIModel, config: Config, mode: str, t: LocalThresholds, margin: float | None = None
) -> tuple[list[list[Decision]], np.ndarray]:
    """Each claim's routing decision and each row's NLI pairs in ``mode`` under thresholds ``t``: the selector set
    up as ``pipeline.steps`` sets it up for them (``stages.route.evidence_rule``; ``margin``: the fewer-pairs rule's,
    None for the product's ``evidence.MARGIN``), its rule (``EvidenceSelector.run``) and the routing
    (``stages.route.route_claim``) run on the stored scores."""
    contradiction = local_contradiction(t, model)
    # no head: the replay is of the raw model
    rule = evidence_rule(
        mode, t, reads_every_score=contradiction, conflict_check=config.conflict_check, weak_floor=config.weak_floor
    )
    selector = EvidenceSelector(StoredScorer(model, rp.table), k=config.evidence_k, margin=margin, **rule)
    results = selector.run(rp.plans, len(rp.rows))
    decisions = [
        [
            route_claim(
                c,
                r,
                mode=mode,
                thresholds=t,
                local_contradiction=contradiction,
                conflict_check=config.conflict_check,
                escalate_conflicts=config.escalate_conflicts,
            )
            for c, r in zip(cl, res, strict=True)
        ]
        for cl, res in zip(rp.claims, results, strict=True)
    ]
    pairs = np.array([float(sum(r.passages_scored for r in res)) for res in results])
    return decisions, pairs


def replay_at(rp: Replay, model: NLIModel, config: Config, t_support: float) -> tuple[np.ndarray, np.ndarray]:
    """Each row's prediction (SUPPORTED claim; consistent answer) and NLI pairs in nli mode at ``t_support``
    (:func:`replay_rule`)."""
    t = config.model_copy(update={"t_support": t_support}).local_thresholds("nli", model.name)
    decisions, pairs = replay_rule(rp, model, config, "nli", t)
    pred = np.array(
        [every_claim_supported(len(ds), sum(d.label == "SUPPORTED" for d in ds)) for ds in decisions], dtype=bool
    )
    return pred, pairs


def bal_acc(gold: np.ndarray, pred: np.ndarray) -> float:
    """Balanced accuracy (points) of boolean predictions against boolean gold."""
    if not len(gold):
        return float("nan")
    return 100 * float(balanced_accuracies(confusion_cells(gold, pred).sum(axis=0).reshape(2, 2)))


def confusion_cells(gold: np.ndarray, pred: np.ndarray) -> np.ndarray:
    """Per row, its 2x2 confusion cell as a one-hot row of four (gold positive first)."""
    cells = np.zeros((len(gold), 4))
    cells[np.arange(len(gold)), 2 * (~gold).astype(int) + (~pred).astype(int)] = 1
    return cells


def paired_difference(gold: np.ndarray, a: np.ndarray, b: np.ndarray, units: Sequence[Any], seed: int = 0) -> Any:
    """Balanced accuracy of predictions ``a`` minus ``b`` (points), with each resample's differences: a bootstrap
    over ``units`` (claim texts, answers), both rules on the same resample."""
    index: dict[Any, int] = {}
    for u in units:
        index.setdefault(u, len(index))
    per_unit = np.zeros((len(index), 8))
    np.add.at(per_unit, [index[u] for u in units], np.hstack([confusion_cells(gold, a), confusion_cells(gold, b)]))
    draws = resampled_sums(per_unit, seed=seed)
    diff = balanced_accuracies(draws[:, :4].reshape(-1, 2, 2)) - balanced_accuracies(draws[:, 4:].reshape(-1, 2, 2))
    point = bal_acc(gold, a) - bal_acc(gold, b)
    return point, 100 * diff


def pooled_folds(units: dict[str, list[Any]], cv_files: Sequence[str], folds: int, seed: int) -> dict[str, np.ndarray]:
    """Each file's fold per row, by claim text over the files pooled (``checker.head.claim_folds``): a claim in two
    files, or in two rows, is always in one fold. What both cross-validations (thresholds, margins) split by."""
    keys = [k for f in cv_files for k in units[f]]
    fold_of = dict(zip(keys, claim_folds(keys, folds, seed), strict=True))
    return {f: np.array([fold_of[k] for k in units[f]], dtype=int) for f in cv_files}


def cross_validate(
    grid: Sequence[float],
    default: float,
    preds: dict[str, np.ndarray],
    gold: dict[str, np.ndarray],
    units: dict[str, list[Any]],
    cv_files: Sequence[str],
    folds: int,
    seeds: int,
) -> dict[str, Any]:
    """The threshold picked on each fold's training part and measured out of fold (``preds[file][j]``: each row's
    prediction at ``grid[j]``; ``units``: each row's claim text, which decides its fold over the files pooled), for
    each fold seed; against ``default``, with a paired bootstrap interval of the difference."""
    d = grid.index(default)
    # folds by claim text over the pooled claim files; on each fold's training part, the threshold with the best mean
    # of the files' balanced accuracies (a tie: the one nearest the default), measured on the held-out fold
    picked: list[list[float]] = []
    oof: dict[str, list[float]] = {f: [] for f in cv_files}
    oof_diff: list[dict[str, Any]] = []
    for seed in range(seeds):
        fold_of = pooled_folds(units, cv_files, folds, seed)
        per_seed: list[float] = []
        oof_pred = {f: np.zeros(len(gold[f]), dtype=bool) for f in cv_files}
        for fold in range(folds):
            test = {f: fold_of[f] == fold for f in cv_files}
            scores = np.mean(
                [[bal_acc(gold[f][~test[f]], preds[f][j][~test[f]]) for j in range(len(grid))] for f in cv_files],
                axis=0,
            )
            best = [int(i) for i in np.flatnonzero(scores >= scores.max() - 1e-9)]
            j = min(best, key=lambda i: (abs(grid[i] - default), grid[i]))
            per_seed.append(grid[j])
            for f in cv_files:
                oof_pred[f][test[f]] = preds[f][j][test[f]]
        picked.append(per_seed)
        diffs: dict[str, Any] = {}
        for f in cv_files:
            oof[f].append(round(bal_acc(gold[f], oof_pred[f]), 2))
            point, draws = paired_difference(gold[f], oof_pred[f], preds[f][d], units[f], seed=seed)
            diffs[f] = (point, draws)
        mean_point = float(np.mean([p for p, _ in diffs.values()]))
        mean_draws = np.mean([dr for _, dr in diffs.values()], axis=0)
        ci = percentile_interval(mean_point, mean_draws)
        oof_diff.append({"seed": seed, "mean_minus_default": round(mean_point, 2), "ci": [round(x, 2) for x in ci]})
    flat = [t for s in picked for t in s]
    chosen = float(np.median(flat))
    chosen = min(grid, key=lambda t: (abs(t - chosen), abs(t - default)))
    return {
        "files": cv_files,
        "folds": folds,
        "seeds": seeds,
        "picked": picked,
        "median_picked": chosen,
        "out_of_fold_balanced_accuracy": oof,
        "default_balanced_accuracy": {f: round(bal_acc(gold[f], preds[f][d]), 2) for f in cv_files},
        "out_of_fold_minus_default": oof_diff,
        # a default moves only where the picked rule beats it out of fold beyond noise under every fold seed
        "beats_default": all(x["ci"][0] > 0 for x in oof_diff),
    }


def replays_of(args: Any) -> tuple[Config, NLIModel, list[Replay]]:
    """The replays' config, model and files (``--cv-data``, then ``--cv-answers``), every planned piece scored
    once through the cache: what ``--threshold-cv`` and ``--cascade-margin-cv`` replay their rules on."""
    config = Config.make(
        mode="nli",
        nli_model=args.nli_model or default_nli_model(),
        qa=False,
        passage_tokens=args.passage_tokens,
        passage_overlap=min(Config().passage_overlap, args.passage_tokens // 4),
        evidence_k=args.k or None,
        use_head=not args.no_head,
    )
    if Evaluator(config).head is not None:  # the pipeline would score every piece and decide on the head's scale
        raise ArgumentError(
            f"{config.nli_model} has a verdict head stored beside it: the replays are of the raw model's rule; "
            "pass --no-head"
        )
    model = NLIModel(config.nli_model)
    cache = Cache(args.cache_dir)
    files = [Path(p) for p in args.cv_data.split(",")]
    replays = [plan_and_score(f.stem, read_rows(f, args.limit), model, cache, config) for f in files]
    if args.cv_answers and args.cv_answers_limit:
        rows = read_rows(args.cv_answers, args.cv_answers_limit)
        replays.append(plan_and_score(Path(args.cv_answers).stem, rows, model, cache, config))
    return config, model, replays


def grid_of(spec: str) -> list[float]:
    """``LOW:HIGH:STEP`` as the grid's values, rounded to 4 places."""
    lo, hi, step = (float(x) for x in spec.split(":")[:3])
    return sorted({round(lo + i * step, 4) for i in range(round((hi - lo) / step) + 1)})


def threshold_cv(args: Any) -> None:
    """The --threshold-cv result (see ``--threshold-cv``'s help): one JSON line."""
    start = time.perf_counter()
    config, model, replays = replays_of(args)
    default = config.local_thresholds("nli", model.name).t_support
    assert default is not None
    grid = sorted({*grid_of(args.cv_grid), default})
    scored_s = time.perf_counter() - start
    out: dict[str, Any] = {"benchmark": "threshold-cv", "nli_model": model.name, "default": default, "grid": grid}
    out["files"] = {}
    # every row's prediction and pairs at every threshold of the grid, on the same scores
    preds: dict[str, np.ndarray] = {}
    pairs: dict[str, np.ndarray] = {}
    gold: dict[str, np.ndarray] = {}
    units: dict[str, list[Any]] = {}
    for rp in replays:
        at = [replay_at(rp, model, config, t) for t in grid]
        preds[rp.name] = np.stack([p for p, _ in at])
        pairs[rp.name] = np.stack([n for _, n in at])
        if rp.claim_level:
            gold[rp.name] = np.array([r["label"] == "SUPPORTED" for r in rp.rows])
            units[rp.name] = [claim_key(r["claim"]) for r in rp.rows]
        else:
            gold[rp.name] = np.array([r["label"] == "consistent" for r in rp.rows])
            units[rp.name] = list(range(len(rp.rows)))
    cv_files = [rp.name for rp in replays if rp.claim_level]
    out["cv"] = cross_validate(grid, default, preds, gold, units, cv_files, args.cv_folds, args.cv_seeds)
    chosen = out["cv"]["median_picked"]
    for rp in replays:
        f, row = rp.name, dict[str, Any]()
        n_claims = sum(len(c) for c in rp.claims)
        for name, t in (("default", default), ("median_picked", chosen)):
            j = grid.index(t)
            iv = agreement_intervals(
                ["Y" if g else "N" for g in gold[f]], ["Y" if p else "N" for p in preds[f][j]], ["Y", "N"], units[f]
            )["balanced_accuracy_ci"]
            row[name] = {
                "t_support": t,
                "balanced_accuracy": round(bal_acc(gold[f], preds[f][j]), 2),
                "balanced_accuracy_ci": [round(100 * x, 1) for x in iv],
                "pairs": int(pairs[f][j].sum()),
                "pairs_per_claim": round(float(pairs[f][j].sum()) / max(n_claims, 1), 3),
            }
        point, draws = paired_difference(gold[f], preds[f][grid.index(chosen)], preds[f][grid.index(default)], units[f])
        row["median_picked_minus_default"] = round(point, 2)
        row["median_picked_minus_default_ci"] = [round(x, 2) for x in percentile_interval(point, draws)]
        row["rows"], row["claims"] = len(rp.rows), n_claims
        row["pieces"] = sum(len(pl.pieces) for pl in rp.plans)
        row["curve"] = {str(t): round(bal_acc(gold[f], preds[f][j]), 2) for j, t in enumerate(grid)}
        row["pairs_curve"] = {str(t): int(pairs[f][j].sum()) for j, t in enumerate(grid)}
        out["files"][f] = row
    out["scoring_seconds"] = round(scored_s, 1)
    out["seconds"] = round(time.perf_counter() - start, 1)
    print_table(
        [
            "file",
            "claims",
            f"bal.acc at {default}",
            f"bal.acc at {chosen}",
            f"pairs/claim at {default}",
            f"at {chosen}",
        ],
        [
            [
                f,
                r["claims"],
                r["default"]["balanced_accuracy"],
                r["median_picked"]["balanced_accuracy"],
                r["default"]["pairs_per_claim"],
                r["median_picked"]["pairs_per_claim"],
            ]
            for f, r in out["files"].items()
        ],
    )
    print(
        f"thresholds picked per seed (folds): {out['cv']['picked']}; "
        f"out of fold {out['cv']['out_of_fold_balanced_accuracy']} "
        f"against {out['cv']['default_balanced_accuracy']} at {default}"
    )
    print(json.dumps(out))


# -- --cascade-margin-cv: a margin for the cascade's line, by claim-disjoint cross-validation on replayed scores ---

EXACT = "exact"  # the grid's point for today's rule: evidence.MARGIN, which reaches below 0 under the cascade's line


def cascade_replay(
    rp: Replay, model: NLIModel, config: Config, margins: Sequence[float | None]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The cascade (the model's cascade thresholds) replayed at each fewer-pairs margin (None: ``evidence.MARGIN``):
    per margin, each claim's local UNSUPPORTED (routed "nli" with that label), its escalation (routed "judge"),
    both ``(margins, claims)`` over the rows' claims in order, and each row's pairs ``(margins, rows)``."""
    t = config.local_thresholds("cascade", model.name)
    local, escalated, pairs = [], [], []
    for m in margins:
        decisions, n = replay_rule(rp, model, config, "cascade", t, margin=m)
        flat = [d for ds in decisions for d in ds]
        local.append([d.route == "nli" and d.label == "UNSUPPORTED" for d in flat])
        escalated.append([d.route == "judge" for d in flat])
        pairs.append(n)
    return np.array(local, dtype=bool), np.array(escalated, dtype=bool), np.array(pairs)


def precision_differences(
    local: np.ndarray, right: np.ndarray, units: Sequence[Any], ref: int, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Local precision at each grid point minus at ``ref`` (``local``: ``(points, claims)`` decided; ``right``: the
    claim is truly not SUPPORTED), with each resample's differences ``(resamples, points)``: a paired bootstrap over
    ``units`` (claim texts), every point on the same resample; NaN where a side decides nothing."""
    index: dict[Any, int] = {}
    for u in units:
        index.setdefault(u, len(index))
    g = local.shape[0]
    per_unit = np.zeros((len(index), 2 * g))
    cols = np.hstack([local.T, (local & right[None, :]).T]).astype(float)  # decided per point, then right ones
    np.add.at(per_unit, [index[u] for u in units], cols)
    draws = resampled_sums(per_unit, seed=seed)
    sums = per_unit.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        prec = draws[:, g:] / draws[:, :g]
        point = sums[g:] / sums[:g]
    return point - point[ref], prec - prec[:, ref : ref + 1]


def _num(x: float, places: int = 4) -> float | None:
    return None if x is None or math.isnan(x) else round(float(x), places)


def _local_summary(
    local: np.ndarray, right: np.ndarray, escalated: np.ndarray, pairs: float, claims: int
) -> dict[str, Any]:
    """Local UNSUPPORTED decisions, their precision (Wilson 95%), the escalation share and the pairs per claim."""
    iv = wilson(int((local & right).sum()), int(local.sum()))
    return {
        "local": int(local.sum()),
        "precision": _num(iv.value) if iv.value is not None else None,
        "precision_ci": [round(x, 4) for x in iv.ci],
        "escalated": round(float(escalated.mean()), 4) if len(escalated) else None,
        "pairs_per_claim": round(pairs / max(claims, 1), 3),
    }


def margin_cv(
    labels: Sequence[str],
    exact: int,
    local: dict[str, np.ndarray],
    right: dict[str, np.ndarray],
    pairs: dict[str, np.ndarray],
    units: dict[str, list[Any]],
    cv_files: Sequence[str],
    folds: int,
    seeds: int,
) -> dict[str, Any]:
    """The margin picked on each fold's training part and measured out of fold, per fold seed (folds by claim text
    over the files pooled). The rule, fixed before looking: a margin is admissible on a training part when, on every
    file, the paired bootstrap 95% interval of its local precision minus exact's (``labels[exact]``) reaches 0 or
    above (not worse beyond noise); of those, the one with the fewest pairs on the training part (a tie: the one
    listed later, nearer exact). ``local[f]``: ``(points, claims)`` local UNSUPPORTED; ``pairs[f]``: per claim."""
    picked: list[list[str]] = []
    oof: list[dict[str, Any]] = []
    for seed in range(seeds):
        fold_of = pooled_folds(units, cv_files, folds, seed)
        per_seed: list[str] = []
        oof_local = {f: np.zeros(local[f].shape[1], dtype=bool) for f in cv_files}
        oof_pairs = {f: np.zeros(local[f].shape[1]) for f in cv_files}
        for fold in range(folds):
            test = {f: fold_of[f] == fold for f in cv_files}
            ok = np.ones(len(labels), dtype=bool)
            cost = np.zeros(len(labels))
            for f in cv_files:
                train = ~test[f]
                tu = [u for u, x in zip(units[f], train, strict=True) if x]
                point, draws = precision_differences(
                    local[f][:, train], right[f][train], tu, exact, seed=seeds * fold + seed
                )
                for j in range(len(labels)):
                    hi = percentile_interval(point[j], draws[:, j], undefined_lo=-1.0, undefined_hi=1.0)[1]
                    ok[j] &= bool(math.isnan(point[j]) or hi >= 0)
                cost += pairs[f][:, train].sum(axis=1)
            j = min(np.flatnonzero(ok), key=lambda i: (cost[i], -i))
            per_seed.append(labels[j])
            for f in cv_files:
                oof_local[f][test[f]] = local[f][j][test[f]]
                oof_pairs[f][test[f]] = pairs[f][j][test[f]]
        picked.append(per_seed)
        files: dict[str, Any] = {}
        for f in cv_files:
            both = np.stack([oof_local[f], local[f][exact]])
            point, draws = precision_differences(both, right[f], units[f], 1, seed=seed)
            lo, hi = percentile_interval(point[0], draws[:, 0], undefined_lo=-1.0, undefined_hi=1.0)
            n = len(oof_local[f])
            files[f] = {
                "local": int(oof_local[f].sum()),
                "precision": _num(float((oof_local[f] & right[f]).sum()) / max(int(oof_local[f].sum()), 1)),
                "precision_ci": [
                    round(x, 4) for x in wilson(int((oof_local[f] & right[f]).sum()), int(oof_local[f].sum())).ci
                ],
                "precision_minus_exact": _num(point[0]),
                "precision_minus_exact_ci": [round(lo, 4), round(hi, 4)],
                "pairs_per_claim": round(float(oof_pairs[f].sum()) / max(n, 1), 3),
                "exact_pairs_per_claim": round(float(pairs[f][exact].sum()) / max(n, 1), 3),
                "more_local_than_exact": int((oof_local[f] & ~local[f][exact]).sum()),
                "fewer_local_than_exact": int((~oof_local[f] & local[f][exact]).sum()),
            }
        oof.append({"seed": seed, "files": files})
    # the recommended margin: the median of the picks (exact at its numeric margin), the nearest grid point
    value = {lab: (evidence.MARGIN if lab == EXACT else float(lab)) for lab in labels}
    med = float(np.median([value[x] for s in picked for x in s]))
    chosen = min(labels, key=lambda lab: (abs(value[lab] - med), -value[lab]))
    return {
        "files": list(cv_files),
        "folds": folds,
        "seeds": seeds,
        "rule": "fewest training pairs among margins whose paired-bootstrap 95% interval of local precision minus "
        "exact's reaches 0 on every file",
        "picked": picked,
        "median_picked": chosen,
        "out_of_fold": oof,
        # the picked margins keep exact's precision out of fold: no seed's interval on any file lies below 0
        "keeps_precision": all(x["files"][f]["precision_minus_exact_ci"][1] >= 0 for x in oof for f in cv_files),
    }


def cascade_margin_cv(args: Any) -> None:
    """The --cascade-margin-cv result (see its help): a table per file and one JSON line."""
    start = time.perf_counter()
    config, model, replays = replays_of(args)
    margins: list[float | None] = [*grid_of(args.margin_grid), None]
    labels = [*(str(m) for m in margins[:-1]), EXACT]
    exact = len(labels) - 1
    t = config.local_thresholds("cascade", model.name)
    out: dict[str, Any] = {
        "benchmark": "cascade-margin-cv",
        "nli_model": model.name,
        "cascade_thresholds": t.model_dump(),
        "exact_margin": evidence.MARGIN,
        "grid": labels,
        "files": {},
    }
    local: dict[str, np.ndarray] = {}
    right: dict[str, np.ndarray] = {}
    pairs: dict[str, np.ndarray] = {}
    units: dict[str, list[Any]] = {}
    for rp in replays:
        loc, esc, n = cascade_replay(rp, model, config, margins)
        claims = loc.shape[1]
        row: dict[str, Any] = {"rows": len(rp.rows), "claims": claims, "pieces": sum(len(p.pieces) for p in rp.plans)}
        if rp.claim_level:
            f = rp.name
            local[f], pairs[f] = loc, n  # one claim per row
            right[f] = np.array([r["label"] != "SUPPORTED" for r in rp.rows], dtype=bool)
            units[f] = [claim_key(r["claim"]) for r in rp.rows]
            point, draws = precision_differences(loc, right[f], units[f], exact)
        else:  # answers: no gold per claim; nli mode's own pairs beside (the NLI-only run's evidence work)
            right_all = np.zeros(claims, dtype=bool)
            nli_pairs = replay_at(rp, model, config, config.local_thresholds("nli", model.name).t_support or 0.5)[1]
            row["nli_mode_pairs_per_claim"] = round(float(nli_pairs.sum()) / max(claims, 1), 3)
        per: dict[str, Any] = {}
        for j, lab in enumerate(labels):
            cell = _local_summary(loc[j], right[rp.name] if rp.claim_level else right_all, esc[j], n[j].sum(), claims)
            if not rp.claim_level:
                cell.pop("precision"), cell.pop("precision_ci")
            else:
                lo, hi = percentile_interval(point[j], draws[:, j], undefined_lo=-1.0, undefined_hi=1.0)
                cell["precision_minus_exact"] = _num(point[j])
                cell["precision_minus_exact_ci"] = [round(lo, 4), round(hi, 4)]
            cell["more_local_than_exact"] = int((loc[j] & ~loc[exact]).sum())  # escalated by exact, local here
            cell["fewer_local_than_exact"] = int((~loc[j] & loc[exact]).sum())
            cell["pairs"] = int(n[j].sum())
            cell["pairs_saved"] = round(1 - float(n[j].sum()) / max(float(n[exact].sum()), 1), 4)
            per[lab] = cell
        row["margins"] = per
        out["files"][rp.name] = row
    cv_files = [rp.name for rp in replays if rp.claim_level]
    out["cv"] = margin_cv(labels, exact, local, right, pairs, units, cv_files, args.cv_folds, args.cv_seeds)
    out["seconds"] = round(time.perf_counter() - start, 1)
    for f, row in out["files"].items():
        print(f"{f}: {row['claims']} claims")
        print_table(
            [
                "M",
                "local UNSUP",
                "precision",
                "95% CI",
                "prec-exact",
                "95% CI",
                "escalated",
                "pairs/claim",
                "+local",
                "-local",
            ],
            [
                [
                    lab,
                    c["local"],
                    c.get("precision", "-"),
                    "{:.3f}-{:.3f}".format(*c["precision_ci"]) if "precision_ci" in c else "-",
                    c.get("precision_minus_exact", "-"),
                    "{:.3f}-{:.3f}".format(*c["precision_minus_exact_ci"]) if "precision_minus_exact_ci" in c else "-",
                    c["escalated"],
                    c["pairs_per_claim"],
                    c["more_local_than_exact"],
                    c["fewer_local_than_exact"],
                ]
                for lab, c in row["margins"].items()
            ],
        )
    cv = out["cv"]
    print(f"margins picked per seed (folds): {cv['picked']}; median {cv['median_picked']}")
    for x in cv["out_of_fold"]:
        print(f"seed {x['seed']} out of fold: {json.dumps(x['files'])}")
    print(json.dumps(out))


def main() -> None:
    defaults = Config()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(SHARED / "benchmarks" / "factcheckgpt-stance.jsonl"))
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--mode", choices=["nli", "cascade", "llm"], default=None)
    ap.add_argument("--llm", default=None, help="provider/model: run the real judge (needs its API key)")
    ap.add_argument("--base-url", default=None)
    ap.add_argument("--nli-model", default=None)
    ap.add_argument("--t-support", type=float, default=defaults.t_support)
    ap.add_argument("--t-contradict", type=float, default=defaults.t_contradict)
    ap.add_argument("--t-unsupported", type=float, default=None)
    ap.add_argument("--passage-tokens", type=int, default=defaults.passage_tokens)
    ap.add_argument("--k", type=int, default=defaults.evidence_k, help="passages per claim (0: all)")
    ap.add_argument("--score-threshold", type=float, default=0.5, help="for the score-threshold answer rule")
    ap.add_argument("--cache-dir", default=None, help="default: the user cache (re-runs are free)")
    ap.add_argument("--no-seed", action="store_true", help="skip the seeds' method")
    ap.add_argument("--no-head", action="store_true", help="ignore a verdict head stored with the model")
    ap.add_argument(
        "--verbatim",
        type=int,
        default=None,
        metavar="N",
        help="instead of --data: N dev claims each stated word for word at a random place in an unrelated passage "
        "(all gold SUPPORTED); prints the share called SUPPORTED with its interval",
    )
    ap.add_argument(
        "--whole-pages",
        action="store_true",
        help="with --verbatim: each claim among all the sentences of an unrelated WiCE page (long sources)",
    )
    ap.add_argument("--sentences", type=int, default=None, help="centred sentence windows per claim (0: off)")
    ap.add_argument(
        "--threshold-cv",
        action="store_true",
        help="instead of one run: nli mode's t_support chosen by claim-disjoint cross-validation on replayed scores "
        "(every planned piece of every claim scored once, the product's rule replayed at each threshold of --cv-grid; "
        "--limit applies to each file)",
    )
    benchmarks = SHARED / "benchmarks"
    ap.add_argument(
        "--cv-data",
        default=f"{benchmarks / 'wice-dev.jsonl'},{benchmarks / 'factcheckgpt-stance.jsonl'}",
        help="with --threshold-cv or --cascade-margin-cv: the claim files, comma-separated (folds by claim text over "
        "them pooled)",
    )
    ap.add_argument(
        "--cv-answers",
        default=str(benchmarks / "faithbench-dev.jsonl"),
        help="with --threshold-cv or --cascade-margin-cv: answer rows replayed beside (not used to pick)",
    )
    ap.add_argument(
        "--cv-answers-limit",
        type=int,
        default=200,
        help="with --threshold-cv or --cascade-margin-cv: answers (0: none)",
    )
    ap.add_argument("--cv-grid", default="0.30:0.80:0.01", help="with --threshold-cv: LOW:HIGH:STEP")
    ap.add_argument("--cv-folds", type=int, default=5)
    ap.add_argument("--cv-seeds", type=int, default=3, help="fold seeds")
    ap.add_argument(
        "--cascade-margin-cv",
        action="store_true",
        help="instead of one run: the cascade replayed (its thresholds, the product's rule) at each fewer-pairs margin "
        "of --margin-grid and at today's (exact), on the --threshold-cv files and cache; the margin picked by "
        "claim-disjoint cross-validation (the fewest pairs whose local UNSUPPORTED precision stays within noise of "
        "exact's)",
    )
    ap.add_argument("--margin-grid", default="0:0.21:0.01", help="with --cascade-margin-cv: LOW:HIGH:STEP")
    args = ap.parse_args()

    if args.sentences is not None:  # the evidence stage's default, for this process (how many windows buy what)
        evidence.SENTENCES = args.sentences
    if args.threshold_cv:
        threshold_cv(args)
        return
    if args.cascade_margin_cv:
        cascade_margin_cv(args)
        return
    mode = args.mode or ("cascade" if args.llm else "nli")
    # without an LLM a cascade cannot run: the NLI stage runs alone and the cascade's local share is measured with
    # the cascade thresholds in force (for a tuned model, those stored beside its weights)
    run_mode = mode if args.llm or mode == "nli" else "nli"
    rows = verbatim_rows(args.verbatim, whole=args.whole_pages) if args.verbatim else read_rows(args.data, args.limit)
    config = Config.make(
        mode=run_mode,
        llm=args.llm,
        base_url=args.base_url,
        nli_model=args.nli_model or default_nli_model(),
        qa=False,
        t_support=args.t_support,
        t_contradict=args.t_contradict,
        **({"t_unsupported": args.t_unsupported} if args.t_unsupported is not None else {}),
        passage_tokens=args.passage_tokens,
        passage_overlap=min(defaults.passage_overlap, args.passage_tokens // 4),
        evidence_k=args.k or None,
        use_head=not args.no_head,
    )
    ev = Evaluator(config, cache=Cache(args.cache_dir))
    start = time.perf_counter()
    reports: list[AnswerReport] = list(ev.evaluate_many(rows, batch_size=64))
    seconds = time.perf_counter() - start

    claim_level = "claim" in rows[0]
    claims = [c for r in reports for c in r.claims]
    if args.verbatim:
        verbatim(ev, rows, reports, seconds, args)
        return
    # what the cascade would decide locally (its thresholds, whatever mode ran; a verdict head's, on its probability)
    cascade = ev.local_thresholds("cascade")
    local = [
        decide_locally(c.nli, cascade.t_support, cascade.t_contradict, cascade.t_unsupported, cascade.line)
        if c.nli
        else None
        for c in claims
    ]
    escalation_rate = sum(x is None for x in local) / len(local) if local else None
    table: list[list[Any]] = []
    out: dict[str, Any] = {
        "benchmark": Path(args.data).stem,
        "mode": mode,
        "ran": run_mode,
        "nli_model": ev.nli.name,
        "n": len(reports),
        "thresholds": ev.thresholds.model_dump(),
        "cascade_thresholds": cascade.model_dump(),
    }

    # the same numbers `groundjudge metrics` prints for these reports
    m = label_metrics(reports)
    labels = BINARY if claim_level else ANSWER
    if claim_level:
        gold = ["SUPPORTED" if r["label"] == "SUPPORTED" else "NOT_SUPPORTED" for r in rows]
        decided = [(g, x) for g, x in zip(gold, local, strict=True) if x is not None]
        correct = sum((x == "SUPPORTED") == (g == "SUPPORTED") for g, x in decided)
        out["nli_decided_precision"] = correct / len(decided) if decided else None
        out["nli_decided"] = len(decided)
        # local contradiction calls of the cascade against the 3-way gold labels
        called = [r["label"] for r, x in zip(rows, local, strict=True) if x == "CONTRADICTED"]
        refuted = sum(r["label"] == "CONTRADICTED" for r in rows)
        hits = sum(g == "CONTRADICTED" for g in called)
        out["nli_decided_precision_ci"] = list(wilson(correct, len(decided)).ci) if decided else None
        # the cascade's line where a head's thresholds carry one (per class at the labelled mix), else the nli mode's
        line = cascade.line if cascade.line is not None else ev.local_thresholds("nli").t_support
        support = [c.nli.support if c.nli is not None and c.nli.error is None else None for c in claims]
        out["escalation_curve"] = escalation_curve(support, gold, line)
        out["local_contradictions"] = len(called)
        out["local_contradiction_precision"] = hits / len(called) if called else None
        out["local_contradiction_recall"] = hits / refuted if refuted else None
    else:
        gold = [r["label"] for r in rows]
        variant = [
            "consistent" if (r.scores.combined or 0) >= args.score_threshold else "hallucinated" for r in reports
        ]
        out["balanced_accuracy_score_rule"] = 100 * balanced_accuracy(gold, variant, ANSWER)
        out["nli_decided_precision"] = None
    out["balanced_accuracy"] = 100 * m["balanced_accuracy"]
    out["balanced_accuracy_ci"] = balanced_accuracy_ci(rows, reports, claim_level)
    out["kappa"] = m["kappa"]
    out["escalation_rate"] = escalation_rate
    out["pairs_scored"] = sum(r.nli_pairs for r in reports)
    out["claims"] = len(claims)
    out["seconds"] = round(seconds, 1)
    table.append([f"groundjudge {mode}", out["balanced_accuracy"], out["kappa"]])
    if not claim_level:
        table.append(
            [f"groundjudge {mode}, combined >= {args.score_threshold}", out["balanced_accuracy_score_rule"], "-"]
        )

    if not args.no_seed:
        seed_ok = seeds_method(ev.nli, rows)
        pos = labels[0]
        seed_pred = [pos if ok else labels[1] for ok in seed_ok]
        out["seed_balanced_accuracy"] = 100 * balanced_accuracy(gold, seed_pred, labels)
        out["delta_vs_seed"] = out["balanced_accuracy"] - out["seed_balanced_accuracy"]
        table.append(["seeds' method", out["seed_balanced_accuracy"], cohen_kappa(gold, seed_pred, labels)])

    refs = rows[0].get("reference_predictions") if not claim_level else None
    if refs:
        out["references"] = {}
        for name in refs:
            ref_pred = []
            for r in rows:
                v = r["reference_predictions"].get(name)
                ref_pred.append("consistent" if v is not None and float(v) >= 0.5 else "hallucinated")
            out["references"][name] = 100 * balanced_accuracy(gold, ref_pred, ANSWER)
            table.append([f"reference: {name}", out["references"][name], cohen_kappa(gold, ref_pred, ANSWER)])

    print_table(["method", "balanced_accuracy", "kappa"], table)
    if out.get("escalation_curve"):
        print_table(
            ["escalated", "decided", "local precision", "95% CI"],
            [
                [
                    f"{x['escalation']:.0%}",
                    x["decided"],
                    x["precision"],
                    "{:.3f}-{:.3f}".format(*x["precision_ci"]),
                ]
                for x in out["escalation_curve"]
                if x["precision"] is not None
            ],
        )
    print(
        f"cascade thresholds {cascade.model_dump()}: "
        f"escalation rate {escalation_rate}, NLI-decided precision {out['nli_decided_precision']}, "
        f"pairs {out['pairs_scored']}, {seconds:.1f} s"
    )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
