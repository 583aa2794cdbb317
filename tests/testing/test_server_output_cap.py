"""The scripted server holds every reply to the request's output cap, as both APIs do: a reply longer than
``max_tokens`` / ``max_completion_tokens`` is cut off (OpenAI ``finish_reason`` length, Anthropic ``stop_reason``
max_tokens) and billed exactly the cap. It used to hold only a reasoning model's replies: any other came back whole,
billed past the cap, and the client warned that a call cost more than it had reserved, which no provider allows."""

from __future__ import annotations

import json
import logging
from typing import Any

import anthropic
import openai
import pytest
from pydantic import BaseModel

from groundjudge import errors
from groundjudge.llm import Price
from groundjudge.models import Message
from groundjudge.testing import Reply, ScriptedLLMServer
from tests.conftest import make_test_client

TEXT = "".join(f"word{i:03d} " for i in range(50))  # 400 characters: 100 tokens at the server's ~4 a token
CLAIMS = {"claims": [{"text": f"claim number {i} says something"} for i in range(20)]}  # ~200 tokens of JSON
TOOL = {"name": "answer", "description": "the reply", "input_schema": {"type": "object"}}


def openai_sdk(server: ScriptedLLMServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.openai_base_url, api_key="test", max_retries=0)


def anthropic_sdk(server: ScriptedLLMServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.anthropic_base_url, api_key="test", max_retries=0)


@pytest.mark.parametrize("cap_param", ["max_tokens", "max_completion_tokens"])
def test_openai_cuts_a_reply_longer_than_the_cap(server: ScriptedLLMServer, cap_param: str) -> None:
    server.push(Reply.text(TEXT))
    cap: dict[str, Any] = {cap_param: 10}
    reply = openai_sdk(server).chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], **cap
    )
    choice = reply.choices[0]
    assert choice.finish_reason == "length"
    assert choice.message.content == TEXT[:40]  # the share of the text that fits: 10 of its 100 tokens
    assert reply.usage is not None and reply.usage.completion_tokens == 10


def test_openai_hands_over_a_reply_that_fits_as_scripted(server: ScriptedLLMServer) -> None:
    server.push(Reply.text(TEXT), Reply.text(TEXT))
    sdk = openai_sdk(server)
    caps: list[dict[str, Any]] = [{"max_tokens": 100}, {}]  # exactly the cap, and no cap at all
    for kw in caps:
        reply = sdk.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "hi"}],
            **kw,
        )
        assert reply.choices[0].finish_reason == "stop" and reply.choices[0].message.content == TEXT
        assert reply.usage is not None and reply.usage.completion_tokens == 100


def test_openai_holds_scripted_output_tokens_to_the_cap(server: ScriptedLLMServer) -> None:
    # a reply scripted at 1,000 tokens, cap 250: a quarter of its text, billed 250
    server.push(Reply.text(TEXT, output_tokens=1000))
    reply = openai_sdk(server).chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], max_tokens=250
    )
    assert reply.choices[0].finish_reason == "length" and reply.choices[0].message.content == TEXT[:100]
    assert reply.usage is not None and reply.usage.completion_tokens == 250


def test_anthropic_cuts_a_text_reply_longer_than_the_cap(server: ScriptedLLMServer) -> None:
    server.push(Reply.text(TEXT), Reply.text(TEXT))
    sdk = anthropic_sdk(server)
    message = sdk.messages.create(
        model="claude-3-5-haiku-latest", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
    )
    assert message.stop_reason == "max_tokens" and message.usage.output_tokens == 10
    assert [b.text for b in message.content if b.type == "text"] == [TEXT[:40]]
    whole = sdk.messages.create(
        model="claude-3-5-haiku-latest", max_tokens=100, messages=[{"role": "user", "content": "hi"}]
    )
    assert whole.stop_reason == "end_turn" and whole.usage.output_tokens == 100
    assert [b.text for b in whole.content if b.type == "text"] == [TEXT]


def test_anthropic_cuts_a_forced_tool_call_to_what_of_its_input_parsed(server: ScriptedLLMServer) -> None:
    server.push(Reply.json(CLAIMS), Reply.json(CLAIMS))
    sdk = anthropic_sdk(server)
    ask: dict[str, Any] = dict(
        model="claude-3-5-haiku-latest",
        messages=[{"role": "user", "content": "hi"}],
        tools=[TOOL],
        tool_choice={"type": "tool", "name": "answer"},
    )
    message = sdk.messages.create(max_tokens=50, **ask)
    assert message.stop_reason == "max_tokens" and message.usage.output_tokens == 50
    (call,) = [b for b in message.content if b.type == "tool_use"]
    claims = call.input["claims"]
    assert 0 < len(claims) < len(CLAIMS["claims"]) and claims[:-1] == CLAIMS["claims"][: len(claims) - 1]
    whole = sdk.messages.create(max_tokens=4096, **ask)
    assert whole.stop_reason == "tool_use" and whole.usage.output_tokens == len(json.dumps(CLAIMS)) // 4
    assert [b.input for b in whole.content if b.type == "tool_use"] == [CLAIMS]


def test_a_batched_reply_is_held_to_its_cap(server: ScriptedLLMServer) -> None:
    server.batch_polls = 0
    server.push(Reply.text(TEXT), Reply.text(TEXT))
    sdk = openai_sdk(server)
    line = {
        "custom_id": "r1",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 10},
    }
    upload = sdk.files.create(file=("in.jsonl", json.dumps(line).encode()), purpose="batch")
    batch = sdk.batches.create(input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h")
    done = sdk.batches.retrieve(batch.id)
    assert done.status == "completed" and done.output_file_id is not None
    (result,) = [json.loads(x) for x in sdk.files.content(done.output_file_id).text.splitlines()]
    body = result["response"]["body"]
    assert body["choices"][0]["finish_reason"] == "length" and body["usage"]["completion_tokens"] == 10

    claude = anthropic_sdk(server)
    params: Any = {
        "model": "claude-3-5-haiku-latest",
        "max_tokens": 10,
        "messages": [{"role": "user", "content": "hi"}],
    }
    created = claude.messages.batches.create(requests=[{"custom_id": "r1", "params": params}])
    assert claude.messages.batches.retrieve(created.id).processing_status == "ended"
    (entry,) = list(claude.messages.batches.results(created.id))
    assert entry.result.type == "succeeded"
    assert entry.result.message.stop_reason == "max_tokens" and entry.result.message.usage.output_tokens == 10


class Claims(BaseModel):
    claims: list[dict[str, str]]


LONG = {"claims": [{"text": f"claim number {i} says something"} for i in range(300)]}  # ~3,000 tokens of JSON


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_reply_past_the_cap_costs_no_more_than_the_client_reserved(
    server: ScriptedLLMServer, provider: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The outside symptom: a reply of ~3,000 tokens against a cap of 50 was taken whole and billed 3,000 tokens,
    past the budget's hold for the call (its input bytes and the cap: ~1,300 tokens here), and the client warned
    that the call cost more than it reserved. Now it is cut off, billed the cap, and re-asked."""
    server.push(*[Reply.json(LONG)] * 2)
    client = make_test_client(server, provider, max_tokens=50, price=Price(1.0, 1.0), max_reasks=1)
    problems: list[str] = []
    with caplog.at_level(logging.WARNING):
        try:
            client.complete_json([Message(role="user", content="list the claims")], Claims)
        except errors.InvalidOutputError as failed:
            problems = failed.errors
    assert not [r for r in caplog.records if "more than" in r.getMessage()]
    assert len(problems) == 2 and all("token limit" in p for p in problems)
    billed = [
        (r.reply_usage or {}).get("completion_tokens", (r.reply_usage or {}).get("output_tokens"))
        for r in server.requests
    ]
    assert billed == [50, 50]
