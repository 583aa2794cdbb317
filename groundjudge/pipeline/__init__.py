"""Joins the stages for a batch of answers: the only package that imports more than one stage.

May import ``stages``, ``checker``, ``llm``, ``io`` and the shared modules; never ``runs``, ``learn``, ``cli``,
``testing``, ``diagnose`` or ``middleware``.
"""

from __future__ import annotations

from groundjudge.pipeline.evaluator import Evaluator

__all__ = ["Evaluator"]
