"""Helpers shared by the benchmark scripts: where the shared data and model are, and reading rows."""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
SHARED_MODEL = SHARED / "models" / "gj-nli-minilm-l6"


def default_nli_model() -> str:
    """$GROUNDJUDGE_NLI_MODEL, else the project's shared model (hub offline), else the library default."""
    if env := os.environ.get("GROUNDJUDGE_NLI_MODEL"):
        return env
    if SHARED_MODEL.is_dir():
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        return str(SHARED_MODEL)
    from groundjudge.checker.nli import DEFAULT_NLI_MODEL

    return DEFAULT_NLI_MODEL


def read_rows(path: str | Path, limit: int | None = None) -> list[dict[str, Any]]:
    rows = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                rows.append(json.loads(line))
                if limit is not None and len(rows) >= limit:
                    break
    return rows


def print_table(headers: list[str], rows: list[list[Any]]) -> None:
    cells = [[f"{c:.3f}" if isinstance(c, float) else str(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    for r in cells:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))


CLAIM_FILES = (SHARED / "benchmarks" / "factcheckgpt-stance.jsonl", SHARED / "benchmarks" / "wice-dev.jsonl")


def claim_sample(paths: Sequence[str | Path], limit: int | None, seed: int) -> list[dict[str, Any]]:
    """Claim rows of ``paths`` (every row with a ``claim`` and a ``label``), a seeded sample of whole claim texts
    taken until ``limit`` rows are in (None: all): a claim text that Factcheck-GPT pairs with several snippets comes
    with all its rows or none (claims are split by text, never by row; ``checker.head.claim_key``). A row that
    repeats an earlier row's claim and contexts (Factcheck-GPT has 26) is left out: nothing tells the two apart."""
    from groundjudge.checker.head import claim_key

    by_text: dict[str, list[dict[str, Any]]] = {}
    seen: set[tuple[str, tuple[str, ...]]] = set()
    for path in paths:
        for r in read_rows(path):
            if not (r.get("claim") and r.get("label")):
                continue
            key = (claim_key(r["claim"]), tuple(r["contexts"]))
            if key not in seen:
                seen.add(key)
                by_text.setdefault(key[0], []).append(r)
    keys = sorted(by_text)
    random.Random(seed).shuffle(keys)
    out: list[dict[str, Any]] = []
    for k in keys:
        if limit is not None and len(out) >= limit:
            break
        out.extend(by_text[k])
    return out


def gold_judge(rows: Sequence[dict[str, Any]], flipped: Callable[[], Collection[str]]) -> Any:
    """A scripted judge (for :class:`groundjudge.testing.ScriptedLLMServer`) that answers each claim with its row's
    gold label, turned over for the row ids ``flipped()`` holds at the time of the call (a judge that errs on a known
    share): not supported (UNSUPPORTED, CONTRADICTED) becomes SUPPORTED, SUPPORTED becomes UNSUPPORTED. SUPPORTED
    quotes the first twelve words of source 1 verbatim. A claim is found by its text (``claim_key``) and, when
    several rows share that text, by the row whose contexts hold source 1 (the first if several do); a claim found
    in no row is answered UNSUPPORTED and counted in the script's ``unmatched`` list."""
    from groundjudge.checker.head import claim_key
    from groundjudge.testing import RecordedRequest, Reply, claims_in, fenced_block

    by_text: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_text.setdefault(claim_key(r["claim"]), []).append(r)
    unmatched: list[str] = []

    def row_of(text: str, source: str) -> dict[str, Any] | None:
        candidates = by_text.get(claim_key(text), [])
        if len(candidates) <= 1:
            return candidates[0] if candidates else None
        passage = " ".join(source.split())
        return next((r for r in candidates if passage and passage in " ".join(" ".join(r["contexts"]).split())), None)

    def judge(req: RecordedRequest) -> Reply:
        source = fenced_block(req, "SOURCE 1")
        quote = " ".join(source.split()[:12])
        flips = flipped()
        verdicts = []
        for cid, text in claims_in(req).items():
            row = row_of(text, source)
            if row is None:
                unmatched.append(text)
                verdict = "UNSUPPORTED"
            elif row["id"] in flips:
                verdict = "UNSUPPORTED" if row["label"] == "SUPPORTED" else "SUPPORTED"
            else:
                verdict = row["label"]
            verdicts.append(
                {
                    "claim_id": cid,
                    "verdict": verdict,
                    "reason": "per the gold label",
                    "quotes": [{"source": 1, "text": quote}] if verdict == "SUPPORTED" else [],
                }
            )
        return Reply.json({"verdicts": verdicts})

    judge.unmatched = unmatched  # type: ignore[attr-defined]
    return judge
