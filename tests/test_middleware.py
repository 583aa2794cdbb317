"""verify, verify_or_reject and generate_with_validation with a scripted generator and the shared NLI model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from groundjudge.middleware import feedback_for, generate_with_validation, verify, verify_or_reject
from groundjudge.testing import ScriptedLLMServer, route
from tests.test_pipeline import BAD_ANSWER, CONTEXT, GOOD_ANSWER, HANDLERS, evaluator


def test_verify_and_reject(shared_nli: Any, tmp_path: Path) -> None:
    with ScriptedLLMServer(route(HANDLERS)) as server:
        ev = evaluator(server, shared_nli, tmp_path, qa=False)
        assert verify(ev, GOOD_ANSWER, [CONTEXT]).verdict == "PASS"
        answer, report = verify_or_reject(ev, BAD_ANSWER, [CONTEXT], fallback="I can't confirm that.")
        assert answer == "I can't confirm that." and report.verdict == "FAIL"
        answer, report = verify_or_reject(ev, GOOD_ANSWER, CONTEXT, fallback="no")
        assert answer == GOOD_ANSWER and report.verdict == "PASS"


def test_generate_with_validation_regenerates_with_the_flagged_claims(shared_nli: Any, tmp_path: Path) -> None:
    feedbacks: list[str | None] = []

    def generate(question: str, context: Any, feedback: str | None) -> str:
        feedbacks.append(feedback)
        return BAD_ANSWER if feedback is None else GOOD_ANSWER

    with ScriptedLLMServer(route(HANDLERS)) as server:
        ev = evaluator(server, shared_nli, tmp_path, qa=False)
        result = generate_with_validation(ev, generate, "When was it completed?", [CONTEXT], threshold=0.7)
    assert result.passed and result.answer == GOOD_ANSWER and len(result.attempts) == 2
    assert feedbacks[0] is None
    assert feedbacks[1] is not None and "The Eiffel Tower was completed in 1899." in feedbacks[1]
    assert "contradicted" in feedbacks[1] and "The source says 1889." in feedbacks[1]


def test_generate_with_validation_gives_up_after_max_retries(shared_nli: Any, tmp_path: Path) -> None:
    calls = []

    def stubborn(question: str, context: Any) -> str:  # takes no feedback: called with two arguments
        calls.append(question)
        return BAD_ANSWER

    with ScriptedLLMServer(route(HANDLERS)) as server:
        ev = evaluator(server, shared_nli, tmp_path, qa=False)
        result = generate_with_validation(ev, stubborn, "q", [CONTEXT], max_retries=2)
    assert not result.passed and len(calls) == 3 and result.report.verdict == "FAIL"
    assert feedback_for(result.report).startswith("These statements are not backed")
