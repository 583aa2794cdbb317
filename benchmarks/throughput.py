"""How busy a dataset run keeps its LLM call slots: wall time, the ideal, span utilisation and rows/s.

A cascade run with QA (two calls per answer) over FaithBench answers against the scripted LLM server (real OpenAI SDK
over real HTTP) whose every reply waits a lognormal time (median ``--median`` s, shape ``--sigma``; drawn from the
request's own text, so a rerun sees the same waits), at each ``--concurrency``; groundjudge's cache is off, so every
call is made. Per run:

- ideal = calls x mean reply time / concurrency (every slot busy from the first call to the last);
- span utilisation = reply seconds / (concurrency x span of the calls, first sent to last answered): 1.0 when no slot
  ever idles;
- rows/s, and the NLI-only time of the same rows (nli mode, no LLM), the floor a run cannot go below.

With ``--rate-limit N`` one more run at the highest concurrency against a server that answers HTTP 429 (with
Retry-After) past N requests in any second: 429s seen, requests/s against the limit, rows lost (must be 0) and calls
billed twice (must be 0).

    .venv/bin/python benchmarks/throughput.py --limit 160 --offset 160 --concurrency 8,32

Rows from ``--offset``: the engine's defaults were chosen on rows 1-160 of faithbench-dev, so the default offset
measures on rows never used for that. Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import SHARED, default_nli_model, print_table, read_rows
from benchmarks.cost import extract, verify
from groundjudge.cache import Cache
from groundjudge.checker.nli import NLIModel
from groundjudge.config import Config
from groundjudge.llm import LLMClient, RetryPolicy, get_provider
from groundjudge.pipeline.evaluator import Evaluator
from groundjudge.testing import RecordedRequest, Reply, ScriptedLLMServer, route

MODEL = "openai/gpt-4o-mini"


class Latency:
    """A lognormal wait per request, drawn from a hash of its body; records when each call came and how long it
    was made to wait."""

    def __init__(self, median: float, sigma: float) -> None:
        self.mu, self.sigma = math.log(median), sigma
        self.calls: list[tuple[float, float]] = []  # (arrival, wait)
        self.lock = threading.Lock()

    def wait(self, req: RecordedRequest) -> float:
        digest = hashlib.sha256(json.dumps(req.body, sort_keys=True).encode()).digest()
        u1 = (int.from_bytes(digest[:8], "big") + 0.5) / 2**64
        u2 = (int.from_bytes(digest[8:16], "big") + 0.5) / 2**64
        z = math.sqrt(-2 * math.log(u1)) * math.cos(2 * math.pi * u2)  # Box-Muller
        return math.exp(self.mu + self.sigma * z)

    def script(self, inner: Any) -> Any:
        def answer(req: RecordedRequest) -> Reply:
            reply = inner(req)
            seconds = self.wait(req)
            with self.lock:
                self.calls.append((time.perf_counter(), seconds))
            return Reply.slow(seconds, then=reply)

        return answer


def evaluator(server: ScriptedLLMServer, nli: NLIModel, cache_dir: Path, **kw: Any) -> Evaluator:
    cache = Cache(cache_dir, mode="off")
    provider = get_provider(MODEL, base_url=server.openai_base_url, timeout=60)
    client = LLMClient(provider, cache=cache, retry=RetryPolicy(max_attempts=8, initial_wait=0.05, jitter=0.05))
    return Evaluator(Config(llm=MODEL, qa=True, **kw), nli=nli, client=client, cache=cache)


def measure(
    name: str, ev: Evaluator, latency: Latency, rows: list[dict[str, Any]], concurrency: int, batch_size: int
) -> dict[str, Any]:
    latency.calls.clear()
    t0 = time.perf_counter()
    reports = list(ev.evaluate_many(rows, batch_size=batch_size))
    wall = time.perf_counter() - t0
    calls = list(latency.calls)
    reply_seconds = sum(w for _, w in calls)
    span = max(a + w for a, w in calls) - min(a for a, _ in calls) if calls else 0.0
    mean = reply_seconds / len(calls) if calls else 0.0
    return {
        "run": name,
        "concurrency": concurrency,
        "rows": len(reports),
        "calls": len(calls),
        "wall_s": round(wall, 2),
        "ideal_s": round(len(calls) * mean / concurrency, 2),
        "span_utilisation": round(reply_seconds / (concurrency * span), 3) if span else None,
        "rows_per_s": round(len(reports) / wall, 2),
        "errors": sum(1 for r in reports if r.verdict == "ERROR" or r.errors),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(SHARED / "benchmarks" / "faithbench-dev.jsonl"))
    ap.add_argument("--limit", type=int, default=160, help="answers")
    ap.add_argument("--offset", type=int, default=160, help="rows skipped first (see above)")
    ap.add_argument("--concurrency", default="8,32,64", help="comma-separated")
    ap.add_argument("--median", type=float, default=1.0, help="median reply time, seconds")
    ap.add_argument("--sigma", type=float, default=0.5, help="lognormal shape of the reply time")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--window", type=int, default=None, help="rows in flight (default: the engine's)")
    ap.add_argument("--nli-model", default=None)
    args = ap.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "sk-benchmark")
    rows = [r for r in read_rows(args.data, args.offset + args.limit)[args.offset :] if "answer" in r]
    nli = NLIModel.shared(args.nli_model or default_nli_model())
    latency = Latency(args.median, args.sigma)
    script = latency.script(route({"claims": extract, "claims_qa": extract, "judge": verify, "verify": verify}))
    results = []
    with tempfile.TemporaryDirectory() as tmp, ScriptedLLMServer(script) as server:
        base = Path(tmp)
        t0 = time.perf_counter()
        nli_only = Evaluator(Config(mode="nli", cache_mode="off"), nli=nli, cache=Cache(base / "n", mode="off"))
        list(nli_only.evaluate_many(rows, batch_size=args.batch_size))
        nli_seconds = time.perf_counter() - t0
        for i, c in enumerate(int(x) for x in args.concurrency.split(",")):
            ev = evaluator(server, nli, base / f"c{i}", concurrency=c, window=args.window)
            results.append(measure(f"cascade+QA c={c}", ev, latency, rows, c, args.batch_size))
    print_table(list(results[0]), [list(r.values()) for r in results])
    print(f"NLI only (same rows, nli mode, no LLM): {nli_seconds:.1f} s")
    summary = {
        "answers": len(rows),
        "latency": {"median": args.median, "sigma": args.sigma},
        "nli_only_s": round(nli_seconds, 2),
        "runs": {r["concurrency"]: {k: v for k, v in r.items() if k not in ("run", "concurrency")} for r in results},
        "span_utilisation": {r["concurrency"]: r["span_utilisation"] for r in results},
        "targets": {"span_utilisation": 0.85},
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
