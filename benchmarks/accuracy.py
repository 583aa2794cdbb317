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
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import CLAIM_FILES, SHARED, claim_sample, default_nli_model, print_table, read_rows
from groundjudge.cache import Cache
from groundjudge.checker import evidence
from groundjudge.checker.head import claim_key
from groundjudge.checker.nli import ENTAILMENT, NLIModel
from groundjudge.chunking import claim_sentences, split_sentences
from groundjudge.config import Config
from groundjudge.models import AnswerReport
from groundjudge.pipeline.evaluator import Evaluator
from groundjudge.review.metrics import (
    agreement_intervals,
    answer_prediction,
    balanced_accuracy,
    cohen_kappa,
    label_metrics,
)
from groundjudge.review.stats import wilson
from groundjudge.stages.route import decide_locally

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
    if claim_level:
        gold = ["SUPPORTED" if r["label"] == "SUPPORTED" else "NOT_SUPPORTED" for r in rows]
        pred = [
            "SUPPORTED" if rep.claims and rep.claims[0].label == "SUPPORTED" else "NOT_SUPPORTED" for rep in reports
        ]
        clusters: list[Any] = [claim_key(r["claim"]) for r in rows]
        labels = BINARY
    else:
        gold, pred, labels = [r["label"] for r in rows], [answer_prediction(x) for x in reports], ANSWER
        clusters = list(range(len(rows)))
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
    args = ap.parse_args()

    if args.sentences is not None:  # the evidence stage's default, for this process (how many windows buy what)
        evidence.SENTENCES = args.sentences
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
