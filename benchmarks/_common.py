"""Helpers shared by the benchmark scripts: where the shared data and model are, and reading rows."""

from __future__ import annotations

import json
import os
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
