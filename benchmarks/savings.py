"""What the fewer-pairs rule saves, and what it changes in the reports, against scoring every piece.

The local checker scores a claim's later evidence (the next passages, the sentence with its neighbours) only while
its best entailment is within ``checker.evidence.MARGIN`` below a decision line in force
(docs/explanation/checker-reading.md, "Fewer pairs"). Where a claim's other pieces do not entail it much more than
its first two (always in the cascade without a head, whose margin reaches below its line), verdicts, routes and
conflict flags are those of scoring every piece (a property test holds this). What the savings can move is a
claim's support, the best entailment over the pieces scored: it is never higher than scoring everything gives, so
a claim can be flagged ``weak`` (support below ``weak_floor``) where every piece would clear it, and the NLI part of
an answer's score (the mean support) can be lower. This script measures both on FaithBench answers with their
articles, through the pipeline, once with the rule and once with every piece scored (nli mode still stops a claim at
``t_support``, its early exit; the cascade's early exit where its route, weak flag and disagreement are settled,
``stages.route.settled_at``, is part of the rule measured), the same NLI score cache, so both read the same scores:

- pairs scored by each;
- claims whose support differs (each must be lower with the rule), ``weak`` flags with each;
- the NLI part and the combined score of each answer: largest and mean difference;
- verdicts (PASS / WARN / FAIL) and claim labels that differ: none in the cascade; in nli mode the rule is a bet
  measured on the dev files (a claim stopped more than ``MARGIN`` below ``t_support`` that a skipped piece would
  have lifted over it), and it only ever goes one way: no score and no verdict is higher with the rule.

Claims come from the scripted LLM of ``benchmarks/cost.py`` (the answer's sentences; the judge says SUPPORTED),
so every local decision is the shared model's. ``--mode nli`` runs without an LLM.

    .venv/bin/python benchmarks/savings.py --limit 200            # cascade + QA, FaithBench rows 1-200
    .venv/bin/python benchmarks/savings.py --limit 200 --mode nli
    .venv/bin/python benchmarks/savings.py --data ../shared/benchmarks/wice-dev.jsonl --limit 349   # long pages

In the cascade it also says what the judge is shown where the sources are too long to show whole (over
``stages.judge.WHOLE_CHARS``; never on FaithBench, whose articles are shorter): of the claims the judge decides,
how many are shown the passage that entails them best when every piece is scored, and the characters of source
shown with each. A claim row (WiCE's, ``claim`` and ``contexts``) is scored with its claim as the answer.

Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import SHARED, default_nli_model, read_rows
from benchmarks.cost import extract, verify
from benchmarks.throughput import evaluator
from groundjudge.cache import Cache
from groundjudge.checker.nli import NLIModel
from groundjudge.config import Config
from groundjudge.models import LocalThresholds
from groundjudge.pipeline import steps as pipeline_steps
from groundjudge.pipeline.evaluator import Evaluator
from groundjudge.stages.judge import WHOLE_CHARS
from groundjudge.stages.route import EvidenceRule, evidence_rule
from groundjudge.testing import RecordedRequest, Reply, ScriptedLLMServer, claims_in, prompt_name, route, sources_in


def every_piece_rule(
    mode: str, thresholds: LocalThresholds, *, reads_every_score: bool, conflict_check: bool, weak_floor: float
) -> EvidenceRule:
    """The pipeline's rule (``stages.route.evidence_rule``) with no decision line and no early exit but the one at
    ``t_support`` nli mode always had: every piece of every claim scored."""
    rule = evidence_rule(
        mode, thresholds, reads_every_score=reads_every_score, conflict_check=conflict_check, weak_floor=weak_floor
    )
    return EvidenceRule(
        early_exit=None if reads_every_score else thresholds.t_support, lines=None, conflicts=rule["conflicts"]
    )


@contextlib.contextmanager
def every_piece() -> Iterator[None]:
    """The pipeline sets its selector up with :func:`every_piece_rule` while this is open: for the whole process
    (a module attribute, restored on exit), so for this script, never for code that scores in other threads."""
    saved = pipeline_steps.evidence_rule
    pipeline_steps.evidence_rule = every_piece_rule
    try:
        yield
    finally:
        pipeline_steps.evidence_rule = saved


class JudgeSources:
    """What the judge is shown, recorded from its requests to the scripted server: for each claim it is asked about,
    the source texts of that request (the contexts whole when they fit ``stages.judge.WHOLE_CHARS``, else the
    evidence the NLI stage found, widened: ``stages.judge.select_sources``)."""

    def __init__(self) -> None:
        # claim text -> the SOURCE blocks of the request that judged it (a claim text judged in two rows keeps the
        # last: the counts of judge_evidence are of distinct claims)
        self.shown: dict[str, list[str]] = {}

    def script(self, inner: Any) -> Any:
        def answer(req: RecordedRequest) -> Reply:
            if prompt_name(req) in ("judge", "verify"):
                for text in claims_in(req).values():
                    self.shown[text] = sources_in(req)
            return inner(req)

        return answer


def judge_evidence(
    rows: list[dict[str, Any]], rule: list[dict[str, Any]], every: list[dict[str, Any]], seen: dict[str, JudgeSources]
) -> dict[str, Any]:
    """On rows whose contexts are too long to show whole: for each claim the judge decided in both runs, whether the
    passage that entails it best when every piece is scored is inside what the judge is shown with the rule, and
    the characters of source shown to the judge with each."""
    long_rows = claims = covered = 0
    chars = {"rule": 0, "every": 0}
    for row, a, b in zip(rows, rule, every, strict=True):
        if sum(len(c) for c in row["contexts"]) <= WHOLE_CHARS:
            continue
        long_rows += 1
        for ca, cb in zip(a["claims"], b["claims"], strict=True):
            if ca["route"] != "judge" or cb["route"] != "judge":
                continue
            text = ca["claim"]["text"]
            shown = {name: seen[name].shown.get(text, []) for name in chars}
            for name in chars:
                chars[name] += sum(len(x) for x in shown[name])
            best = (cb["nli"] or {}).get("entailment_passage")
            claims += 1
            covered += best is not None and any(best["text"] in x for x in shown["rule"])
    return {
        "long_rows": long_rows,
        "long_judged_claims": claims,
        "best_passage_shown_with_rule": covered,  # of long_judged_claims
        "judge_source_chars_rule": chars["rule"],
        "judge_source_chars_every_piece": chars["every"],
    }


def reports(
    nli: NLIModel, rows: list[dict[str, Any]], mode: str, server: ScriptedLLMServer, folder: Path, nli_cache: Path
) -> list[dict[str, Any]]:
    """The rows' reports as JSON objects: the throughput benchmark's evaluator (LLM cache off) in the cascade, nli
    mode without an LLM; NLI scores through ``nli_cache``."""
    if mode == "nli":
        ev = Evaluator(Config(mode="nli", cache_mode="off"), nli=nli, cache=Cache(nli_cache, mode="use"))
    else:
        ev = evaluator(server, nli, folder, nli_cache=nli_cache, concurrency=8)
    return [r.model_dump(mode="json") for r in ev.evaluate_many(rows, batch_size=32)]


def compare(rule: list[dict[str, Any]], every: list[dict[str, Any]]) -> dict[str, Any]:
    """What differs between the rule's reports and every piece's, row by row."""
    claims = support_differs = support_higher = weak_rule = weak_every = labels = labels_higher = 0
    verdicts = better = 0
    rank = {"FAIL": 0, "WARN": 1, "PASS": 2}
    nli_part: list[float] = []
    combined: list[float] = []
    for a, b in zip(rule, every, strict=True):
        verdicts += a["verdict"] != b["verdict"]
        better += rank.get(a["verdict"], -1) > rank.get(b["verdict"], -1)
        for ca, cb in zip(a["claims"], b["claims"], strict=True):
            claims += 1
            labels += ca["label"] != cb["label"]
            labels_higher += ca["label"] == "SUPPORTED" != cb["label"]
            weak_rule += "weak" in ca["flags"]
            weak_every += "weak" in cb["flags"]
            if ca["nli"] and cb["nli"] and ca["nli"]["entailment"] != cb["nli"]["entailment"]:
                support_differs += 1
                support_higher += ca["nli"]["entailment"] > cb["nli"]["entailment"]
        sa, sb = a["scores"], b["scores"]
        if sa["nli"] is not None and sb["nli"] is not None:
            nli_part.append(sb["nli"] - sa["nli"])
        if sa["combined"] is not None and sb["combined"] is not None:
            combined.append(sb["combined"] - sa["combined"])
    return {
        "claims": claims,
        "support_differs": support_differs,
        "support_higher_with_rule": support_higher,  # must be 0
        "weak_with_rule": weak_rule,
        "weak_every_piece": weak_every,
        "nli_part_lower_max": round(max(nli_part, default=0.0), 4),
        "nli_part_lower_mean": round(sum(nli_part) / len(nli_part), 4) if nli_part else 0.0,
        "combined_lower_max": round(max(combined, default=0.0), 4),
        "combined_lower_mean": round(sum(combined) / len(combined), 4) if combined else 0.0,
        "combined_higher_with_rule": sum(d < 0 for d in combined),  # must be 0
        # 0 in the cascade (the margin reaches below its line); in nli mode the rule's measured bet: a claim stopped
        # more than MARGIN below t_support that a skipped piece would have lifted over it
        "labels_changed": labels,
        "labels_higher_with_rule": labels_higher,  # must be 0: SUPPORTED with the rule, not with every piece
        "verdicts_changed": verdicts,
        "verdicts_better_with_rule": better,  # must be 0
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(SHARED / "benchmarks" / "faithbench-dev.jsonl"))
    ap.add_argument("--limit", type=int, default=200, help="answers")
    ap.add_argument("--offset", type=int, default=0, help="rows skipped first")
    ap.add_argument("--mode", choices=["cascade", "nli"], default="cascade")
    ap.add_argument("--nli-model", default=None)
    args = ap.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "sk-benchmark")
    # a claim row (WiCE's) is its claim as the answer
    rows = [
        {**{k: v for k, v in r.items() if k != "claim"}, "answer": r.get("answer", r.get("claim"))}
        for r in read_rows(args.data, args.offset + args.limit)[args.offset :]
        if "answer" in r or "claim" in r
    ]
    nli = NLIModel.shared(args.nli_model or default_nli_model())
    seen = {"rule": JudgeSources(), "every": JudgeSources()}
    pairs: dict[str, int] = {}
    out: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        base, nli_cache = Path(tmp), Path(tmp) / "nli"
        for name in ("rule", "every"):
            script = seen[name].script(
                route({"claims": extract, "claims_qa": extract, "judge": verify, "verify": verify})
            )
            before = nli.pairs_scored
            with ScriptedLLMServer(script) as server, every_piece() if name == "every" else contextlib.nullcontext():
                out[name] = reports(nli, rows, args.mode, server, base / name, nli_cache)
            pairs[name] = nli.pairs_scored - before  # "every" scores only the pairs the rule skipped
    result = {
        "benchmark": "savings",
        "mode": args.mode,
        "answers": len(rows),
        "pairs_with_rule": pairs["rule"],
        "pairs_every_piece": pairs["rule"] + pairs["every"],
        **compare(out["rule"], out["every"]),
        **(judge_evidence(rows, out["rule"], out["every"], seen) if args.mode == "cascade" else {}),
    }
    for key, value in result.items():
        print(f"{key:28} {value}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
