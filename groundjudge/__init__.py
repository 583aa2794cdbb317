"""groundjudge: how much of an LLM's answer is grounded in its sources."""

from __future__ import annotations

from groundjudge.config import Config
from groundjudge.middleware import generate_with_validation, verify, verify_or_reject
from groundjudge.models import AnswerReport, ClaimVerdict, Sample
from groundjudge.pipeline.evaluator import Evaluator

__version__ = "0.1.0"

__all__ = [
    "AnswerReport",
    "ClaimVerdict",
    "Config",
    "Evaluator",
    "Sample",
    "__version__",
    "generate_with_validation",
    "verify",
    "verify_or_reject",
]
