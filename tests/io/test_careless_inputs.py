"""Careless and hostile input through the one row reader (``io.tables.read_rows``): byte order marks, JSON in cells,
columns repeated in a later file, ids through pandas. Each case reads correctly or is an error naming row and
field (or the file and column, before any row)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from groundjudge.errors import ConfigError
from groundjudge.io.tables import read_rows

P = "The library opens at 9 am."
BOM = b"\xef\xbb\xbf"


def read(source: Any, mapping: dict[str, str] | None = None) -> list[tuple[int, Any]]:
    return list(read_rows(source, mapping))


# -- byte order marks -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("marks", [1, 2, 3])
def test_a_file_saved_twice_with_a_byte_order_mark_keeps_its_first_column(tmp_path: Path, marks: int) -> None:
    """A tool that adds a byte order mark each time it saves left two: the reader cut one and the header's first
    column became '\\ufeffid', so every row lost its id (its report became row-N, matching no earlier run) or, with
    the answer first, the file had "no column for the answer". Every mark that opens the file is cut."""
    csv_path = tmp_path / "in.csv"
    csv_path.write_bytes(BOM * marks + f'id,answer,contexts\nr1,It opens at 9 am.,"[""{P}""]"\n'.encode())
    assert read(csv_path) == [(1, {"id": "r1", "answer": "It opens at 9 am.", "contexts": [P]})]
    first_answer = tmp_path / "answer_first.csv"
    first_answer.write_bytes(BOM * marks + f'"answer",contexts\nIt opens.,"[""{P}""]"\n'.encode())
    assert read(first_answer) == [(1, {"answer": "It opens.", "contexts": [P]})]
    jsonl = tmp_path / "in.jsonl"
    jsonl.write_bytes(BOM * marks + json.dumps({"id": "r1", "answer": "a", "contexts": [P]}).encode() + b"\n")
    assert read(jsonl) == [(1, {"id": "r1", "answer": "a", "contexts": [P]})]


def test_a_column_behind_a_byte_order_mark_in_a_dataframe_or_parquet_is_a_usage_error(tmp_path: Path) -> None:
    """pandas cuts one mark: a file saved twice gives a DataFrame (or a Parquet file written from it) whose first
    column is '\\ufeffid', which no row would be read from. Refused before any row, naming the column."""
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"\ufeffid": ["r1"], "answer": ["a"], "contexts": [[P]]})
    parquet = tmp_path / "in.parquet"
    pytest.importorskip("pyarrow")
    frame.to_parquet(parquet)
    for source in (frame, parquet):
        with pytest.raises(ConfigError, match=r"column named '\\ufeffid': its name starts with a byte order mark"):
            read(source)
    # a column mapped by its own name, mark and all, is read
    assert read(frame, {"id": "\ufeffid"})[0][1]["id"] == "r1"
