"""The benchmark scripts run end to end on small slices of the shared data and print their JSON line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, SHARED, SHARED_MODEL

DATA = SHARED / "benchmarks"


def run(script: str, *args: str, cache: Path) -> dict[str, Any]:
    env = {**os.environ, "GROUNDJUDGE_NLI_MODEL": str(SHARED_MODEL), "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(
        [
            sys.executable,
            f"benchmarks/{script}",
            *args,
            *(["--cache-dir", str(cache)] if script == "accuracy.py" else []),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", ["factcheckgpt-stance", "wice-dev"])
def test_accuracy_on_claim_rows(name: str, tmp_path: Path) -> None:
    out = run("accuracy.py", "--data", str(DATA / f"{name}.jsonl"), "--limit", "10", cache=tmp_path)
    assert out["benchmark"] == name and out["mode"] == "nli" and out["n"] == 10
    for key in (
        "balanced_accuracy",
        "kappa",
        "escalation_rate",
        "nli_decided_precision",
        "pairs_scored",
        "seconds",
        "seed_balanced_accuracy",
    ):
        assert key in out
    assert 0 <= out["balanced_accuracy"] <= 100 and 0 <= out["escalation_rate"] <= 1 and out["pairs_scored"] >= 10


def test_accuracy_on_answer_rows_prints_the_references(tmp_path: Path) -> None:
    out = run("accuracy.py", "--data", str(DATA / "faithbench-dev.jsonl"), "--limit", "10", cache=tmp_path)
    assert out["n"] == 10 and out["claims"] > 10
    assert {"gpt_4o", "hhem-2.1"} <= set(out["references"]) and "balanced_accuracy_score_rule" in out


def test_nli_throughput(tmp_path: Path) -> None:
    out = run("nli_throughput.py", "--limit", "3", "--repeat", "1", cache=tmp_path)
    for key in (
        "naive_pairs_per_s",
        "ceiling_pairs_per_s",
        "groundjudge_pairs_per_s",
        "ceiling_ratio",
        "speedup_vs_naive",
        "pairs_naive",
        "pairs_groundjudge",
        "balanced_accuracy_naive",
        "balanced_accuracy_groundjudge",
    ):
        assert out[key] is not None, key
    assert out["pairs_groundjudge"] <= out["pairs_naive"]
