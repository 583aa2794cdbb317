"""The cache's hit and miss counts belong to its directory: ``cache stats`` runs in a process of its own."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from groundjudge.cache import MARKER, Cache, make_key
from groundjudge.cli import app
from groundjudge.errors import ConfigError


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


def _unmark(directory: Path) -> None:
    """A cache as groundjudge made it before the marker."""
    (directory / MARKER).unlink()


def test_cache_commands_leave_another_programs_cache_db_alone(tmp_path: Path) -> None:
    """'cache clear --cache-dir D' on another tool's diskcache emptied it, and 'cache stats' on a folder with the
    user's own cache.db added diskcache's tables to that database (and a table named Cache would be emptied)."""
    import sqlite3

    import diskcache

    theirs = tmp_path / "theirs"
    other = diskcache.Cache(str(theirs))
    other.set("session/42", {"user": "ada"})
    other.close()
    mine = tmp_path / "mine"
    mine.mkdir()
    con = sqlite3.connect(mine / "cache.db")
    con.execute("CREATE TABLE Cache (k TEXT, v TEXT)")
    con.execute("INSERT INTO Cache VALUES ('a', 'b')")
    con.commit()
    con.close()

    def files() -> dict[Path, list[tuple[str, bytes]]]:  # SQLite's own -wal/-shm of a read-only look aside
        return {d: sorted((p.name, p.read_bytes()) for p in d.iterdir() if p.suffix == ".db") for d in (theirs, mine)}

    before = files()
    for directory, why in ((theirs, "holds entries groundjudge never writes"), (mine, "has the tables Cache, not")):
        for command in (["cache", "clear"], ["cache", "stats"], ["cache", "clear", "--kind", "llm"]):
            result = CliRunner().invoke(app, [*command, "--cache-dir", str(directory)])
            assert result.exit_code == 2, result.output
            said = " ".join(result.output.split())
            assert f"cache directory {directory} is not a groundjudge cache: its cache.db {why}" in said, said
    assert files() == before and not (theirs / MARKER).exists() and not (mine / MARKER).exists()
    reopened = diskcache.Cache(str(theirs))
    assert reopened.get("session/42") == {"user": "ada"}
    reopened.close()


def test_a_cache_made_before_the_marker_is_still_read_and_cleared(tmp_path: Path) -> None:
    """Caches written by earlier versions have no marker: their keys are groundjudge's, so they are adopted."""
    old = Cache(tmp_path / "c")
    old.set(make_key("nli", [1]), [0.1, 0.2, 0.7])
    old.get(make_key("llm", 2))  # a counted lookup: a gj-counts key
    old.close()
    _unmark(tmp_path / "c")
    empty = tmp_path / "empty"
    diskcache_made = Cache(empty)
    assert diskcache_made.store is not None  # a cache.db with no entry
    diskcache_made.close()
    _unmark(empty)
    assert Cache(empty).stats()["total_entries"] == 0  # an unmarked cache.db with no entry is adopted too
    assert Cache(tmp_path / "c").get(make_key("nli", [1])) == [0.1, 0.2, 0.7]
    assert (tmp_path / "c" / MARKER).is_file()
    assert Cache(tmp_path / "c").clear() == 1


def test_score_refuses_another_programs_cache_db_before_any_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import diskcache

    from tests.conftest import SHARED_MODEL

    monkeypatch.setenv("GROUNDJUDGE_NLI_MODEL", str(SHARED_MODEL))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    theirs = tmp_path / "theirs"
    other = diskcache.Cache(str(theirs))
    other.set("k", "v")
    other.close()
    data = tmp_path / "in.jsonl"
    data.write_text(json.dumps({"id": "a", "contexts": ["Paris is in France."], "claim": "Paris is in France."}) + "\n")
    out = tmp_path / "out.jsonl"
    args = ["score", str(data), "-o", str(out), "--mode", "nli", "--cache-dir", str(theirs), "--no-progress"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "is not a groundjudge cache" in " ".join(result.output.split()), result.output
    assert not out.exists()


def test_a_folder_another_groundjudge_process_is_making_is_not_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ray actors on a new shared --cache-dir: one looks for the marker and finds none, another writes the marker and
    starts its cache.db (diskcache makes its Settings table first), then the first finds that half-made cache.db
    ('has the tables Settings, not a disk cache's') and refused the folder: the actor failed. The marker, looked at
    again, says a groundjudge process made it."""
    import sqlite3

    import groundjudge.cache as cache_module

    folder = tmp_path / "shared"
    folder.mkdir()
    con = sqlite3.connect(folder / "cache.db")  # the other actor's cache.db as diskcache starts it
    con.execute("CREATE TABLE Settings (key TEXT NOT NULL UNIQUE, value)")
    con.commit()
    con.close()
    real = cache_module._not_ours

    def meanwhile(database: Path) -> str | None:  # the other actor wrote its marker after this one looked
        (folder / MARKER).write_text("made by the other actor\n")
        return real(database)

    monkeypatch.setattr(cache_module, "_not_ours", meanwhile)
    Cache(folder)  # no ConfigError
    (folder / MARKER).unlink()
    monkeypatch.setattr(cache_module, "_not_ours", real)
    with pytest.raises(ConfigError, match="has the tables Settings"):  # with no marker at all it is still refused
        Cache(folder)
