"""Rows in: the one reader of input rows (JSONL, CSV, Parquet, DataFrame, ``datasets.Dataset``; local paths and
URIs), the column mapping, the row contract (conversations and agent traces included), the id rule and the batch
cutter; the label rule (``labels``: a gold or reviewer label as a user's file gives it, read by every command); the
strict JSONL reader that report files are read with too. Reports out: the report line's format
(``reports``: writing a line, reading a report file, telling a report from an input row, Parquet), which both
engines write OUT with; what a report was made with, and how two runs differ in it (``made_with``: the resume
check's, compare's and the baseline gate's one rule).

Imports only ``models``, ``errors`` and ``atomic`` (the one atomic file writer).
"""

from __future__ import annotations

from groundjudge.io.conversations import each_turn
from groundjudge.io.tables import ColumnMap, input_rows, parse_mapping, read_rows, table_format

__all__ = ["ColumnMap", "each_turn", "input_rows", "parse_mapping", "read_rows", "table_format"]
