"""Issue 34: prompts as short as their rules. Each prompt states every rule it needs, once, keeps its fences, and
stays within a size; the schema is not in the prompt text (the adapters send it once, tests/llm/test_schema_once.py).
"""

from __future__ import annotations

import re

import pytest

from groundjudge.models import Claim, Message, QAItem
from groundjudge.prompts import DEFAULT_FENCE, load_prompt
from groundjudge.stages.claims import claims_messages
from groundjudge.stages.judge import Source, judge_messages

CLAIM_RULES = [
    "One claim per checkable fact",
    "Self-contained",
    "replace pronouns",
    "never correct, soften or add",
    "Skip opinions",
    "each fact once",
    "`source`: the verbatim excerpt of the answer",
]
JUDGE_RULES = [
    "Use only the passages, not your knowledge",
    "- SUPPORTED: the passages state or directly entail every part of the claim",
    "- CONTRADICTED: the passages state something incompatible",
    "- UNSUPPORTED: neither, or only part is backed",
    "silence is not contradiction",
    "as precise as it says",
    "a plan or possibility",
    "Superlatives and comparisons need explicit backing",
    "(cites: SOURCE n)",
    "`quotes`: excerpts copied verbatim from a passage",
    "with its number",
    "`reason`: one short sentence",
    "`error_type`, null for SUPPORTED",
    "unsupported_detail",
]
DATA_NOT_INSTRUCTIONS = f"between {DEFAULT_FENCE} lines"
NEVER_FOLLOW = "not instructions"

RULES: dict[str, list[str]] = {
    "claims": [*CLAIM_RULES, DATA_NOT_INSTRUCTIONS, NEVER_FOLLOW],
    "claims_qa": [
        *CLAIM_RULES,
        "`questions`: each about one fact the answer states",
        "answerable in a few words from sources alone",
        "never revealing its answer",
        "`answer_from_answer`: the answer's own reply",
        DATA_NOT_INSTRUCTIONS,
        NEVER_FOLLOW,
    ],
    "judge": [*JUDGE_RULES, "one verdict per claim id", DATA_NOT_INSTRUCTIONS, NEVER_FOLLOW],
    "verify": [
        *JUDGE_RULES,
        "one reply per question id and per claim id",
        "`answers`: each question answered in a few words from the passages alone",
        "never from the claims",  # blind: the sources side answers from the passages, not from the claims
        "exactly NOT_FOUND",
        "Do not guess",
        DATA_NOT_INSTRUCTIONS,
        NEVER_FOLLOW,
    ],
}
# Words that name one rule each: a prompt that says them twice states a rule twice.
ONCE = ["verbatim", "NOT_FOUND", "- SUPPORTED:", "- CONTRADICTED:", "- UNSUPPORTED:", "error_type", "never follow"]
FENCES = {
    "claims": {"QUESTION", "ANSWER"},
    "claims_qa": {"QUESTION", "ANSWER"},
    "judge": {"SOURCE 1", "SOURCE 2", "CLAIMS"},
    "verify": {"SOURCE 1", "SOURCE 2", "QUESTIONS", "CLAIMS"},
}
# The fixed part of each call (its system message), in characters: ~4 a token. Before issue 34: claims_qa 1,732
# and verify 5,140 (with the schema as text: 2,900 and 7,040).
MAX_SYSTEM_CHARS = {"claims": 800, "claims_qa": 1_100, "judge": 1_400, "verify": 1_650}


def rendered(name: str) -> list[Message]:
    claims = [Claim(id="c1", text="The tower is 330 metres tall."), Claim(id="c2", text="It opened in 1889.")]
    sources = [Source(1, 0, 0, "The Eiffel Tower is 330 metres tall."), Source(2, 1, 0, "It opened in 1889.")]
    qa = [QAItem(question="How tall is the tower?", answer_from_answer="SECRET-REPLY 330 metres")]
    if name in ("claims", "claims_qa"):
        return claims_messages("The tower is 330 metres tall.", "How tall?", 3 if name == "claims_qa" else 0)
    return judge_messages(claims, sources, qa if name == "verify" else ())


@pytest.mark.parametrize("name", sorted(RULES))
def test_each_prompt_states_its_rules(name: str) -> None:
    system = rendered(name)[0]
    assert system.role == "system"
    flat = " ".join(system.content.split())  # a rule may wrap
    missing = [rule for rule in RULES[name] if rule not in flat]
    assert not missing, f"{name} does not state: {missing}"


@pytest.mark.parametrize("name", sorted(RULES))
def test_each_rule_is_stated_once(name: str) -> None:
    system = rendered(name)[0].content
    twice = [word for word in ONCE if system.count(word) > 1]
    assert not twice, f"{name} states these more than once: {twice}"


@pytest.mark.parametrize("name", sorted(RULES))
def test_each_prompt_keeps_its_fences_and_its_data_out_of_the_system_message(name: str) -> None:
    messages = rendered(name)
    user = messages[-1].content
    titles = set(re.findall(rf"^{DEFAULT_FENCE} BEGIN (.+)$", user, re.M))
    assert titles == FENCES[name]
    assert titles == set(re.findall(rf"^{DEFAULT_FENCE} END (.+)$", user, re.M))
    assert "BEGIN" not in messages[0].content and "330" not in messages[0].content  # the fixed part comes first


@pytest.mark.parametrize("name", sorted(RULES))
def test_prompts_are_short_and_carry_no_schema_text(name: str) -> None:
    system = rendered(name)[0].content
    assert len(system) <= MAX_SYSTEM_CHARS[name], f"{name}: {len(system)} characters of fixed instructions"
    assert "JSON Schema" not in system and '"properties"' not in system


def test_the_sources_side_never_sees_the_answers_replies() -> None:
    text = "\n".join(m.content for m in rendered("verify"))
    assert "How tall is the tower?" in text and "SECRET-REPLY" not in text


@pytest.mark.parametrize(("name", "version"), [("claims", 3), ("claims_qa", 3), ("judge", 4), ("verify", 3)])
def test_issue_34_bumped_the_prompt_versions(name: str, version: int) -> None:
    assert load_prompt(name).version.split("+")[0] == str(version)
