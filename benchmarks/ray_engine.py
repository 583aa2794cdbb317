"""Rows per second of the local engine and the Ray engine on the same rows (nli mode, cache off).

Both score the same slice of a dev file (default the first 200 rows of ../shared/benchmarks/wice-dev.jsonl) with
the same config; the local engine as ``groundjudge score`` runs it (model loaded before the clock starts), the Ray
engine through :func:`groundjudge.runs.score_file` (``engine="ray"``) on a local Ray started here
(``ray.init(num_cpus=N)``), timed from the call to the last report written: actor start-up and one model load per
actor are its overhead; then a second Ray run on the same Ray, whose actors were kept from the first. The outputs are
compared line for line. Prints a table; the last line is one JSON object.

    python benchmarks/ray_engine.py --limit 200
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import SHARED, default_nli_model, print_table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data", default=str(SHARED / "benchmarks" / "wice-dev.jsonl"))
    parser.add_argument("--limit", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--cpus", type=int, default=os.cpu_count() or 2, help="CPUs of the local Ray")
    parser.add_argument("--actors", type=int, default=None, help="default: one per CPU but one")
    args = parser.parse_args()

    from groundjudge.config import Config
    from groundjudge.io.reports import dumps, finite_report
    from groundjudge.io.tables import input_rows
    from groundjudge.pipeline.evaluator import Evaluator

    work = Path(tempfile.mkdtemp(prefix="gj-ray-bench-"))
    src = work / "in.jsonl"
    with open(args.data, "rb") as fh, src.open("wb") as dst:  # a slice in a temp dir, never in the repository
        for n, line in enumerate(fh):
            if n >= args.limit:
                break
            dst.write(line)
    config = Config(nli_model=default_nli_model(), mode="nli", cache_mode="off")

    evaluator = Evaluator(config)
    _ = evaluator.nli
    t0 = time.perf_counter()
    local = [dumps(finite_report(r)) for r in evaluator.evaluate_numbered(input_rows(src, set()), args.batch_size)]
    local_s = time.perf_counter() - t0
    del evaluator

    import ray

    from groundjudge.runs import score_file
    from groundjudge.runs.ray import plan

    # a local Ray of its own with the CPUs asked for, never a cluster already running on this machine
    ray.init(
        address="local", num_cpus=args.cpus, include_dashboard=False, log_to_driver=False,
        object_store_memory=300 * 2**20,
    )  # fmt: skip
    logging.getLogger("ray.data").setLevel(logging.WARNING)
    actors = plan(args.actors, None)[0]
    out = work / "ray.jsonl"
    t0 = time.perf_counter()
    first: list[float] = []
    score_file(
        str(src),
        out,
        config,
        engine="ray",
        batch_size=args.batch_size,
        actors=args.actors,
        progress=lambda n: first.append(time.perf_counter() - t0) if n == 1 else None,
    )
    ray_s = time.perf_counter() - t0
    # a second run on the same Ray: the first run's actors were kept, with the model loaded (runs.ray.KEEP_ACTORS_S)
    again = work / "ray-again.jsonl"
    t0 = time.perf_counter()
    score_file(str(src), again, config, engine="ray", batch_size=args.batch_size, actors=args.actors)
    again_s = time.perf_counter() - t0
    ray.shutdown()
    got = out.read_text(encoding="utf-8").splitlines()
    (work / "local.jsonl").write_text("".join(x + "\n" for x in local), encoding="utf-8")
    for a, b in zip(local, got, strict=False):
        if a != b:  # say where the engines differ
            da, db = json.loads(a), json.loads(b)
            keys = [k for k in da if da[k] != db.get(k)]
            print(f"first difference: row {da.get('row')} in {keys} (both files in {work})", file=sys.stderr)
            break

    rows = len(local)
    result = {
        "benchmark": "ray_engine",
        "rows": rows,
        "batch_size": args.batch_size,
        "cpus": args.cpus,
        "actors": actors,
        "local_seconds": round(local_s, 2),
        "ray_seconds": round(ray_s, 2),
        "local_rows_per_s": round(rows / local_s, 3),
        "ray_rows_per_s": round(rows / ray_s, 3),
        "ray_first_report_seconds": round(first[0], 2) if first else None,
        "ray_overhead_seconds": round(ray_s - local_s, 2),
        "ray_vs_local": round(local_s / ray_s, 3),
        "ray_second_run_seconds": round(again_s, 2),
        "ray_second_run_rows_per_s": round(rows / again_s, 3),
        "identical_reports": got == local == again.read_text(encoding="utf-8").splitlines(),
    }
    print_table(
        ["engine", "rows", "seconds", "rows/s"],
        [
            ["local", rows, local_s, rows / local_s],
            [f"ray ({actors} actor{'s' if actors != 1 else ''}, {args.cpus} CPUs)", rows, ray_s, rows / ray_s],
            ["ray, a second run (actors kept)", rows, again_s, rows / again_s],
        ],
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
