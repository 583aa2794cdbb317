"""CSV rows, read strictly (``io.tables`` reads every table; this is its CSV reader).

CSV is read strictly, so that no row is lost or changed without a word: UTF-8 (the byte order marks that open the
file are skipped: one, or two from a file saved twice), a header line (spaces around a name are not part of it),
cells quoted as RFC 4180 says (a quote inside a quoted cell is written ``""``; only a quoted cell may hold a line
break); an empty cell is no value; a blank line is not a row. A record that cannot be read is an InputError in its
row's place and the rows after it are read as usual: a byte that is not UTF-8 (bytes are decoded per row, the cell
named), a quote that closes a cell with more text after it, more cells than the header has. A quote left open is
told from a quoted cell with a line break by what reading on would give: when the record would run to the end of the
file, not be valid CSV, or not have the header's number of cells, the row is refused (naming the cell where the
quote opens and its line) and reading goes on from the next line, so the rows that the quote would have swallowed
are rows. (A stray quote that a later quote happens to close into a record of the right shape cannot be told from a
cell with line breaks in it: that record is read as it is.) Lines end as the header's line ends: in \n (or \r\n),
where a lone \r inside a line is text (Python's csv and pandas' ``to_csv`` write it unquoted), or in a lone \r (old
Mac files); a cell that ends a row in \r, unquoted, cannot be told from a \r\n line end and loses that \r. A header
that is not UTF-8 or not valid CSV is a :class:`ConfigError`.

Imports only ``errors`` and ``io.jsonl``.
"""

from __future__ import annotations

import csv
import io
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from groundjudge.errors import ConfigError, InputError
from groundjudge.io.jsonl import BOM_CHAR, Openable, ends_in_newline


class _Lines:
    """The physical lines of a text file for :mod:`csv`, numbered, those of the record being read remembered, so that
    the reader can go back to the line after a record's first line."""

    def __init__(self, fh: Iterable[str], *, lone_cr: bool = False) -> None:
        self._fh = (_LONE_CR.sub(_CR, line) for line in fh) if lone_cr else iter(fh)
        self._back: list[tuple[int, str]] = []  # lines given back, the next one last
        self._count = 0
        self.taken: list[tuple[int, str]] = []  # (line number, text) of the record being read

    def __iter__(self) -> _Lines:
        return self

    def __next__(self) -> str:
        if self._back:
            item = self._back.pop()
        else:
            self._count += 1
            line = next(self._fh)
            # the byte order marks that open the file: the codec cuts one, a file saved twice has another
            item = (self._count, line.lstrip(BOM_CHAR) if self._count == 1 else line)
        self.taken.append(item)
        return item[1]

    def give_back(self, lines: list[tuple[int, str]]) -> None:
        self._back.extend(reversed(lines))


# A carriage return inside a line of a file whose lines end in \n is text: Python's csv and pandas' to_csv (line end
# \n) write it unquoted, and csv.reader would end the record there. It is read as _CR, a character no decoded text
# holds (surrogateescape makes bytes into U+DC80..U+DCFF only), and given back as \r in the cell.
_CR = "\udc0d"
_LONE_CR = re.compile(r"\r(?!\n|\Z)")


_NOT_UTF8 = re.compile("[\udc80-\udcff]")  # what errors="surrogateescape" makes of a byte that is not UTF-8


def _not_utf8(cell: str) -> str | None:
    """Why a cell is not text: its first byte that is not UTF-8; None when it is all text."""
    bad = _NOT_UTF8.search(cell)
    if bad is None:
        return None
    return f"is not UTF-8: byte 0x{ord(bad.group()) - 0xDC00:02x} at character {bad.start() + 1} of the cell"


def _quote_fault(line: str) -> int | None:
    """The index of the cell where one line of CSV goes wrong with quotes: a quote that closes a cell followed by
    more text, or a quote still open at the line's end; None when its quotes are right."""
    cell, start, quoted, closing = 0, True, False, False
    for ch in line:
        if quoted:
            if not closing:
                closing = ch == '"'
                continue
            if ch == '"':  # "" inside a quoted cell is one quote
                closing = False
                continue
            if ch not in ",\r\n":
                return cell
            quoted = closing = False
        if ch == '"' and start:
            quoted, start = True, False
        elif ch == ",":
            cell, start = cell + 1, True
        else:
            start = False
    return cell if quoted and not closing else None


def _unclosed(taken: list[tuple[int, str]], why: str) -> str:
    """What is wrong with a record whose first line leaves a quote open and which is bad when read on."""
    first, more = taken[0][0], len(taken) - 1
    if not more:
        return f"unclosed quote: the quote that opens this cell on line {first} is never closed (the file ends)"
    return (
        f"unclosed quote: the quote that opens this cell on line {first} is not closed on that line (read on, the "
        f"cell would take in the next {more} line(s) and {why}); this row is refused and the lines after it are "
        'read as rows. A quote inside a cell is written ""'
    )


def _column(header: list[str], cell: int | None) -> str | None:
    return header[cell] if cell is not None and cell < len(header) else None


def _csv_records(source: Path | Openable, path: str) -> Iterator[Any]:
    """The header (a list of column names) first, then (row number, row dict or InputError) for each record.

    Records are read in strict mode from text decoded with ``surrogateescape``, so that a byte that is not UTF-8
    spoils only its own row (its cell is found and named). A record that spans lines (only a quoted cell may) and
    is not valid CSV or does not have the header's number of cells is a quote left open: its row is refused and
    reading goes on from the line after the record's first line, so that no row after it is lost.
    """
    csv.field_size_limit(sys.maxsize if sys.maxsize < 2**63 else 2**31 - 1)
    with (
        source.open("rb") as raw,
        io.TextIOWrapper(
            raw, encoding="utf-8-sig", errors="surrogateescape", newline="\n" if (lf := ends_in_newline(raw)) else ""
        ) as fh,
    ):
        lines = _Lines(fh, lone_cr=lf)
        reader = csv.reader(lines, strict=True)
        header: list[str] | None = None
        n = 0
        while True:
            lines.taken = []
            problem = None
            try:
                cells = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                cells, problem = [], str(exc)
            taken = lines.taken
            if header is None:
                if problem is not None:
                    raise ConfigError(f"{path}: the header (line {taken[0][0]}) is not valid CSV: {problem}")
                if not cells:
                    continue  # blank lines before the header
                for i, name in enumerate(cells):
                    if (why := _not_utf8(name)) is not None:
                        raise ConfigError(f"{path}: the header's column {i + 1} {why}; save the file as UTF-8")
                header = [c.replace(_CR, "\r").strip() for c in cells]  # "id, answer": spaces name no column
                yield header
                continue
            if not cells and problem is None:
                continue  # a blank line is not a row
            n += 1
            eof = problem == "unexpected end of data"
            if (len(taken) > 1 and (problem is not None or len(cells) != len(header))) or eof:
                if problem is None:
                    why = f"the row would have {len(cells)} cell(s) for {len(header)} column(s)"
                elif eof:
                    why = "the file would end inside it"
                else:
                    why = f"the row would not be valid CSV: {problem}"
                field = _column(header, _quote_fault(taken[0][1]))
                yield n, InputError(_unclosed(taken, why), row=n, field=field)
                lines.give_back(taken[1:])
                continue
            if problem is not None:  # on one line: a quote closes a cell and more text follows
                field = _column(header, _quote_fault(taken[0][1]))
                message = f'is not valid CSV (line {taken[0][0]}): {problem}; a quote inside a cell is written ""'
                yield n, InputError(message, row=n, field=field)
                continue
            if len(cells) > len(header):
                yield n, InputError(f"{len(cells) - len(header)} more cell(s) than the header has columns", row=n)
                continue
            bad = next(((i, why) for i, cell in enumerate(cells) if (why := _not_utf8(cell)) is not None), None)
            if bad is not None:
                yield n, InputError(bad[1], row=n, field=header[bad[0]])
                continue
            row = dict.fromkeys(header)  # a record with fewer cells: the cells it lacks are empty
            row.update((k, None if v == "" else v.replace(_CR, "\r")) for k, v in zip(header, cells, strict=False))
            yield n, row


def open_csv(source: Path | Openable, name: str) -> tuple[list[str], Iterator[tuple[int, Any]]]:
    """(the header's column names, read now; (row number, row or InputError) for each data row, streamed), of the
    CSV file ``source`` (``name`` in messages)."""
    records = _csv_records(source, name)
    header: list[str] = next(records, [])
    return header, records
