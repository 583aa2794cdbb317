"""Conversation shapes users commonly produce that the reader misread (groundjudge.io.conversations).

A final answer given as a refusal or as speech was read as no text, so an earlier assistant turn was judged in place
of the answer.
"""

from __future__ import annotations

from typing import Any

import pytest

from groundjudge.errors import InputError
from groundjudge.io.conversations import each_turn
from groundjudge.io.rows import parse_sample

EVIDENCE = "Paris is the capital of France."
EARLIER = "Paris is the capital of France, as I said."
HEAD: list[dict[str, Any]] = [
    {"role": "user", "content": "What is the capital of France?"},
    {"role": "tool", "content": EVIDENCE},
    {"role": "assistant", "content": EARLIER},
]
REFUSAL = "I'm sorry, I can't help with that."


@pytest.mark.parametrize(
    "last",
    [
        {"role": "assistant", "content": None, "refusal": REFUSAL},  # OpenAI chat: message.refusal
        {"role": "assistant", "content": [{"type": "refusal", "refusal": REFUSAL}]},  # a refusal content part
        {"type": "message", "role": "assistant", "content": [{"type": "refusal", "refusal": REFUSAL}]},  # Responses
        {"role": "assistant", "content": None, "audio": {"id": "audio_1", "transcript": REFUSAL}},  # a spoken reply
    ],
    ids=["refusal", "refusal-part", "responses-refusal", "audio"],
)
def test_a_final_refusal_or_spoken_reply_is_the_answer_not_an_earlier_turn(last: dict[str, Any]) -> None:
    row = {"id": "r", "messages": [*HEAD, last]}
    s = parse_sample(row, 1)
    assert s.answer == REFUSAL  # was EARLIER: the turn before the answer, judged in its place
    assert s.contexts == [EVIDENCE]
    assert [r["id"] for r in each_turn([row])] == ["r#turn1", "r#turn2"]


def test_a_spoken_reply_without_its_transcript_is_an_input_error_naming_it() -> None:
    last = {"role": "assistant", "content": None, "audio": {"id": "audio_1"}}
    with pytest.raises(InputError) as err:
        parse_sample({"id": "r", "messages": [*HEAD, last]}, 3)
    assert (err.value.row, err.value.field) == (3, "messages[3].audio")
    assert "transcript" in err.value.reason
