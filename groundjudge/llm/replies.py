"""What a JSON reply must be: how it is asked for, parsed, judged, and the re-ask that names what was wrong.

:class:`~groundjudge.llm.client.LLMClient` uses these for direct calls and for batch results alike, so a reply
is accepted (and cached) by one rule whichever way it came.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from groundjudge.llm.base import LLMResponse
from groundjudge.models import Message

T = TypeVar("T", bound=BaseModel)

_FENCE = re.compile(r"^```(?:json)?\s*\n?(.*?)\n?```$", re.DOTALL)


def parse_json_reply(text: str) -> Any:
    """Parse a reply as JSON, tolerating only surrounding whitespace and one Markdown code fence."""
    stripped = text.strip()
    if m := _FENCE.match(stripped):
        stripped = m.group(1).strip()
    return json.loads(stripped)


def judge_reply(
    response: LLMResponse, schema: type[T], check: Callable[[T], str | None] | None
) -> tuple[T | None, str, T | None]:
    """(accepted value, "", None), or (None, the problem, the schema-valid value that failed the check if any).

    A reply cut off at the token limit is never accepted, even when what came back parses and validates: an
    Anthropic tool call cut off hands over what of its input was written (a claims list without its last claims),
    and an accepted reply is cached. It is re-asked like invalid JSON."""
    if response.truncated:
        try:
            parse_json_reply(response.text)
        except json.JSONDecodeError as exc:
            return None, f"the reply was cut off at the token limit: {exc}", None
        return None, "the reply was cut off at the token limit (what came back may be only part of it)", None
    try:
        value = schema.model_validate(parse_json_reply(response.text))
    except json.JSONDecodeError as exc:
        return None, f"not valid JSON: {exc}", None
    except ValidationError as exc:
        problem = "JSON does not match the schema: " + "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}" for e in exc.errors()[:10]
        )
        return None, problem, None
    rejected = check(value) if check is not None else None
    if rejected is None:
        return value, "", None
    return None, f"the answer is incomplete or inconsistent: {rejected}", value


def reask(response: LLMResponse, problem: str) -> tuple[Message, Message]:
    """The two messages a re-ask appends: the rejected reply as the assistant's turn, then what was wrong with it."""
    assistant = Message(role="assistant", content=response.text or "(empty reply)")
    correction = Message(
        role="user",
        content=f"Your reply was rejected: {problem}. Reply again with one complete JSON object "
        "that validates against the schema, and nothing else." + (" Keep it shorter." if response.truncated else ""),
    )
    return assistant, correction
