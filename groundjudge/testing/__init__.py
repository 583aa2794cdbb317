"""Helpers for testing LLM pipelines offline, groundjudge's own tests among them.

- :mod:`~groundjudge.testing.server`: :class:`ScriptedLLMServer`, a scripted OpenAI / Anthropic server on
  127.0.0.1 (:class:`Reply`, :class:`RecordedRequest`, the load models :class:`Latency` and :class:`RateLimit`,
  and the script helpers :func:`route`, :func:`prompt_name`, :func:`fenced_block`, :func:`claims_in`,
  :func:`questions_in`, :func:`questions_wanted`, :func:`sources_in`); its batch APIs are in
  :mod:`~groundjudge.testing.batches`.
- :mod:`~groundjudge.testing.assertions`: :func:`assert_grounded`, :func:`assert_file_grounded` and the default
  evaluator they share with the pytest plugin.
- :mod:`~groundjudge.testing.fixtures`: :func:`tiny_nli_model`.

Imports of groundjudge modules beyond ``errors`` are lazy; no groundjudge module but ``pytest_plugin`` imports this
package.
"""

from __future__ import annotations

from groundjudge.testing.assertions import (
    GroundingAssertionError,
    assert_file_grounded,
    assert_grounded,
    default_evaluator,
    explain_report,
    grounding_problems,
    set_default_evaluator,
)
from groundjudge.testing.batches import ScriptedBatch
from groundjudge.testing.fixtures import tiny_nli_model
from groundjudge.testing.server import (
    Api,
    Latency,
    RateLimit,
    RecordedRequest,
    Reply,
    Script,
    ScriptedLLMServer,
    claims_in,
    fenced_block,
    packed_requests,
    prompt_name,
    questions_in,
    questions_wanted,
    route,
    sources_in,
)

__all__ = [
    "Api",
    "GroundingAssertionError",
    "Latency",
    "RateLimit",
    "RecordedRequest",
    "Reply",
    "Script",
    "ScriptedBatch",
    "ScriptedLLMServer",
    "assert_file_grounded",
    "assert_grounded",
    "claims_in",
    "default_evaluator",
    "explain_report",
    "fenced_block",
    "grounding_problems",
    "packed_requests",
    "prompt_name",
    "questions_in",
    "questions_wanted",
    "route",
    "set_default_evaluator",
    "sources_in",
    "tiny_nli_model",
]
