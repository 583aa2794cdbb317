"""The cache's hit and miss counts belong to its directory: ``cache stats`` runs in a process of its own."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from groundjudge.cache import Cache, make_key
from groundjudge.cli import app


def test_cache_stats_shows_the_lookups_of_other_processes(tmp_path: Path) -> None:
    """Issue 29 §8: ``cache stats`` printed this process's counts, which in its own process are always empty."""
    first = Cache(tmp_path)
    first.set(make_key("llm", 1), {"a": 1})
    assert first.get(make_key("llm", 1)) == {"a": 1} and first.get(make_key("llm", 2)) is None
    assert first.get(make_key("nli", 3)) is None
    first.close()
    script = (
        "from groundjudge.cache import Cache, make_key\n"
        f"c = Cache({str(tmp_path)!r})\n"
        "for _ in range(300):\n"  # more than one flush's worth, and some left in memory when the process ends
        "    c.get(make_key('llm', 1))\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    result = CliRunner().invoke(app, ["cache", "stats", "--cache-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    stats = json.loads(result.output)
    assert stats["hits"] == {"llm": 301} and stats["misses"] == {"llm": 1, "nli": 1}
    assert stats["entries"] == {"llm": 1} and stats["total_entries"] == 1  # the counts are not entries
    assert Cache(tmp_path).clear() == 1 and Cache(tmp_path).stats()["hits"] == {}
