"""Reads finished reports and runs nothing: summaries, agreement metrics, A/B comparison, pages and plots.

Imports only ``models``, ``errors`` and itself.
"""
