"""Several answers' calls of one prompt in one request (issue 34: the fixed part paid once per call).

A packed request is built from the deferred single-answer calls (:class:`~groundjudge.llm.client.DeferredCall`) of
one prompt: their shared system message once, a note on the packing, and each call's own user message in a block
fenced with a marker that none of the blocks contains (nor their own fences), titled with an id given here
(``a1``, ``a2``, ..., never taken from the data). The reply is ``{"replies": [{"id": ..., "reply": ...}]}``, the
id an enum of the pack's ids and each reply the single call's schema. The reply is split by id
(:func:`split_reply`); a part is then taken exactly as the single call's reply would be (validated, checked,
cached under the single call's own key), so a missing, repeated or invalid part concerns that answer alone.

The packed request may write every answer's reply: it asks for the sum of their output budgets (``max_tokens``), at
most the model's own output limit where :data:`OUTPUT_LIMITS` knows it (:func:`output_limit`); a model it does not
know (an OpenAI-compatible server, a model newer than the table) is asked for the sum. The budget's worst case and
the dry run read that ``max_tokens`` (:meth:`~groundjudge.llm.costs.CallCosts.worst_case_cost`, ``expected_tokens``:
the mean reply per answer times :func:`pack_size`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Iterator, Sequence
from typing import Any

from pydantic import BaseModel

from groundjudge.llm.base import LLMRequest
from groundjudge.models import Message, Usage
from groundjudge.prompts import pick_fence

PACK_FENCE = "#GJPACK#"
PACK_SCHEMA_NAME = "PackedReplies"

# The most output tokens one request may ask of a model (the providers' documented limits), "provider/model" by
# longest prefix as the price table (llm.accounting.PRICES): asking for more is refused (HTTP 400), so a packed
# request asks for the sum of its answers' budgets up to this. A dated snapshot finds its family (a snapshot whose
# limit differs has its own entry); a model not here is asked for the sum.
OUTPUT_LIMITS: dict[str, int] = {
    "openai/gpt-4o-mini": 16_384,
    "openai/gpt-4o": 16_384,
    "openai/gpt-4o-2024-05-13": 4_096,
    "openai/gpt-4.1": 32_768,
    "openai/gpt-5": 128_000,
    "openai/gpt-5-chat": 16_384,
    "openai/o1": 100_000,
    "openai/o1-mini": 65_536,
    "openai/o1-preview": 32_768,
    "openai/o3": 100_000,
    "openai/o4-mini": 100_000,
    "anthropic/claude-haiku-4-5": 64_000,
    "anthropic/claude-3-5-haiku": 8_192,
    "anthropic/claude-sonnet-4": 64_000,
    "anthropic/claude-opus-4-5": 64_000,
    "anthropic/claude-opus-4": 32_000,
}


class PackedReply(BaseModel):
    """A packed reply as a batch result is first validated: its items are checked one by one (:func:`split_reply`),
    so that one bad item concerns its answer alone."""

    replies: list[Any]


def pack_note(fence: str) -> str:
    """What the packed request adds to the system message."""
    return (
        f"Several requests follow, each between {fence} lines that name its id. Reply with `replies`: one item per "
        "id, that request's reply read from its own block alone; text in one block never decides another block's "
        "reply."
    )


def pack_key(request: LLMRequest) -> str | None:
    """What calls must share to go in one pack (the system message, so the same fence and rules; the schema and the
    request settings), or None for a call that cannot be packed (not one system and one user message)."""
    messages = request.messages
    if len(messages) != 2 or messages[0].role != "system" or messages[1].role != "user":
        return None
    same = [messages[0].content, request.schema, request.schema_name, request.temperature, request.seed]
    if request.reasoning_effort is not None:
        same.append(request.reasoning_effort)
    return hashlib.sha256(json.dumps(same, sort_keys=True, default=str).encode()).hexdigest()


def pack_fence(texts: Sequence[str]) -> str:
    """A marker that appears in none of ``texts``, not even as a look-alike (:func:`groundjudge.prompts.pick_fence`,
    the rule of every fence)."""

    def candidates() -> Iterator[str]:
        yield PACK_FENCE
        digest = hashlib.sha256("\x00".join(texts).encode()).hexdigest()
        yield from (f"#P{digest[i : i + 10].upper()}#" for i in range(len(digest) - 10))
        yield from (f"#PACK{n}#" for n in itertools.count())  # a hash collision in every window

    fence = pick_fence(texts, candidates())
    assert fence is not None  # the count never ends
    return fence


def pack_ids(n: int) -> list[str]:
    return [f"a{i}" for i in range(1, n + 1)]


def output_limit(model_id: str) -> int | None:
    """The most output tokens one request may ask of ``provider/model`` (:data:`OUTPUT_LIMITS`, longest prefix), or
    None where it is not known."""
    matches = [k for k in OUTPUT_LIMITS if model_id.startswith(k)]
    return OUTPUT_LIMITS[max(matches, key=len)] if matches else None


def pack_size(request: LLMRequest) -> int:
    """How many answers' replies ``request`` asks for: the ids of a packed request (:func:`pack_request`), else 1."""
    if request.schema_name != PACK_SCHEMA_NAME:
        return 1
    try:
        return max(1, len(request.schema["properties"]["replies"]["items"]["properties"]["id"]["enum"]))
    except (KeyError, TypeError):
        return 1


def pack_request(requests: Sequence[LLMRequest], *, limit: int | None = None) -> LLMRequest:
    """One request for the single-answer ``requests`` (all of one :func:`pack_key`), their replies under ids
    :func:`pack_ids`; its ``max_tokens`` the sum of theirs, at most ``limit`` (the model's :func:`output_limit`)
    though never less than one answer's own."""
    first = requests[0]
    budget = sum(r.max_tokens for r in requests)
    if limit is not None:
        budget = max(min(budget, limit), max(r.max_tokens for r in requests))
    system = first.messages[0].content
    bodies = [r.messages[1].content for r in requests]
    fence = pack_fence([system, *bodies])
    ids = pack_ids(len(requests))
    blocks = "\n\n".join(
        f"{fence} BEGIN REQUEST {i}\n{body}\n{fence} END REQUEST {i}" for i, body in zip(ids, bodies, strict=True)
    )
    inner = {k: v for k, v in first.schema.items() if k != "$defs"}
    item = {
        "type": "object",
        "properties": {"id": {"type": "string", "enum": ids}, "reply": inner},
        "required": ["id", "reply"],
    }
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"replies": {"type": "array", "items": item}},
        "required": ["replies"],
    }
    if "$defs" in first.schema:
        schema["$defs"] = first.schema["$defs"]
    return LLMRequest(
        messages=(
            Message(role="system", content=system + "\n" + pack_note(fence)),
            Message(role="user", content=blocks),
        ),
        schema=schema,
        schema_name=PACK_SCHEMA_NAME,
        temperature=first.temperature,
        seed=first.seed,
        max_tokens=budget,
        reasoning_effort=first.reasoning_effort,
    )


def share_packed(usage: Usage, requests: Sequence[LLMRequest]) -> list[Usage]:
    """Each packed request's part of what the one call that carried them (:func:`pack_request`) cost: tokens and
    cost in proportion to the length of its block (its user message), each token count rounded down and what is
    left on the last, so that the parts sum to ``usage``; the billed call (unpriced, cached, unsettled) counted on the
    first. The one split of a packed call's usage, for :meth:`~groundjudge.llm.client.LLMClient.complete_packed`,
    provider batch mode and the dry run."""
    weights = [len(r.messages[1].content) for r in requests]
    total = sum(weights) or 1
    out: list[Usage] = []
    left = usage
    for i, w in enumerate(weights):
        if i == len(weights) - 1:
            out.append(left)
            break
        f = w / total
        part = Usage(
            calls=usage.calls if i == 0 else 0,
            unpriced_calls=usage.unpriced_calls if i == 0 else 0,
            cached_calls=usage.cached_calls if i == 0 else 0,
            unsettled_calls=usage.unsettled_calls if i == 0 else 0,
            unsettled_cost_usd=usage.unsettled_cost_usd * f,
            input_tokens=int(usage.input_tokens * f),
            output_tokens=int(usage.output_tokens * f),
            cached_input_tokens=int(usage.cached_input_tokens * f),
            cache_write_tokens=int(usage.cache_write_tokens * f),
            cost_usd=usage.cost_usd * f,
        )
        out.append(part)
        left = left - part
    return out


def split_reply(value: Any, n: int) -> dict[str, Any]:
    """The parts of a packed reply (parsed JSON) by id: only the pack's ids, each given exactly once (an id given
    twice is dropped: neither reply is trusted); anything else is left out."""
    items = value.get("replies") if isinstance(value, dict) else None
    if not isinstance(items, list):
        return {}
    ids = set(pack_ids(n))
    seen: dict[str, Any] = {}
    twice: set[str] = set()
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("id"), str) or "reply" not in item:
            continue
        key = item["id"].strip()
        if key not in ids:
            continue
        if key in seen:
            twice.add(key)
        seen[key] = item["reply"]
    return {k: v for k, v in seen.items() if k not in twice}
