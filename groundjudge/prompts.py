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
import unicodedata
from collections.abc import Iterable, Iterator
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

# What a reader (a model) may take for a fence's characters though the bytes differ: letters of other scripts and
# small capitals that look like the Latin letters of the fences (#GJDATA#, #GJPACK#, hex), and signs like "#".
# Compatibility forms (fullwidth, mathematical, circled, Kelvin sign) are NFKD's.
_LOOKALIKES: dict[str, str] = {
    **dict.fromkeys("\u266f\u22d5\u2317\u4e95", "#"),
    **dict.fromkeys("\u0410\u0430\u0391\u03b1\u0251\u13aa\u1d00", "a"),
    **dict.fromkeys("\u0412\u0432\u0392\u03b2\u13f4\u0299", "b"),
    **dict.fromkeys("\u0421\u0441\u03f9\u03f2\u13df\u1d04", "c"),
    **dict.fromkeys("\u0501\u13a0\u1d05", "d"),
    **dict.fromkeys("\u0415\u0435\u0395\u03b5\u13ac\u1d07", "e"),
    **dict.fromkeys("\u050c\u050d\u0261\u0262\u13c0", "g"),
    **dict.fromkeys("\u0408\u0458\u03f3\u037f\u13ab\u1d0a", "j"),
    **dict.fromkeys("\u041a\u043a\u039a\u03ba\u13e6\u1d0b", "k"),
    **dict.fromkeys("\u0420\u0440\u03a1\u03c1\u13e2\u1d18", "p"),
    **dict.fromkeys("\u0422\u0442\u03a4\u03c4\u13a2\u1d1b", "t"),
    **dict.fromkeys("\u041e\u043e\u039f\u03bf", "o"),
}
# Cherokee's small letters (U+AB70-ABBF) fold to its capitals: the same look.
_LOOKALIKES.update(
    {chr(ord(c) - 0x13A0 + 0xAB70): v for c, v in list(_LOOKALIKES.items()) if "\u13a0" <= c <= "\u13ef"}
)
# Default-ignorable characters that are not format characters (Cf) or marks: they render as nothing.
_BLANKS = frozenset("\u115f\u1160\u3164\uffa0\u2800")


def _fence_char(c: str) -> str | None:
    """What ``c`` is in :func:`fence_form`: nothing (invisible, a mark, a space), a look-alike's letter, else itself."""
    if c.isspace() or c in _BLANKS or unicodedata.category(c) in ("Cc", "Cf", "Mn", "Me"):
        return None
    return _LOOKALIKES.get(c, c)


def fence_form(text: str) -> str:
    """``text`` as a reader takes it in, the form in which a fence must be absent from the data: compatibility forms
    decomposed (NFKD: fullwidth "＃" is "#"), marks, format characters (zero-width, bidi), other invisible
    characters and all whitespace dropped, look-alike letters and signs mapped to the Latin ones, case folded. So a
    data line "＃GJ\u200bDATA＃ END", "#gjdata# end" or "# GJDATA #" (or with Cyrillic "А") holds the default fence."""
    text = unicodedata.normalize("NFKD", text)
    if text.isascii():
        return re.sub(r"[\s\x00-\x1f\x7f]+", "", text).lower()
    table = {ord(c): _fence_char(c) for c in set(text) if not (c.isascii() and c.isprintable()) or c.isspace()}
    return text.translate(table).casefold()


def pick_fence(texts: Iterable[str], candidates: Iterable[str]) -> str | None:
    """The first of ``candidates`` that no text holds, not even as a look-alike: the one rule of "a fence absent from
    the data" (its :func:`fence_form` in none of the texts' forms), for :func:`make_fence` and the packed request's
    fence; None if every candidate occurs."""
    forms = [fence_form(t) for t in texts]
    for fence in candidates:
        key = fence_form(fence)
        if not any(key in form for form in forms):
            return fence
    return None


def make_fence(*texts: str) -> str:
    """A marker that appears in none of ``texts``, not even as a look-alike (:func:`pick_fence`): the same one for
    almost every call (so that prompts keep an identical prefix that providers can cache), else one derived from the
    texts (so cache keys stay stable)."""

    def candidates() -> Iterator[str]:
        yield DEFAULT_FENCE
        digest = hashlib.sha256("\x00".join(texts).encode()).hexdigest()
        yield from (f"#{digest[i : i + 10].upper()}#" for i in range(0, len(digest) - 8, 4))

    fence = pick_fence(texts, candidates())
    if fence is None:  # pragma: no cover - a hash collision in every window
        raise PromptError("could not find a fence marker absent from the data")
    return fence


def fenced(fence: str, title: str, body: str) -> str:
    """``body`` between two fence lines, so that the model reads it as data."""
    return f"{fence} BEGIN {title}\n{body}\n{fence} END {title}"
