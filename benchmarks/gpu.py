"""The local checker on a GPU, measured: weight dtypes, batch sizes, the out-of-memory path, tune and a run.

One script for a lent GPU machine (no network there: the model and the dev files are read from ``../shared``):

1. ``dtype``: the shared model in float32, float16 (what ``NLIModel`` picks on cuda) and bfloat16 over the same
   pairs (every claim of a Factcheck-GPT and a WiCE slice against every one of its passages, as the pipeline cuts
   them): pairs/s, the argmax labels that change against float32 on the same GPU, the largest change of entailment,
   the claims whose verdict at the model's nli-mode ``t_support`` flips, and balanced accuracy of each. float32 on
   the GPU against float32 on the CPU (a slice) says what the device alone changes.
2. ``batch``: pairs/s and peak GPU memory at batch sizes 16 ... 8192 (float16), up to memory.
3. ``oom``: the out-of-memory halving path forced (the process may use only a small share of the GPU's memory, and
   the batch asks for far more): the batch size it settles on, its time, and that its numbers are the ones a run
   at that size gives.
4. ``tune``: ``groundjudge tune``'s library call on the GPU over Factcheck-GPT (default settings): seconds, and the
   held-out balanced accuracy before and after.
5. ``throughput``: ``benchmarks/throughput.py`` with the NLI on the GPU (its own JSON line).

``--smoke`` runs every part on a few pairs (on the CPU where there is no GPU: the CPU test of this script).
Last line: one JSON object.

    python benchmarks/gpu.py --out gpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import ROOT, SHARED, default_nli_model, print_table, read_rows
from groundjudge.checker.nli import ENTAILMENT, NLIModel
from groundjudge.chunking import chunk_documents
from groundjudge.config import Config
from groundjudge.review.metrics import balanced_accuracy


def claim_pairs(model: NLIModel, limits: dict[str, int]) -> tuple[list[tuple[str, str]], list[int], list[bool]]:
    """Every claim against every passage of its row (the pipeline's 128-token passages): the pairs, the claim index
    of each pair, and each claim's gold (SUPPORTED or not)."""
    cfg = Config()
    pairs: list[tuple[str, str]] = []
    owner: list[int] = []
    gold: list[bool] = []
    for name, limit in limits.items():
        if limit <= 0:
            continue
        for row in read_rows(SHARED / "benchmarks" / name, limit):
            passages = chunk_documents(row["contexts"], model.tokenizer, cfg.passage_tokens, cfg.passage_overlap)
            for p in passages:
                pairs.append((p.text, row["claim"]))
                owner.append(len(gold))
            gold.append(row["label"] == "SUPPORTED")
    return pairs, owner, gold


def claim_entailment(probs: np.ndarray, owner: list[int], n: int) -> np.ndarray:
    """The best entailment of each claim over its passages."""
    best = np.zeros(n, dtype=np.float32)
    np.maximum.at(best, np.asarray(owner), probs[:, ENTAILMENT])
    return best


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def timed_predict(model: NLIModel, pairs: list[tuple[str, str]], repeat: int) -> tuple[np.ndarray, float]:
    """Probabilities and the best of ``repeat`` timed runs (after one warm-up batch)."""
    model.predict(pairs[: model.batch_size])
    best, probs = float("inf"), np.zeros((0, 3))
    for _ in range(repeat):
        synchronize(model.device)
        start = time.perf_counter()
        probs = model.predict(pairs)
        synchronize(model.device)
        best = min(best, time.perf_counter() - start)
    return probs, best


def load(path: str, device: str, dtype: str) -> NLIModel:
    import torch

    model = NLIModel(path, device=device, half=dtype == "float16")
    if dtype == "bfloat16":
        model.model.to(torch.bfloat16)
    return model


def dtype_part(path: str, device: str, limits: dict[str, int], repeat: int, cpu_slice: int) -> dict[str, Any]:
    ref = load(path, device, "float32")
    pairs, owner, gold = claim_pairs(ref, limits)
    t_support = Config().local_thresholds("nli", ref.name).t_support
    gold_names = ["SUPPORTED" if g else "NOT" for g in gold]
    out: dict[str, Any] = {"pairs": len(pairs), "claims": len(gold), "t_support": t_support}
    ref_probs, ref_s = timed_predict(ref, pairs, repeat)
    ref_claims = claim_entailment(ref_probs, owner, len(gold))
    rows = []
    for dtype in ("float32", "float16", "bfloat16"):
        model = ref if dtype == "float32" else load(path, device, dtype)
        probs, seconds = (ref_probs, ref_s) if dtype == "float32" else timed_predict(model, pairs, repeat)
        claims = claim_entailment(probs, owner, len(gold))
        pred = ["SUPPORTED" if e >= t_support else "NOT" for e in claims]
        stats = {
            "pairs_per_s": round(len(pairs) / seconds, 1),
            "seconds": round(seconds, 3),
            "argmax_changed": int((probs.argmax(1) != ref_probs.argmax(1)).sum()),
            "argmax_changed_share": round(float((probs.argmax(1) != ref_probs.argmax(1)).mean()), 5),
            "max_abs_entailment_change": round(float(np.abs(probs[:, ENTAILMENT] - ref_probs[:, ENTAILMENT]).max()), 5),
            "claim_verdicts_flipped": int(((claims >= t_support) != (ref_claims >= t_support)).sum()),
            "balanced_accuracy": round(100 * balanced_accuracy(gold_names, pred, ["SUPPORTED", "NOT"]), 2),
            "batch_size": model.batch_size,
        }
        out[dtype] = stats
        rows.append(
            [
                dtype,
                stats["pairs_per_s"],
                stats["argmax_changed"],
                stats["max_abs_entailment_change"],
                stats["claim_verdicts_flipped"],
                stats["balanced_accuracy"],
            ]
        )
        if model is not ref:
            del model
    print_table(["dtype", "pairs/s", "argmax changed", "max |d entail|", "claims flipped", "bal.acc"], rows)
    if device.startswith("cuda") and cpu_slice:
        cpu = load(path, "cpu", "float32")
        some = pairs[:cpu_slice]
        cpu_probs, cpu_s = timed_predict(cpu, some, 1)
        out["cuda_float32_vs_cpu_float32"] = {
            "pairs": len(some),
            "max_abs_change": round(float(np.abs(cpu_probs - ref_probs[: len(some)]).max()), 6),
            "argmax_changed": int((cpu_probs.argmax(1) != ref_probs[: len(some)].argmax(1)).sum()),
            "cpu_pairs_per_s": round(len(some) / cpu_s, 1),
        }
    return out | {"_pairs": pairs}


def batch_part(
    path: str, device: str, pairs: list[tuple[str, str]], sizes: list[int], repeat: int
) -> list[dict[str, Any]]:
    import torch

    model = load(path, device, "float16" if device.startswith("cuda") else "float32")
    results = []
    for size in sizes:
        model.batch_size = size
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        _, seconds = timed_predict(model, pairs, repeat)
        peak = torch.cuda.max_memory_allocated() / 2**30 if device.startswith("cuda") else None
        halved = model.batch_size < size
        results.append(
            {
                "asked": size,
                "used": model.batch_size,
                "pairs_per_s": round(len(pairs) / seconds, 1),
                "peak_gib": round(peak, 2) if peak is not None else None,
                "halved": halved,
            }
        )
        print(f"batch {size}: {results[-1]}", flush=True)
        if halved:
            break
    return results


def oom_part(path: str, device: str, pairs: list[tuple[str, str]], fraction: float, asked: int) -> dict[str, Any]:
    """Force the halving path: a small memory share and a batch far above it."""
    import torch

    if not device.startswith("cuda"):
        return {"skipped": "no cuda"}
    model = load(path, device, "float16")
    longest = sorted(pairs, key=lambda p: -len(p[0]))[: max(asked * 2, 64)]
    torch.cuda.empty_cache()
    torch.cuda.set_per_process_memory_fraction(fraction)
    model.batch_size = asked
    try:
        start = time.perf_counter()
        probs = model.predict(longest)
        synchronize(device)
        seconds = time.perf_counter() - start
        settled = model.batch_size
        again, _ = timed_predict(model, longest, 1)  # a run that starts at the settled size: the same numbers?
        result = {
            "memory_fraction": fraction,
            "pairs": len(longest),
            "asked": asked,
            "settled": settled,
            "recovered": settled < asked,
            "seconds_with_halving": round(seconds, 3),
            "max_abs_change_vs_settled_run": round(float(np.abs(probs - again).max()), 6),
            "argmax_changed_vs_settled_run": int((probs.argmax(1) != again.argmax(1)).sum()),
        }
    except Exception as exc:  # the measurement reports what broke
        result = {"error": f"{type(exc).__name__}: {exc}"[:500], "asked": asked, "fraction": fraction}
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
        torch.cuda.empty_cache()
    print(f"oom: {result}", flush=True)
    return result


def tune_part(path: str, device: str, limit: int | None, epochs: int | None) -> dict[str, Any]:
    from groundjudge.learn.tune import TuneSettings, tune

    data = SHARED / "benchmarks" / "factcheckgpt-stance.jsonl"
    with tempfile.TemporaryDirectory() as tmp:
        if limit:
            part = Path(tmp) / "data.jsonl"
            part.write_text("".join(data.read_text(encoding="utf-8").splitlines(keepends=True)[:limit]))
            data = part
        settings = TuneSettings() if epochs is None else TuneSettings(epochs=epochs)
        start = time.perf_counter()
        try:
            res = tune([data], path, Path(tmp) / "tuned", settings, device=device, log=print)
        except Exception as exc:  # the measurement reports what broke
            return {"error": f"{type(exc).__name__}: {exc}"[:500]}
        seconds = time.perf_counter() - start

    return {
        "seconds": round(seconds, 1),
        "claims": res["n_claims"],
        "held_out": res["n_held_out"],
        "train_pairs": res["n_train_pairs"],
        "training": {k: v for k, v in res["training"].items() if not isinstance(v, (list, dict))},
        "before": res["before"],
        "after": res["after"],
    }


def throughput_part(args: list[str], timeout: float) -> dict[str, Any]:
    cmd = [sys.executable, str(ROOT / "benchmarks" / "throughput.py"), *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"over {timeout} s"}
    print(proc.stdout[-4000:], proc.stderr[-2000:], flush=True)
    lines = [x for x in proc.stdout.splitlines() if x.startswith("{")]
    return json.loads(lines[-1]) if proc.returncode == 0 and lines else {"error": proc.stderr[-1000:]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nli-model", default=None)
    ap.add_argument("--device", default=None, help="default: cuda when there is one")
    ap.add_argument("--factcheck", type=int, default=600, help="Factcheck-GPT rows for the dtype part")
    ap.add_argument("--wice", type=int, default=120, help="WiCE rows for the dtype part")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--parts", default="dtype,batch,oom,tune,throughput")
    ap.add_argument("--oom-fraction", type=float, default=0.01, help="share of GPU memory in the forced-OOM part")
    ap.add_argument("--oom-batch", type=int, default=4096)
    ap.add_argument("--tune-limit", type=int, default=None, help="first N Factcheck-GPT rows (default: all)")
    ap.add_argument("--tune-epochs", type=int, default=None)
    ap.add_argument("--throughput-args", default="--limit 160 --offset 160 --concurrency 8,32 --warm-nli")
    ap.add_argument("--throughput-timeout", type=float, default=300)
    ap.add_argument("--smoke", action="store_true", help="every part on a few rows (the CPU test)")
    ap.add_argument("--out", default=None, help="also write the JSON here")
    args = ap.parse_args()
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    path = args.nli_model or default_nli_model()
    parts = set(args.parts.split(","))
    if args.smoke:
        args.factcheck, args.wice, args.repeat, args.tune_limit, args.tune_epochs = 2, 0, 1, 60, 1
        args.throughput_args = "--limit 4 --offset 160 --concurrency 2 --median 0.01"
    # "false" (or a process forked after the tokenizer ran) leaves one tokenizer thread: then pairs/s is its ceiling
    tokenizer_threads = os.environ.get("TOKENIZERS_PARALLELISM", "default")
    env: dict[str, Any] = {"device": device, "torch": torch.__version__, "tokenizers_parallelism": tokenizer_threads}
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(0)
        env |= {"gpu": props.name, "gpu_memory_gib": round(props.total_memory / 2**30, 1)}
    result: dict[str, Any] = {"env": env, "model": path}
    print(json.dumps(env), flush=True)
    pairs: list[tuple[str, str]] = []

    def save() -> None:  # after each part: a run cut short keeps what it measured
        if args.out:
            Path(args.out).write_text(json.dumps(result) + "\n")

    if "dtype" in parts:
        dt = dtype_part(
            path,
            device,
            {"factcheckgpt-stance.jsonl": args.factcheck, "wice-dev.jsonl": args.wice},
            args.repeat,
            0 if args.smoke else 2000,
        )
        pairs = dt.pop("_pairs")
        result["dtype"] = dt
        save()
    if not pairs:
        model = load(path, "cpu", "float32")
        pairs = claim_pairs(model, {"factcheckgpt-stance.jsonl": args.factcheck})[0]
    if "batch" in parts:
        sizes = [16, 64] if args.smoke else [16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192]
        result["batch"] = batch_part(path, device, pairs, sizes, args.repeat)
        save()
    if "oom" in parts:
        result["oom"] = oom_part(path, device, pairs, args.oom_fraction, args.oom_batch)
        save()
    if "tune" in parts:
        result["tune"] = tune_part(path, device, args.tune_limit, args.tune_epochs)
        print(f"tune: {result['tune']}", flush=True)
        save()
    if "throughput" in parts:
        result["throughput"] = throughput_part(args.throughput_args.split(), args.throughput_timeout)
    save()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
