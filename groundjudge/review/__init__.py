"""Reads finished reports and runs nothing: summaries, agreement metrics, A/B comparison, pages and plots, and
the estimators behind their intervals and corrected rates (``stats``).

Imports only ``models``, ``errors`` and itself.
"""
