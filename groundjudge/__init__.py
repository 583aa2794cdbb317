"""groundjudge: how much of an LLM's answer is grounded in its sources."""

from __future__ import annotations

__version__ = "0.1.0"
