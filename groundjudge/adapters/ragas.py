"""groundjudge as a RAGAS metric (``pip install 'groundjudge[ragas]'``): :class:`GroundjudgeMetric`.

A single-turn metric: ``response`` is the answer, ``retrieved_contexts`` its sources, ``user_input`` the question
(optional) and ``reference`` the reference answer (optional, kept in the report's metadata). The score is the combined
grounding score (NaN, RAGAS's "not scored", when the answer could not be judged: ERROR, NO_CLAIMS; its outcome says
why); every checked sample's :class:`Outcome` (the whole report,
the per-claim verdicts, the pass rule's verdict and reason) stays on the metric::

    from ragas import EvaluationDataset, evaluate
    from groundjudge.adapters.ragas import GroundjudgeMetric

    metric = GroundjudgeMetric()
    result = evaluate(EvaluationDataset.from_list(rows), metrics=[metric])
    result.to_pandas()["groundjudge"]; metric.outcome_for(rows[0]).claims()

RAGAS needs no LLM of its own for this metric: the evaluator (given, else the default one: ``GROUNDJUDGE_LLM``, else
nli mode) makes every call, through groundjudge's cache and budget.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from groundjudge.adapters.common import DEFAULT_THRESHOLD, Grounding, Outcome, as_contexts, require

require("ragas", "ragas")

from ragas.dataset_schema import SingleTurnSample  # noqa: E402
from ragas.metrics.base import MetricType, SingleTurnMetric  # noqa: E402

__all__ = ["GroundjudgeMetric", "Outcome"]

COLUMNS = {"response", "retrieved_contexts", "user_input:optional", "reference:optional"}


def _key(answer: Any, contexts: Any) -> tuple[str, tuple[str, ...]]:
    return str(answer), tuple(str(c) for c in (as_contexts(contexts) or ()))


@dataclass
class GroundjudgeMetric(SingleTurnMetric):
    """How much of ``response`` is grounded in ``retrieved_contexts``, by groundjudge.

    Args:
        evaluator: a :class:`~groundjudge.pipeline.Evaluator`; None: the default one, built on first use.
        threshold: the combined score an answer needs to pass (its :attr:`Outcome.success`).
        allow_contradicted: let an answer with a contradicted claim pass when its score is high enough.
    """

    name: str = "groundjudge"
    _required_columns: dict[MetricType, set[str]] = field(
        default_factory=lambda: {MetricType.SINGLE_TURN: set(COLUMNS)}
    )
    evaluator: Any = None
    threshold: float = DEFAULT_THRESHOLD
    allow_contradicted: bool = False
    outcomes: list[Outcome] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.grounding = Grounding(self.evaluator, self.threshold, self.allow_contradicted)
        self._lock = threading.Lock()
        # each outcome by the sample it was asked for (an input ERROR's report has no answer or contexts to match)
        self._asked: dict[tuple[str, tuple[str, ...]], Outcome] = {}

    def init(self, run_config: Any) -> None:
        """Nothing to set up: the evaluator is built on first use."""

    async def _single_turn_ascore(self, sample: SingleTurnSample, callbacks: Any) -> float:
        result = await self.grounding.acheck(
            sample.response, sample.retrieved_contexts, sample.user_input, reference=sample.reference
        )
        with self._lock:
            self.outcomes.append(result)
            self._asked[_key(sample.response, sample.retrieved_contexts)] = result
        return result.score if result.score is not None else math.nan

    def outcome_for(self, sample: SingleTurnSample | Mapping[str, Any]) -> Outcome:
        """The latest outcome for a sample (or a row with ``response`` and ``retrieved_contexts``) this metric
        scored: the report, the per-claim verdicts (:meth:`Outcome.claims`), pass and reason."""
        row = sample if isinstance(sample, Mapping) else sample.model_dump()
        wanted = _key(row.get("response"), row.get("retrieved_contexts"))
        with self._lock:
            if wanted in self._asked:
                return self._asked[wanted]
        raise KeyError(f"this metric has not scored a sample with response {str(row.get('response'))[:80]!r}")
