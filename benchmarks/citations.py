"""Citation checking on cited answers built from labelled claims: are wrong citations flagged, right ones accepted?

From the SUPPORTED claims of ../shared/benchmarks (Factcheck-GPT claims with their snippet, WiCE claims with their
cited page) it builds one cited claim per row: the claim with a marker ``[k]`` and two sources, its own (which
supports it) and a distractor (another row's source), in a seeded random order. A third of the rows cite the right
source, a third the distractor, a third nothing. It scores them NLI-only and in the cascade with a "correct judge":
a :class:`~groundjudge.testing.ScriptedLLMServer` that answers from the gold labels (SUPPORTED, quoting the claim's
own source verbatim), through the real OpenAI SDK.

Reported, per mode: the share of wrong citations flagged (``OTHER_SUPPORTS`` or ``NOT_SUPPORTED``), of right
citations accepted (``CITED_SUPPORTS``), of uncited claims reported ``UNCITED``; the last line is one JSON object.
Targets: >= 95% wrong flagged and >= 90% right accepted in the cascade with a correct judge.

    python benchmarks/citations.py --limit 30
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import SHARED, default_nli_model, print_table, read_rows

DATA = [SHARED / "benchmarks" / "factcheckgpt-stance.jsonl", SHARED / "benchmarks" / "wice-dev.jsonl"]
KINDS = ("right", "distractor", "none")


def build(paths: list[Path], limit: int, seed: int) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """Cited claim rows and, by claim text, what the correct judge knows: the claim's own source text."""
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    gold: dict[str, dict[str, Any]] = {}
    for path in paths:
        pool = [r for r in read_rows(path) if r.get("label") == "SUPPORTED" and r.get("claim") and r.get("contexts")]
        rng.shuffle(pool)
        picked = pool[:limit]
        for i, row in enumerate(picked):
            own = "\n\n".join(row["contexts"])
            other = picked[(i + 1) % len(picked)] if len(picked) > 1 else pool[-1]
            distractor = "\n\n".join(other["contexts"])
            contexts = [own, distractor]
            rng.shuffle(contexts)
            kind = KINDS[i % 3]
            claim = row["claim"].strip()
            marker = {"right": contexts.index(own) + 1, "distractor": contexts.index(distractor) + 1}.get(kind)
            text = f"{claim} [{marker}]" if marker else claim
            rows.append({"id": f"{row['id']}-{kind}", "claim": text, "contexts": contexts, "metadata": {"kind": kind}})
            gold[claim] = {"own": own}
    return rows, gold


def correct_judge(gold: dict[str, dict[str, Any]]) -> Any:
    """A scripted judge that knows the gold labels: every claim SUPPORTED, quoting its own source verbatim."""
    from groundjudge.testing import RecordedRequest, Reply, claims_in, sources_in

    def judge(req: RecordedRequest) -> Reply:
        sources = dict(enumerate(sources_in(req), 1))
        verdicts = []
        for cid, shown in claims_in(req).items():
            text = re.sub(r" \(cites: [^)]*\)$", "", shown)
            own = gold.get(text, {}).get("own", "")
            number = next((k for k, s in sources.items() if s and s[:200] in own), None)
            if number is None:
                verdicts.append({"claim_id": cid, "verdict": "UNSUPPORTED", "reason": "not shown", "quotes": []})
                continue
            quote = " ".join(sources[number].split()[:12])
            verdicts.append(
                {
                    "claim_id": cid,
                    "verdict": "SUPPORTED",
                    "reason": "the claim's own source states it",
                    "quotes": [{"source": number, "text": quote}],
                    "error_type": None,
                }
            )
        return Reply.json({"verdicts": verdicts})

    return judge


def tally(reports: list[Any]) -> dict[str, Any]:
    by_kind: dict[str, list[str | None]] = {k: [] for k in KINDS}
    for r in reports:
        kind = r.metadata.get("kind")
        by_kind[kind].append(r.claims[0].citation if r.claims else None)

    def share(kind: str, ok: tuple[str | None, ...]) -> float | None:
        got = by_kind[kind]
        return sum(c in ok for c in got) / len(got) if got else None

    return {
        "wrong_flagged": share("distractor", ("OTHER_SUPPORTS", "NOT_SUPPORTED")),
        "right_accepted": share("right", ("CITED_SUPPORTS",)),
        "uncited_reported": share("none", ("UNCITED", None)),  # None: the answer cites nothing at all
        "n_wrong": len(by_kind["distractor"]),
        "n_right": len(by_kind["right"]),
        "n_uncited": len(by_kind["none"]),
        "errors": sum(r.verdict == "ERROR" for r in reports),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", action="append", type=Path, help="claim rows (default: Factcheck-GPT and WiCE)")
    ap.add_argument("--limit", type=int, default=30, help="SUPPORTED claims taken from each file")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache-dir", type=Path, default=None, help="NLI/LLM cache (default: a fresh temporary one)")
    args = ap.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "sk-scripted-benchmark")
    from groundjudge.checker.nli import NLIModel
    from groundjudge.config import Config
    from groundjudge.pipeline.evaluator import Evaluator
    from groundjudge.testing import ScriptedLLMServer, route

    rows, gold = build(args.data or DATA, args.limit, args.seed)
    cache_dir = args.cache_dir or Path(tempfile.mkdtemp(prefix="gj-citations-"))
    nli = NLIModel.shared(default_nli_model())
    out: dict[str, Any] = {"benchmark": "citations", "n": len(rows), "seed": args.seed}
    started = time.perf_counter()
    nli_ev = Evaluator(Config(mode="nli", cache_dir=str(cache_dir / "nli")), nli=nli)
    out["nli"] = tally(list(nli_ev.evaluate_many(rows)))
    with ScriptedLLMServer(route({"judge": correct_judge(gold)})) as server:
        cascade = Evaluator(
            Config(llm="openai/gpt-4o-mini", base_url=server.openai_base_url, cache_dir=str(cache_dir / "cascade")),
            nli=nli,
        )
        reports = list(cascade.evaluate_many(rows))
        out["cascade"] = tally(reports)
        out["cascade"]["escalation_rate"] = sum(c.route == "judge" for r in reports for c in r.claims) / max(
            1, sum(len(r.claims) for r in reports)
        )
    out["seconds"] = round(time.perf_counter() - started, 1)
    c = out["cascade"]
    out["targets_met"] = (c["wrong_flagged"] or 0) >= 0.95 and (c["right_accepted"] or 0) >= 0.90
    print_table(
        ["mode", "wrong flagged", "right accepted", "uncited reported", "n wrong / right / uncited"],
        [
            [
                m,
                out[m]["wrong_flagged"],
                out[m]["right_accepted"],
                out[m]["uncited_reported"],
                f"{out[m]['n_wrong']} / {out[m]['n_right']} / {out[m]['n_uncited']}",
            ]
            for m in ("nli", "cascade")
        ],
    )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
