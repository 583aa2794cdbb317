"""How busy a dataset run keeps its LLM call slots: wall time, the ideal, span utilisation and rows/s.

A cascade run with QA (two calls per answer) over FaithBench answers against the scripted LLM server (real OpenAI SDK
over real HTTP) whose every reply waits a lognormal time (median ``--median`` s, shape ``--sigma``; drawn from the
request's own text, so a rerun sees the same waits), at each ``--concurrency``; groundjudge's cache is off, so every
call is made. Per run:

- ideal = calls x mean reply time / concurrency (every slot busy from the first call to the last);
- span utilisation = reply seconds / (concurrency x span of the calls, first sent to last answered): 1.0 when no slot
  ever idles;
- rows/s, and the NLI-only time of the same rows (nli mode, no LLM, run just before in the same process), the
  floor a run cannot go below: the bound is max(ideal, NLI only) and ``wall/bound`` how close the run comes to it
  (target: at most 1.25 on long answers at concurrency 32);
- where the local work sat in the run (``local_first_s``: when the NLI thread first had a cut batch, whose slowest
  claims reply it waited for; ``local_busy_s``: its NLI stages and QA comparisons; ``local_idle_s``: the rest of
  the wall: every cut batch not yet scored still waiting for a claims reply, and the tail);
- the QA check's comparison against the evidence NLI on the same rows: the model's calls of the first cold run,
  each kind replayed alone in this process with nothing else running, in CPU seconds (``qa_share``: QA CPU /
  evidence CPU, target at most 0.25), with the pairs and forward passes of each (``--no-qa-share`` skips it);
- the span utilisation of an engine that costs nothing but the replies (claims calls first, each slot refilled at
  once; reply times drawn from the same lognormal, 300 draws): what scheduling alone can reach, since the last
  calls' slowest replies make the span's tail (``greedy_bound``).

With ``--warm-nli`` each concurrency runs once more with the NLI scores read from a cache filled by an unmeasured
run (every LLM call still made, as in a rerun with another judge or prompt): the engine alone, without the CPU's
share of the work; its bound takes the NLI-only time with the same cache. On 2 CPU cores the NLI of 160 answers
takes longer than the calls' ideal at concurrency 32, so only this run can say whether the engine keeps 32 slots
busy.

With ``--rate-limit N`` one more run at the highest concurrency against a server that answers HTTP 429 (with
Retry-After) past N requests in any second: 429s seen, requests/s against the limit, rows lost (must be 0) and calls
billed twice (must be 0).

    .venv/bin/python benchmarks/throughput.py --limit 160 --offset 160 --concurrency 8,32 --warm-nli   # long
    .venv/bin/python benchmarks/throughput.py --short --limit 480 --concurrency 32 --warm-nli           # short

Rows from ``--offset``: the engine's defaults were chosen on rows 1-160 of faithbench-dev, so the default offset
measures on rows never used for that. ``--short``: short answers, each Factcheck-GPT claim as an answer with its
snippet as the source (``--data`` defaults to factcheckgpt-stance.jsonl). Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import heapq
import json
import math
import os
import random
import re
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import SHARED, default_nli_model, print_table, read_rows
from benchmarks.cost import extract, verify
from groundjudge.cache import Cache
from groundjudge.checker.nli import NLIModel
from groundjudge.config import Config
from groundjudge.llm import Limits, RetryPolicy, make_client
from groundjudge.pipeline.evaluator import Evaluator
from groundjudge.pipeline.steps import Steps
from groundjudge.testing import (
    Latency,
    RateLimit,
    RecordedRequest,
    Reply,
    ScriptedLLMServer,
    fenced_block,
    prompt_name,
    route,
)

MODEL = "openai/gpt-4o-mini"


def answer_key(answer: str) -> str:
    """What ties an answer's two calls together in this benchmark: a digest of the answer."""
    return hashlib.sha256(answer.encode("utf-8", "surrogatepass")).hexdigest()[:12]


ANSWER_KEYS: list[str] = []  # the answer keys in the order first seen: answer N's key is ANSWER_KEYS[N - 1]
_NUMBERS: dict[str, int] = {}  # and back
_NUMBERS_LOCK = threading.Lock()


def keyed_extract(req: RecordedRequest) -> Reply:
    """:func:`benchmarks.cost.extract`, each question naming its answer by a small number (the sources-side call
    shows the questions, never the answer, and carries the number back). The questions reach the QA check's model
    comparison, so the tie is a few words a question could hold ("... in point 2 of answer 17?"); an earlier version
    appended the answer's 12-hex key, which made the compared statements a third longer."""
    out = json.loads(extract(req).content)
    key = answer_key(fenced_block(req, "ANSWER"))
    with _NUMBERS_LOCK:
        if key not in _NUMBERS:
            ANSWER_KEYS.append(key)
            _NUMBERS[key] = len(ANSWER_KEYS)
        number = _NUMBERS[key]
    for i, q in enumerate(out.get("questions", []), 1):
        q["question"] = f"What does the text say in point {i} of answer {number}?"
    return Reply.json(out)


def call_key(req: RecordedRequest) -> tuple[int, str] | None:
    """(stage, answer key) of a request: 0 the claims call, 1 the sources-side call; None if neither."""
    name = prompt_name(req)
    if name in ("claims", "claims_qa"):
        return 0, answer_key(fenced_block(req, "ANSWER"))
    if name == "verify":
        found = re.search(r" of answer (\d+)\?", fenced_block(req, "QUESTIONS"))
        n = int(found.group(1)) if found else 0
        with _NUMBERS_LOCK:
            return (1, ANSWER_KEYS[n - 1]) if 0 < n <= len(ANSWER_KEYS) else None
    return None


class Tagged(Steps):
    """The steps, with the QA check's comparison tagged (:data:`COMPARING`), so that the model's calls can be told
    apart: the evidence NLI's and the QA comparison's; and the local steps' times on the NLI thread recorded
    (:data:`LOCAL_STEPS`)."""

    def _answers_agree(self, pairs: Any) -> list[float]:
        COMPARING.on = True
        try:
            return super()._answers_agree(pairs)
        finally:
            COMPARING.on = False

    def nli_stage(self, batch: list[Any]) -> None:
        with timed_step():
            super().nli_stage(batch)

    def compare(self, works: list[Any]) -> None:
        with timed_step():  # a failed shared comparison compares each answer alone, inside: counted once
            super().compare(works)


@contextlib.contextmanager
def timed_step() -> Iterator[None]:
    """Record a local step's (start, end) in :data:`LOCAL_STEPS`; a step run inside another is the outer one's."""
    if getattr(_IN_STEP, "on", False):
        yield
        return
    _IN_STEP.on, t0 = True, time.perf_counter()
    try:
        yield
    finally:
        _IN_STEP.on = False
        LOCAL_STEPS.append((t0, time.perf_counter()))


_IN_STEP = threading.local()  # whether this thread is inside a timed local step (a nested one is not counted)


LOCAL_STEPS: list[tuple[float, float]] = []  # (start, end) of each local step (NLI stage, QA comparison) of a run


def local_thread(t0: float, wall: float) -> dict[str, float | None]:
    """Where the run's local work (the NLI thread: each cut batch's NLI stage and QA comparison, one at a time) sat in
    its wall time: when the first step began (the first cut batch waits for its slowest claims reply), how long the
    steps ran, and how long the thread had nothing to run after its first step (every cut batch not yet scored
    still waiting for a claims reply, and the tail). first + busy is the wall of an engine whose calls cost nothing
    once the first batch's claims are back."""
    steps = sorted(LOCAL_STEPS)
    if not steps:
        return {"local_first_s": None, "local_busy_s": None, "local_idle_s": None}
    busy = sum(e - s for s, e in steps)
    first = steps[0][0] - t0
    return {
        "local_first_s": round(first, 2),
        "local_busy_s": round(busy, 2),
        "local_idle_s": round(max(0.0, wall - first - busy), 2),
    }


COMPARING = threading.local()


class TaggedEvaluator(Evaluator):
    @property
    def steps(self) -> Steps:
        return Tagged(super().steps.ctx)


class Recorder:
    """The model's calls in one run (``nli.predict`` wrapped): (QA comparison?, pairs) in order."""

    def __init__(self, nli: NLIModel) -> None:
        self.nli, self.calls = nli, []  # type: ignore[var-annotated]

    def __enter__(self) -> Recorder:
        inner = self.nli.predict

        def predict(pairs: Any) -> Any:
            self.calls.append((bool(getattr(COMPARING, "on", False)), list(pairs)))
            return inner(pairs)

        self.nli.predict = predict  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        del self.nli.predict  # the class's own again


def qa_share(
    nli: NLIModel,
    calls: list[tuple[bool, list[tuple[str, str]]]],
    repeat: int = 2,
    nli_only_calls: list[tuple[bool, list[tuple[str, str]]]] | None = None,
) -> dict[str, Any]:
    """The recorded calls of each kind replayed alone (the same calls, so the same batches), CPU seconds of this
    process, the least of ``repeat`` alternating rounds: the QA comparison's against the evidence NLI's; with
    ``nli_only_calls`` (the NLI-only run's), also the cascade's whole local work (evidence and QA) against the
    NLI-only run's, on the same terms (``local_over_nli_only``: CPU against CPU, an estimate of the wall/bound a
    CPU-bound run ends near when the NLI-only run is the bound and both keep the cores equally busy; not a floor)."""
    kinds = {"qa": [p for qa, p in calls if qa], "evidence": [p for qa, p in calls if not qa]}
    if nli_only_calls is not None:
        kinds["nli_only"] = [p for _, p in nli_only_calls]
    cpu: dict[str, float] = {k: math.inf for k in kinds}
    for _ in range(repeat):
        for kind, batches in kinds.items():
            passes = nli.forward_passes
            t0 = time.process_time()
            for pairs in batches:
                nli.predict(pairs)
            cpu[kind] = min(cpu[kind], time.process_time() - t0)
            kinds_passes = nli.forward_passes - passes
            cpu[f"{kind}_passes"] = kinds_passes
    out = {
        "qa_cpu_s": round(cpu["qa"], 2),
        "evidence_cpu_s": round(cpu["evidence"], 2),
        "qa_share": round(cpu["qa"] / cpu["evidence"], 3) if cpu["evidence"] else None,
        "qa_pairs": sum(len(p) for p in kinds["qa"]),
        "evidence_pairs": sum(len(p) for p in kinds["evidence"]),
        "qa_calls": len(kinds["qa"]),
        "qa_forward_passes": int(cpu["qa_passes"]),
        "evidence_forward_passes": int(cpu["evidence_passes"]),
    }
    if nli_only_calls is not None:
        out["nli_only_cpu_s"] = round(cpu["nli_only"], 2)
        out["nli_only_pairs"] = sum(len(p) for p in kinds["nli_only"])
        local = cpu["qa"] + cpu["evidence"]
        out["local_over_nli_only"] = round(local / cpu["nli_only"], 3) if cpu["nli_only"] else None
    return out


def short_rows(path: str, offset: int, limit: int) -> list[dict[str, Any]]:
    """Short answers: each claim row's claim as the answer, its snippet as the source."""
    rows = [r for r in read_rows(path) if r.get("claim")][offset : offset + limit]
    return [{"id": r["id"], "answer": r["claim"], "contexts": r["contexts"]} for r in rows]


class Timed:
    """The server's latency model (:class:`groundjudge.testing.Latency`), applied by the script so that each call's
    arrival, wait and answer (:func:`call_key`) are recorded."""

    def __init__(self, median: float, sigma: float) -> None:
        self.latency = Latency(median=median, sigma=sigma)
        self.calls: list[tuple[float, float]] = []  # (arrival, wait)
        self.waits: dict[tuple[int, str], list[float]] = {}  # (stage, answer key) -> its waits, in arrival order
        self.lock = threading.Lock()

    def clear(self) -> None:
        with self.lock:
            self.calls.clear()
            self.waits.clear()

    def script(self, inner: Any) -> Any:
        def answer(req: RecordedRequest) -> Reply:
            reply = inner(req)
            seconds = self.latency.seconds(json.dumps(req.body, sort_keys=True).encode())
            key = call_key(req)
            with self.lock:
                self.calls.append((req.received_at, seconds))
                if key is not None:
                    self.waits.setdefault(key, []).append(seconds)
            return Reply.slow(seconds, then=reply)

        return answer

    def same_replies(self, rows: list[dict[str, Any]]) -> list[tuple[float, float]] | None:
        """Each answer's two reply times in the last run, in row order (the same answer in two rows takes them in
        the order they came; None when a call is missing or was sent twice)."""
        keys = [answer_key(str(r["answer"])) for r in rows]  # the ANSWER block is the row's answer
        counts = Counter(keys)
        if any(len(self.waits.get((stage, k), [])) != n for k, n in counts.items() for stage in (0, 1)):
            return None
        taken: Counter[str] = Counter()
        out = []
        for k in keys:
            out.append((self.waits[(0, k)][taken[k]], self.waits[(1, k)][taken[k]]))
            taken[k] += 1
        return out


def evaluator(
    server: ScriptedLLMServer, nli: NLIModel, cache_dir: Path, *, nli_cache: Path | None = None, **kw: Any
) -> Evaluator:
    """The evaluator a user gets from a config (its client, limiter and retry policy), groundjudge's cache off.

    ``nli_cache``: the NLI scores are read from (and written to) a cache there while every LLM call is still made
    (a rerun after a prompt or judge change: the CPU's share of the work is done, the calls are not)."""
    config = Config(
        llm=MODEL, base_url=server.openai_base_url, qa=True, cache_dir=str(cache_dir), cache_mode="off", **kw
    )
    if nli_cache is None:
        return TaggedEvaluator(config, nli=nli)
    c = config
    client = make_client(
        MODEL,
        base_url=c.base_url,
        timeout=c.timeout,
        cache=Cache(cache_dir, mode="off"),
        retry=RetryPolicy(max_attempts=c.max_attempts),
        limits=Limits(c.concurrency, c.rpm, c.tpm, c.adaptive_concurrency),
    )
    return TaggedEvaluator(config, nli=nli, client=client, cache=Cache(nli_cache, mode="use"))


def greedy(waits: list[tuple[float, float]], concurrency: int) -> float:
    """Span utilisation of an engine that costs nothing but the replies, given each answer's two reply times
    (claims, then the sources-side call): claims calls first, in order, every slot refilled the instant it frees."""
    ready = [(0, a) for a in range(len(waits))]  # (stage, answer)
    heapq.heapify(ready)
    running: list[tuple[float, int, int]] = []  # (ends at, stage, answer)
    now, busy = 0.0, 0.0
    while ready or running:
        while ready and len(running) < concurrency:
            stage, a = heapq.heappop(ready)
            busy += waits[a][stage]
            heapq.heappush(running, (now + waits[a][stage], stage, a))
        now, stage, a = heapq.heappop(running)
        if stage == 0:
            heapq.heappush(ready, (1, a))
    return busy / (concurrency * now) if now else 0.0


def greedy_bound(answers: int, concurrency: int, median: float, sigma: float, draws: int = 300) -> dict[str, float]:
    """:func:`greedy` over ``draws`` draws (seeded) of the reply times from the benchmark's lognormal: mean, 10th
    and 90th percentile. No engine that does not know the reply times in advance does much better: the last
    calls' slowest replies are the span's tail."""
    rng = random.Random(0)
    shares = sorted(
        greedy(
            [
                (median * math.exp(sigma * rng.gauss(0.0, 1.0)), median * math.exp(sigma * rng.gauss(0.0, 1.0)))
                for _ in range(answers)
            ],
            concurrency,
        )
        for _ in range(draws)
    )
    return {
        "mean": round(sum(shares) / len(shares), 3),
        "p10": round(shares[len(shares) // 10], 3),
        "p90": round(shares[len(shares) * 9 // 10], 3),
    }


def nli_only(nli: NLIModel, rows: list[dict[str, Any]], batch_size: int, cache: Path | None) -> float:
    """Seconds of the NLI-only run of the rows (nli mode, no LLM; NLI scores read from ``cache`` if given)."""
    c = Cache(cache, mode="use") if cache is not None else None
    ev = Evaluator(Config(mode="nli", cache_mode="off"), nli=nli, cache=c)
    t0 = time.perf_counter()
    list(ev.evaluate_many(rows, batch_size=batch_size))
    return time.perf_counter() - t0


def measure(
    name: str,
    ev: Evaluator,
    latency: Timed,
    rows: list[dict[str, Any]],
    concurrency: int,
    batch_size: int,
    nli_seconds: float,
) -> dict[str, Any]:
    latency.clear()
    LOCAL_STEPS.clear()
    t0, c0 = time.perf_counter(), time.process_time()
    reports = list(ev.evaluate_many(rows, batch_size=batch_size))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    calls = list(latency.calls)
    same = latency.same_replies(rows)
    reply_seconds = sum(w for _, w in calls)
    span = max(a + w for a, w in calls) - min(a for a, _ in calls) if calls else 0.0
    mean = reply_seconds / len(calls) if calls else 0.0
    ideal = len(calls) * mean / concurrency
    bound = max(ideal, nli_seconds)
    return {
        "run": name,
        "concurrency": concurrency,
        "rows": len(reports),
        "calls": len(calls),
        "wall_s": round(wall, 2),
        "ideal_s": round(ideal, 2),
        "nli_only_s": round(nli_seconds, 2),
        "bound_s": round(bound, 2),
        "wall/bound": round(wall / bound, 3) if bound else None,
        "span_utilisation": round(reply_seconds / (concurrency * span), 3) if span else None,
        "greedy_same_replies": round(greedy(same, concurrency), 3) if same else None,
        "rows_per_s": round(len(reports) / wall, 2),
        # CPU seconds of the whole process (the engine, the NLI thread, the in-process scripted server) per wall second
        "cores_busy": round(cpu / wall, 2) if wall else None,
        **local_thread(t0, wall),
        "errors": sum(1 for r in reports if r.verdict == "ERROR" or r.errors),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=None, help="default: faithbench-dev.jsonl (--short: factcheckgpt-stance.jsonl)")
    ap.add_argument("--short", action="store_true", help="short answers: each claim row's claim as the answer")
    ap.add_argument("--limit", type=int, default=160, help="answers")
    ap.add_argument("--offset", type=int, default=160, help="rows skipped first (see above)")
    ap.add_argument("--concurrency", default="8,32,64", help="comma-separated")
    ap.add_argument("--median", type=float, default=1.0, help="median reply time, seconds")
    ap.add_argument("--sigma", type=float, default=0.5, help="lognormal shape of the reply time")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--window", type=int, default=None, help="rows in flight (default: the engine's)")
    ap.add_argument("--rate-limit", type=float, default=None, help="requests/s past which the server answers 429")
    ap.add_argument("--nli-model", default=None)
    ap.add_argument(
        "--warm-nli",
        action="store_true",
        help="also run each concurrency with the NLI scores cached (every LLM call still made): the engine alone, "
        "without the CPU's share of the work",
    )
    ap.add_argument("--no-qa-share", action="store_true", help="skip replaying the QA and evidence NLI calls")
    args = ap.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "sk-benchmark")
    default = "factcheckgpt-stance.jsonl" if args.short else "faithbench-dev.jsonl"
    data = args.data or str(SHARED / "benchmarks" / default)
    if args.short:
        rows = short_rows(data, args.offset, args.limit)
    else:
        rows = [r for r in read_rows(data, args.offset + args.limit)[args.offset :] if "answer" in r]
    nli = NLIModel.shared(args.nli_model or default_nli_model())
    latency = Timed(args.median, args.sigma)
    plain = route({"claims": extract, "claims_qa": keyed_extract, "judge": verify, "verify": verify})
    script = latency.script(plain)
    results = []
    keep = tempfile.TemporaryDirectory()  # the NLI cache of the --warm-nli runs, kept for the rate-limited one
    warm = Path(keep.name) / "nli"
    recorded: list[tuple[bool, list[tuple[str, str]]]] = []
    only_calls: list[tuple[bool, list[tuple[str, str]]]] = []
    levels = [int(x) for x in args.concurrency.split(",")]
    with tempfile.TemporaryDirectory() as tmp, ScriptedLLMServer(script) as server:
        base = Path(tmp)
        nli_seconds, only_busy = 0.0, None
        for i, c in enumerate(levels):  # the NLI-only run just before each run: the same load on the machine
            with Recorder(nli) as only:
                c0 = time.process_time()
                nli_seconds = nli_only(nli, rows, args.batch_size, None)
                only_busy = round((time.process_time() - c0) / nli_seconds, 2) if nli_seconds else None
            only_calls = only_calls or only.calls
            ev = evaluator(server, nli, base / f"c{i}", concurrency=c, window=args.window)
            with Recorder(nli) as rec:
                results.append(measure(f"cascade+QA c={c}", ev, latency, rows, c, args.batch_size, nli_seconds))
            recorded = recorded or rec.calls
        if args.warm_nli:
            prime = evaluator(server, nli, base / "prime", nli_cache=warm, concurrency=max(levels))  # not measured
            list(prime.evaluate_many(rows, batch_size=args.batch_size))
            nli_only(nli, rows, args.batch_size, warm)  # the NLI-only run's own pairs (nli mode's claims) cached
            for i, c in enumerate(levels):
                cached = nli_only(nli, rows, args.batch_size, warm)
                ev = evaluator(server, nli, base / f"w{i}", nli_cache=warm, concurrency=c, window=args.window)
                results.append(measure(f"NLI cached c={c}", ev, latency, rows, c, args.batch_size, cached))
    share = qa_share(nli, recorded, nli_only_calls=only_calls) if recorded and not args.no_qa_share else None

    def limited_run(nli_cache: Path | None) -> dict[str, Any]:
        c = max(int(x) for x in args.concurrency.split(","))
        rl = RateLimit(requests_per_second=args.rate_limit)
        with tempfile.TemporaryDirectory() as tmp, ScriptedLLMServer(latency.script(plain), rate_limit=rl) as server:
            ev = evaluator(server, nli, Path(tmp), nli_cache=nli_cache, concurrency=c, window=args.window)
            latency.clear()
            t0 = time.perf_counter()
            reports = list(ev.evaluate_many(rows, batch_size=args.batch_size))
            wall = time.perf_counter() - t0
            ok = [r for r in server.requests if not r.rate_limited and r.received_at]
            span = max(r.received_at for r in ok) - min(r.received_at for r in ok) if len(ok) > 1 else 0.0
            return {
                "concurrency": c,
                "nli_cached": nli_cache is not None,
                "limit_rps": args.rate_limit,
                "requests_per_s": round((len(ok) - 1) / span, 2) if span else None,
                "share_of_limit": round((len(ok) - 1) / span / args.rate_limit, 3) if span else None,
                "rate_limited_429s": server.rate_limited,
                "rows_lost": len(rows) - sum(1 for r in reports if r.verdict != "ERROR"),
                "billed_twice": server.billed - ev.usage.calls,
                "rows_per_s": round(len(reports) / wall, 2),
                "wall_s": round(wall, 2),
            }

    limited = limited_run(None) if args.rate_limit else None
    limited_warm = limited_run(warm) if args.rate_limit and args.warm_nli else None
    keep.cleanup()
    print_table(list(results[0]), [list(r.values()) for r in results])
    if limited is not None:
        print("against a rate limit:", json.dumps(limited))
    if limited_warm is not None:
        print("against a rate limit, NLI cached:", json.dumps(limited_warm))
    print(
        f"NLI only (same rows, nli mode, no LLM), before the last cold run: {nli_seconds:.1f} s, {only_busy} cores busy"
    )
    if share is not None:
        print(
            f"QA comparison against the evidence NLI (first cold run's model calls replayed): {share['qa_cpu_s']} s "
            f"against {share['evidence_cpu_s']} s of CPU, {share['qa_share']} ({share['qa_pairs']} pairs in "
            f"{share['qa_calls']} calls, {share['qa_forward_passes']} forward passes, against "
            f"{share['evidence_pairs']} pairs in {share['evidence_forward_passes']})"
        )
        print(
            f"the cascade's local work (evidence and QA) against the NLI-only run's, replayed the same way: "
            f"{share['local_over_nli_only']} ({share['qa_cpu_s'] + share['evidence_cpu_s']:.2f} s against "
            f"{share['nli_only_cpu_s']} s of CPU; {share['nli_only_pairs']} pairs in the NLI-only run): on a CPU-bound "
            "run's wall/bound ends near it when both keep the cores equally busy (an estimate, not a floor)"
        )
    bounds = {c: greedy_bound(len(rows), c, args.median, args.sigma) for c in sorted(set(levels))}
    for c, b in bounds.items():
        print(
            f"an engine that costs nothing but the replies, c={c}: span utilisation {b['mean']} "
            f"(10th-90th percentile of reply-time draws {b['p10']}-{b['p90']})"
        )
    summary = {
        "answers": len(rows),
        "short": args.short,
        "latency": {"median": args.median, "sigma": args.sigma},
        "nli_only_s": round(nli_seconds, 2),
        "nli_only_cores_busy": only_busy,
        "wall_over_bound": {r["concurrency"]: r["wall/bound"] for r in results if r["run"].startswith("cascade")},
        "wall_over_bound_nli_cached": {
            r["concurrency"]: r["wall/bound"] for r in results if r["run"].startswith("NLI cached")
        }
        or None,
        "qa_share": share,
        "runs": {
            r["concurrency"]: {k: v for k, v in r.items() if k not in ("run", "concurrency")}
            for r in results
            if r["run"].startswith("cascade")
        },
        "span_utilisation": {
            r["concurrency"]: r["span_utilisation"] for r in results if r["run"].startswith("cascade")
        },
        "span_utilisation_nli_cached": {
            r["concurrency"]: r["span_utilisation"] for r in results if r["run"].startswith("NLI cached")
        }
        or None,
        "greedy_bound": bounds,
        "rate_limited": limited,
        "rate_limited_nli_cached": limited_warm,
        "targets": {
            "span_utilisation": 0.85,
            "wall_over_bound": 1.25,
            "qa_share": 0.25,
            "share_of_limit": 0.85,
            "rows_lost": 0,
            "billed_twice": 0,
        },
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
