"""Reads finished reports and runs nothing: run summaries (``summary``), pandas frames and the notebook ``Run``
(``notebook``), agreement metrics, A/B comparison, pages and plots, and the estimators behind their intervals and
corrected rates (``stats``). The report line itself (writing, reading) is ``io.reports``.

Imports only ``models``, ``errors``, ``io.jsonl``, ``io.reports`` and itself.
"""
