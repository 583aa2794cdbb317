"""Issue 34: the JSON schema is sent once. As the structured-output format where the provider takes one (OpenAI
``response_format`` json_schema, Anthropic's forced tool), lean (no titles or descriptions, references inlined); as
text only where the model may not see it otherwise (json_object mode, OpenAI-compatible servers)."""

from __future__ import annotations

import json
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from groundjudge.llm import LLMClient, get_provider
from groundjudge.llm.base import wire_schema
from groundjudge.models import Message
from groundjudge.stages.claims import ClaimsAndQuestions
from groundjudge.stages.judge import VerifyReply
from groundjudge.testing import Reply, ScriptedLLMServer
from tests.conftest import make_test_client


class Quote(BaseModel):
    source: int = Field(description="passage number")
    text: str


class Item(BaseModel):
    """An item."""

    title: str = Field(description="a property named title stays")
    verdict: Literal["SUPPORTED", "UNSUPPORTED"]
    quotes: list[Quote]


class Reply1(BaseModel):
    items: list[Item]


ASK = [Message(role="system", content="You grade claims."), Message(role="user", content="Claim: the sky is blue.")]
GOOD = {"items": [{"title": "t", "verdict": "SUPPORTED", "quotes": [{"source": 1, "text": "the sky is blue"}]}]}


def text_of(body: dict[str, Any]) -> str:
    system = body.get("system") or ""
    system = system if isinstance(system, str) else "".join(b["text"] for b in system)
    rest = [m["content"] if isinstance(m["content"], str) else json.dumps(m["content"]) for m in body["messages"]]
    return "\n".join([system, *rest])


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_the_schema_goes_once_as_the_providers_format_never_as_text(server: ScriptedLLMServer, provider: str) -> None:
    server.push(Reply.json(GOOD))
    value, _ = make_test_client(server, provider).complete_json(ASK, Reply1)
    assert value == Reply1.model_validate(GOOD)
    (req,) = server.requests
    assert "JSON Schema" not in text_of(req.body) and "quotes" not in text_of(req.body)
    if provider == "openai":
        sent = req.body["response_format"]["json_schema"]["schema"]
    else:
        sent = req.body["tools"][0]["input_schema"]
        assert req.body["tool_choice"] == {"type": "tool", "name": "Reply1"}
    item = sent["properties"]["items"]["items"]
    assert set(item["properties"]) == {"title", "verdict", "quotes"}  # a property named "title" is kept
    assert "$defs" not in sent and "$ref" not in json.dumps(sent)
    assert '"description"' not in json.dumps(sent) and '"title": "' not in json.dumps(sent)


@pytest.mark.parametrize("json_mode", ["object", "schema"])
def test_an_openai_compatible_server_gets_the_schema_as_text_once(server: ScriptedLLMServer, json_mode: str) -> None:
    server.push(Reply.json(GOOD))
    provider = get_provider(f"openai-compatible/qwen2.5:7b@{server.openai_base_url}")
    provider.json_mode = json_mode  # type: ignore[attr-defined]
    LLMClient(provider, sleep=lambda s: None).complete_json(ASK, Reply1)
    (req,) = server.requests
    system = req.body["messages"][0]["content"]
    assert system.startswith("You grade claims.") and system.count("JSON Schema") == 1
    assert req.body["response_format"]["type"] == ("json_object" if json_mode == "object" else "json_schema")


def test_openai_json_object_mode_puts_the_schema_in_the_text(server: ScriptedLLMServer) -> None:
    server.push(Reply.json(GOOD))
    client = make_test_client(server, "openai")
    client.provider.json_mode = "object"  # type: ignore[attr-defined]
    client.complete_json(ASK, Reply1)
    (req,) = server.requests
    assert req.body["response_format"] == {"type": "json_object"}
    assert req.body["messages"][0]["content"].count("JSON Schema") == 1


@pytest.mark.parametrize("schema", [VerifyReply, ClaimsAndQuestions])
def test_the_stages_wire_schemas_are_lean(schema: type[BaseModel]) -> None:
    full, lean = schema.model_json_schema(), wire_schema(schema.model_json_schema())
    assert len(json.dumps(lean)) < 0.6 * len(json.dumps(full))
    assert "$ref" not in json.dumps(lean)


class Node(BaseModel):
    name: str
    children: list[Node] = []


def test_a_recursive_schema_keeps_its_definitions() -> None:
    lean = wire_schema(Node.model_json_schema())
    assert "$defs" in lean and "Node" in lean["$defs"] and "$ref" in json.dumps(lean)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["title", "description", "name", "type", "x"]), min_size=1, max_size=4, unique=True))
def test_wire_schema_keeps_every_property_name(names: list[str]) -> None:
    schema = {
        "title": "T",
        "type": "object",
        "properties": {n: {"type": "string", "title": n.title(), "description": "d"} for n in names},
        "required": names,
    }
    lean = wire_schema(schema)
    assert list(lean["properties"]) == names and lean["required"] == names
    assert all(p == {"type": "string"} for p in lean["properties"].values())
    assert "title" not in lean and "description" not in lean


def test_the_budget_holds_a_schema_sent_twice() -> None:
    # An OpenAI-compatible server gets the schema as the format and as text: a wide schema sent that way is longer
    # than the messages and the pydantic schema once; the reservation holds what is sent (one token per byte).
    from pydantic import create_model

    from groundjudge.llm import Price
    from groundjudge.llm.base import billed_text

    wide: Any = create_model("Wide", **{f"f{i}": (str, ...) for i in range(300)})  # type: ignore[call-overload]
    provider = get_provider("openai-compatible/qwen2.5:7b@http://127.0.0.1:9/v1")
    client = LLMClient(provider, price=Price(1.0, 0.0))
    request = client.request_for(ASK, wide)
    sent = len(billed_text(provider, request).encode())
    assert sent > sum(len(m.content.encode()) for m in ASK) + len(json.dumps(request.schema).encode()) + 1024
    assert client.costs.worst_case_cost(request) * 1e6 >= sent


def test_each_schema_is_made_once_and_handed_out_fresh() -> None:
    """Every call reads its reply model's schema several times (the body, the pace, the budget's hold): pydantic
    builds it once per model, the lean and strict forms once per schema, and each caller gets its own dict, so a
    caller that changes one changes nothing for the next call."""
    from groundjudge.llm.base import model_schema
    from groundjudge.llm.openai import strict_schema

    built = []

    class Counted(BaseModel):
        verdict: Literal["SUPPORTED", "UNSUPPORTED"]
        quotes: list[Quote]

        @classmethod
        def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
            built.append(cls)
            return super().model_json_schema(*args, **kwargs)

    first = model_schema(Counted)
    assert first == BaseModel.model_json_schema.__func__(Counted)  # type: ignore[attr-defined]
    first["properties"]["verdict"]["enum"].append("CHANGED")
    assert model_schema(Counted)["properties"]["verdict"]["enum"] == ["SUPPORTED", "UNSUPPORTED"]
    assert len(built) == 1
    for make in (wire_schema, strict_schema):
        lean = make(model_schema(Counted))
        lean["properties"].clear()
        assert make(model_schema(Counted))["properties"], make.__name__
    assert strict_schema(wire_schema(model_schema(Counted)))["additionalProperties"] is False
