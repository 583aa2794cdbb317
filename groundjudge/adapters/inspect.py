"""groundjudge as an Inspect scorer (``pip install 'groundjudge[inspect]'``): :func:`groundjudge_scorer`.

The answer is the model's completion; its sources are the sample's ``metadata["contexts"]`` (a list of passages, or
one string; another key with ``contexts_key``), the question the sample's input, and the target, when there is one,
the reference answer. The :class:`~inspect_ai.scorer.Score`'s value is the combined grounding score, with the metrics
``mean()`` and ``stderr()``; an answer that could not be judged (ERROR, NO_CLAIMS) is an unscored Score
(``Score.unscored``: NaN, left out of the metrics) with the same explanation and metadata; its explanation names the
claims that are not supported; its metadata holds the verdict, whether the answer passes, the per-claim verdicts and
the whole report::

    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.solver import generate
    from groundjudge.adapters.inspect import groundjudge_scorer

    task = Task(dataset=[Sample(input=q, metadata={"contexts": docs})], solver=generate(), scorer=groundjudge_scorer())

The evaluator (given, else the default one: ``GROUNDJUDGE_LLM``, else nli mode) makes every call, through
groundjudge's cache and budget.
"""

from __future__ import annotations

from typing import Any

from groundjudge.adapters.common import DEFAULT_THRESHOLD, Grounding, require

require("inspect_ai", "inspect")

from inspect_ai.scorer import Score, Scorer, Target, mean, scorer, stderr  # noqa: E402
from inspect_ai.solver import TaskState  # noqa: E402

__all__ = ["groundjudge_scorer"]


@scorer(metrics=[mean(), stderr()], name="groundjudge")
def groundjudge_scorer(
    threshold: float = DEFAULT_THRESHOLD,
    contexts_key: str = "contexts",
    allow_contradicted: bool = False,
    evaluator: Any = None,
) -> Scorer:
    """Score how much of the completion is grounded in the sample's sources.

    Args:
        threshold: the combined score an answer needs to pass (``metadata["success"]``).
        contexts_key: the sample metadata key that holds the sources.
        allow_contradicted: let an answer with a contradicted claim pass when its score is high enough.
        evaluator: a :class:`~groundjudge.pipeline.Evaluator`; None: the default one, built on first use.
    """
    grounding = Grounding(evaluator, threshold, allow_contradicted)

    async def score(state: TaskState, target: Target) -> Score:
        answer = state.output.completion
        contexts = (state.metadata or {}).get(contexts_key)
        reference = target.text if target.text else None
        result = await grounding.acheck(
            answer, contexts, state.input_text, reference=reference, id=str(state.sample_id)
        )
        report = result.report
        metadata: dict[str, Any] = {
            "verdict": report.verdict,
            "success": result.success,
            "threshold": grounding.threshold,
            "claims": result.claims(),
            "report": report.model_dump(mode="json"),
        }
        if result.score is None:  # no score: left out of the metrics, the reason kept
            # an answer with claims the checker failed on: the grader failed; no claims or a bad input: no score
            why = "grader_failed" if report.verdict == "ERROR" and report.claims else "scoring_failed"
            if report.verdict == "NO_CLAIMS":
                why = "no_response" if not (answer or "").strip() else "no_claims"
            metadata["unscored"] = result.unscored
            return Score.unscored(reason=why, answer=answer, explanation=result.reason, metadata=metadata)
        return Score(value=result.score, answer=answer, explanation=result.reason, metadata=metadata)

    return score
