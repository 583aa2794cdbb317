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
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import SHARED, default_nli_model, print_table, read_rows
from groundjudge.cache import Cache
from groundjudge.checker.nli import ENTAILMENT, NLIModel
from groundjudge.chunking import claim_sentences
from groundjudge.config import Config
from groundjudge.models import AnswerReport
from groundjudge.pipeline.evaluator import Evaluator
from groundjudge.review.metrics import balanced_accuracy, cohen_kappa, label_metrics
from groundjudge.stages.route import decide_locally

BINARY = ["SUPPORTED", "NOT_SUPPORTED"]
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
    args = ap.parse_args()

    mode = args.mode or ("cascade" if args.llm else "nli")
    # without an LLM a cascade cannot run: the NLI stage runs alone and the cascade's local share is measured with
    # the cascade thresholds in force (for a tuned model, those stored beside its weights)
    run_mode = mode if args.llm or mode == "nli" else "nli"
    rows = read_rows(args.data, args.limit)
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
    # what the cascade would decide locally (its thresholds, whatever mode ran; a verdict head's, on its probability)
    cascade = ev.local_thresholds("cascade")
    local = [
        decide_locally(c.nli, cascade.t_support, cascade.t_contradict, cascade.t_unsupported) if c.nli else None
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
    print(
        f"cascade thresholds {cascade.model_dump()}: "
        f"escalation rate {escalation_rate}, NLI-decided precision {out['nli_decided_precision']}, "
        f"pairs {out['pairs_scored']}, {seconds:.1f} s"
    )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
