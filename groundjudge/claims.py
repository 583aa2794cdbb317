"""Claims out of an answer: an LLM in JSON mode, or the answer's sentences when no LLM is configured."""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from groundjudge.chunking import claim_sentences, locate
from groundjudge.llm.client import LLMClient
from groundjudge.models import Claim, Message, Span, Usage
from groundjudge.prompts import load_prompt, render


class ExtractedClaim(BaseModel):
    text: str = Field(description="the claim, self-contained, pronouns resolved")
    source: str = Field(description="verbatim excerpt of the answer the claim comes from")


class ExtractedClaims(BaseModel):
    claims: list[ExtractedClaim]


def _norm(text: str) -> str:
    return re.sub(r"\W+", " ", text.lower()).strip()


def claims_from_sentences(answer: str) -> list[Claim]:
    """The answer's claim-bearing sentences, with their spans."""
    return [
        Claim(id=f"c{i}", text=s.text, span=s, origin="sentence")
        for i, s in enumerate(claim_sentences(answer), start=1)
    ]


def claims_messages(answer: str, question: str | None = None) -> list[Message]:
    return render(load_prompt("claims"), question=question or "(none given)", answer=answer)


def claims_from_llm(client: LLMClient, answer: str, question: str | None = None) -> tuple[list[Claim], Usage]:
    """Atomic claims by the LLM; duplicates merged, each located in the answer where its source excerpt is."""
    messages = claims_messages(answer, question)
    reply, usage = client.complete_json(messages, ExtractedClaims, prompt=load_prompt("claims").ref)
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
    return claims, usage


def claim_from_input(claim: str) -> list[Claim]:
    """A row that carries a claim instead of an answer is that one claim."""
    return [Claim(id="c1", text=claim.strip(), origin="input")]
