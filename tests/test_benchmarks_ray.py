"""The benchmark test that starts Ray, in a module of its own: the modules that start Ray run one after another in one
worker (``RAY_MODULES`` in tests/conftest.py), and the rest of the benchmark tests need not wait in that queue."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_benchmarks import run


@pytest.mark.ray
def test_ray_engine_benchmark_compares_both_engines(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    out = run("ray_engine.py", "--limit", "4", "--batch-size", "2", "--cpus", "2", cache=tmp_path)
    assert out["benchmark"] == "ray_engine" and out["rows"] == 4 and out["identical_reports"] is True
    for key in (
        "local_rows_per_s",
        "ray_rows_per_s",
        "ray_overhead_seconds",
        "ray_first_report_seconds",
        "actors",
        "ray_second_run_seconds",
    ):
        assert out[key] is not None, key
