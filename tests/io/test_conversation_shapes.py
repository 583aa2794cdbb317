"""Conversation shapes users commonly produce that the reader misread (groundjudge.io.conversations).

Each was read wrongly without an error, or refused as if it were a typo: a final answer given as a refusal or as
speech was read as no text, so an earlier assistant turn was judged in place of the answer; the OpenAI Responses
API's items (``function_call``, ``function_call_output``, ``reasoning``) were refused as unknown roles; a tool's own
JSON whose objects carry a ``type`` key, and an Anthropic tool result holding search results or a document, were
refused as unknown content parts.
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


def test_responses_api_items_are_read_tool_calls_outputs_and_reasoning() -> None:
    items: list[dict[str, Any]] = [
        {"role": "developer", "content": "Answer from the tools."},
        {"role": "user", "content": [{"type": "input_text", "text": "Capital of France?"}]},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Paris is the capital."}]},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "lookup", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": EVIDENCE},
        {"type": "function_call_output", "call_id": "call_2", "output": [{"type": "input_text", "text": "Two."}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Paris."}]},
    ]  # fmt: skip
    s = parse_sample({"id": "resp", "messages": items}, 1)
    assert s.answer == "Paris." and s.question == "Capital of France?"
    assert s.contexts == [EVIDENCE, "Two."]  # the reasoning summary is the assistant's own: never evidence
    first, second = s.sources or []
    assert (first.message, first.role, first.tool_call_id, first.tool_name, first.note) == (4, "tool", "call_1",
                                                                                          "lookup", None)  # fmt: skip
    assert second.tool_call_id == "call_2" and "matches no earlier tool call" in (second.note or "")
    assert [t.role for t in s.conversation or []] == ["system", "user", "assistant", "assistant", "tool", "tool",
                                                      "assistant"]  # fmt: skip


@pytest.mark.parametrize("kind", ["file_search_call", "mcp_call", "item_reference"])
def test_a_responses_item_this_reader_does_not_read_is_an_input_error_naming_its_type(kind: str) -> None:
    items = [*HEAD[:2], {"type": kind, "id": "x"}, {"role": "assistant", "content": "Paris."}]
    with pytest.raises(InputError) as err:
        parse_sample({"id": "x", "messages": items}, 2)
    assert (err.value.row, err.value.field) == (2, "messages[2].type")
    assert kind in err.value.reason and "Responses" in err.value.reason


def test_a_tools_own_objects_with_a_type_key_are_its_json_output() -> None:
    flights = [{"type": "flight", "number": "AF1", "from": "Paris"}, {"type": "train", "number": "TGV9"}]
    s = parse_sample({"messages": [HEAD[0], {"role": "tool", "content": flights}, HEAD[2]]}, 1)
    assert s.contexts == ['[{"type": "flight", "number": "AF1", "from": "Paris"}, {"type": "train", "number": "TGV9"}]']


def test_search_results_and_a_text_document_inside_an_anthropic_tool_result_are_its_text() -> None:
    text = [{"type": "text", "text": EVIDENCE}]
    found = {"type": "search_result", "source": "https://x", "title": "t", "content": text}
    doc = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "Lyon is in France."}}
    pdf = {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0x"}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": [found, doc, pdf]}
    messages = [
        HEAD[0],
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "search", "input": {}}]},
        {"role": "user", "content": [result]},
        {"role": "assistant", "content": "Paris."},
    ]
    s = parse_sample({"messages": messages}, 1)
    assert s.contexts == [EVIDENCE + "\n\nLyon is in France."]
    assert (s.sources or [])[0].tool_name == "search"
