"""Compatibility path: the Ray engine lives in :mod:`groundjudge.runs.ray`."""

from __future__ import annotations

from groundjudge.runs.ray import LedgerProxy, score_dataset, score_file

__all__ = ["LedgerProxy", "score_dataset", "score_file"]
