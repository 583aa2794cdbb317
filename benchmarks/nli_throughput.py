"""NLI throughput: the seeds' one-pair loop vs the model's bare batched ceiling vs groundjudge's scorer.

On the same model and claims (default ../shared/benchmarks/wice-dev.jsonl):
  naive        one (passage, claim) pair per forward pass, every claim against every passage
  ceiling      the model's bare forward pass over the pairs groundjudge scored, pre-tokenized, length-sorted batches
  groundjudge  the real scorer: BM25 evidence selection, rounds with early exit, batching; cache off

Prints a table; the last line is one JSON object. Targets: ceiling_ratio >= 0.9, speedup_vs_naive >= 5,
pairs pruned >= 3x with <= 1 point of balanced-accuracy loss.

    python benchmarks/nli_throughput.py --limit 120
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import SHARED, default_nli_model, print_table, read_rows
from groundjudge.checker.evidence import EvidenceSelector
from groundjudge.checker.nli import ENTAILMENT, NLIModel, NLIScorer
from groundjudge.chunking import chunk_documents, claim_sentences
from groundjudge.config import Config
from groundjudge.review.metrics import balanced_accuracy


def roc_auc(gold: list[bool], score: list[float]) -> float:
    """Probability that a positive outranks a negative (ties count half)."""
    pos = [s for g, s in zip(gold, score, strict=True) if g]
    neg = [s for g, s in zip(gold, score, strict=True) if not g]
    if not pos or not neg:
        return float("nan")
    p, n = np.array(pos)[:, None], np.array(neg)[None, :]
    return float(((p > n).sum() + 0.5 * (p == n).sum()) / (len(pos) * len(neg)))


class RecordingScorer(NLIScorer):
    """The real scorer, remembering every pair it was asked for (to replay them for the ceiling)."""

    def __init__(self, model: NLIModel) -> None:
        super().__init__(model, cache=None)
        self.pairs: list[tuple[str, str]] = []

    def score(self, pairs):  # type: ignore[no-untyped-def]
        self.pairs.extend(pairs)
        return super().score(pairs)


def ceiling(model: NLIModel, pairs: list[tuple[str, str]]) -> float:
    """Seconds for the bare model (its forward pass as groundjudge runs it: traced on a CPU) over pre-tokenized,
    length-sorted, dynamically padded batches."""
    import torch

    enc = model.tokenizer([p for p, _ in pairs], [h for _, h in pairs], truncation=False)
    feats = [{k: enc[k][i] for k in enc} for i in range(len(pairs))]
    feats.sort(key=lambda f: -len(f["input_ids"]))
    batches = [
        model.tokenizer.pad(feats[i : i + model.batch_size], return_tensors="pt")
        for i in range(0, len(feats), model.batch_size)
    ]
    start = time.perf_counter()
    with torch.inference_mode():
        for b in batches:
            model.classifier_logits({k: v.to(model.device) for k, v in b.items()})
    return time.perf_counter() - start


def main() -> None:
    defaults = Config()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(SHARED / "benchmarks" / "wice-dev.jsonl"))
    ap.add_argument("--limit", type=int, default=120, help="claims (rows) to use")
    ap.add_argument("--nli-model", default=None)
    ap.add_argument("--batch-size", type=int, default=None)
    ap.add_argument("--passage-tokens", type=int, default=defaults.passage_tokens)
    ap.add_argument("--overlap", type=int, default=defaults.passage_overlap)
    ap.add_argument("--k", type=int, default=defaults.evidence_k, help="passages per claim (0: all)")
    ap.add_argument("--early-exit", type=float, default=None, help="default: the model's nli-mode t_support")
    ap.add_argument(
        "--threshold", type=float, default=None, help="entailment >= this is SUPPORTED (default: t_support)"
    )
    ap.add_argument("--repeat", type=int, default=2, help="timed runs of groundjudge and the ceiling")
    ap.add_argument("--skip-naive", action="store_true", help="skip the slow one-pair loop")
    ap.add_argument(
        "--sentences", type=int, default=None, help="centred sentence windows per claim (0: passages alone, as before)"
    )
    args = ap.parse_args()

    model = NLIModel(args.nli_model or default_nli_model(), batch_size=args.batch_size)
    if args.early_exit is None:
        args.early_exit = defaults.local_thresholds("nli", model.name).t_support
    if args.threshold is None:
        args.threshold = defaults.local_thresholds("nli", model.name).t_support
    rows = read_rows(args.data, args.limit)
    items, gold = [], []
    for r in rows:
        claims = [r["claim"]] if "claim" in r else [s.text for s in claim_sentences(r["answer"])]
        items.append((claims, chunk_documents(r["contexts"], model.tokenizer, args.passage_tokens, args.overlap)))
        if "claim" in r and "label" in r:
            gold.append(r["label"] == "SUPPORTED")
    n_claims = sum(len(c) for c, _ in items)
    model.predict([("warm up", "warm up")])

    # groundjudge and the ceiling, alternated --repeat times; the best time of each counts (less noise)
    gj_times, ceil_times = [], []
    for _ in range(args.repeat):
        scorer = RecordingScorer(model)
        selector = EvidenceSelector(scorer, k=args.k or None, early_exit=args.early_exit, sentences=args.sentences)
        start = time.perf_counter()
        results = selector.check(items)
        gj_times.append(time.perf_counter() - start)
        ceil_times.append(ceiling(model, scorer.pairs))
    gj_s, ceil_s = min(gj_times), min(ceil_times)
    gj_pairs = len(scorer.pairs)
    gj_ent = [c.entailment for claims in results for c in claims]

    # naive
    naive_pairs, naive_s, naive_ent = 0, float("nan"), []
    if not args.skip_naive:
        start = time.perf_counter()
        for claims, passages in items:
            for claim in claims:
                best = 0.0
                for p in passages:
                    best = max(best, float(model.predict([(p.text, claim)])[0, ENTAILMENT]))
                    naive_pairs += 1
                naive_ent.append(best)
        naive_s = time.perf_counter() - start

    def acc(ent: list[float]) -> float | None:
        if not gold or len(ent) != len(gold):
            return None
        pred = ["SUPPORTED" if e >= args.threshold else "NOT" for e in ent]
        return 100 * balanced_accuracy(["SUPPORTED" if g else "NOT" for g in gold], pred, ["SUPPORTED", "NOT"])

    def auc(ent: list[float]) -> float | None:
        return roc_auc(gold, ent) if gold and len(ent) == len(gold) else None

    out = {
        "data": Path(args.data).name,
        "model": model.name,
        "device": model.device,
        "batch_size": model.batch_size,
        "claims": n_claims,
        "passages": sum(len(p) for _, p in items),
        "k": args.k,
        "early_exit": args.early_exit,
        "pairs_naive": naive_pairs,
        "sentences": selector.sentences,
        "pairs_groundjudge": gj_pairs,
        "pairs_per_claim": round(gj_pairs / n_claims, 3) if n_claims else None,
        "pairs_pruned_x": round(naive_pairs / gj_pairs, 2) if gj_pairs and naive_pairs else None,
        "naive_seconds": round(naive_s, 2),
        "ceiling_seconds": round(ceil_s, 2),
        "groundjudge_seconds": round(gj_s, 2),
        "naive_pairs_per_s": round(naive_pairs / naive_s, 2) if naive_pairs else None,
        "ceiling_pairs_per_s": round(gj_pairs / ceil_s, 2) if ceil_s else None,
        "groundjudge_pairs_per_s": round(gj_pairs / gj_s, 2) if gj_s else None,
        "ceiling_ratio": round(ceil_s / gj_s, 3) if gj_s else None,
        "speedup_vs_naive": round(naive_s / gj_s, 2) if naive_pairs and gj_s else None,
        "balanced_accuracy_naive": acc(naive_ent),
        "balanced_accuracy_groundjudge": acc(gj_ent),
        "roc_auc_naive": auc(naive_ent),
        "roc_auc_groundjudge": auc(gj_ent),
    }
    print_table(
        ["method", "pairs", "seconds", "pairs/s", "bal.acc", "roc_auc"],
        [
            [
                "naive",
                naive_pairs,
                naive_s,
                out["naive_pairs_per_s"],
                out["balanced_accuracy_naive"],
                out["roc_auc_naive"],
            ],
            ["ceiling", gj_pairs, ceil_s, out["ceiling_pairs_per_s"], "-", "-"],
            [
                "groundjudge",
                gj_pairs,
                gj_s,
                out["groundjudge_pairs_per_s"],
                out["balanced_accuracy_groundjudge"],
                out["roc_auc_groundjudge"],
            ],
        ],
    )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
