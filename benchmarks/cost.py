"""Tokens and USD per answer, measured on the wire, against RAGAS Faithfulness by the same count (issue 34).

Rows: Factcheck-GPT answers (two claims of the stance set that share one snippet, joined: an answer of two
sentences) and FaithBench summaries (a seeded sample), every context at most 5,000 characters, from
../shared/benchmarks. Runs, each against the scripted LLM server (real SDKs over real HTTP; the server counts ~4
characters a token, as ``score --json`` reports usage, and emulates the providers' prompt caches):

- ``default``: cascade with QA on, OpenAI (gpt-4o-mini list price); ``no-qa``; ``llm`` (``--mode llm``);
  ``batch`` (the default through the provider batch API, half price);
- ``default-anthropic``: the default on Anthropic (claude-haiku-4-5 list price), whose cache writes cost 25% more.

Per run and data set: calls per answer; input tokens per answer, fresh and cached (read from the provider's
prompt cache), cache writes, output tokens; USD per answer with prompt caching (what the provider bills) and
without (every input token at the input rate); and per call (claims_qa / claims / verify / judge) the tokens of
the fixed instructions (system message), of the schema (response_format or the tool, which the provider also
bills) and of the per-answer data. ``packed-4`` and ``packed-8``: the default with 4 or 8 answers per request
(``--pack-answers``), and whether every answer's verdict and scores are those of the default run. The scripted
model's replies are plausible but not a real model's, so output tokens show the shape, not a model's verbosity.

RAGAS 0.4.3 Faithfulness (2 calls per answer): ragas is not a dependency here, so its numbers are the ones
published in issue 34 for the same kind of rows (40 answers each, measured by request logging): 2,216 (FC) and
2,748 (FB) input tokens per answer at 4 characters a token; 1,756 and 2,209 in o200k. When tiktoken's o200k
encoding can be loaded (it downloads once; offline it cannot), groundjudge's requests are counted in o200k too.

    .venv/bin/python benchmarks/cost.py --limit 40

Last line: one JSON object (``per_answer`` by run and data set, ``ratio_to_ragas``, and the keys the test reads).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import SHARED, default_nli_model, print_table, read_rows
from groundjudge.cache import Cache
from groundjudge.checker.nli import NLIModel
from groundjudge.config import Config
from groundjudge.llm import LLMClient, RetryPolicy, get_provider
from groundjudge.pipeline.evaluator import Evaluator
from groundjudge.testing import RecordedRequest, Reply, ScriptedLLMServer, claims_in, fenced_block, prompt_name, route

MODELS = {"openai": "openai/gpt-4o-mini", "anthropic": "anthropic/claude-haiku-4-5"}
MAX_CONTEXT = 5_000
# RAGAS 0.4.3 Faithfulness, input tokens per answer, as published in issue 34 (same kinds of rows).
RAGAS = {"factcheck": {"chars4": 2216, "o200k": 1756}, "faithbench": {"chars4": 2748, "o200k": 2209}}
TARGET_RATIO = 0.8


# -- rows ---------------------------------------------------------------------------------------------------------


def factcheck_answers(limit: int, seed: int = 0) -> list[dict[str, Any]]:
    """Answers of two sentences: two different claims the stance set checks against one snippet, joined."""
    by_context: dict[str, list[str]] = collections.defaultdict(list)
    for r in read_rows(SHARED / "benchmarks" / "factcheckgpt-stance.jsonl"):
        claims = by_context[r["contexts"][0]]
        if r.get("claim") and r["claim"] not in claims:
            claims.append(r["claim"])
    contexts = sorted(c for c, claims in by_context.items() if len(claims) >= 2 and len(c) <= MAX_CONTEXT)
    random.Random(seed).shuffle(contexts)
    return [
        {"id": f"fc-{i}", "contexts": [c], "answer": " ".join(by_context[c][:2])}
        for i, c in enumerate(contexts[:limit])
    ]


def faithbench_answers(limit: int, seed: int = 0) -> list[dict[str, Any]]:
    rows = [
        r
        for r in read_rows(SHARED / "benchmarks" / "faithbench-dev.jsonl")
        if sum(len(c) for c in r["contexts"]) <= MAX_CONTEXT
    ]
    random.Random(seed).shuffle(rows)
    return [{"id": r["id"], "contexts": r["contexts"], "answer": r["answer"]} for r in rows[:limit]]


# -- the scripted model -------------------------------------------------------------------------------------------


def extract(req: RecordedRequest) -> Reply:
    """Claims = the answer's sentences; with claims_qa, one question per claim (the stage keeps as many as it
    asked for)."""
    from groundjudge.chunking import claim_sentences

    answer = fenced_block(req, "ANSWER")
    sentences = [s.text for s in claim_sentences(answer)] or [answer.strip() or "(empty)"]
    out: dict[str, Any] = {"claims": [{"text": s, "source": s} for s in sentences]}
    if prompt_name(req) == "claims_qa":
        out["questions"] = [
            {"question": f"What does the text say in point {i}?", "answer_from_answer": s[:40]}
            for i, s in enumerate(sentences, 1)
        ]
    return Reply.json(out)


def verify(req: RecordedRequest) -> Reply:
    """Every claim SUPPORTED with a verbatim quote from source 1; questions answered from the source."""
    source = fenced_block(req, "SOURCE 1")
    quote = " ".join(source.split()[:8]) or "(none)"
    out: dict[str, Any] = {
        "verdicts": [
            {
                "claim_id": cid,
                "verdict": "SUPPORTED",
                "reason": "stated",
                "quotes": [{"source": 1, "text": quote}],
                "error_type": None,
            }
            for cid in claims_in(req)
        ]
    }
    if prompt_name(req) == "verify":
        listing = json.loads(fenced_block(req, "QUESTIONS") or "[]")
        out = {"answers": [{"id": q["id"], "context_answer": quote[:40]} for q in listing], **out}
    return Reply.json(out)


# -- counting -----------------------------------------------------------------------------------------------------


def o200k() -> Any:
    """tiktoken's o200k encoding, or None when it cannot be loaded (not installed, or offline before its download)."""
    try:
        import tiktoken

        return tiktoken.get_encoding("o200k_base")
    except Exception:
        return None


def request_parts(req: RecordedRequest) -> tuple[str, str, str]:
    """(system text, schema as sent, per-answer text) of one request."""
    messages = req.messages
    system = messages[0]["content"] if messages and messages[0]["role"] == "system" else ""
    data = "\n".join(m["content"] for m in messages if m["role"] != "system")
    if req.api == "openai":
        schema = json.dumps(req.body.get("response_format", {}).get("json_schema", {}).get("schema", {}))
    else:
        schema = json.dumps([t.get("input_schema") for t in req.body.get("tools", [])])
    return system, schema, data


def evaluator(
    server: ScriptedLLMServer, nli: NLIModel, cache_dir: Path, provider: str, nli_cache: Cache, **kw: Any
) -> Evaluator:
    """An evaluator whose LLM replies are cached in ``cache_dir`` (one per run: every run pays its calls) and NLI
    scores in ``nli_cache`` (shared by the runs: the local model scores each claim once)."""
    cache = Cache(cache_dir, mode=kw.pop("cache_mode", "use"))
    model = MODELS[provider]
    base = server.openai_base_url if provider == "openai" else server.anthropic_base_url
    client = LLMClient(
        get_provider(model, base_url=base, timeout=30),
        cache=cache,
        retry=RetryPolicy(max_attempts=3, initial_wait=0.01, jitter=0.01),
    )
    kw.setdefault("qa", True)
    kw.setdefault("batch_state", str(cache_dir / "batches.json"))  # not the user's default cache folder
    return Evaluator(Config(llm=model, batch_poll_seconds=0.0, **kw), nli=nli, client=client, cache=nli_cache)


def run(
    name: str, data: str, ev: Evaluator, server: ScriptedLLMServer, rows: list[dict[str, Any]], enc: Any
) -> dict[str, Any]:
    before = len(server.requests)
    t0 = time.perf_counter()
    reports = list(ev.evaluate_many(rows, batch_size=16))
    seconds = time.perf_counter() - t0
    new = [r for r in server.requests[before:] if not r.rate_limited]
    u = ev.usage
    n = len(rows)
    price = ev.client.price if ev.client is not None else None
    batch = name == "batch"
    no_cache = price.cost(u.input_tokens, u.output_tokens, batch=batch) if price is not None else 0.0
    calls: dict[str, collections.Counter[str]] = {}
    for req in new:
        kind = prompt_name(req) or "other"
        system, schema, text = request_parts(req)
        c = calls.setdefault(kind, collections.Counter())
        c["calls"] += 1
        c["system"] += len(system) // 4
        c["schema"] += len(schema) // 4
        c["data"] += len(text) // 4
        if enc is not None:
            c["o200k_messages"] += len(enc.encode(system)) + len(enc.encode(text))
            c["o200k_schema"] += len(enc.encode(schema))
    per_call = {k: {f: round(v / c["calls"], 1) for f, v in c.items() if f != "calls"} for k, c in calls.items()}
    for k, c in calls.items():
        per_call[k]["calls_per_answer"] = round(c["calls"] / n, 3)
    out = {
        "run": name,
        "data": data,
        "answers": n,
        "calls_per_answer": round(len(new) / n, 3),
        "input_per_answer": round(u.input_tokens / n, 1),
        "input_with_schema_per_answer": round(sum(len(q.text) // 4 + len(q.format_text) // 4 for q in new) / n, 1),
        "fresh_input_per_answer": round((u.input_tokens - u.cached_input_tokens) / n, 1),
        "cached_input_per_answer": round(u.cached_input_tokens / n, 1),
        "cache_write_per_answer": round(u.cache_write_tokens / n, 1),
        "output_per_answer": round(u.output_tokens / n, 1),
        "usd_per_answer": u.cost_usd / n,
        "usd_per_answer_no_cache": no_cache / n,
        "per_call": per_call,
        "errors": sum(1 for r in reports if r.errors or r.verdict == "ERROR"),
        "verdicts": collections.Counter(r.verdict for r in reports),
        "reports": [r.model_dump(exclude={"usage"}) for r in reports],
        "seconds": round(seconds, 1),
    }
    if enc is not None:
        o2 = sum(c.get("o200k_messages", 0) for c in calls.values())
        out["o200k_input_per_answer"] = round(o2 / n, 1)
        out["o200k_input_with_schema_per_answer"] = round(
            (o2 + sum(c.get("o200k_schema", 0) for c in calls.values())) / n, 1
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, default=40, help="answers per data set")
    ap.add_argument("--runs", default="default,no-qa,llm,batch,default-anthropic,replay,packed-4,packed-8")
    ap.add_argument("--nli-model", default=None)
    args = ap.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "sk-benchmark")
    os.environ.setdefault("ANTHROPIC_API_KEY", "sk-ant-benchmark")
    wanted = args.runs.split(",")
    datasets = {"factcheck": factcheck_answers(args.limit), "faithbench": faithbench_answers(args.limit)}
    nli = NLIModel.shared(args.nli_model or default_nli_model())
    enc = o200k()
    script = route({"claims": extract, "claims_qa": extract, "judge": verify, "verify": verify})
    plans: dict[str, tuple[str, dict[str, Any]]] = {
        "default": ("openai", {}),
        "no-qa": ("openai", {"qa": False}),
        "llm": ("openai", {"mode": "llm"}),
        "batch": ("openai", {"batch_api": True}),
        "default-anthropic": ("anthropic", {}),
        "packed-4": ("openai", {"pack_answers": 4}),
        "packed-8": ("openai", {"pack_answers": 8}),
    }
    results: list[dict[str, Any]] = []
    replay_requests = 0
    with tempfile.TemporaryDirectory() as tmp:
        nli_cache = Cache(Path(tmp) / "nli")
        for data, rows in datasets.items():
            for name in [w for w in wanted if w in plans]:
                provider, kw = plans[name]
                with ScriptedLLMServer(script) as server:  # a fresh provider cache for every run
                    cache_dir = Path(tmp) / f"{data}-{name}"
                    ev = evaluator(server, nli, cache_dir, provider, nli_cache, **kw)
                    results.append(run(name, data, ev, server, rows, enc))
                    print(f"{data} {name}: {results[-1]['seconds']} s", file=sys.stderr, flush=True)
                    if name == "default" and "replay" in wanted:
                        ev = evaluator(server, nli, cache_dir, provider, nli_cache, cache_mode="only")
                        before = len(server.requests)
                        list(ev.evaluate_many(rows, batch_size=16))
                        replay_requests += len(server.requests) - before
    headers = ["data", "run", "calls/ans", "in/ans", "fresh", "cached", "written", "out/ans", "USD/ans", "USD no cache"]
    print_table(
        headers,
        [
            [
                r["data"],
                r["run"],
                r["calls_per_answer"],
                r["input_per_answer"],
                r["fresh_input_per_answer"],
                r["cached_input_per_answer"],
                r["cache_write_per_answer"],
                r["output_per_answer"],
                f"{r['usd_per_answer']:.7f}",
                f"{r['usd_per_answer_no_cache']:.7f}",
            ]
            for r in results
        ],
    )
    print()
    print_table(
        ["data", "run", "call", "calls/ans", "system", "schema", "data tokens"],
        [
            [r["data"], r["run"], k, v["calls_per_answer"], v["system"], v["schema"], v["data"]]
            for r in results
            for k, v in sorted(r["per_call"].items())
            if r["run"] in ("default", "default-anthropic")
        ],
    )
    by = {(r["data"], r["run"]): r for r in results}
    for r in results:  # several answers per request: every answer's report as in the default run?
        base = by.get((r["data"], "default"))
        r["same_verdicts"] = None if base is None else r["reports"] == base["reports"]
    ratio = {
        data: round(by[(data, "default")]["input_per_answer"] / RAGAS[data]["chars4"], 3)
        for data in datasets
        if (data, "default") in by
    }
    ratio_o200k = {
        data: round(by[(data, "default")]["o200k_input_per_answer"] / RAGAS[data]["o200k"], 3)
        for data in datasets
        if "o200k_input_per_answer" in by.get((data, "default"), {})
    }
    print()
    for data, value in ratio.items():
        print(
            f"{data}: default {by[(data, 'default')]['input_per_answer']:.0f} input tokens per answer (chars/4), RAGAS "
            f"Faithfulness {RAGAS[data]['chars4']} (published, issue 34): {value:.2f}x (target <= {TARGET_RATIO})"
        )
    for data in datasets:
        base = by.get((data, "default"))
        for name in [n for n in wanted if n.startswith("packed-")]:
            if base is None or (data, name) not in by:
                continue
            r = by[(data, name)]
            ins, with_schema = r["input_per_answer"], r["input_with_schema_per_answer"]
            print(
                f"{data} {name}: {ins:.0f} input tokens per answer ({with_schema:.0f} with the schema; default "
                f"{base['input_per_answer']:.0f} / {base['input_with_schema_per_answer']:.0f}), "
                f"{r['calls_per_answer']} requests per answer, verdicts unchanged: {r['same_verdicts']}"
            )
    if enc is None:
        print("o200k: tiktoken's o200k_base encoding could not be loaded (offline?); counted at 4 characters a token")
    warm = [r for r in results if r["run"] == "default"]
    batch = [r for r in results if r["run"] == "batch"]
    summary = {
        "benchmark": "cost",
        "answers": {data: len(rows) for data, rows in datasets.items()},
        "count": "chars/4" + (" and o200k" if enc is not None else ""),
        "per_answer": {
            f"{r['data']}/{r['run']}": {
                k: r[k]
                for k in (
                    "calls_per_answer",
                    "input_per_answer",
                    "input_with_schema_per_answer",
                    "same_verdicts",
                    "fresh_input_per_answer",
                    "cached_input_per_answer",
                    "cache_write_per_answer",
                    "output_per_answer",
                    "usd_per_answer",
                    "usd_per_answer_no_cache",
                    *(("o200k_input_per_answer", "o200k_input_with_schema_per_answer") if enc is not None else ()),
                )
            }
            for r in results
        },
        "per_call_default": {r["data"]: r["per_call"] for r in warm},
        "ragas_per_answer": {data: RAGAS[data] for data in datasets},
        "ragas_source": "published in issue 34 (ragas not installed)",
        "ratio_to_ragas": ratio,
        "ratio_to_ragas_o200k": ratio_o200k or None,
        "target_ratio": TARGET_RATIO,
        "requests_per_answer": max((r["calls_per_answer"] for r in warm), default=None),
        "replay_requests": replay_requests,
        "cached_input_share": round(
            sum(r["cached_input_per_answer"] for r in warm) / max(1e-9, sum(r["input_per_answer"] for r in warm)), 3
        ),
        "batch_cost_ratio": round(sum(r["usd_per_answer"] for r in batch) / sum(r["usd_per_answer"] for r in warm), 3)
        if batch and warm and sum(r["usd_per_answer"] for r in warm)
        else None,
        "errors": sum(r["errors"] for r in results),
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
