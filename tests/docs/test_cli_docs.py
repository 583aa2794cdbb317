"""Issue 30: the manual and the README name only options that exist, and every option of the CLI is documented.

The reference is generated from the typer app (``docs/hooks/gj_reference.py``); these tests hold the hand-written
pages to it: every ``groundjudge ...`` line of a shell example parses (its command and options exist), every
``--option`` the text names exists somewhere (the CLI, the pytest plugin, a benchmark script), and every option of
every command has help text and a place in the generated reference. No model, no build: a second or two.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.docs.blocks import ROOT, gj_reference, option_words, pages, resolve, shell_commands
from tests.docs.blocks import blocks as code_blocks

SHELL = {"bash", "sh", "shell", "console"}
# Options of other programs the pages show beside groundjudge's (pip, chromium, mkdocs, pytest itself).
FOREIGN = {"--headless", "--screenshot", "--window-size", "--strict", "--durations", "-e", "-q", "-m", "-n", "-x",
           "-p", "-k", "--help", "--upgrade", "-o", "-v"}  # fmt: skip


@pytest.fixture(scope="module")
def commands() -> dict[tuple[str, ...], gj_reference.CliCommand]:
    return {tuple(c.path): c for c in gj_reference.cli_commands()}


def plugin_options() -> set[str]:
    """The options the pytest plugin adds (read by calling its hook with a recorder)."""
    from groundjudge import pytest_plugin

    names: set[str] = set()

    class Recorder:
        def getgroup(self, *args: Any, **kwargs: Any) -> Recorder:
            return self

        def addoption(self, *opts: str, **kwargs: Any) -> None:
            names.update(opts)

        def addini(self, *args: Any, **kwargs: Any) -> None:
            pass

    pytest_plugin.pytest_addoption(Recorder())  # type: ignore[arg-type]
    return names


def benchmark_options() -> set[str]:
    """The options of the benchmark scripts (their argparse declarations)."""
    found: set[str] = set()
    for script in (ROOT / "benchmarks").glob("*.py"):
        found.update(re.findall(r"""add_argument\(\s*["'](--[a-z0-9-]+)["']""", script.read_text(encoding="utf-8")))
    return found


def every_known_option(commands: dict[tuple[str, ...], gj_reference.CliCommand]) -> set[str]:
    """The options of groundjudge's own programs: the CLI, the pytest plugin (and a few of other tools)."""
    return {o for c in commands.values() for o in c.options} | plugin_options() | FOREIGN


def test_every_groundjudge_line_of_a_shell_example_parses(
    commands: dict[tuple[str, ...], gj_reference.CliCommand],
) -> None:
    problems = []
    seen = 0
    for page in pages():
        for block in code_blocks(page):
            if block.lang not in SHELL:
                continue
            for words in shell_commands(block):
                seen += 1
                words = [w.strip("[]") for w in words]
                root_options = []
                while words and words[0].startswith("-"):  # options of the program itself, before the command
                    root_options.append(words.pop(0))
                command, rest = resolve(words, commands)
                if command.path == [] and rest:
                    problems.append(f"{block.where}: no command {rest[0]!r}: groundjudge {' '.join(words)}")
                    continue
                for option in root_options:
                    if option not in commands[()].options:
                        problems.append(f"{block.where}: groundjudge takes no {option}")
                for option in option_words(rest):
                    if option not in command.options:
                        problems.append(f"{block.where}: {command.name} has no {option}")
    assert seen >= 20, f"only {seen} groundjudge command lines found in the shell examples"
    assert not problems, "\n".join(problems)


def test_every_option_the_text_names_exists(commands: dict[tuple[str, ...], gj_reference.CliCommand]) -> None:
    """An option in the text (``--t-support``, say) that no program here takes is drift. A benchmark script's
    options count only on the benchmark pages and on lines that name a script under ``benchmarks/``."""
    known = every_known_option(commands)
    scripts = benchmark_options()
    problems = []
    for page in pages():
        text = page.read_text(encoding="utf-8")
        on_benchmarks = "benchmarks" in page.parts
        for lineno, line in enumerate(text.splitlines(), 1):
            allowed = known | scripts if on_benchmarks or "benchmarks/" in line else known
            for span in re.findall(r"`([^`\n]+)`", line):
                for option in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", span):
                    if option not in allowed:
                        problems.append(f"{page.relative_to(ROOT)}:{lineno}: {option} (in `{span}`)")
    assert not problems, "options named that nothing takes:\n" + "\n".join(problems)


def test_the_check_finds_an_option_that_does_not_exist(
    commands: dict[tuple[str, ...], gj_reference.CliCommand], tmp_path: Path
) -> None:
    """The README once named --t-support, which the CLI does not have: the checks above would catch it now."""
    assert "--t-support" not in every_known_option(commands)
    score = commands[("score",)]
    _, rest = resolve(["score", "in.jsonl", "--out", "x.jsonl", "--t-support", "0.9"], commands)
    assert [o for o in option_words(rest) if o not in score.options] == ["--t-support"]


def test_every_option_has_help_and_a_place_in_the_reference(
    commands: dict[tuple[str, ...], gj_reference.CliCommand],
) -> None:
    reference = gj_reference.cli_markdown()
    problems = []
    for command in commands.values():
        assert f"## {command.name} " in reference, command.name
        for param in command.params:
            if param.opts == ["--help"]:
                continue
            if not param.help or param.help.startswith("[default"):
                problems.append(f"{command.name} {param.names}: no help text")
            for spelling in param.opts if param.kind == "option" else [param.name]:
                if not re.search(rf"<code>(-\w, )?{re.escape(spelling)}\b", reference):
                    problems.append(f"{command.name} {spelling}: not in the generated reference")
    assert not problems, "\n".join(problems)


def test_every_score_option_is_explained_in_a_hand_written_page(
    commands: dict[tuple[str, ...], gj_reference.CliCommand],
) -> None:
    """The reference lists every option; the guides and explanations must also say what each of score's is for."""
    text = "\n".join(p.read_text(encoding="utf-8") for p in pages())
    missing = [
        option
        for param in commands[("score",)].params
        if param.kind == "option" and param.opts != ["--help"]
        for option in param.opts[:1] + [o for o in param.opts if o.startswith("--") and o != param.opts[0]][:1]
        if option.startswith("--") and not option.startswith("--no-") and option not in text
    ]
    assert not missing, f"score options no page explains: {missing}"


def test_every_config_field_is_described() -> None:
    """The Config reference is generated from the fields' descriptions: a field without one would be a blank row."""
    from groundjudge.config import Config, Thresholds

    blank = [
        f"{model.__name__}.{name}"
        for model in (Config, Thresholds)
        for name, field in model.model_fields.items()
        if not field.description
    ]
    assert not blank, f"fields without a description (Field(..., description=...)): {blank}"
