"""The LLM judge: one call per answer for all its escalated claims, quotes verified against the sources.

Sources and claims are fenced with a marker derived from their text, and the prompt tells the model that fenced
text is data. A reply that leaves claim ids out is re-asked naming them and never cached. Every quote is located in
the sources (exactly, then ignoring case, whitespace and Unicode compatibility forms; a quote joined by an ellipsis
piece by piece); a quote under the evidence floor proves nothing, and a SUPPORTED verdict none of whose quotes can
be verified becomes UNSUPPORTED with the flag ``unverified_quote``.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, get_args

from pydantic import BaseModel, Field, field_validator

from groundjudge.chunking import locate
from groundjudge.errors import InvalidOutputError
from groundjudge.llm.client import LLMClient
from groundjudge.models import Claim, Label, Message, Passage, QAItem, Quote, Usage
from groundjudge.prompts import fenced, load_prompt, make_fence, render

log = logging.getLogger(__name__)


class JudgeQuote(BaseModel):
    source: int = Field(description="number of the source passage the quote is copied from")
    text: str = Field(description="verbatim excerpt of that passage")


ERROR_TYPE = Literal["number", "date", "entity", "relation", "negation", "unsupported_detail", "other"]


class JudgeItem(BaseModel):
    claim_id: str
    verdict: Literal["SUPPORTED", "CONTRADICTED", "UNSUPPORTED"]
    reason: str
    quotes: list[JudgeQuote]
    error_type: ERROR_TYPE | None = Field(
        None, description="for CONTRADICTED or UNSUPPORTED: the kind of error; null for SUPPORTED"
    )

    @field_validator("error_type", mode="before")
    @classmethod
    def _known_type(cls, value: object) -> object:
        """A kind outside the list (or in another case) is "other", never a failed reply."""
        if not isinstance(value, str):
            return value
        v = value.strip().lower().replace(" ", "_")
        if v in ("", "none", "null"):
            return None
        return v if v in get_args(ERROR_TYPE) else "other"

    @field_validator("verdict", mode="before")
    @classmethod
    def _upper(cls, value: object) -> object:
        return value.strip().upper() if isinstance(value, str) else value  # "supported" from a small local model


class JudgeReply(BaseModel):
    verdicts: list[JudgeItem]


class SourceAnswer(BaseModel):
    id: str
    context_answer: str = Field(description="the answer from the passages alone, or NOT_FOUND")


class VerifyReply(BaseModel):
    """The one sources-side call of an answer: QA answers first (blind to the claims' wording as far as a prompt can
    ask), then verdicts on the escalated claims."""

    answers: list[SourceAnswer]
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
    error_type: str | None = None


SOURCE_CHARS = 24_000  # the most source text one judge prompt shows
WHOLE_CHARS = 12_000  # contexts up to this long are shown whole; longer ones as the evidence passages (issue 34)
MARGIN_CHARS = 600  # text kept on each side of an evidence passage, so the judge reads it in its context


def _widen(text: str, start: int, end: int, margin: int) -> tuple[int, int]:
    """``[start, end)`` widened by ``margin`` characters each side, cut back to a word boundary."""
    if margin <= 0:
        return start, end
    lo, hi = max(0, start - margin), min(len(text), end + margin)
    if lo > 0 and (space := text.find(" ", lo, start)) >= 0:
        lo = space + 1
    if hi < len(text) and (space := text.rfind(" ", end, hi)) >= 0:
        hi = space
    return lo, hi


def select_sources(
    contexts: Sequence[str],
    hints: Sequence[Passage],
    char_budget: int = SOURCE_CHARS,
    *,
    whole_up_to: int = WHOLE_CHARS,
    margin: int = MARGIN_CHARS,
) -> list[Source]:
    """The whole contexts when they fit ``whole_up_to`` (or there are no hints and they fit ``char_budget``); else
    the hinted passages (the evidence of the claims the judge decides), each widened by ``margin`` characters,
    merged, in document order, taken in hint order until ``char_budget`` is spent."""
    total = sum(len(c) for c in contexts)
    if total <= min(whole_up_to, char_budget) or (not hints and total <= char_budget):
        return [Source(number=i + 1, doc=i, start=0, text=c) for i, c in enumerate(contexts)]
    chosen: list[tuple[int, int, int]] = []
    used = 0
    for p in hints:
        start, end = _widen(contexts[p.doc], p.start, p.end, margin)
        if any(d == p.doc and s <= start and end <= e for d, s, e in chosen):
            continue
        if used + (end - start) > char_budget and chosen:
            break
        chosen.append((p.doc, start, end))
        used += end - start
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


# What counts as evidence: a quote (or each piece of one joined by an ellipsis) of at least this many words and
# characters. "e" or "1889" alone can be found in almost any source and proves nothing.
MIN_QUOTE_WORDS = 2
MIN_QUOTE_CHARS = 8
_ELLIPSIS = re.compile(r"\s*(?:\[\s*(?:\.\.\.|…)\s*\]|\.\.\.+|…)\s*")


def _too_short(text: str) -> bool:
    return len(re.findall(r"\w+", text)) < MIN_QUOTE_WORDS or len(re.sub(r"\s", "", text)) < MIN_QUOTE_CHARS


def _locate_pieces(pieces: Sequence[str], text: str) -> list[tuple[int, int, str]] | None:
    """Each piece found in ``text`` after the one before it, or None."""
    found: list[tuple[int, int, str]] = []
    pos = 0
    for piece in pieces:
        hit = locate(piece, text[pos:])
        if hit is None:
            return None
        start, end, how = hit
        found.append((pos + start, pos + end, how))
        pos += end
    return found


def verify_quote(text: str, cited: int, sources: Sequence[Source]) -> Quote:
    """Locate a quote in the cited source, else in any source; offsets are in the original document.

    A quote joined by an ellipsis is verified piece by piece, in order, within one source. A quote (or a piece)
    under the evidence floor (:data:`MIN_QUOTE_WORDS` words, :data:`MIN_QUOTE_CHARS` characters) is not evidence.
    """
    pieces = [p for p in _ELLIPSIS.split(text.strip()) if p.strip()]
    if not pieces or any(_too_short(p) for p in pieces):
        return Quote(text=text, verified=False, problem="too short to count as evidence")
    ordered = sorted(sources, key=lambda s: s.number != cited)
    for src in ordered:
        found = _locate_pieces(pieces, src.text)
        if found is not None:
            how = "exact" if all(h == "exact" for _, _, h in found) else "normalized"
            return Quote(
                text=text,
                doc=src.doc,
                start=src.start + found[0][0],
                end=src.start + found[-1][1],
                verified=True,
                match=how,
                parts=[(src.start + a, src.start + b) for a, b, _ in found] if len(found) > 1 else None,
            )
    return Quote(text=text, verified=False, problem="not found in the sources")


def _decide(item: JudgeItem, sources: Sequence[Source]) -> JudgedClaim:
    quotes = [verify_quote(q.text, q.source, sources) for q in item.quotes if q.text.strip()]
    flags = ["unverified_quote"] if any(not q.verified for q in quotes) else []
    label: Label = item.verdict
    if label == "SUPPORTED" and not any(q.verified for q in quotes):
        label = "UNSUPPORTED"
        flags = ["unverified_quote"]
    # every claim that is not SUPPORTED carries a kind of error; a downgraded SUPPORTED has its detail unbacked
    kind = None if label == "SUPPORTED" else item.error_type or ("unsupported_detail" if flags else "other")
    return JudgedClaim(label=label, reason=item.reason.strip(), quotes=quotes, flags=flags, error_type=kind)


def question_listing(questions: Sequence[QAItem]) -> str:
    """The questions as the sources-side sees them: ids and questions, never the answer's replies (blind)."""
    return json.dumps(
        [{"id": f"q{i}", "question": q.question} for i, q in enumerate(questions, 1)], ensure_ascii=False, indent=1
    )


def with_stable_prefix(messages: list[Message], per_call: str) -> list[Message]:
    """Mark the last message's content before ``per_call`` as the stable prefix providers may cache (instructions and
    sources come first; several answers about the same sources share it)."""
    last = messages[-1]
    at = last.content.find(per_call)
    if at > 0:
        messages[-1] = last.model_copy(update={"cache_upto": at})
    return messages


def cites_text(docs: Sequence[int], sources: Sequence[Source]) -> str:
    """How a claim's citations are shown to the judge: the numbers of the sources shown from the cited contexts."""
    shown = [s.number for s in sources if s.doc in docs]
    if not shown:
        return " (cites: a source not shown)"
    return f" (cites: SOURCE {', '.join(map(str, shown))})"


def one_line(text: str) -> str:
    """``text`` on one line (each line break a space): the CLAIMS block is one ``[id] text`` line per claim, so a
    claim whose text breaks the line (a claim row's own text, or one the claims call copied from a hostile answer)
    cannot start a line that reads as another claim's (``[c2] ...``) or as no claim's."""
    return " ".join(text.splitlines())


def judge_messages(
    claims: Sequence[Claim],
    sources: Sequence[Source],
    questions: Sequence[QAItem] = (),
    cited: Mapping[str, Sequence[int]] | None = None,
) -> list[Message]:
    """The judge prompt for these claims and sources (with the QA questions, the combined ``verify`` prompt), fenced;
    instructions and sources first, the per-answer part last; each claim on one line (:func:`one_line`). ``cited``:
    the contexts (0-based) each claim id cites, shown beside the claim as the sources it names."""
    cited = cited or {}
    claims_text = (
        "\n".join(
            f"[{c.id}] {one_line(c.text)}" + (cites_text(cited[c.id], sources) if c.id in cited else "") for c in claims
        )
        or "(none)"
    )
    listing = question_listing(questions) if questions else ""
    fence = make_fence(claims_text, listing, *(s.text for s in sources))
    claims_block = fenced(fence, "CLAIMS", claims_text)
    if not questions:
        messages = render(
            load_prompt("judge"), sources=format_sources(sources, fence), claims=claims_block, fence=fence
        )
        return with_stable_prefix(messages, claims_block)
    questions_block = fenced(fence, "QUESTIONS", listing)
    messages = render(
        load_prompt("verify"),
        sources=format_sources(sources, fence),
        questions=questions_block,
        claims=claims_block,
        fence=fence,
    )
    return with_stable_prefix(messages, questions_block)


_SEVERITY = {"SUPPORTED": 0, "UNSUPPORTED": 1, "CONTRADICTED": 2, "ERROR": 3}


def _claim_id(raw: str) -> str:
    return raw.strip().strip("[]").strip()


def judge_claims(
    client: LLMClient,
    claims: Sequence[Claim],
    sources: Sequence[Source],
    questions: Sequence[QAItem] = (),
    cited: Mapping[str, Sequence[int]] | None = None,
) -> tuple[dict[str, JudgedClaim], dict[str, str], Usage]:
    """Verdicts for ``claims`` by claim id and, in the same call, the sources' answers to ``questions`` by question
    id (q1, q2, ...). Ids the judge never answers (after the client's re-asks, which name them) come back as ERROR
    verdicts and missing answers. A reply that leaves ids out is never cached, so a later run asks again."""
    prompt = load_prompt("verify" if questions else "judge")
    schema: type[JudgeReply] | type[VerifyReply] = VerifyReply if questions else JudgeReply
    asked = {c.id for c in claims}
    asked_q = {f"q{i}" for i in range(1, len(questions) + 1)}

    def every_id_answered(reply: JudgeReply | VerifyReply) -> str | None:
        missing = sorted(asked - {_claim_id(item.claim_id) for item in reply.verdicts})
        missing_q = sorted(asked_q - {a.id.strip() for a in getattr(reply, "answers", [])})
        if missing or missing_q:
            ids = ", ".join(missing + missing_q)
            return f"no reply for ids {ids}: give exactly one reply for every claim id and question id"
        return None

    usage = Usage()
    try:
        reply, usage = client.complete_json(
            judge_messages(claims, sources, questions, cited), schema, prompt=prompt.ref, check=every_id_answered
        )
    except InvalidOutputError as exc:
        if not isinstance(exc.partial, (JudgeReply, VerifyReply)):
            raise
        log.info("judge left ids out after the re-asks; keeping the replies it gave")
        reply, usage = exc.partial, exc.usage or Usage()
    out: dict[str, JudgedClaim] = {}
    for item in reply.verdicts:
        cid = _claim_id(item.claim_id)
        if cid not in asked:
            log.info("judge answered an id it was not asked: %r", item.claim_id)
            continue
        judged = _decide(item, sources)
        # two verdicts for one claim: the one that flatters least stands
        if cid not in out or _SEVERITY[judged.label] > _SEVERITY[out[cid].label]:
            out[cid] = judged
    for c in claims:
        if c.id not in out:
            out[c.id] = JudgedClaim(label="ERROR", error="the judge gave no verdict for this claim")
    answers = {a.id.strip(): a.context_answer.strip() for a in getattr(reply, "answers", []) if a.id.strip() in asked_q}
    return out, answers, usage
