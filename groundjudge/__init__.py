"""groundjudge: how much of an LLM's answer is grounded in its sources."""

from __future__ import annotations

from groundjudge.config import Config
from groundjudge.models import AnswerReport, ClaimVerdict, Sample
from groundjudge.pipeline import Evaluator

__version__ = "0.1.0"

__all__ = ["AnswerReport", "ClaimVerdict", "Config", "Evaluator", "Sample", "__version__"]
