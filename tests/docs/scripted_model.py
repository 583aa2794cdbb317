"""A plausible scripted LLM for the manual's examples: the real SDKs talk HTTP to it (``ScriptedLLMServer``).

Claims are the answer's sentences; the judge reads each claim against the sources' sentences: a sentence that shares
most of the claim's words supports it (quoted verbatim, so the quote verifies), unless a number differs, which
contradicts it; otherwise UNSUPPORTED. QA questions are answered with the answer's own words from the best source
sentence. What is exercised is groundjudge's wiring of a documented call, not a model's judgement.
"""

from __future__ import annotations

import json
import re
from typing import Any

from groundjudge.testing import RecordedRequest, Reply, claims_in, fenced_block, prompt_name, route, sources_in

WORD = re.compile(r"[a-z0-9]+")
NUMBER = re.compile(r"\d+(?:[.,]\d+)?")


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if s.strip()]


def _best(claim: str, sources: list[str]) -> tuple[float, int, str]:
    words = set(WORD.findall(claim.lower())) - {"the", "a", "an", "is", "was", "it", "of", "in", "to"}
    best = (0.0, 1, "")
    for n, source in enumerate(sources, 1):
        for sentence in _sentences(source):
            overlap = len(words & set(WORD.findall(sentence.lower()))) / max(1, len(words))
            if overlap > best[0]:
                best = (overlap, n, sentence)
    return best


def _verdict(claim_id: str, claim: str, sources: list[str]) -> dict[str, Any]:
    overlap, n, sentence = _best(claim, sources)
    if overlap >= 0.4 and sentence:
        mine, theirs = set(NUMBER.findall(claim)), set(NUMBER.findall(sentence))
        quote = [{"source": n, "text": sentence}]
        if mine and theirs and not mine <= theirs:
            return {"claim_id": claim_id, "verdict": "CONTRADICTED", "reason": "The source gives another number.",
                    "quotes": quote, "error_type": "number"}  # fmt: skip
        return {"claim_id": claim_id, "verdict": "SUPPORTED", "reason": "Stated.", "quotes": quote}
    return {"claim_id": claim_id, "verdict": "UNSUPPORTED", "reason": "Not in the sources.", "quotes": [],
            "error_type": "unsupported_detail"}  # fmt: skip


def claims(req: RecordedRequest) -> Reply:
    answer = fenced_block(req, "ANSWER")
    sentences = _sentences(answer) or [answer.strip() or "(empty)"]
    out: dict[str, Any] = {"claims": [{"text": s, "source": s} for s in sentences]}
    if prompt_name(req) == "claims_qa":
        out["questions"] = [
            {"question": f"Which words begin the statement on: {s}", "answer_from_answer": " ".join(s.split()[:4])}
            for s in sentences[:4]
        ]
    return Reply.json(out)


def judge(req: RecordedRequest) -> Reply:
    sources = sources_in(req)
    verdicts = [_verdict(cid, re.sub(r" \(cites: [^)]*\)$", "", text), sources) for cid, text in claims_in(req).items()]
    out: dict[str, Any] = {"verdicts": verdicts}
    if prompt_name(req) == "verify":
        listing = json.loads(fenced_block(req, "QUESTIONS") or "[]")
        answers = []
        for q in listing:
            overlap, _, sentence = _best(q["question"].split(": ", 1)[-1], sources)
            answers.append(
                {"id": q["id"], "context_answer": " ".join(sentence.split()[:4]) if overlap else "NOT_FOUND"}
            )
        out = {"answers": answers, **out}
    return Reply.json(out)


SCRIPT = route({"claims": claims, "claims_qa": claims, "judge": judge, "verify": judge})
