"""Issue 29: a stage that was meant to run and failed never lets the answer PASS a gate.

Each stage's failure, one at a time, on an answer whose honest run PASSes: the claims call (refused, cut off on
every re-ask), the sources call (judge and QA), the QA check alone, the NLI model; and the second judge, whose
failure changes nothing (it is never scored). The gates are the verdict, ``assert_grounded`` (and every adapter,
which applies its rule: ``grounding_problems``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from groundjudge.cache import Cache
from groundjudge.config import Config
from groundjudge.models import AnswerReport
from groundjudge.pipeline.evaluator import Evaluator
from groundjudge.testing import (
    GroundingAssertionError,
    RecordedRequest,
    Reply,
    ScriptedLLMServer,
    assert_grounded,
    route,
)
from groundjudge.testing.assertions import grounding_problems
from tests.conftest import MODELS, make_test_client
from tests.pipeline.test_pipeline import CONTEXT, GOOD_ANSWER, HANDLERS, claims_handler, judge_handler


def _evaluator(server: ScriptedLLMServer, nli: Any, tmp_path: Path, **kw: Any) -> Evaluator:
    cache = Cache(tmp_path / "cache")
    client = make_test_client(server, cache=cache, max_reasks=1)
    second = make_test_client(server, "anthropic", cache=cache) if kw.pop("second", False) else None
    config = {"second_judge": MODELS["anthropic"], "second_judge_sample": 1.0} if second is not None else {}
    return Evaluator(Config(t_support=0.99, **config, **kw), nli=nli, client=client, cache=cache, second_client=second)


def _run(handlers: dict[str, Any], nli: Any, tmp_path: Path, **kw: Any) -> tuple[AnswerReport, bool]:
    """The report of GOOD_ANSWER with ``handlers`` over the honest ones, and whether ``assert_grounded`` passes it."""
    with ScriptedLLMServer(route({**HANDLERS, **handlers})) as server:
        ev = _evaluator(server, nli, tmp_path, **kw)
        report = ev.evaluate(GOOD_ANSWER, [CONTEXT])
        try:
            assert_grounded(GOOD_ANSWER, [CONTEXT], evaluator=ev)
        except GroundingAssertionError:
            return report, False
    return report, True


def _nan_for(shared: Any, word: str) -> Any:
    """The shared model returning NaN for the claims that hold ``word``."""
    import copy

    model = copy.copy(shared)
    real = shared.predict

    def predict(pairs: Any) -> Any:
        out = real(pairs)
        for j, (_, hypothesis) in enumerate(pairs):
            if word in hypothesis:
                out[j] = np.nan
        return out

    model.predict = predict
    return model


def test_the_honest_run_passes(shared_nli: Any, tmp_path: Path) -> None:
    report, passes = _run({}, shared_nli, tmp_path)
    assert report.verdict == "PASS" and passes and not report.errors


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(lambda req: Reply.refusal(), id="refused"),
        pytest.param(lambda req: Reply.truncated('{"claims": [{"text": "The Eiffel Tower i'), id="cut-off"),
        pytest.param(lambda req: Reply.error(500), id="500"),
        pytest.param(lambda req: Reply.text("{not json"), id="malformed"),
    ],
)
@pytest.mark.parametrize("qa", [False, True])
def test_a_failed_claims_call_is_error_never_a_pass(reply: Any, qa: bool, shared_nli: Any, tmp_path: Path) -> None:
    """Reproduced from outside: a refused claims call put the answer's sentences in place of the claims, the judge
    approved them, and the answer came back PASS 0.96 with the error in ``errors``."""
    report, passes = _run({"claims": reply, "claims_qa": reply}, shared_nli, tmp_path, qa=qa)
    assert report.verdict == "ERROR" and not passes, report.verdict_reasons
    assert report.scores.claims_failed and report.errors
    assert report.claims and all(c.claim.origin == "fallback" for c in report.claims)  # checked all the same
    assert any("claims call failed" in r for r in report.verdict_reasons), report.verdict_reasons
    assert grounding_problems(report)


def test_a_failed_sources_call_never_passes(shared_nli: Any, tmp_path: Path) -> None:
    report, passes = _run({"verify": lambda req: Reply.refusal()}, shared_nli, tmp_path)
    assert report.verdict != "PASS" and not passes


def test_a_judge_that_leaves_a_claim_out_never_passes(shared_nli: Any, tmp_path: Path) -> None:
    """One claim unjudged, the other SUPPORTED: the combined score stays high (0.8), the verdict WARNs, and
    ``assert_grounded`` (min_score 0.8) passed it: an unjudged claim is a failure the gate must see."""
    skip = lambda req: judge_handler(req, skip={"c2"})  # noqa: E731
    report, passes = _run({"judge": skip, "verify": skip}, shared_nli, tmp_path, qa=False)
    assert report.scores.n_errors == 1 and report.verdict != "PASS" and not passes


@pytest.mark.parametrize(
    "handlers",
    [
        pytest.param(
            {"claims_qa": lambda req: Reply.json({**json.loads(claims_handler(req).content), "questions": []})},
            id="no-questions",
        ),
        pytest.param(
            {"verify": lambda req: Reply.json({**json.loads(judge_handler(req).content), "answers": []})},
            id="answers-left-out",
        ),
    ],
)
def test_a_failed_qa_check_never_passes(handlers: dict[str, Any], shared_nli: Any, tmp_path: Path) -> None:
    """The QA part counts 0; with the claims and the NLI part high (and QA's weight low) the combined score still
    reached the bar, and the answer PASSed."""
    weights = {"claims": 0.7, "nli": 0.25, "qa": 0.05}
    report, passes = _run(handlers, shared_nli, tmp_path, weights=weights)
    assert report.scores.combined is not None and report.scores.combined >= 0.85  # a PASS by the score alone
    assert report.scores.qa == 0.0 and report.scores.qa_failed
    assert report.verdict != "PASS" and not passes, report.verdict_reasons
    assert any("QA" in r for r in report.verdict_reasons)


def test_an_nli_failure_never_passes(shared_nli: Any, tmp_path: Path) -> None:
    """The judge decides the claim the NLI model could not score; the NLI part counts it 0; the verdict says so."""
    report, passes = _run({}, _nan_for(shared_nli, "Paris"), tmp_path, qa=False)
    assert report.scores.n_nli_errors == 1 and report.errors
    assert report.verdict != "PASS" and not passes, report.verdict_reasons
    assert any("NLI" in r for r in report.verdict_reasons)


def test_a_failed_second_judge_changes_nothing(shared_nli: Any, tmp_path: Path) -> None:
    """The second judge is never scored: its failure is its own, the answer's verdict and scores stay the first's."""

    def second_fails(req: RecordedRequest) -> Reply:
        return Reply.refusal() if req.model.startswith("claude") else judge_handler(req)

    honest, honest_passes = _run({}, shared_nli, tmp_path / "h", qa=False)
    report, passes = _run({"judge": second_fails}, shared_nli, tmp_path / "f", qa=False, second=True)
    assert report.second_judge is not None and report.second_judge.error
    assert (report.verdict, report.scores, passes) == (honest.verdict, honest.scores, honest_passes)
    assert not report.errors
