"""Versioned prompt files: ``prompts/<name>.md``.

A prompt file has a front matter block and two sections::

    ---
    name: judge
    version: 2
    variables: [claims, sources]
    ---
    # system
    You check claims ...
    # user
    Claims: {{claims}}

Placeholders are ``{{name}}``. Every placeholder must be declared and every declared variable used; rendering
with a missing or unknown variable is an error. The version is part of every LLM cache key, so editing a prompt
without bumping its version is caught by :func:`load_prompt` (the content hash goes into the key as well).
"""

from __future__ import annotations

import hashlib
import os
import re
from functools import lru_cache
from pathlib import Path

from groundjudge.errors import PromptError
from groundjudge.models import Message, Prompt

_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_SECTION = re.compile(r"^# (system|user)\s*$", re.MULTILINE)


@lru_cache(maxsize=1)
def _package_dir() -> Path:
    """This package's directory, resolved once (every LLM call loads its prompt: a resolve is a dozen lstat calls)."""
    return Path(__file__).resolve().parent


def prompt_dirs() -> list[Path]:
    """Where prompts are looked for, first match wins: $GROUNDJUDGE_PROMPTS_DIR, the wheel, the checkout."""
    dirs = []
    if env := os.environ.get("GROUNDJUDGE_PROMPTS_DIR"):
        dirs.append(Path(env))
    here = _package_dir()
    dirs.append(here / "prompts")  # inside an installed wheel
    dirs.append(here.parent / "prompts")  # editable install / source checkout
    return dirs


def _parse_front_matter(text: str, path: Path) -> tuple[dict[str, str | list[str]], str]:
    if not text.startswith("---\n"):
        raise PromptError(f"{path}: a prompt file starts with a '---' front matter block")
    end = text.find("\n---\n", 4)
    if end < 0:
        raise PromptError(f"{path}: the front matter block is not closed with '---'")
    meta: dict[str, str | list[str]] = {}
    for line in text[4:end].splitlines():
        if not line.strip():
            continue
        key, sep, value = line.partition(":")
        if not sep:
            raise PromptError(f"{path}: front matter line {line!r} is not 'key: value'")
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            meta[key.strip()] = [v.strip() for v in value[1:-1].split(",") if v.strip()]
        else:
            meta[key.strip()] = value.strip("\"'")
    return meta, text[end + 5 :]


def parse_prompt(text: str, path: Path) -> Prompt:
    """Parse one prompt file's text; checks that placeholders and declared variables agree."""
    meta, body = _parse_front_matter(text, path)
    for key in ("name", "version"):
        if not isinstance(meta.get(key), str) or not meta[key]:
            raise PromptError(f"{path}: front matter needs '{key}'")
    sections: dict[str, str] = {}
    marks = list(_SECTION.finditer(body))
    for i, m in enumerate(marks):
        stop = marks[i + 1].start() if i + 1 < len(marks) else len(body)
        sections[m.group(1)] = body[m.end() : stop].strip("\n")
    if "user" not in sections:
        raise PromptError(f"{path}: a prompt needs a '# user' section")
    declared = meta.get("variables", [])
    if isinstance(declared, str):
        declared = [declared] if declared else []
    used = set(_PLACEHOLDER.findall(sections.get("system", "") + sections["user"]))
    if undeclared := used - set(declared):
        raise PromptError(f"{path}: placeholders not declared in 'variables': {sorted(undeclared)}")
    if unused := set(declared) - used:
        raise PromptError(f"{path}: declared variables never used: {sorted(unused)}")
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    return Prompt(
        name=str(meta["name"]),
        # The content hash rides along with the declared version: an edit without a bump still misses the cache.
        version=f"{meta['version']}+{digest}",
        description=str(meta.get("description", "")),
        variables=tuple(declared),
        system=sections.get("system", ""),
        user=sections["user"],
    )


_INCLUDE = re.compile(r"^\{\{>\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}\n?", re.MULTILINE)


def _expand_includes(text: str, directory: Path, path: Path) -> str:
    """Replace each line ``{{> part}}`` by the text of ``part.txt`` beside the prompt: text several prompts share
    (the judge's rules) lives once. The prompt's version hash is taken after this, so editing a part re-versions
    every prompt that includes it."""

    def part(m: re.Match[str]) -> str:
        file = directory / f"{m.group(1)}.txt"
        if not file.is_file():
            raise PromptError(f"{path}: includes {m.group(1)!r}, but there is no {file}")
        body = file.read_text(encoding="utf-8")
        return body if body.endswith("\n") else body + "\n"

    return _INCLUDE.sub(part, text)


@lru_cache(maxsize=64)
def _load(name: str, dirs: tuple[Path, ...]) -> Prompt:
    for d in dirs:
        path = d / f"{name}.md"
        if path.is_file():
            prompt = parse_prompt(_expand_includes(path.read_text(encoding="utf-8"), d, path), path)
            if prompt.name != name:
                raise PromptError(f"{path}: front matter name {prompt.name!r} differs from the file name")
            return prompt
    raise PromptError(f"no prompt {name!r} in {', '.join(str(d) for d in dirs)}")


def load_prompt(name: str) -> Prompt:
    """Load ``prompts/<name>.md`` from the first prompt directory that has it."""
    return _load(name, tuple(prompt_dirs()))


def render(prompt: Prompt, **variables: str) -> list[Message]:
    """Fill a prompt's placeholders; every declared variable must be given, and nothing else."""
    given, declared = set(variables), set(prompt.variables)
    if missing := declared - given:
        raise PromptError(f"prompt {prompt.name!r}: missing variables {sorted(missing)}")
    if extra := given - declared:
        raise PromptError(f"prompt {prompt.name!r}: unknown variables {sorted(extra)}")

    def fill(template: str) -> str:
        return _PLACEHOLDER.sub(lambda m: variables[m.group(1)], template)

    messages = []
    if prompt.system:
        messages.append(Message(role="system", content=fill(prompt.system)))
    messages.append(Message(role="user", content=fill(prompt.user)))
    return messages


DEFAULT_FENCE = "#GJDATA#"


def make_fence(*texts: str) -> str:
    """A marker that appears in none of ``texts``: the same one for almost every call (so that prompts keep an
    identical prefix that providers can cache), else one derived from the texts (so cache keys stay stable)."""
    if not any(DEFAULT_FENCE in t for t in texts):
        return DEFAULT_FENCE
    digest = hashlib.sha256("\x00".join(texts).encode()).hexdigest()
    for i in range(0, len(digest) - 8, 4):
        fence = f"#{digest[i : i + 10].upper()}#"
        if not any(fence in t for t in texts):
            return fence
    raise PromptError("could not find a fence marker absent from the data")  # pragma: no cover


def fenced(fence: str, title: str, body: str) -> str:
    """``body`` between two fence lines, so that the model reads it as data."""
    return f"{fence} BEGIN {title}\n{body}\n{fence} END {title}"
