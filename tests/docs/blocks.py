"""The code blocks and option names of the manual (``docs/``) and the README, for the tests of this folder."""

from __future__ import annotations

import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
HOOKS = DOCS / "hooks"
if str(HOOKS) not in sys.path:
    sys.path.insert(0, str(HOOKS))

import gj_reference  # noqa: E402  (docs/hooks: the generator mkdocs runs; the tests use the same functions)

FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})(?P<lang>[\w+-]*)(?P<info>[^`\n]*)$")
ATTR = re.compile(r'(\w+)="([^"]*)"')


@dataclass
class Block:
    """A fenced code block: its file, first line (1-based, the fence's), language, attributes and code."""

    path: Path
    line: int
    lang: str
    attrs: dict[str, str]
    code: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def pages() -> list[Path]:
    """The README and every Markdown page of the manual."""
    return [ROOT / "README.md", *sorted(p for p in DOCS.rglob("*.md") if HOOKS not in p.parents)]


def blocks(path: Path) -> list[Block]:
    """The fenced code blocks of one Markdown file, in order (indented ones, in lists, dedented)."""
    out: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence = m.group("indent"), m.group("fence")
        body = []
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            line = lines[j]
            body.append(line[len(indent) :] if line.startswith(indent) else line.lstrip())
            j += 1
        out.append(Block(path, i + 1, m.group("lang"), dict(ATTR.findall(m.group("info"))), "\n".join(body)))
        i = j + 1
    return out


def shell_commands(block: Block) -> list[list[str]]:
    """The ``groundjudge ...`` command lines of a shell block (continuations joined, comments and env vars off)."""
    text = re.sub(r"\\\n\s*", " ", block.code)
    out = []
    for line in text.splitlines():
        for part in re.split(r"&&|;|\|", line):
            try:
                words = shlex.split(part, comments=True)
            except ValueError:
                continue
            while words and re.match(r"^[A-Z_]+=", words[0]):
                words = words[1:]
            if words and words[0].endswith("groundjudge") and "/" not in words[0].replace(".venv/bin/", ""):
                out.append(words[1:])
    return out


def resolve(
    words: list[str], commands: dict[tuple[str, ...], gj_reference.CliCommand]
) -> tuple[gj_reference.CliCommand, list[str]]:
    """The command a command line names (the longest known path) and the words after it."""
    path: tuple[str, ...] = ()
    rest = list(words)
    while rest and not rest[0].startswith("-") and (*path, rest[0]) in commands:
        path = (*path, rest[0])
        rest = rest[1:]
    return commands[path], rest


def option_words(words: list[str]) -> list[str]:
    """The option names among a command line's words (``--out=x`` -> ``--out``; ``-`` alone is not one)."""
    out = []
    for w in words:
        if w == "--":
            break
        if w.startswith("-") and len(w) > 1 and not re.match(r"^-\d", w):
            out.append(w.split("=", 1)[0])
    return out
