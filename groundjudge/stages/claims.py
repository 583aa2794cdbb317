"""Claims out of an answer: an LLM in JSON mode, or the answer's sentences when no LLM is configured."""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from groundjudge.chunking import claim_sentences, locate
from groundjudge.llm.client import LLMClient
from groundjudge.models import Claim, Message, QAItem, Span, Usage
from groundjudge.prompts import fenced, load_prompt, make_fence, render


class ExtractedClaim(BaseModel):
    text: str = Field(description="the claim, self-contained, pronouns resolved")
    source: str = Field(description="verbatim excerpt of the answer the claim comes from")


class ExtractedClaims(BaseModel):
    claims: list[ExtractedClaim]


class ExtractedQuestion(BaseModel):
    question: str = Field(description="a short question about one fact the answer states; it does not reveal it")
    answer_from_answer: str = Field(description="the answer's own reply, in a few words")


class ClaimsAndQuestions(BaseModel):
    claims: list[ExtractedClaim]
    questions: list[ExtractedQuestion]  # no maxItems: not every strict-schema server takes it; extras are dropped


def _norm(text: str) -> str:
    return re.sub(r"\W+", " ", text.lower()).strip()


def claims_from_sentences(answer: str, *, fallback: bool = False) -> list[Claim]:
    """The answer's claim-bearing sentences, with their spans; ``fallback``: in place of a claims call that failed
    (origin ``fallback``: the answer's verdict is ERROR, its scores are shown for review)."""
    return [
        Claim(id=f"c{i}", text=s.text, span=s, origin="fallback" if fallback else "sentence")
        for i, s in enumerate(claim_sentences(answer), start=1)
    ]


def claims_messages(answer: str, question: str | None = None, n_questions: int = 0) -> list[Message]:
    """The extraction prompt: claims only, or claims and ``n_questions`` verification questions in one call. The
    question and the answer are fenced as data with a marker neither contains, as the judge's sources are: an answer
    cannot close its block and put text of its own outside it."""
    question = question or "(none given)"
    fence = make_fence(question, answer)
    blocks = {"question": fenced(fence, "QUESTION", question), "answer": fenced(fence, "ANSWER", answer)}
    if n_questions:
        return render(load_prompt("claims_qa"), **blocks, n=str(n_questions), fence=fence)
    return render(load_prompt("claims"), **blocks, fence=fence)


def claims_from_llm(
    client: LLMClient, answer: str, question: str | None = None, n_questions: int = 0
) -> tuple[list[Claim], list[QAItem], Usage]:
    """Atomic claims by the LLM (duplicates merged, each located in the answer where its source excerpt is) and, when
    ``n_questions`` > 0, verification questions with the answer's own replies, from the same call."""
    messages = claims_messages(answer, question, n_questions)
    prompt = load_prompt("claims_qa" if n_questions else "claims")
    schema: type[ExtractedClaims] | type[ClaimsAndQuestions] = ClaimsAndQuestions if n_questions else ExtractedClaims
    reply, usage = client.complete_json(messages, schema, prompt=prompt.ref)
    claims: list[Claim] = []
    seen: set[str] = set()
    for item in reply.claims:
        text = item.text.strip()
        key = _norm(text)
        if not key or key in seen:
            continue
        seen.add(key)
        found = locate(item.source, answer) if item.source else None
        span = Span(start=found[0], end=found[1], text=answer[found[0] : found[1]]) if found else None
        claims.append(Claim(id=f"c{len(claims) + 1}", text=text, span=span, origin="llm"))
    questions = [
        QAItem(question=q.question.strip(), answer_from_answer=q.answer_from_answer.strip())
        for q in getattr(reply, "questions", [])
        if q.question.strip()
    ][:n_questions]
    return claims, questions, usage


def claim_from_input(claim: str) -> list[Claim]:
    """A row that carries a claim instead of an answer is that one claim."""
    return [Claim(id="c1", text=claim.strip(), origin="input")]
