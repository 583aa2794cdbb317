"""groundjudge as a DeepEval metric (``pip install 'groundjudge[deepeval]'``): :class:`GroundjudgeMetric`.

``actual_output`` is the answer, ``retrieval_context`` its sources (``context`` only when no retrieval_context is
given: an empty one is an answer with no sources), ``input`` the question and
``expected_output`` the reference answer (kept in the report's metadata). ``score`` is the combined grounding score;
an answer that could not be judged (ERROR, NO_CLAIMS) has none: ``score`` None and ``error`` says why, as DeepEval
records a metric that could not measure; ``success`` the pass rule (score >= ``threshold``, no contradicted
claim), ``reason`` names the claims that are not supported with their verdicts, and ``report`` / ``outcome`` hold
the whole groundjudge report::

    from deepeval import assert_test
    from deepeval.test_case import LLMTestCase
    from groundjudge.adapters.deepeval import GroundjudgeMetric

    assert_test(LLMTestCase(input=q, actual_output=answer, retrieval_context=docs), [GroundjudgeMetric()])

DeepEval needs no model of its own for this metric: the evaluator (given, else the default one: ``GROUNDJUDGE_LLM``,
else nli mode) makes every call, through groundjudge's cache and budget.
"""

from __future__ import annotations

import math
from typing import Any

from groundjudge.adapters.common import DEFAULT_THRESHOLD, Grounding, Outcome, require, retrieved_or

require("deepeval", "deepeval")

from deepeval.metrics import BaseMetric  # noqa: E402
from deepeval.test_case import LLMTestCase  # noqa: E402

__all__ = ["GroundjudgeMetric", "Outcome"]


class GroundjudgeMetric(BaseMetric):
    """How much of ``actual_output`` is grounded in ``retrieval_context`` (else ``context``), by groundjudge.

    Args:
        threshold: the combined score an answer needs to pass.
        evaluator: a :class:`~groundjudge.pipeline.Evaluator`; None: the default one, built on first use.
        allow_contradicted: let an answer with a contradicted claim pass when its score is high enough.
    """

    def __init__(
        self, threshold: float = DEFAULT_THRESHOLD, evaluator: Any = None, *, allow_contradicted: bool = False
    ) -> None:
        # kept under their argument names: deepeval copies a metric per test case as type(m)(**vars(m))
        self.evaluator = evaluator
        self.allow_contradicted = allow_contradicted
        self.grounding = Grounding(evaluator, threshold, allow_contradicted)
        self.threshold = self.grounding.threshold
        self.include_reason = True
        self.async_mode = True
        self.evaluation_model = "groundjudge"
        self.outcome: Outcome | None = None

    @property
    def report(self) -> Any:
        """The groundjudge report of the last measured test case (None before the first)."""
        return self.outcome.report if self.outcome is not None else None

    @property
    def __name__(self) -> str:
        return "Groundjudge"

    def _fields(self, test_case: LLMTestCase) -> tuple[Any, Any, Any, Any]:
        contexts = retrieved_or(test_case.retrieval_context, test_case.context)
        return test_case.actual_output, contexts, test_case.input, test_case.expected_output

    def _record(self, result: Outcome) -> float:
        self.outcome = result
        self.score = result.score  # None: not scored, and ``error`` says why (DeepEval's way for a metric that failed)
        self.success = result.success
        self.reason = result.reason
        self.error = result.unscored
        self.evaluation_cost = result.report.usage.cost_usd
        self.verbose_logs = result.reason
        return result.score if result.score is not None else math.nan

    def measure(self, test_case: LLMTestCase, *args: Any, **kwargs: Any) -> float:
        answer, contexts, question, reference = self._fields(test_case)
        return self._record(self.grounding.check(answer, contexts, question, reference=reference))

    async def a_measure(self, test_case: LLMTestCase, *args: Any, **kwargs: Any) -> float:
        answer, contexts, question, reference = self._fields(test_case)
        return self._record(await self.grounding.acheck(answer, contexts, question, reference=reference))

    def is_successful(self) -> bool:
        return self.error is None and bool(self.success)
