"""Every command's --help at 80 columns: option names whole, no '…', brackets kept, score's in at most 200 lines."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from typing import Any

import pytest
import typer
import typer.rich_utils
from typer.testing import CliRunner

from groundjudge.cli import app

WIDTH = {"COLUMNS": "80", "TERMINAL_WIDTH": "80"}  # whatever terminal the tests run in
BOX = "│╭╮╰╯─"


def commands() -> list[tuple[list[str], Any]]:
    """Every command path with its click command: the root, each command, each sub-command."""
    root = typer.main.get_command(app)
    found: list[tuple[list[str], Any]] = [([], root)]

    def walk(group: Any, path: list[str]) -> None:
        for name, command in group.commands.items():
            found.append(([*path, name], command))
            if hasattr(command, "commands"):
                walk(command, [*path, name])

    walk(root, [])
    return found


def flat(text: str) -> str:
    """The help as one line of words: no panel borders, no wrapping."""
    for ch in BOX:
        text = text.replace(ch, " ")
    return " ".join(text.split())


@pytest.fixture
def narrow(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(typer.rich_utils, "MAX_WIDTH", 80)  # typer read TERMINAL_WIDTH at import (group help)


@pytest.mark.usefixtures("narrow")
@pytest.mark.parametrize(("path", "command"), commands(), ids=lambda x: " ".join(x) if isinstance(x, list) else "")
def test_help_at_80_columns_is_whole(path: list[str], command: Any) -> None:
    result = CliRunner().invoke(app, [*path, "--help"], env=WIDTH)
    assert result.exit_code == 0, result.output
    out = result.output
    assert "…" not in out, out  # rich's mark of a name or a word cut short
    assert all(len(line) <= 80 for line in out.splitlines()), out
    assert len(out.splitlines()) <= 200, len(out.splitlines())
    words = set(re.findall(r"(?<![\w-])-{1,2}[\w-]+", out))
    text = flat(out)
    for param in command.params:
        for name in (*param.opts, *param.secondary_opts):
            if name.startswith("-"):
                assert name in words, (name, out)
        help_text = " ".join((getattr(param, "help", None) or "").split())
        for bracketed in re.findall(r"\[[^\]]*\]", help_text):  # '[default: ...]', 'groundjudge[ray]', '[1]'
            assert bracketed in text, (bracketed, out)


def test_score_help_in_a_pipe_at_80_columns() -> None:
    """The command as a user runs it: ``COLUMNS=80 groundjudge score --help | wc -l`` is at most 200 lines, grouped
    in panels, no option name cut."""
    env = {**os.environ, **WIDTH, "PYTHONIOENCODING": "utf-8"}  # a UTF-8 terminal, whatever the machine's locale
    shown = subprocess.run(
        [sys.executable, "-m", "groundjudge", "score", "--help"],
        capture_output=True,
        encoding="utf-8",
        env=env,
        check=True,
    ).stdout
    assert len(shown.splitlines()) <= 200 and "…" not in shown
    for panel in ("Input and output", "LLM judges", "Local checker", "Cost and pace", "Run"):
        assert f"─ {panel} ─" in shown, panel
    for name in ("--second-judge-base-url", "--second-judge-price", "--nli-trust-remote-code", "--citation-style"):
        assert re.search(rf"(?<![\w-]){name}(?![\w-])", shown), name
    assert "pip install 'groundjudge[ray]'" in flat(shown)


@pytest.mark.parametrize("args", [["--help"], ["score", "--help"]])
def test_help_in_an_ascii_locale_on_a_narrow_terminal_escapes_what_it_cannot_encode(args: list[str]) -> None:
    """``LC_ALL=C`` without Python's UTF-8 mode (stdout is ASCII) and ``COLUMNS=20``: rich cuts the commands' help with
    "…", which ASCII cannot hold; the help is still printed, exit 0, the character escaped, not a traceback."""
    env = {**os.environ, "LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0", "COLUMNS": "20"}
    for name in ("PYTHONIOENCODING", "TERMINAL_WIDTH"):
        env.pop(name, None)
    shown = subprocess.run(
        [sys.executable, "-m", "groundjudge", *args], capture_output=True, env=env, stdin=subprocess.DEVNULL
    )
    assert shown.returncode == 0, shown.stderr.decode("ascii", "backslashreplace")[-600:]
    assert shown.stdout.isascii() and b"Usage" in shown.stdout
