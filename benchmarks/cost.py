"""What an answer costs in LLM calls, tokens and USD: direct, with a warm provider prefix cache, through the
provider batch API, and replayed from groundjudge's own cache.

Runs the fixtures and a dev file (FaithBench by default: ~12 summaries per source document, as in a prompt
comparison) in cascade mode with QA on, against the scripted LLM server (real OpenAI SDK over real HTTP; the server
emulates OpenAI's automatic prefix caching: cached from 1024 tokens on, in 128-token steps, and the Batch API). The
scripted model answers every prompt plausibly (claims = the answer's sentences, quotes from the source), so what is
measured is groundjudge's request pattern and token accounting, not a model's judgement. Prices: the price table's
openai/gpt-4o-mini (cached input at 50%, batch at 50%).

    .venv/bin/python benchmarks/cost.py --limit 120

Last line: one JSON object with requests_per_answer (direct, QA on), replay_requests, cached_input_share (judge
calls), batch_cost_ratio (batch USD / direct USD, both with the provider's prefix cache).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import ROOT, SHARED, default_nli_model, print_table, read_rows
from groundjudge.cache import Cache
from groundjudge.checker.nli import NLIModel
from groundjudge.config import Config
from groundjudge.llm import LLMClient, RetryPolicy, get_provider
from groundjudge.pipeline.evaluator import Evaluator
from groundjudge.testing import (
    RecordedRequest,
    Reply,
    ScriptedLLMServer,
    claims_in,
    fenced_block,
    prompt_name,
    route,
)

MODEL = "openai/gpt-4o-mini"


def extract(req: RecordedRequest) -> Reply:
    """Claims = the answer's sentences; with claims_qa, one question per claim (at most the number asked)."""
    from groundjudge.chunking import claim_sentences

    answer = fenced_block(req, "ANSWER")
    sentences = [s.text for s in claim_sentences(answer)] or [answer.strip() or "(empty)"]
    out: dict[str, Any] = {"claims": [{"text": s, "source": s} for s in sentences]}
    if prompt_name(req) == "claims_qa":
        n = int(re.search(r"write (\d+) verification", req.last_user).group(1))  # type: ignore[union-attr]
        out["questions"] = [
            {"question": f"What does the text say in point {i}?", "answer_from_answer": s[:40]}
            for i, s in enumerate(sentences[:n], 1)
        ]
    return Reply.json(out)


def verify(req: RecordedRequest) -> Reply:
    """Every claim SUPPORTED with a verbatim quote from source 1; questions answered from the source."""
    source = fenced_block(req, "SOURCE 1")
    quote = " ".join(source.split()[:8]) or "(none)"
    out: dict[str, Any] = {
        "verdicts": [
            {"claim_id": cid, "verdict": "SUPPORTED", "reason": "stated", "quotes": [{"source": 1, "text": quote}]}
            for cid in claims_in(req)
        ]
    }
    if prompt_name(req) == "verify":
        listing = json.loads(fenced_block(req, "QUESTIONS") or "[]")
        out = {"answers": [{"id": q["id"], "context_answer": quote[:40]} for q in listing], **out}
    return Reply.json(out)


def evaluator(server: ScriptedLLMServer, nli: NLIModel, cache_dir: Path, **kw: Any) -> Evaluator:
    cache = Cache(cache_dir, mode=kw.get("cache_mode", "use"))
    provider = get_provider(MODEL, base_url=server.openai_base_url, timeout=30)
    client = LLMClient(provider, cache=cache, retry=RetryPolicy(max_attempts=3, initial_wait=0.01, jitter=0.01))
    return Evaluator(Config(llm=MODEL, qa=True, batch_poll_seconds=0.0, **kw), nli=nli, client=client, cache=cache)


def run(name: str, ev: Evaluator, server: ScriptedLLMServer, rows: list[dict[str, Any]]) -> dict[str, Any]:
    before = len(server.requests)
    t0 = time.perf_counter()
    reports = list(ev.evaluate_many(rows, batch_size=32))
    seconds = time.perf_counter() - t0
    new = server.requests[before:]
    u = ev.usage
    answers = sum(1 for r in rows if "answer" in r)
    judge = [r for r in new if prompt_name(r) in ("verify", "judge")]
    judge_in = sum(int((r.reply_usage or {}).get("prompt_tokens", 0)) for r in judge)
    judge_cached = sum(
        int(((r.reply_usage or {}).get("prompt_tokens_details") or {}).get("cached_tokens", 0)) for r in judge
    )
    return {
        "run": name,
        "answers": answers,
        "requests": len(new),
        "requests_per_answer": len(new) / answers,
        "input_tokens": u.input_tokens,
        "cached_input_tokens": u.cached_input_tokens,
        "output_tokens": u.output_tokens,
        "usd": u.cost_usd,
        "usd_per_answer": u.cost_usd / answers,
        "judge_cached_share": judge_cached / judge_in if judge_in else 0.0,
        "errors": sum(1 for r in reports if r.errors or r.verdict == "ERROR"),
        "seconds": seconds,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(SHARED / "benchmarks" / "faithbench-dev.jsonl"))
    ap.add_argument("--limit", type=int, default=120, help="dev-file rows (plus the 8 fixtures)")
    ap.add_argument("--nli-model", default=None)
    args = ap.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "sk-benchmark")
    rows = read_rows(ROOT / "fixtures" / "samples.jsonl") + read_rows(args.data, args.limit)
    rows = [r for r in rows if "answer" in r]  # answers: where the two-call budget applies
    nli = NLIModel.shared(args.nli_model or default_nli_model())
    script = route({"claims": extract, "claims_qa": extract, "judge": verify, "verify": verify})
    results = []
    with tempfile.TemporaryDirectory() as tmp, ScriptedLLMServer(script) as server:
        base = Path(tmp)
        # cold: a fresh provider (nothing in its prefix cache) for every request
        server.min_cached_prefix_tokens = 10**9
        results.append(run("direct, cold provider cache", evaluator(server, nli, base / "a"), server, rows))
        # the provider's prefix cache as it really is: answers about the same source share the judge's prefix
        server.min_cached_prefix_tokens = 1024
        server._prefixes.clear()
        results.append(run("direct, warm provider cache", evaluator(server, nli, base / "b"), server, rows))
        results.append(run("batch API", evaluator(server, nli, base / "c", batch_api=True), server, rows))
        results.append(
            run("replay (groundjudge cache)", evaluator(server, nli, base / "b", cache_mode="only"), server, rows)
        )
    headers = [
        "run",
        "answers",
        "requests",
        "req/answer",
        "in tok",
        "cached in",
        "out tok",
        "USD",
        "USD/answer",
        "judge cached share",
        "errors",
        "s",
    ]
    print_table(
        headers,
        [
            [
                r["run"],
                r["answers"],
                r["requests"],
                r["requests_per_answer"],
                r["input_tokens"],
                r["cached_input_tokens"],
                r["output_tokens"],
                r["usd"],
                r["usd_per_answer"],
                r["judge_cached_share"],
                r["errors"],
                r["seconds"],
            ]
            for r in results
        ],
    )
    cold, warm, batch, replay = results
    summary = {
        "answers": cold["answers"],
        "requests_per_answer": round(cold["requests_per_answer"], 3),
        "replay_requests": replay["requests"],
        "cached_input_share": round(warm["judge_cached_share"], 3),
        # against the direct run with the same provider prefix cache, so that only the batch discount is measured
        "batch_cost_ratio": round(batch["usd"] / warm["usd"], 3) if warm["usd"] else None,
        "warm_cost_ratio": round(warm["usd"] / cold["usd"], 3) if cold["usd"] else None,
        "usd_per_answer": {r["run"]: round(r["usd_per_answer"], 7) for r in results},
        "targets": {
            "requests_per_answer": 2.0,
            "replay_requests": 0,
            "cached_input_share": 0.5,
            "batch_cost_ratio": 0.55,
        },
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
