"""Compatibility path: the Ray engine lives in :mod:`groundjudge.runs.ray`; a run on it from Python is
``groundjudge.runs.score_file(..., engine="ray")``. Importing this module warns (DeprecationWarning)."""

from __future__ import annotations

import warnings

from groundjudge.runs.ray import LedgerProxy, score_dataset, score_file

warnings.warn(
    "groundjudge.ray is deprecated: import groundjudge.runs.ray (score_dataset, LedgerProxy), and run a file with "
    "groundjudge.runs.score_file(..., engine='ray')",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = ["LedgerProxy", "score_dataset", "score_file"]
