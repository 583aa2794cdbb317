"""Deprecated: the old home of the report line, the run summary and the notebook frames; import from their homes.

- the report file format (``dumps``, ``finite_report``, ``read_reports``, ``is_report_file``, ``is_report_row``,
  ``write_parquet``): :mod:`groundjudge.io.reports`;
- the run summary (``RunSummary``, ``Summarizer``, ``summarize``, ``summary_rows``, ``corrected_rows``,
  ``needs_text``, ``second_rows``): :mod:`groundjudge.review.summary`;
- pandas frames and the notebook ``Run`` (``to_dataframe``, ``claims_dataframe``, ``Run``):
  :mod:`groundjudge.review.notebook`.

``from groundjudge.review.report import read_reports`` still works and warns (``DeprecationWarning``).
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

# each name this module used to hold, and the module that holds it now
MOVED: dict[str, str] = {
    **dict.fromkeys(
        ("dumps", "finite_report", "read_reports", "is_report_file", "is_report_row", "write_parquet"),
        "groundjudge.io.reports",
    ),
    **dict.fromkeys(
        (
            "CI",
            "RunSummary",
            "Summarizer",
            "summarize",
            "summary_rows",
            "corrected_rows",
            "needs_text",
            "second_rows",
        ),
        "groundjudge.review.summary",
    ),
    **dict.fromkeys(("to_dataframe", "claims_dataframe", "Run"), "groundjudge.review.notebook"),
}

__all__: list[str] = []  # nothing lives here any more; ``from ... import *`` takes nothing


def __getattr__(name: str) -> Any:
    """A moved name, from its new home, with a DeprecationWarning that names the new path."""
    home = MOVED.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"groundjudge.review.report.{name} moved to {home}.{name}; import it from there",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(importlib.import_module(home), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *MOVED])
