"""Rows in: every reader of input rows (JSONL, CSV, Parquet, DataFrame, ``datasets.Dataset``), the column mapping,
the row contract and the id rule, and the Parquet copy of a report file.

Imports only ``models``, ``errors`` and ``review.report``.
"""

from __future__ import annotations

from groundjudge.io.tables import ColumnMap, parse_mapping, read_rows, table_format, write_parquet

__all__ = ["ColumnMap", "parse_mapping", "read_rows", "table_format", "write_parquet"]
