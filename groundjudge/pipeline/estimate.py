"""The dry run: how many LLM calls scoring some rows may need at most, how many the cache holds, and the cost."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel

from groundjudge.config import Config
from groundjudge.errors import InputError
from groundjudge.io.rows import parse_sample
from groundjudge.llm import LLMClient
from groundjudge.models import Claim, Message, QAItem, Sample
from groundjudge.prompts import load_prompt
from groundjudge.stages.claims import ClaimsAndQuestions, ExtractedClaims, claim_from_input, claims_messages
from groundjudge.stages.judge import SOURCE_CHARS, JudgeReply, Source, VerifyReply, judge_messages, select_sources


def estimate(
    rows: Iterable[Sample | dict[str, Any]],
    *,
    client: LLMClient | None,
    mode: str,
    config: Config,
    qa_expected: bool,
) -> dict[str, Any]:
    """A dry run: how many LLM calls scoring ``rows`` may need at most, how many the cache holds, the cost.

    Exact for claim extraction and for judging single-claim rows; for answer rows the sources-side call is counted
    as if every answer escalated (an upper bound: the cascade decides some claims locally). At most two calls per
    answer: one reads the answer (claims and QA questions), one reads the sources (verdicts and QA answers).

    Args:
        rows: the input rows.
        client: the LLM client (none, or ``mode`` "nli": no LLM calls).
        mode: the evaluation mode.
        config: the QA question count and whether calls go through the provider batch API.
        qa_expected: whether answers get the QA check.
    """
    out: dict[str, Any] = {
        "rows": 0,
        "bad_rows": 0,
        "llm_calls_upper_bound": 0,
        "cached_calls": 0,
        "estimated_cost_usd": 0.0,
    }
    qa = qa_expected
    n_questions = config.qa_questions if qa else 0
    for n, row in enumerate(rows, start=1):
        try:
            s = parse_sample(row, n)
        except InputError:
            out["bad_rows"] += 1
            continue
        out["rows"] += 1
        if client is None or mode == "nli":
            continue
        # an upper bound: the whole contexts up to the judge's character budget (what the judge may be shown)
        sources = select_sources(s.contexts, []) or [Source(1, 0, 0, "\n\n".join(s.contexts)[:SOURCE_CHARS])]
        calls: list[tuple[list[Message], type[BaseModel], str, bool]]
        if s.claim is not None:
            calls = [(judge_messages(claim_from_input(s.claim), sources), JudgeReply, "judge", True)]
        else:
            stand_in = [Claim(id="c1", text=s.answer or "")]
            questions = [QAItem(question=s.answer or "", answer_from_answer="")] if qa else []
            extract = claims_messages(s.answer or "", s.question, n_questions)
            calls = [
                (extract, ClaimsAndQuestions if qa else ExtractedClaims, "claims_qa" if qa else "claims", True),
                (judge_messages(stand_in, sources, questions), VerifyReply if qa else JudgeReply, "", False),
            ]
        for messages, schema, name, exact in calls:
            if exact and client.is_cached(messages, schema, load_prompt(name).ref):
                out["cached_calls"] += 1
            else:
                out["llm_calls_upper_bound"] += 1
                out["estimated_cost_usd"] += client.estimate_cost(messages, batch=config.batch_api)
    out["estimated_cost_usd"] = round(float(out["estimated_cost_usd"]), 6)
    if client is not None and client.price is None and out["llm_calls_upper_bound"]:  # unknown, not 0
        out["estimated_cost_usd"] = None
        out["cost"] = (
            f"unknown: no price known for {client.model_id}; give one with --price IN,OUT (USD per million "
            "input and output tokens) or price={'input_per_mtok': ..., 'output_per_mtok': ...} in Python"
        )
    if config.batch_api:
        out["priced_as"] = "provider batch API"
    return out
