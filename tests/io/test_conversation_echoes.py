"""A tool result that repeats the assistant's own words (the draft it sent as a tool call's arguments, or an earlier
assistant turn) is not evidence for them (``io.conversations.Echoes``): the repeat is blanked in the context, at the
message's own offsets, so quotes of the rest still land; genuine output sharing a shorter phrase, or repeating what
an earlier tool said, stays whole."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groundjudge.config import Config
from groundjudge.errors import InputError
from groundjudge.io.conversations import ECHO_MIN_CHARS, read_turns, source_text
from groundjudge.io.rows import parse_sample
from groundjudge.pipeline.evaluator import Evaluator
from groundjudge.testing import ScriptedLLMServer, route
from tests.conftest import judge_word_for_word, make_test_client, sentences_are_claims

DRAFT = "The Eiffel Tower was completed in 1899 and is 500 metres tall, the tallest structure in Europe."
TOOL = "The Eiffel Tower is in Paris. It was completed in 1889 and is 330 metres tall."
ECHO = f"Saved your draft: {DRAFT}\n\n{TOOL}"
LONG = f"{TOOL} It stands on the Champ de Mars and was designed and built by Gustave Eiffel's company."
WIRES = ["openai", "anthropic", "responses"]


def row(wire: str, via: str, tool: str = ECHO, answer: str = DRAFT, draft: str = DRAFT) -> dict[str, Any]:
    """A trace in ``wire`` whose one tool result is ``tool``; the assistant's ``draft`` is in the call's arguments
    (``via="args"``) or in an earlier turn of its own (``via="turn"``)."""
    args: dict[str, Any] = {"draft": draft} if via == "args" else {"q": "eiffel"}
    said = [draft] if via == "turn" else []
    user = {"role": "user", "content": "Tell me about the Eiffel Tower."}
    if wire == "openai":
        call = {"id": "c1", "type": "function", "function": {"name": "notes", "arguments": json.dumps(args)}}
        messages = [
            user,
            *({"role": "assistant", "content": t} for t in said),
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": tool},
            {"role": "assistant", "content": answer},
        ]
    elif wire == "anthropic":
        result = {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": tool}]}
        messages = [
            user,
            *({"role": "assistant", "content": [{"type": "text", "text": t}]} for t in said),
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "notes", "input": args}]},
            {"role": "user", "content": [result]},
            {"role": "assistant", "content": [{"type": "text", "text": answer}]},
        ]
    else:  # the OpenAI Responses API's items
        messages = [
            user,
            *({"role": "assistant", "content": t} for t in said),
            {"type": "function_call", "call_id": "r1", "name": "notes", "arguments": json.dumps(args)},
            {"type": "function_call_output", "call_id": "r1", "output": tool},
            {"role": "assistant", "content": answer},
        ]
    return {"id": f"{wire}-{via}", "messages": messages}


@pytest.mark.parametrize("via", ["args", "turn"])
@pytest.mark.parametrize("wire", WIRES)
def test_a_tool_result_echoing_the_assistant_holds_no_evidence_for_its_words(wire: str, via: str) -> None:
    r = row(wire, via)
    sample = parse_sample(r, 1)
    (context,), (src,) = sample.contexts, sample.sources or []
    assert DRAFT not in context and "1899" not in context and "500 metres" not in context
    # the genuine output stays, at the message's own offsets: the context is as long as the message's text
    assert len(context) == len(ECHO) and context.index(TOOL) == ECHO.index(TOOL)
    assert context.startswith("Saved your draft: ") and context[ECHO.index(DRAFT) : ECHO.index(TOOL)].strip() == ""
    assert src.note and f"{len(DRAFT)} characters" in src.note and "assistant's own words" in src.note
    turns = read_turns(r["messages"], 1)
    assert source_text(turns, src) == context
    if wire != "anthropic":  # the tool message keeps its text (Anthropic's result is a block of a user message)
        assert turns[src.message or 0].text == ECHO


@pytest.mark.parametrize("wire", WIRES)
def test_a_tool_result_that_is_only_an_echo_leaves_no_evidence(wire: str) -> None:
    with pytest.raises(InputError, match=r"no evidence.*repeats the assistant's own words"):
        parse_sample(row(wire, "args", tool=DRAFT), 1)


@pytest.mark.parametrize("wire", WIRES)
def test_genuine_output_sharing_a_short_phrase_stays_whole(wire: str) -> None:
    shared = DRAFT[: ECHO_MIN_CHARS - 1]  # just under the minimum, word for word
    tool = f"{TOOL} {shared} is a line from a guide."
    sample = parse_sample(row(wire, "args", tool=tool), 1)
    assert sample.contexts == [tool] and (sample.sources or [])[0].note is None


def test_the_assistant_quoting_a_tool_is_not_its_own_words() -> None:
    assert len(LONG) > 2 * ECHO_MIN_CHARS
    # a tool said it first; the assistant repeats it and sends it on; a second tool returns it again: still evidence
    first = {"type": "function", "id": "c1", "function": {"name": "search", "arguments": '{"q": "eiffel"}'}}
    second = {"type": "function", "id": "c2", "function": {"name": "fetch", "arguments": json.dumps({"text": LONG})}}
    messages = [
        {"role": "user", "content": "Tell me about the Eiffel Tower."},
        {"role": "assistant", "content": None, "tool_calls": [first]},
        {"role": "tool", "tool_call_id": "c1", "content": LONG},
        {"role": "assistant", "content": f"I found: {LONG}", "tool_calls": [second]},
        {"role": "tool", "tool_call_id": "c2", "content": f"Page: {LONG}"},
        {"role": "assistant", "content": "It is 330 metres tall."},
    ]
    sample = parse_sample({"id": "q", "messages": messages}, 1)
    assert sample.contexts == [LONG, f"Page: {LONG}"]


def test_the_assistant_quoting_a_document_of_the_row_is_not_its_own_words() -> None:
    r = row("openai", "turn", tool=f"Page: {DRAFT}")  # the earlier turn says what the row's document says
    r["contexts"] = [f"Guide: {DRAFT}"]
    assert parse_sample(r, 1).contexts == [f"Guide: {DRAFT}", f"Page: {DRAFT}"]


def test_an_echo_written_as_json_by_the_tool_is_caught() -> None:
    draft = f'{DRAFT}\nIt said "hello".'
    r = row("openai", "args")
    r["messages"][1]["tool_calls"][0]["function"]["arguments"] = json.dumps({"draft": draft})
    r["messages"][2]["content"] = json.dumps({"saved": draft, "page": TOOL})
    (context,) = parse_sample(r, 1).contexts
    assert DRAFT not in context and "1899" not in context and TOOL in context


@pytest.mark.parametrize("wire", WIRES)
def test_a_long_tool_output_is_not_hashed_when_the_assistant_wrote_nothing_that_long_before(
    wire: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the echo check hashed every character of every source as it read it: a 5 MB tool output took 4 s and 700 MB
    # to read, though a short query before it can echo nothing; now it is hashed only when the assistant wrote
    # ECHO_MIN_CHARS characters or more before a tool result
    import groundjudge.io.conversations as conversations

    hashed: list[int] = []
    pieces = conversations._pieces
    monkeypatch.setattr(conversations, "_pieces", lambda text: (hashed.append(len(text)), pieces(text))[1])
    big = TOOL + " x y z" * 20_000
    (context,) = parse_sample(row(wire, "args", tool=big, answer=TOOL, draft="eiffel"), 1).contexts
    assert context == big
    assert hashed == []
    # with a draft of the minimum length before it, the output is read for echoes as before
    echoed = parse_sample(row(wire, "args", tool=f"{DRAFT}\n\n{big}", answer=TOOL), 1).contexts[0]
    assert DRAFT not in echoed and echoed.endswith(big) and hashed


# -- end to end: the echoed draft's claim is not supported; a quote of the genuine part lands in its message -------


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_the_echoed_draft_supports_nothing_and_quotes_of_the_rest_land(
    provider: str, shared_nli: Any, tmp_path: Path
) -> None:
    answer = f"{DRAFT} It was completed in 1889 and is 330 metres tall."
    rows = [row(wire, via, answer=answer) for wire in ("openai", "anthropic") for via in ("args", "turn")]
    with ScriptedLLMServer(route({"claims": sentences_are_claims, "judge": judge_word_for_word})) as server:
        client = make_test_client(server, provider)
        config = Config(mode="cascade", qa=False, t_support=0.99, t_contradict=0.99, cache_dir=str(tmp_path))
        reports = list(Evaluator(config, nli=shared_nli, client=client).evaluate_many(rows))
    for report in reports:
        assert report.verdict != "ERROR", report.errors
        by_text = {c.claim.text: c for c in report.claims}
        assert by_text[DRAFT].label != "SUPPORTED"
        genuine = by_text["It was completed in 1889 and is 330 metres tall."]
        assert genuine.label == "SUPPORTED"
        (quote,) = genuine.quotes
        src = quote.source
        assert src is not None and src.start is not None and src.end is not None
        assert ECHO[src.start : src.end] == quote.text == genuine.claim.text.rstrip(".")  # the result as it came


# -- the property ------------------------------------------------------------------------------------------------

_words = st.lists(st.text("abcdefghij", min_size=2, max_size=7), min_size=30, max_size=40).map(" ".join)


@settings(max_examples=60, deadline=None, database=None)
@given(st.sampled_from(WIRES), st.sampled_from(["args", "turn"]), _words, _words, _words)
def test_property_no_piece_of_an_echo_of_the_minimum_length_is_evidence(
    wire: str, via: str, draft: str, before: str, after: str
) -> None:
    tool = f"{before}\n{draft}\n{after}"
    r = row(wire, via, tool=tool, answer=draft, draft=draft)
    try:
        sample = parse_sample(r, 1)
    except InputError:
        return  # the whole result was the assistant's words
    (context,), (src,) = sample.contexts, sample.sources or []
    k = ECHO_MIN_CHARS
    assert len(context) == len(tool) and source_text(read_turns(r["messages"], 1), src) == context
    assert not any(draft[i : i + k] in context for i in range(len(draft) - k + 1))
    # what is not blanked is the tool's text, character for character
    assert all(c == t or c == " " for c, t in zip(context, tool, strict=True))
