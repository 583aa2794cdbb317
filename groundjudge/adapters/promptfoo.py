"""groundjudge as a promptfoo Python assertion: :func:`get_assert` (no Python extra; promptfoo comes from npm).

promptfoo calls ``get_assert(output, context)`` with the provider's output and a context whose ``vars`` hold the
test's variables. The sources are ``vars["contexts"]`` (a list of passages, or one string; also read from
``context`` or ``retrieved_contexts``), the question ``vars["question"]`` (else ``query``, ``input``), the reference
``vars["reference"]``. The assertion's ``config`` may set ``threshold`` (default 0.8), ``contexts_var`` and
``allow_contradicted`` (true or false; anything else, a quoted ``"false"`` too, is an error, never a pass). It
returns a GradingResult: ``pass``, ``score`` (the combined grounding score), ``reason`` (the claims that are not
supported, with their verdicts), ``namedScores`` and ``metadata`` (the verdict, the per-claim verdicts, ``scored``).
An answer that could not be judged (ERROR, NO_CLAIMS) fails with score 0 (a GradingResult needs a number) but has no
named score, so that the ``groundjudge`` metric's average is over real scores only; ``metadata.scored`` is false and
``metadata.error`` says why.

promptfoo loads a Python assertion by file path and puts the file's folder first on ``sys.path``, so point it at a
file of your own that re-exports this function, never at this module (its folder holds modules named after other
packages)::

    # groundjudge_assert.py, beside promptfooconfig.yaml
    from groundjudge.adapters.promptfoo import get_assert

    # promptfooconfig.yaml
    tests:
      - vars: {question: "...", contexts: ["...", "..."]}
        assert:
          - type: python
            value: file://groundjudge_assert.py
            config: {threshold: 0.8}

Every call in one Python process shares the default evaluator (``GROUNDJUDGE_LLM``, else nli mode); its disk cache
(``GROUNDJUDGE_CACHE_DIR``) makes a re-run of the suite free, across processes too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from groundjudge.adapters.common import DEFAULT_THRESHOLD, Grounding

__all__ = ["get_assert"]

CONTEXT_VARS = ("contexts", "context", "retrieved_contexts", "retrieval_context")
QUESTION_VARS = ("question", "query", "input", "user_input")
REFERENCE_VARS = ("reference", "expected_output", "ground_truth")


def _first(values: Mapping[str, Any], names: tuple[str, ...]) -> Any:
    return next((values[n] for n in names if values.get(n) is not None), None)


def _answer(output: Any) -> Any:
    """promptfoo hands a JSON output over parsed; an object with an ``output`` or ``answer`` is read there."""
    if isinstance(output, Mapping):
        return _first(output, ("output", "answer", "response", "text"))
    return output


def get_assert(output: Any, context: Mapping[str, Any]) -> dict[str, Any]:
    """promptfoo's Python assertion: is ``output`` grounded in the test's ``contexts`` variable?"""
    config = dict(context.get("config") or {})
    values = dict(context.get("vars") or {})
    threshold = config.get("threshold")
    allowed = config.get("allow_contradicted")
    grounding = Grounding(  # the default evaluator, shared by every call in this process; true or false only
        None,
        DEFAULT_THRESHOLD if threshold is None else float(threshold),
        False if allowed is None else allowed,
    )
    names = (str(config["contexts_var"]),) if config.get("contexts_var") else CONTEXT_VARS
    result = grounding.check(
        _answer(output),
        _first(values, names),
        _first(values, QUESTION_VARS),
        reference=_first(values, REFERENCE_VARS),
    )
    report = result.report
    metadata: dict[str, Any] = {
        "verdict": report.verdict,
        "claims": result.claims(),
        "scored": result.score is not None,
    }
    if result.score is None:
        metadata["error"] = result.unscored
        return {"pass": False, "score": 0.0, "reason": result.reason, "namedScores": {}, "metadata": metadata}
    return {
        "pass": result.success,
        "score": result.score,
        "reason": result.reason,
        "namedScores": {"groundjudge": result.score},
        "metadata": metadata,
    }
