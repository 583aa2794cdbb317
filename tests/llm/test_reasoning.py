"""OpenAI's reasoning models (o1, o3, o4-mini, the gpt-5 family): the output cap they are sent (their reasoning counts
against it), ``reasoning_effort``, what their reasoning costs, and every other model's requests left as they were."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import openai
import pytest
from pydantic import BaseModel

from groundjudge import errors
from groundjudge.config import Config
from groundjudge.llm import Ledger, price_for
from groundjudge.llm.anthropic import AnthropicProvider
from groundjudge.llm.base import REASONING_MAX_TOKENS
from groundjudge.llm.client import LLMClient
from groundjudge.llm.openai import OpenAIProvider
from groundjudge.llm.packing import pack_request
from groundjudge.models import Message
from groundjudge.pipeline import Evaluator
from groundjudge.testing import Reply, ScriptedLLMServer
from tests.conftest import SHARED_MODEL, make_test_client

ASK = [Message(role="system", content="You grade claims."), Message(role="user", content="Is the sky blue?")]


class Verdict(BaseModel):
    label: str


GOOD = {"label": "SUPPORTED"}


def test_a_reasoning_model_is_sent_a_cap_with_room_for_its_reasoning(server: ScriptedLLMServer) -> None:
    """o4-mini reasons with tokens that count against max_completion_tokens: with the cap of 4096 sized for the
    visible reply, a call that reasoned 6,000 tokens came back cut off before its answer (a truncated reply,
    billed and wasted). It is sent REASONING_MAX_TOKENS now; the reasoning is billed as output, and the budget's
    hold for the call in flight is priced on the cap actually sent."""
    server.push(Reply.json(GOOD, reasoning_tokens=6000, output_tokens=5))
    client = make_test_client(server, model="openai/o4-mini", ledger=Ledger(budget_usd=10.0))
    value, usage = client.complete_json(ASK, Verdict)
    assert value.label == "SUPPORTED"
    (req,) = server.requests
    assert req.body["max_completion_tokens"] == REASONING_MAX_TOKENS and "max_tokens" not in req.body
    assert "reasoning_effort" not in req.body  # not set: the model's own
    assert req.reply_usage is not None and req.reply_usage["completion_tokens_details"] == {"reasoning_tokens": 6000}
    price = price_for("openai/o4-mini")
    assert price is not None
    assert usage.output_tokens == 6005  # reasoning is billed as output
    assert usage.cost_usd == pytest.approx(price.cost(usage.input_tokens, 6005))
    request = client.request_for(ASK, Verdict)
    hold = client.costs.worst_case_cost(request)
    assert hold >= REASONING_MAX_TOKENS * price.output_per_mtok / 1e6
    assert request.max_tokens == client.provider.build_params(request)["max_completion_tokens"]  # type: ignore[attr-defined]


def test_a_reply_whose_reasoning_fills_the_cap_is_cut_off_as_the_api_does(server: ScriptedLLMServer) -> None:
    # the scripted server holds reasoning to the cap sent: with a cap of 4096 the same reply has no room left
    server.push(Reply.json(GOOD, reasoning_tokens=6000, output_tokens=5))
    client = make_test_client(server, model="openai/o4-mini", max_tokens=4096, max_reasks=0)
    with pytest.raises(errors.GroundjudgeError) as failed:
        client.complete_json(ASK, Verdict)
    assert "truncat" in str(failed.value).lower() or "cut" in str(failed.value).lower(), failed.value
    assert server.requests[0].reply_usage == {
        "prompt_tokens": server.requests[0].reply_usage["prompt_tokens"],  # type: ignore[index]
        "completion_tokens": 4096,
        "total_tokens": server.requests[0].reply_usage["prompt_tokens"] + 4096,  # type: ignore[index]
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 6000},
    }


@pytest.mark.parametrize("model", ["o3", "o4-mini", "gpt-5-mini", "o1"])
def test_the_scripted_server_refuses_max_tokens_from_a_reasoning_model_as_openai_does(
    server: ScriptedLLMServer, model: str
) -> None:
    sdk = openai.OpenAI(base_url=server.openai_base_url, api_key="test", max_retries=0)
    messages = [{"role": "user", "content": "hi"}]
    with pytest.raises(openai.BadRequestError) as refused:
        sdk.chat.completions.create(model=model, messages=messages, max_tokens=10)  # type: ignore[arg-type]
    assert refused.value.param == "max_tokens" and refused.value.code == "unsupported_parameter"
    assert "Use 'max_completion_tokens' instead" in refused.value.message
    server.push(Reply.text("ok"))
    reply = sdk.chat.completions.create(model=model, messages=messages, max_completion_tokens=10)  # type: ignore[arg-type]
    assert reply.choices[0].message.content == "ok"
    with pytest.raises(openai.BadRequestError) as no_effort:
        sdk.chat.completions.create(model="gpt-4o-mini", messages=messages, reasoning_effort="low")  # type: ignore[arg-type]
    assert no_effort.value.param == "reasoning_effort"


def test_reasoning_effort_is_a_setting_sent_and_keyed_only_when_set(
    server: ScriptedLLMServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """reasoning_effort (Config, --reasoning-effort) reaches the judge's body and its cache key, and the batch
    API's body (the same build_params); a model that does not take it is refused before any call."""
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    base = dict(
        llm="openai/o4-mini",
        base_url=server.openai_base_url,
        mode="llm",
        cache_dir=str(tmp_path / "c"),
        nli_model=str(SHARED_MODEL),
    )
    low = Evaluator(Config(**base, reasoning_effort="low"))  # type: ignore[arg-type]
    plain = Evaluator(Config(**base))  # type: ignore[arg-type]
    assert low.client is not None and plain.client is not None
    server.push(Reply.json(GOOD, reasoning_tokens=50))
    value, _ = low.client.complete_json(ASK, Verdict)
    assert value.label == "SUPPORTED" and server.requests[-1].body["reasoning_effort"] == "low"
    assert low.client.cache_key(ASK, Verdict, None) != plain.client.cache_key(ASK, Verdict, None)
    # the reports name it (so a --resume under another effort is refused), and only when it is set
    assert low.versions()["reasoning_effort"] == "low" and "reasoning_effort" not in plain.versions()
    request = low.client.request_for(ASK, Verdict)
    batch_api = low.client.provider.batch_api()
    assert batch_api is not None
    body = batch_api.params(request)
    assert body["reasoning_effort"] == "low" and body["max_completion_tokens"] == REASONING_MAX_TOKENS
    assert "max_tokens" not in body and "temperature" not in body
    assert pack_request([request, request], limit=100_000).reasoning_effort == "low"  # packed calls keep it
    with pytest.raises(errors.ConfigError, match="openai/gpt-4o-mini is not a reasoning model"):
        Evaluator(Config(**{**base, "llm": "openai/gpt-4o-mini"}, reasoning_effort="low"))  # type: ignore[arg-type]
    with pytest.raises(errors.ConfigError, match="reasoning_effort"):
        Config.make(reasoning_effort="extreme")


def test_other_models_requests_and_cache_keys_are_unchanged() -> None:
    """The bodies and cache keys of every model but OpenAI's reasoning ones, as they were before reasoning models
    got their own cap and reasoning_effort: a changed key would miss every cache users hold."""
    providers = [
        OpenAIProvider("gpt-4o-mini", api_key="k"),
        OpenAIProvider("qwen", api_key="k", base_url="http://h/v1", name="openai-compatible", json_mode="auto"),
        AnthropicProvider("claude-haiku-4-5", api_key="k"),
    ]
    seen = []
    for provider in providers:
        client = LLMClient(provider)  # type: ignore[arg-type]
        body = provider.build_params(client.request_for(ASK, Verdict))
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]
        seen.append((provider.name, client.cache_key(ASK, Verdict, None), digest))
    assert seen == [  # computed at 30478e1, before reasoning models had a cap or reasoning_effort of their own
        ("openai", "llm:842e379f48c6e3d1453e50b651812c468dd007ccec867b75cccdf5d8d74497c6", "d7fbb1ed7d7154ef"),
        (
            "openai-compatible",
            "llm:a9a763c843f67dcfde92455ee5ff33faf5805a3c36d50b5c01a9862e5ca09077",
            "9fd45690ede15940",
        ),
        ("anthropic", "llm:9471a3551b7ced5ab7d594f6faa2fbabf8fbd4ffae7a29c067199b740e844189", "8b647c4a4253c999"),
    ]


def test_a_sampling_setting_a_model_is_never_sent_is_no_part_of_its_cache_key() -> None:
    """Anthropic is sent neither a temperature nor a seed, and OpenAI's reasoning models no temperature, yet both were
    in the cache key: changing them re-paid for the same reply. They are keyed at their defaults now (so the replies
    cached at the defaults keep their keys, as the test above pins); a model that is sent them keeps them apart."""

    def key(provider: Any, **settings: Any) -> str:
        return LLMClient(provider, **settings).cache_key(ASK, Verdict, None)  # type: ignore[arg-type]

    claude = AnthropicProvider("claude-haiku-4-5", api_key="k")
    assert key(claude, temperature=0.7, seed=3) == key(claude)
    o4 = OpenAIProvider("o4-mini", api_key="k")
    assert key(o4, temperature=0.7) == key(o4) and key(o4, seed=3) != key(o4)  # it is sent a seed
    chat = OpenAIProvider("gpt-4o-mini", api_key="k")
    assert key(chat, temperature=0.7) != key(chat) and key(chat, seed=3) != key(chat)
    no_seed = OpenAIProvider("qwen", api_key="k", base_url="http://h/v1", name="openai-compatible", send_seed=False)
    assert key(no_seed, seed=3) == key(no_seed) and key(no_seed, temperature=0.7) != key(no_seed)


def test_versions_name_the_effort_the_judge_is_sent_with_a_client_handed_in(
    server: ScriptedLLMServer, tiny_nli: Path, tmp_path: Path
) -> None:
    """An Evaluator given its client (Python) makes reports with that client's reasoning_effort, whatever its
    config says: versions read the client's, so a resume under another effort is refused, and a config's effort the
    client does not send is not claimed."""
    cache = str(tmp_path / "c")
    high = make_test_client(server, model="openai/o4-mini", reasoning_effort="high")
    plain = make_test_client(server, model="openai/o4-mini")
    handed = Evaluator(Config(mode="llm", nli_model=str(tiny_nli), cache_dir=cache), client=high)
    assert handed.versions()["reasoning_effort"] == "high"
    claimed = Evaluator(
        Config(mode="llm", nli_model=str(tiny_nli), cache_dir=cache, reasoning_effort="low"), client=plain
    )
    assert "reasoning_effort" not in claimed.versions()


def test_the_second_judge_reasons_as_long_as_its_own_setting_says(
    server: ScriptedLLMServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """second_judge_reasoning_effort (--second-judge-reasoning-effort) reaches the second judge's body, its cache key
    and the reports' versions, and never the first judge's; it goes with a second judge, and a second judge that does
    not take it is refused before any call."""
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    base: dict[str, Any] = dict(
        llm="openai/gpt-4o-mini",
        base_url=server.openai_base_url,
        mode="cascade",
        cache_dir=str(tmp_path / "c"),
        nli_model=str(SHARED_MODEL),
        second_judge="openai/o4-mini",
        second_judge_base_url=server.openai_base_url,
    )
    low = Evaluator(Config(**base, second_judge_reasoning_effort="low"))
    plain = Evaluator(Config(**base))
    assert low.client is not None and low.second_client is not None and plain.second_client is not None
    server.push(Reply.json(GOOD, reasoning_tokens=50))
    value, _ = low.second_client.complete_json(ASK, Verdict)
    assert value.label == "SUPPORTED" and server.requests[-1].body["reasoning_effort"] == "low"
    server.push(Reply.json(GOOD))
    low.client.complete_json(ASK, Verdict)
    assert "reasoning_effort" not in server.requests[-1].body  # the first judge's own setting: none
    assert low.second_client.cache_key(ASK, Verdict, None) != plain.second_client.cache_key(ASK, Verdict, None)
    assert low.versions()["second_judge_reasoning_effort"] == "low"
    assert "second_judge_reasoning_effort" not in plain.versions() and "reasoning_effort" not in low.versions()
    with pytest.raises(errors.ConfigError, match="openai/gpt-4o is not a reasoning model") as refused:
        Evaluator(Config(**{**base, "second_judge": "openai/gpt-4o"}, second_judge_reasoning_effort="low"))
    assert "Drop --second-judge-reasoning-effort" in str(refused.value)  # the second judge's option, not the first's
    with pytest.raises(errors.ConfigError, match="go with second_judge"):
        Config.make(llm="openai/gpt-4o-mini", second_judge_reasoning_effort="low")
    # a reasoning model as its own second judge, at another effort: other requests and cache keys, so allowed; at the
    # same effort it would repeat the first verdicts
    same = {**base, "llm": "openai/o3", "reasoning_effort": "low", "second_judge": "openai/o3"}
    harder = Evaluator(Config(**same, second_judge_reasoning_effort="high"))
    assert harder.client is not None and harder.second_client is not None
    assert harder.client.cache_key(ASK, Verdict, None) != harder.second_client.cache_key(ASK, Verdict, None)
    with pytest.raises(errors.ConfigError, match="another --second-judge-reasoning-effort"):
        Evaluator(Config(**same, second_judge_reasoning_effort="low"))
