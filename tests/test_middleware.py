"""verify, verify_or_reject and generate_with_validation with a scripted generator and the shared NLI model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from groundjudge.config import Thresholds
from groundjudge.middleware import feedback_for, generate_with_validation, verify, verify_or_reject
from groundjudge.testing import RecordedRequest, ScriptedLLMServer, fenced_block, route
from tests.pipeline.test_pipeline import BAD_ANSWER, CONTEXT, GOOD_ANSWER, HANDLERS, evaluator


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
    assert "#GJDATA# BEGIN FLAGGED CLAIMS\n" in feedbacks[1]  # the claims and reasons are fenced as data


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


def test_generate_with_validation_never_accepts_an_answer_whose_check_failed(shared_nli: Any, tmp_path: Path) -> None:
    """The sources left the QA questions unanswered on every try: the QA check failed (``errors``, verdict WARN),
    while the claims and the NLI part held the combined score at 0.92 with the QA part's weight low. The loop
    asked only for the score, no contradiction and no unjudged claim, so it called the answer validated
    (``passed``) where ``verify_or_reject`` and ``assert_grounded`` refuse it. Now it uses their rule."""
    import json

    from groundjudge.testing import Reply
    from tests.pipeline.test_pipeline import judge_handler

    unanswered = lambda req: Reply.json({**json.loads(judge_handler(req).content), "answers": []})  # noqa: E731
    with ScriptedLLMServer(route({**HANDLERS, "verify": unanswered})) as server:
        ev = evaluator(server, shared_nli, tmp_path, weights={"claims": 0.7, "nli": 0.25, "qa": 0.05})
        result = generate_with_validation(ev, lambda q, c: GOOD_ANSWER, "When?", [CONTEXT], max_retries=1)
    report = result.report
    assert report.scores.combined is not None and report.scores.combined >= 0.7  # the score alone would pass
    assert report.scores.qa_failed and report.errors and not report.scores.n_errors
    assert not result.passed and len(result.attempts) == 2


# -- the RAG guard: retrieve -> generate -> verify -> return, reject or regenerate --------------------------------


def test_rag_guard_regenerates_with_the_grounded_prompt_and_the_flagged_claims(shared_nli: Any, tmp_path: Path) -> None:
    from groundjudge.middleware import RAGGuard
    from groundjudge.prompts import load_prompt

    seen: list[list[dict[str, str]]] = []
    retrieved: list[str] = []

    def retrieve(question: str) -> list[str]:
        retrieved.append(question)
        return [CONTEXT]

    def generate(messages: list[dict[str, str]]) -> str:
        seen.append(messages)
        return BAD_ANSWER if len(seen) == 1 else GOOD_ANSWER

    with ScriptedLLMServer(route(HANDLERS)) as server:
        guard = RAGGuard(evaluator(server, shared_nli, tmp_path, qa=False), retrieve, generate, threshold=0.7)
        result = guard("When was it completed?")
    assert result.status == "regenerated" and result.ok and result.answer == GOOD_ANSWER
    assert retrieved == ["When was it completed?"] and result.contexts == [CONTEXT]
    assert [a.report.verdict for a in result.attempts] == ["FAIL", "PASS"]
    first = seen[0]
    assert [m["role"] for m in first] == ["system", "user"]
    assert first[0]["content"] == load_prompt("grounded_answer").system.replace("{{fence}}", "#GJDATA#")
    assert "BEGIN SOURCE 1\n" + CONTEXT in first[1]["content"] and "When was it completed?" in first[1]["content"]
    retry = seen[1]
    assert retry[:2] == first and retry[2]["role"] == "user"
    flagged = fenced_block(RecordedRequest("openai", "", {}, {"messages": retry}), "FLAGGED CLAIMS")
    assert flagged == '- "The Eiffel Tower was completed in 1899." (contradicted: The source says 1889.)'


def test_rag_guard_rejects_with_the_fallback(shared_nli: Any, tmp_path: Path) -> None:
    from groundjudge.middleware import RAGGuard

    calls: list[Any] = []

    def generate(messages: list[dict[str, str]]) -> str:
        calls.append(messages)
        return BAD_ANSWER

    with ScriptedLLMServer(route(HANDLERS)) as server:
        ev = evaluator(server, shared_nli, tmp_path, qa=False)
        stubborn = RAGGuard(ev, lambda q: [CONTEXT], generate, fallback="Not sure.", max_retries=2)("q")
        assert stubborn.status == "rejected" and stubborn.answer == "Not sure." and len(calls) == 3
        assert stubborn.report is not None and stubborn.report.verdict == "FAIL"
        # no retries: the first answer, returned when it is grounded (the rule with retries), else the fallback
        once = RAGGuard(ev, lambda q: [CONTEXT], lambda m: GOOD_ANSWER, max_retries=0)("q")
        assert once.status == "passed" and once.answer == GOOD_ANSWER and len(once.attempts) == 1
        rejected = RAGGuard(ev, lambda q: [CONTEXT], lambda m: BAD_ANSWER, fallback="no", max_retries=0)("q")
        assert rejected.status == "rejected" and rejected.answer == "no" and not rejected.ok
        requests = len(server.requests)
        # nothing retrieved: nothing is generated or checked
        empty = RAGGuard(ev, lambda q: ["  "], generate, fallback="Nothing found.")("q")
        assert empty.status == "rejected" and empty.answer == "Nothing found." and empty.report is None
        assert len(calls) == 3 and len(server.requests) == requests


def test_rag_guard_rejects_an_answer_that_equals_the_fallback(shared_nli: Any, tmp_path: Path) -> None:
    # the status comes from the check, not from comparing the text shown with the text generated
    from groundjudge.middleware import RAGGuard

    with ScriptedLLMServer(route(HANDLERS)) as server:
        ev = evaluator(server, shared_nli, tmp_path, qa=False)
        same = RAGGuard(ev, lambda q: [CONTEXT], lambda m: BAD_ANSWER, fallback=BAD_ANSWER, max_retries=0)("q")
        assert same.report is not None and same.report.verdict == "FAIL"
        assert same.status == "rejected" and not same.ok and same.answer == BAD_ANSWER
        good = RAGGuard(ev, lambda q: [CONTEXT], lambda m: GOOD_ANSWER, fallback=GOOD_ANSWER, max_retries=0)("q")
        assert good.status == "passed" and good.ok


def test_rag_guard_with_retries_decides_by_the_verdict(shared_nli: Any, tmp_path: Path) -> None:
    """A score above the guard's threshold is not enough: under a stricter bar the same answer is not a PASS, and
    retries must not show what a single check would reject."""
    from groundjudge.middleware import RAGGuard

    with ScriptedLLMServer(route(HANDLERS)) as server:
        # a bar stricter than the guard's threshold: PASS needs combined 0.99 (the medical-legal preset's 0.95 was
        # met once the local model read the sentence that settles each claim, issue 33)
        bar = Thresholds(min_grounded=0.9, warn=0.99, max_contradicted=0.0)
        strict = evaluator(server, shared_nli, tmp_path, qa=False, thresholds=bar)
        single = RAGGuard(strict, lambda q: [CONTEXT], lambda m: GOOD_ANSWER, fallback="no", max_retries=0)("q")
        assert single.report is not None and single.report.verdict != "PASS"
        assert single.report.scores.combined is not None and single.report.scores.combined >= 0.7
        guarded = RAGGuard(strict, lambda q: [CONTEXT], lambda m: GOOD_ANSWER, fallback="no", threshold=0.7)("q")
        assert guarded.status == "rejected" and guarded.answer == "no"


def test_a_threshold_that_is_not_a_number_from_0_to_1_is_refused_before_anything_is_generated(
    shared_nli: Any, tmp_path: Path
) -> None:
    """generate_with_validation took assert_grounded's rule but not its check of the bar: at threshold NaN no score
    is below it, so an answer with no claim supported (no contradiction, no error) was validated (``passed``)."""
    import math

    import pytest

    from groundjudge.errors import ArgumentError
    from groundjudge.middleware import RAGGuard

    unsupported = "The tower is painted in three shades of brown and weighs about 10,100 tonnes."
    made: list[str] = []

    def generate(question: str, context: Any) -> str:
        made.append(question)
        return unsupported

    with ScriptedLLMServer(route(HANDLERS)) as server:
        ev = evaluator(server, shared_nli, tmp_path, qa=False)
        low = generate_with_validation(ev, generate, "q", [CONTEXT], threshold=0.7, max_retries=0)
        assert not low.passed and not low.report.scores.n_contradicted  # below the bar, nothing contradicted
        for bad in (math.nan, -0.1, 1.5, "0.7", True):
            with pytest.raises(ArgumentError, match="threshold must be a number from 0 to 1"):
                generate_with_validation(ev, generate, "q", [CONTEXT], threshold=bad, max_retries=0)  # type: ignore[arg-type]
            with pytest.raises(ArgumentError, match="threshold"):
                RAGGuard(ev, retrieve=lambda q: [CONTEXT], generate=lambda m: unsupported, threshold=bad)  # type: ignore[arg-type]
    assert len(made) == 1  # only the run at 0.7 generated


def test_a_guard_without_retries_holds_its_threshold_and_contradiction_rule(shared_nli: Any, tmp_path: Path) -> None:
    """With ``max_retries=0`` the guard let through any PASS (``verify_or_reject``): its ``threshold`` went unread and
    a contradicted claim the config's ``max_contradicted`` tolerates was shown, where the same guard with retries
    rejects both answers on every try. One rule now decides, whatever the number of retries."""
    from groundjudge.middleware import RAGGuard

    with ScriptedLLMServer(route(HANDLERS)) as server:
        ev = evaluator(server, shared_nli, tmp_path, qa=False)
        for retries in (0, 1):
            strict = RAGGuard(ev, lambda q: [CONTEXT], lambda m: GOOD_ANSWER, fallback="no", max_retries=retries,
                              threshold=0.999)("q")  # fmt: skip
            assert strict.report is not None and strict.report.verdict == "PASS"  # the config's bar is met
            assert strict.report.scores.combined is not None and strict.report.scores.combined < 0.999
            assert strict.status == "rejected" and strict.answer == "no", retries
        # a config that tolerates one contradicted claim in two: a PASS, still not grounded (assert_grounded's rule)
        loose = evaluator(server, shared_nli, tmp_path, qa=False,
                          thresholds=Thresholds(min_grounded=0.0, warn=0.0, max_contradicted=0.5))  # fmt: skip
        for retries in (0, 1):
            shown = RAGGuard(loose, lambda q: [CONTEXT], lambda m: BAD_ANSWER, fallback="no", max_retries=retries,
                             threshold=0.0)("q")  # fmt: skip
            assert shown.report is not None and shown.report.verdict == "PASS" and shown.report.scores.n_contradicted
            assert shown.status == "rejected" and shown.answer == "no", retries


def test_a_retry_count_that_is_no_whole_number_from_0_is_refused(shared_nli: Any, tmp_path: Path) -> None:
    """``max_retries=-1`` generated nothing and then failed on the empty list of attempts (an IndexError, no
    groundjudge error); a guard took it as 0. Both refuse it now, before anything is generated."""
    import pytest

    from groundjudge.errors import ArgumentError
    from groundjudge.middleware import RAGGuard

    made: list[str] = []
    with ScriptedLLMServer(route(HANDLERS)) as server:
        ev = evaluator(server, shared_nli, tmp_path, qa=False)
        for bad in (-1, 1.5, True, "2", None):
            with pytest.raises(ArgumentError, match="max_retries must be a whole number from 0"):
                generate_with_validation(
                    ev, lambda q, c: made.append(q) or GOOD_ANSWER, "q", [CONTEXT], max_retries=bad
                )  # type: ignore[arg-type]
            with pytest.raises(ArgumentError, match="max_retries must be a whole number from 0"):
                RAGGuard(ev, lambda q: [CONTEXT], lambda m: GOOD_ANSWER, max_retries=bad)  # type: ignore[arg-type]
    assert made == []


def test_a_retriever_that_returns_one_string_gives_one_source(shared_nli: Any, tmp_path: Path) -> None:
    """A retriever that returns its one passage as a plain string (as ``verify`` and ``Evaluator.evaluate`` take it)
    was iterated: each character became a source, the prompt held hundreds of one-letter SOURCE blocks and the
    answer was checked against letters."""
    from groundjudge.middleware import RAGGuard

    seen: list[list[dict[str, str]]] = []

    def generate(messages: list[dict[str, str]]) -> str:
        seen.append(messages)
        return GOOD_ANSWER

    with ScriptedLLMServer(route(HANDLERS)) as server:
        ev = evaluator(server, shared_nli, tmp_path, qa=False)
        result = RAGGuard(ev, lambda q: CONTEXT, generate, max_retries=0)("q")
    assert result.contexts == [CONTEXT] and "BEGIN SOURCE 2" not in seen[0][1]["content"]
    assert result.status == "passed" and result.answer == GOOD_ANSWER
