"""Issue 29's invariant: no failure of any stage can PASS a gate, over generated answers and faults.

The generated answers, sources and fault plans of ``tests/test_honesty_property.py`` (refusals, content filters,
truncation, 4xx/5xx, malformed bodies and JSON, NaN, missing or wrong claim ids, questions or answers left out, NaN
from the NLI model, damaged provider batches), through the same cascade (the real OpenAI or Anthropic SDK against a
ScriptedLLMServer, the shared NLI model). Whenever a fault reached a stage that was meant to run (the report's
``errors`` say so), the answer's verdict is not PASS and ``assert_grounded``'s rule (``grounding_problems``, the one
every adapter applies) fails it; and an answer with an error-free report is a real judgement.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from groundjudge.testing import ScriptedLLMServer
from groundjudge.testing.assertions import grounding_problems
from tests.test_honesty_property import Case, Setup, cases, nan_model, run


@pytest.fixture(scope="module")
def scripted() -> Any:
    with ScriptedLLMServer() as server:
        yield server


@settings(deadline=None, max_examples=20, database=None)
@given(
    case=cases(),
    provider=st.sampled_from(["openai", "anthropic"]),
    qa=st.booleans(),
    batch=st.booleans(),
    attempts=st.integers(1, 2),
    reasks=st.integers(0, 1),
)
def test_no_failure_of_any_stage_passes_a_gate(
    scripted: ScriptedLLMServer,
    shared_nli: Any,
    case: Case,
    provider: str,
    qa: bool,
    batch: bool,
    attempts: int,
    reasks: int,
) -> None:
    setup = Setup(provider, qa, batch, attempts, reasks)
    with tempfile.TemporaryDirectory() as tmp:
        reports = run(case, setup, scripted, nan_model(shared_nli, case), Path(tmp), faulty=True)
    for r in reports:
        i = int(r.id[1:])
        fired = sorted(stage for a, stage in case.fired if a == i)
        where = f"{r.id}: fired {fired}, {r.verdict} {r.verdict_reasons} {r.errors}"
        failed = bool(fired) or (batch and case.batch_fault == "damaged_state")
        if failed:
            assert r.errors, where  # the fault is in the report (test_honesty_property holds this too)
        if r.errors or r.scores.n_errors:  # a stage meant to run failed
            assert r.verdict != "PASS", where
            assert grounding_problems(r), where  # assert_grounded raises; every adapter fails it
            assert grounding_problems(r, min_score=0.0, allow_contradicted=True), where  # at any bar
        event(f"{'failed' if r.errors else 'clean'}: {r.verdict}")
