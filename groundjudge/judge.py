"""The LLM judge: one call per answer for all its escalated claims, quotes verified against the sources.

Sources and claims are fenced with a marker derived from their text, and the prompt tells the model that fenced
text is data. Claim ids missing from a reply are asked again (only those). Every quote is located in the sources
(exactly, then ignoring case and whitespace); a SUPPORTED verdict none of whose quotes can be found becomes
UNSUPPORTED with the flag ``unverified_quote``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, Field, field_validator

from groundjudge.chunking import locate
from groundjudge.llm.client import LLMClient
from groundjudge.models import Claim, Label, Message, Passage, Quote, Usage
from groundjudge.prompts import fenced, load_prompt, make_fence, render

log = logging.getLogger(__name__)


class JudgeQuote(BaseModel):
    source: int = Field(description="number of the source passage the quote is copied from")
    text: str = Field(description="verbatim excerpt of that passage")


class JudgeItem(BaseModel):
    claim_id: str
    verdict: Literal["SUPPORTED", "CONTRADICTED", "UNSUPPORTED"]
    reason: str
    quotes: list[JudgeQuote]

    @field_validator("verdict", mode="before")
    @classmethod
    def _upper(cls, value: object) -> object:
        return value.strip().upper() if isinstance(value, str) else value  # "supported" from a small local model


class JudgeReply(BaseModel):
    verdicts: list[JudgeItem]


@dataclass(frozen=True)
class Source:
    """A numbered piece of the contexts shown to an LLM: document ``doc`` from character ``start``."""

    number: int
    doc: int
    start: int
    text: str


@dataclass
class JudgedClaim:
    label: Label
    reason: str = ""
    quotes: list[Quote] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    error: str | None = None


def select_sources(contexts: Sequence[str], hints: Sequence[Passage], char_budget: int = 24_000) -> list[Source]:
    """The whole contexts when they fit ``char_budget``; else the hinted passages (merged, in document order)
    in hint order until the budget is spent."""
    if sum(len(c) for c in contexts) <= char_budget:
        return [Source(number=i + 1, doc=i, start=0, text=c) for i, c in enumerate(contexts)]
    chosen: list[tuple[int, int, int]] = []
    used = 0
    for p in hints:
        if any(d == p.doc and s <= p.start and p.end <= e for d, s, e in chosen):
            continue
        if used + (p.end - p.start) > char_budget and chosen:
            break
        chosen.append((p.doc, p.start, p.end))
        used += p.end - p.start
    chosen.sort()
    merged: list[list[int]] = []
    for d, s, e in chosen:
        if merged and merged[-1][0] == d and s <= merged[-1][2]:
            merged[-1][2] = max(merged[-1][2], e)
        else:
            merged.append([d, s, e])
    return [Source(number=i + 1, doc=d, start=s, text=contexts[d][s:e]) for i, (d, s, e) in enumerate(merged)]


def format_sources(sources: Sequence[Source], fence: str) -> str:
    return "\n\n".join(fenced(fence, f"SOURCE {s.number}", s.text) for s in sources)


def verify_quote(text: str, cited: int, sources: Sequence[Source]) -> Quote:
    """Locate a quote in the cited source, else in any source; offsets are in the original document."""
    ordered = sorted(sources, key=lambda s: s.number != cited)
    for src in ordered:
        found = locate(text, src.text)
        if found is not None:
            start, end, how = found
            return Quote(text=text, doc=src.doc, start=src.start + start, end=src.start + end, verified=True, match=how)
    return Quote(text=text, verified=False)


def _decide(item: JudgeItem, sources: Sequence[Source]) -> JudgedClaim:
    quotes = [verify_quote(q.text, q.source, sources) for q in item.quotes if q.text.strip()]
    flags = ["unverified_quote"] if any(not q.verified for q in quotes) else []
    label: Label = item.verdict
    if label == "SUPPORTED" and not any(q.verified for q in quotes):
        label = "UNSUPPORTED"
        flags = ["unverified_quote"]
    return JudgedClaim(label=label, reason=item.reason.strip(), quotes=quotes, flags=flags)


def judge_messages(claims: Sequence[Claim], sources: Sequence[Source]) -> list[Message]:
    """The judge prompt for these claims and sources, fenced."""
    claims_text = "\n".join(f"[{c.id}] {c.text}" for c in claims)
    fence = make_fence(claims_text, *(s.text for s in sources))
    return render(
        load_prompt("judge"),
        sources=format_sources(sources, fence),
        claims=fenced(fence, "CLAIMS", claims_text),
        fence=fence,
    )


def judge_claims(
    client: LLMClient, claims: Sequence[Claim], sources: Sequence[Source], max_missing_rounds: int = 2
) -> tuple[dict[str, JudgedClaim], Usage]:
    """Verdicts for ``claims`` by claim id; ids the judge never answers come back as ERROR."""
    prompt = load_prompt("judge")
    usage = Usage()
    out: dict[str, JudgedClaim] = {}
    pending = list(claims)
    for _ in range(1 + max_missing_rounds):
        if not pending:
            break
        reply, call_usage = client.complete_json(judge_messages(pending, sources), JudgeReply, prompt=prompt.ref)
        usage = usage + call_usage
        asked = {c.id for c in pending}
        for item in reply.verdicts:
            cid = item.claim_id.strip().strip("[]")
            if cid in asked and cid not in out:
                out[cid] = _decide(item, sources)
            elif cid not in asked:
                log.info("judge answered an id it was not asked: %r", item.claim_id)
        pending = [c for c in pending if c.id not in out]
        if pending:
            log.info("judge left out %d claim ids; asking again for those", len(pending))
    for c in pending:
        out[c.id] = JudgedClaim(label="ERROR", error="the judge gave no verdict for this claim")
    return out, usage
