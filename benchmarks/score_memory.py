"""Memory of `groundjudge score` over a large input: it streams, so resident memory must stay flat.

Generates N synthetic rows (default 100,000) and scores them in NLI mode with a tiny random NLI model (its speed,
not its answers, matter here; the tokenizer is the shared model's), sampling the process's resident memory as the
output grows. Prints RSS at each tenth of the run; the last line is one JSON object.

    python benchmarks/score_memory.py --rows 100000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import ROOT, SHARED_MODEL, print_table
from groundjudge.testing import tiny_nli_model


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def count_lines(path: Path) -> int:
    if not path.exists():
        return 0
    with path.open("rb") as fh:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--batch-size", type=int, default=64)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        model = tiny_nli_model(tmp / "tiny-nli", SHARED_MODEL)
        data = tmp / "in.jsonl"
        with data.open("w") as fh:
            for i in range(args.rows):
                row = {
                    "id": f"r{i}",
                    "question": f"What does item {i} cost?",
                    "contexts": [f"Item {i} costs {i % 97} dollars. It ships from warehouse {i % 13} in {i % 7} days."],
                    "answer": f"Item {i} costs {i % 97} dollars. It ships in {i % 5} days from warehouse {i % 13}.",
                    "metadata": {"batch": i // 1000},
                }
                fh.write(json.dumps(row) + "\n")
        out = tmp / "out.jsonl"
        env = {**os.environ, "GROUNDJUDGE_NLI_MODEL": str(model), "HF_HUB_OFFLINE": "1"}
        cmd = [
            sys.executable,
            "-m",
            "groundjudge",
            "score",
            str(data),
            "--out",
            str(out),
            "--cache-dir",
            str(tmp / "cache"),
            "--batch-size",
            str(args.batch_size),
            "--no-progress",
        ]
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        samples: list[tuple[int, float]] = []
        while proc.poll() is None:
            try:
                samples.append((count_lines(out), rss_mb(proc.pid)))
            except OSError:
                break
            time.sleep(1.0)
        seconds = time.perf_counter() - start
        done = count_lines(out)
    if proc.returncode != 0:
        raise SystemExit(f"score exited with {proc.returncode}")
    rows = []
    for tenth in range(1, 11):
        target = args.rows * tenth // 10
        at = [mb for n, mb in samples if n <= target]
        rows.append([f"{10 * tenth}%", target, max(at) if at else float("nan")])
    print_table(["progress", "rows", "peak RSS MB so far"], rows)
    warm = [mb for n, mb in samples if n >= args.rows // 10]
    result = {
        "rows": done,
        "seconds": round(seconds, 1),
        "rows_per_s": round(done / seconds, 1),
        "rss_mb_at_10pct": round(min(warm), 1) if warm else None,
        "rss_mb_peak": round(max(mb for _, mb in samples), 1) if samples else None,
        "rss_growth_after_10pct_mb": round(max(warm) - min(warm), 1) if warm else None,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
