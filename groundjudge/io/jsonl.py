"""The one strict JSONL reader: every command and both engines read JSON lines through it.

A row is numbered by its line (lines end in \n, \r\n, or a lone \r where the first line does); blank lines are
skipped; bytes are decoded line by line, so a bad byte spoils only its own line; the UTF-8 byte order marks that
open the file are skipped (one, or more from a tool that added one each time it saved the file); NaN, Infinity and
numbers out of range are refused (they could not be written back), and so is an object that repeats a key (one of
its values would be lost). A bad line is an :class:`InputError` naming it, in the place of its row.

Imports only ``errors``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from groundjudge.errors import InputError

BOM = b"\xef\xbb\xbf"
BOM_CHAR = BOM.decode("utf-8")  # U+FEFF, as decoded text


class Openable(Protocol):
    """Anything with ``open("rb")``: a :class:`~pathlib.Path`, or a remote file (see ``io.tables``)."""

    def open(self, mode: str = ...) -> Any: ...


class RefusedJson(ValueError):
    """Text that is JSON to Python's reader but not to this one: a repeated key, NaN or Infinity, a number out of
    range, nesting too deep. Its message says which."""


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise RefusedJson(f"{text} is out of range")
    return value


def _no_constant(name: str) -> Any:
    raise RefusedJson(f"{name} is not a JSON number")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object whose keys are all different: JSON leaves a repeated key's meaning open, and Python's reader would
    keep the last value and drop the others without a word (two "answer" keys: the first answer lost)."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise RefusedJson(f"the key {key!r} appears twice in one object (one value would be lost)")
            seen.add(key)
    return obj


def loads(text: str) -> Any:
    """``text`` as JSON under this reader's rules: a JSON line, and JSON held in a CSV, Parquet or DataFrame cell
    (``io.tables``), are read by the same rule.

    Raises:
        json.JSONDecodeError: ``text`` is not JSON.
        RefusedJson: a repeated key, NaN or Infinity, a number out of range, nesting too deep.
    """
    try:
        return json.loads(text, parse_float=_finite_float, parse_constant=_no_constant, object_pairs_hook=_unique_keys)
    except RecursionError:
        raise RefusedJson("nested too deeply") from None


BLANK: Any = object()  # what parse_line returns for a blank line


def parse_line(raw: bytes, n: int) -> Any:
    """One line as a row, an :class:`InputError` naming the line and what is wrong with it, or :data:`BLANK`."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return InputError(f"not UTF-8: byte 0x{raw[exc.start]:02x} at byte {exc.start + 1} of the line", row=n)
    if not text.strip():
        return BLANK
    try:
        return loads(text)
    except json.JSONDecodeError as exc:
        return InputError(f"invalid JSON: {exc.msg} at column {exc.colno}", row=n)
    except RefusedJson as exc:
        return InputError(f"invalid JSON: {exc}", row=n)


def ends_in_newline(raw: Any) -> bool:
    """Whether the lines of an open binary file end as its first line ends: in \n or \r\n; else in a lone \r (old
    Mac files, some exports). Told from the first 64 KiB (``peek``); a file that cannot peek ends in \n. The rule of
    the JSONL reader and of ``io.tables``' CSV reader."""
    head = raw.peek(65536)[:65536] if hasattr(raw, "peek") else b""
    cr, lf = head.find(b"\r"), head.find(b"\n")
    return not (cr >= 0 and (lf < 0 or lf > cr + 1))


def _cr_lines(fh: Any) -> Iterator[bytes]:
    """The lines of a file whose lines end in a lone \r, each with its \r, read 64 KiB at a time."""
    parts: list[bytes] = []
    for chunk in iter(lambda: fh.read(1 << 16), b""):
        *ended, rest = chunk.split(b"\r")
        for piece in ended:
            yield b"".join([*parts, piece, b"\r"])
            parts = []
        parts.append(rest)
    if tail := b"".join(parts):
        yield tail


def read_lines(path: str | Path | Openable) -> Iterator[tuple[int, bytes]]:
    """(line number from 1, raw bytes with their line end) of every line, the byte order marks that open the file
    cut (a file saved twice by a tool that adds one has two), streamed. Lines end in \n (or \r\n), or in a lone
    \r where the first line does (:func:`ends_in_newline`): read as one line, such a file was one bad row and
    every row after the first was lost."""
    source = Path(path) if isinstance(path, str) else path
    with source.open("rb") as fh:
        for n, raw in enumerate(fh if ends_in_newline(fh) else _cr_lines(fh), start=1):
            while n == 1 and raw.startswith(BOM):
                raw = raw[len(BOM) :]
            yield n, raw


def read_jsonl(path: str | Path | Openable) -> Iterator[tuple[int, Any]]:
    """(line number, parsed row or an :class:`InputError`) for each non-blank line, streamed."""
    for n, raw in read_lines(path):
        row = parse_line(raw, n)
        if row is not BLANK:  # a JSON null is a (bad) row, not a blank line
            yield n, row
