"""Can the corrected unsupported rate be trusted? Raw and corrected rates against the true rate, over many runs.

    python benchmarks/trust.py                        # 800 claim rows, 200 repetitions, 10% flipped, 20% reviewed
    python benchmarks/trust.py --claims 300 --repetitions 50 --review-share 0.3

Claim rows of ../shared/benchmarks (Factcheck-GPT and WiCE; a seeded sample of whole claim texts, never part of the
rows of one text) are scored in cascade mode as a user's run is: the shared NLI model decides what it can, the rest
goes to the judge, here a :class:`~groundjudge.testing.ScriptedLLMServer` (real OpenAI SDK over real HTTP) that
answers each claim's gold label with a seeded ``--flip`` share of all rows turned over (a judge that errs; with
``--errs lenient`` only rows truly not supported are turned over, to SUPPORTED: a judge that errs one way). The rows
carry no label: the only labels are reviews, the gold labels of a seeded ``--review-share`` sample of the scored
claims, in the shape the review page exports. The unsupported rate is then read as ``groundjudge metrics --reviews``
reads it (``review.metrics.corrected_json``: the raw share of claims not SUPPORTED with its interval, and that share
corrected for the checker's sensitivity and specificity measured on the reviews, by route when each route has
enough labels).

Each repetition has its own flips and its own review sample. An answer's report depends on its own judge reply
alone, so the cascade runs twice, once with the judge right on every row and once with it wrong on every row, and a
repetition's run is, answer by answer, the report of the run that matches its flips; the first ``--verify-runs``
repetitions are also run for real and must give the same reports (else the benchmark stops). The NLI scores are
computed once (the NLI cache); LLM calls are never cached, so no run replays another's judge replies.

The true rate is the gold share of claims not SUPPORTED among the claims scored. Reported: how often each 95%
interval holds the true rate, mean widths, mean errors, how often the corrected rate gave no number, and what each
route adds to the raw rate's error (the local model's own mistakes and the judge's flips can pull opposite ways).
Targets: the corrected interval covers the true rate in >= 93% of the repetitions, the raw interval in fewer than
half. The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import CLAIM_FILES, claim_sample, default_nli_model, gold_judge, print_table
from groundjudge.cache import Cache
from groundjudge.checker.nli import NLIModel
from groundjudge.config import Config
from groundjudge.llm import Limits, make_client
from groundjudge.models import AnswerReport
from groundjudge.pipeline.evaluator import Evaluator
from groundjudge.review.metrics import Review, corrected_json, join_reviews
from groundjudge.testing import ScriptedLLMServer, route

MODEL = "openai/gpt-4o-mini"
Runs = dict[str, AnswerReport]


def reviews_for(reports: list[AnswerReport], gold: dict[str, str], share: float, rng: random.Random) -> list[Review]:
    """Reviewer decisions (the gold label) on a random ``share`` of the scored claims, as the review page exports
    them."""
    claims = [(r, c) for r in reports for c in r.claims]
    picked = rng.sample(claims, round(share * len(claims)))
    return [
        Review(r.id, c.claim.id, c.claim.text, gold[r.id], groundjudge_label=c.label, route=c.route) for r, c in picked
    ]


def covers(ci: list[float | None], truth: float) -> bool:
    lo, hi = ci
    return lo is not None and hi is not None and lo <= truth <= hi


def flips_for(ids: list[str], share: float, seed: int, rep: int) -> tuple[frozenset[str], random.Random]:
    """Repetition ``rep``'s turned-over rows, and its random source (for the review sample after)."""
    rng = random.Random(f"trust-{seed}-{rep}")
    return frozenset(rng.sample(ids, round(share * len(ids)))), rng


def run(ev: Evaluator, inputs: list[dict[str, Any]], state: dict[str, frozenset[str]], flips: frozenset[str]) -> Runs:
    """One cascade run over every row with the judge turning over ``flips``: the reports by id."""
    state["now"] = flips
    return {r.id: r for r in ev.evaluate_many(inputs, batch_size=64)}


def outcome(report: AnswerReport) -> Any:
    """What a report says: verdict, scores, each claim's label, route and judge flags (not timings or usage)."""
    return (
        report.verdict,
        report.scores.model_dump(),
        [(c.claim.text, c.label, c.route, c.flags) for c in report.claims],
    )


def repetition(
    reports: list[AnswerReport], gold: dict[str, str], flips: frozenset[str], share: float, rng: random.Random
) -> dict[str, Any]:
    """One repetition's figures: the true rate, this repetition's reviews, the rates as ``metrics --reviews``
    reads them."""
    scored = [r for r in reports if r.claims]
    n = sum(len(r.claims) for r in scored)
    truth = sum(gold[r.id] != "SUPPORTED" for r in scored for _ in r.claims) / n
    reviews = reviews_for(scored, gold, share, rng)
    rate = corrected_json(reports, "claim", join_reviews(reports, reviews).matched)
    judged = [r for r in scored for c in r.claims if c.route == "judge"]
    # what each route adds to the raw rate's error: (its flagged claims - its truly not supported claims) / all claims
    route_error: dict[str, float] = {}
    for r in scored:
        for c in r.claims:
            miss = (c.label != "SUPPORTED") - (gold[r.id] != "SUPPORTED")
            route_error[c.route] = route_error.get(c.route, 0.0) + miss / n
    return {
        "truth": truth,
        "raw": rate["raw"],
        "raw_ci": rate["raw_ci"],
        "corrected": rate["value"],
        "ci": rate["ci"],
        "by": rate["by"],
        "sensitivity": rate["sensitivity"],
        "specificity": rate["specificity"],
        "routes": rate.get("routes", {}),
        "route_error": route_error,
        "reviews": len(reviews),
        "escalated": len(judged) / n,
        "judge_flipped": sum(r.id in flips for r in judged) / len(judged) if judged else None,
        "errors": sum(r.verdict == "ERROR" for r in reports),
    }


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    def mean(xs: list[float]) -> float | None:
        return statistics.fmean(xs) if xs else None

    numbered = [r for r in runs if r["corrected"] is not None]
    out: dict[str, Any] = {}
    for name, value, ci in (("raw", "raw", "raw_ci"), ("corrected", "corrected", "ci")):
        rows = runs if name == "raw" else numbered
        out[name] = {
            # a repetition where the corrected rate gave no number counts as a miss
            "coverage": sum(covers(r[ci], r["truth"]) for r in rows) / len(runs),
            "mean_width": mean([r[ci][1] - r[ci][0] for r in rows]),
            "mean": mean([r[value] for r in rows]),
            "mean_error": mean([r[value] - r["truth"] for r in rows]),
            "rmse": mean([(r[value] - r["truth"]) ** 2 for r in rows]) ** 0.5 if rows else None,
            "above": sum(r[ci][0] > r["truth"] for r in rows),
            "below": sum(r[ci][1] < r["truth"] for r in rows),
        }
    out["corrected"]["no_number"] = len(runs) - len(numbered)
    out["corrected"]["by_route"] = sum(r["by"] == "route" for r in numbered)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", action="append", type=Path, help="claim rows (default: Factcheck-GPT and WiCE)")
    ap.add_argument("--claims", "--limit", type=int, default=800, help="claim rows scored (whole claim texts)")
    ap.add_argument("--repetitions", type=int, default=200)
    ap.add_argument("--flip", type=float, default=0.1, help="share of rows whose judge verdict is turned over")
    ap.add_argument(
        "--errs",
        choices=("both", "lenient"),
        default="both",
        help="which rows the judge errs on: any ('both'), or only truly not supported ones, called SUPPORTED "
        "('lenient': --flip is then the share of those)",
    )
    ap.add_argument("--review-share", type=float, default=0.2, help="share of scored claims reviewed")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--concurrency", type=int, default=8, help="judge calls in flight")
    ap.add_argument("--verify-runs", type=int, default=1, help="repetitions also run for real and compared")
    ap.add_argument("--cache-dir", type=Path, default=None, help="the NLI cache (default: a fresh temporary one)")
    args = ap.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "sk-scripted-benchmark")

    rows = claim_sample(args.data or CLAIM_FILES, args.claims, args.seed)
    gold = {r["id"]: r["label"] for r in rows}
    if len(gold) != len(rows):
        raise SystemExit("claim rows with the same id in the data: ids must be unique")
    inputs = [{"id": r["id"], "claim": r["claim"], "contexts": r["contexts"]} for r in rows]  # no label: reviews only
    state: dict[str, frozenset[str]] = {"now": frozenset()}
    judge = gold_judge(rows, lambda: state["now"])
    ids = sorted(gold)
    # the rows the judge may err on: any, or (a lenient judge) only those truly not supported
    candidates = ids if args.errs == "both" else [i for i in ids if gold[i] != "SUPPORTED"]
    started = time.perf_counter()
    # the caches: a fresh temporary directory (removed at the end) unless --cache-dir keeps the NLI scores
    with tempfile.TemporaryDirectory(prefix="gj-trust-") as tmp:
        cache_dir = args.cache_dir or Path(tmp)
        with ScriptedLLMServer(route({"judge": judge})) as server:
            client = make_client(
                MODEL,
                base_url=server.openai_base_url,
                cache=Cache(cache_dir / "llm", mode="off"),  # never replay a judge reply given under other flips
                limits=Limits(concurrency=args.concurrency),
            )
            ev = Evaluator(
                Config(llm=MODEL, mode="cascade", qa=False),
                nli=NLIModel.shared(default_nli_model()),
                client=client,
                cache=Cache(cache_dir / "nli"),  # NLI scores: computed in the first run, read in the others
            )
            # an answer's report depends on its own judge reply alone, so a repetition's run is, answer by answer, the
            # run where the judge is right (not flipped) or the one where it is wrong on every row (flipped); the first
            # --verify-runs repetitions are also run for real and must match
            right = run(ev, inputs, state, frozenset())
            first = time.perf_counter() - started
            wrong = run(ev, inputs, state, frozenset(ids))
            verified = 0
            for rep in range(args.verify_runs):
                flips, _ = flips_for(candidates, args.flip, args.seed, rep)
                real = run(ev, inputs, state, flips)
                for i in ids:
                    made = wrong[i] if i in flips else right[i]
                    if outcome(real[i]) != outcome(made):
                        raise SystemExit(f"repetition {rep}, row {i}: the real run differs from the composed one")
                verified += 1
    runs = []
    for rep in range(args.repetitions):
        flips, rng = flips_for(candidates, args.flip, args.seed, rep)
        reports = [wrong[i] if i in flips else right[i] for i in ids]
        runs.append(repetition(reports, gold, flips, args.review_share, rng))
    seconds = time.perf_counter() - started
    s = summarise(runs)
    out: dict[str, Any] = {
        "benchmark": "trust",
        "claims": len(rows),
        "claim_texts": len({r["claim"] for r in rows}),
        "repetitions": args.repetitions,
        "flip": args.flip,
        "errs": args.errs,
        "review_share": args.review_share,
        "seed": args.seed,
        "true_rate": statistics.fmean(r["truth"] for r in runs),
        "escalation_rate": statistics.fmean(r["escalated"] for r in runs),
        "judge_flipped": statistics.fmean(r["judge_flipped"] for r in runs if r["judge_flipped"] is not None),
        "reviews": runs[0]["reviews"],
        "raw_error_by_route": {
            k: statistics.fmean(r["route_error"].get(k, 0.0) for r in runs)
            for k in sorted({k for r in runs for k in r["route_error"]})
        },
        **s,
        "judge_unmatched": len(judge.unmatched),
        "errors": sum(r["errors"] for r in runs),
        "verified_runs": verified,
        "first_run_seconds": round(first, 1),
        "seconds": round(seconds, 1),
    }
    out["targets_met"] = out["corrected"]["coverage"] >= 0.93 and out["raw"]["coverage"] < 0.5
    print_table(
        ["rate", "coverage", "mean width", "mean", "mean error", "rmse", "CI above / below truth"],
        [
            [
                name,
                out[name]["coverage"],
                out[name]["mean_width"],
                out[name]["mean"],
                out[name]["mean_error"],
                out[name]["rmse"],
                f"{out[name]['above']} / {out[name]['below']}",
            ]
            for name in ("raw", "corrected")
        ],
    )
    print(
        f"true rate {out['true_rate']:.3f} over {out['claims']} claims; {out['reviews']} reviews a run; escalation "
        f"{out['escalation_rate']:.3f}; corrected by route in {out['corrected']['by_route']} of {args.repetitions}, "
        f"no number in {out['corrected']['no_number']}; {seconds:.0f} s"
    )
    print(
        "raw rate's error by route (flagged - truly not supported, over all claims): "
        + ", ".join(f"{k} {v:+.3f}" for k, v in out["raw_error_by_route"].items())
    )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
