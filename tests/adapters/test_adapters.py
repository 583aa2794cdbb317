"""The adapters inside their real tools: a RAGAS metric in ``ragas.evaluate``, a DeepEval metric in
``deepeval.evaluate`` and ``assert_test``, an Inspect scorer in ``inspect_ai.eval``, a promptfoo assertion called as
promptfoo calls it. NLI mode with the shared model; the cascade against the scripted server through the real SDK.

A tool that is not installed skips its tests with the extra that installs it; nothing here reaches the network.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from groundjudge.pipeline.evaluator import Evaluator
from groundjudge.testing import ScriptedLLMServer, route
from groundjudge.testing.assertions import DEFAULTS
from tests.conftest import ROOT, SHARED_MODEL
from tests.pipeline.test_pipeline import BAD_ANSWER, CONTEXT, GOOD_ANSWER, HANDLERS

INVENTED = "The Eiffel Tower has a restaurant run by a famous chef on its second floor."
QUESTION = "Tell me about the Eiffel Tower."

# the tools' own telemetry and logins stay off: nothing here may leave the machine
QUIET = {
    "RAGAS_DO_NOT_TRACK": "true",
    "DEEPEVAL_TELEMETRY_OPT_OUT": "1",
    "DEEPEVAL_UPDATE_WARNING_OPT_IN": "0",
    "DEEPEVAL_GRPC_LOGGING": "0",
    "CONFIDENT_API_KEY": "",
    "INSPECT_TELEMETRY": "",
}


def needs(module: str, extra: str) -> Any:
    return pytest.importorskip(module, reason=f"{module} is not installed: pip install 'groundjudge[{extra}]'")


LOCAL = ("127.0.0.1", "localhost", "::1")


@pytest.fixture(autouse=True)
def _quiet(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """The tools' telemetry off, their files in the test's folder, and any look-up or connection to a host that is
    not this machine recorded: the test fails on it (a tool that phones home, a file fetched at run time)."""
    for name, value in QUIET.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # a tool's config or login files land here, not in ~
    monkeypatch.chdir(tmp_path)  # deepeval keeps its test-run files in the working folder
    monkeypatch.delenv("GROUNDJUDGE_LLM", raising=False)
    outside: list[str] = []
    lookup, connect = socket.getaddrinfo, socket.socket.connect

    def guarded_lookup(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host not in LOCAL and host is not None:
            outside.append(str(host))
        return lookup(host, *args, **kwargs)

    def guarded_connect(sock: socket.socket, address: Any) -> Any:
        if isinstance(address, tuple) and address[0] not in LOCAL:
            outside.append(str(address[0]))
        return connect(sock, address)

    monkeypatch.setattr(socket, "getaddrinfo", guarded_lookup)
    monkeypatch.setattr(socket.socket, "connect", guarded_connect)
    DEFAULTS.clear()
    yield
    DEFAULTS.clear()
    assert not outside, f"the test reached for hosts outside this machine: {sorted(set(outside))}"


@pytest.fixture
def from_environment(monkeypatch: pytest.MonkeyPatch, shared_nli: Any) -> None:
    """What a user's environment gives a no-argument adapter: the shared model, nli mode."""
    monkeypatch.setenv("GROUNDJUDGE_NLI_MODEL", str(SHARED_MODEL))


@pytest.fixture
def cascade_environment(monkeypatch: pytest.MonkeyPatch, shared_nli: Any) -> Iterator[ScriptedLLMServer]:
    """GROUNDJUDGE_LLM and the SDK's own base-URL variable pointing at the scripted server: a no-argument adapter
    runs the cascade through the real openai SDK."""
    with ScriptedLLMServer(route(HANDLERS)) as server:
        monkeypatch.setenv("GROUNDJUDGE_NLI_MODEL", str(SHARED_MODEL))
        monkeypatch.setenv("GROUNDJUDGE_LLM", "openai/gpt-4o-mini")
        monkeypatch.setenv("OPENAI_BASE_URL", server.openai_base_url)
        yield server


# -- what every adapter shares -----------------------------------------------------------------------------------


def test_the_package_imports_no_tool() -> None:
    code = (
        "import sys, groundjudge.adapters, groundjudge.adapters.common, groundjudge.adapters.promptfoo\n"
        "print(sorted(m for m in ('ragas', 'deepeval', 'inspect_ai') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"


def test_a_missing_tool_names_its_extra() -> None:
    from groundjudge.adapters.common import require

    with pytest.raises(ImportError, match=r"pip install 'groundjudge\[ragas\]'"):
        require("groundjudge_no_such_tool", "ragas")


def test_the_outcome_is_assert_groundeds_rule(nli_evaluator: Evaluator) -> None:
    from groundjudge.adapters.common import Grounding

    good = Grounding(nli_evaluator).check(GOOD_ANSWER, CONTEXT, QUESTION)
    assert good.success and good.score >= 0.8 and good.report.verdict == "PASS"
    assert good.reason.startswith("grounded: combined score")
    bad = Grounding(nli_evaluator).check(INVENTED, [CONTEXT])
    assert not bad.success and bad.report.verdict == "FAIL"
    assert f'[UNSUPPORTED, nli] "{INVENTED}"' in bad.reason  # the claim, its verdict, the closest source
    assert [c["label"] for c in bad.claims()] == ["UNSUPPORTED"]
    assert Grounding(nli_evaluator, threshold=0.0).check(INVENTED, [CONTEXT]).success  # the threshold is the bar
    with pytest.raises(ValueError, match="threshold"):
        Grounding(nli_evaluator, threshold=80)


def test_an_answer_that_cannot_be_judged_is_not_scored_and_fails(nli_evaluator: Evaluator) -> None:
    """Issue 29: an ERROR or NO_CLAIMS answer scored 0.0, which lowered a tool's averages like a real score; it has
    no score (each adapter says so in its tool's way), keeps its verdict and reason, and fails."""
    from groundjudge.adapters.common import Grounding

    result = Grounding(nli_evaluator).check(GOOD_ANSWER, None)
    assert result.report.verdict == "ERROR" and result.score is None and not result.success
    assert "contexts" in result.reason and result.unscored and "contexts" in result.unscored
    nothing = Grounding(nli_evaluator).check("Hello!", [CONTEXT])
    assert nothing.report.verdict == "NO_CLAIMS" and nothing.score is None and not nothing.success
    assert nothing.unscored and "NO_CLAIMS" in nothing.unscored
    good = Grounding(nli_evaluator).check(GOOD_ANSWER, [CONTEXT])
    assert good.score is not None and good.unscored is None


def test_the_async_check_leaves_the_event_loop_free(nli_evaluator: Evaluator) -> None:
    import asyncio
    import threading

    from groundjudge.adapters.common import Grounding

    released = threading.Event()

    class WaitsForTheLoop:
        """Answers only after a coroutine on the event loop has run: a check that blocked the loop never would."""

        def evaluate_many(self, rows: Any) -> Any:
            if not released.wait(timeout=60):
                raise AssertionError("the event loop was blocked while the answer was checked")
            return nli_evaluator.evaluate_many(rows)

    async def main() -> Any:
        check = asyncio.ensure_future(Grounding(WaitsForTheLoop()).acheck(GOOD_ANSWER, [CONTEXT]))
        await asyncio.sleep(0)
        released.set()
        return await check

    assert asyncio.run(main()).success


# -- RAGAS ----------------------------------------------------------------------------------------------------------


def ragas_rows() -> list[dict[str, Any]]:
    return [
        {"user_input": QUESTION, "response": GOOD_ANSWER, "retrieved_contexts": [CONTEXT], "reference": "Paris."},
        {"user_input": QUESTION, "response": INVENTED, "retrieved_contexts": [CONTEXT]},
    ]


def test_ragas_evaluate_with_the_metric_alone(nli_evaluator: Evaluator, shared_nli: Any) -> None:
    needs("ragas", "ragas")
    from ragas import EvaluationDataset, evaluate

    from groundjudge.adapters.ragas import GroundjudgeMetric

    rows = ragas_rows()
    metric = GroundjudgeMetric(evaluator=nli_evaluator)
    result = evaluate(EvaluationDataset.from_list(rows), metrics=[metric], show_progress=False, raise_exceptions=True)
    good, bad = (s["groundjudge"] for s in result.scores)
    assert good >= 0.8 > bad
    assert metric.outcome_for(rows[0]).success and metric.outcome_for(rows[0]).report.verdict == "PASS"
    assert metric.outcome_for(rows[0]).report.metadata["reference"] == "Paris."
    failed = metric.outcome_for(rows[1])
    assert not failed.success and [c["label"] for c in failed.claims()] == ["UNSUPPORTED"]
    passes = shared_nli.forward_passes
    again = evaluate(EvaluationDataset.from_list(rows), metrics=[metric], show_progress=False, raise_exceptions=True)
    assert [s["groundjudge"] for s in again.scores] == [good, bad]
    assert shared_nli.forward_passes == passes  # the re-run is answered from the cache


def test_ragas_a_row_that_cannot_be_judged_is_nan_and_explained(nli_evaluator: Evaluator) -> None:
    """Issue 29: ``outcome_for`` raised KeyError for a row scored as an input ERROR (blank contexts), the row whose
    score most needs explaining; and such a row scored 0.0 where RAGAS's own metrics give NaN (not scored)."""
    needs("ragas", "ragas")
    import math

    from ragas import EvaluationDataset, evaluate

    from groundjudge.adapters.ragas import GroundjudgeMetric

    rows = [*ragas_rows(), {"user_input": QUESTION, "response": GOOD_ANSWER, "retrieved_contexts": [" "]}]
    metric = GroundjudgeMetric(evaluator=nli_evaluator)
    result = evaluate(EvaluationDataset.from_list(rows), metrics=[metric], show_progress=False, raise_exceptions=True)
    scores = [s["groundjudge"] for s in result.scores]
    assert scores[0] >= 0.8 and math.isnan(scores[2])
    failed = metric.outcome_for(rows[2])
    assert failed.report.verdict == "ERROR" and not failed.success and "contexts" in failed.reason


def test_ragas_cascade_from_the_environment(cascade_environment: ScriptedLLMServer) -> None:
    needs("ragas", "ragas")
    from ragas import EvaluationDataset, evaluate

    from groundjudge.adapters.ragas import GroundjudgeMetric

    rows = [
        {"user_input": QUESTION, "response": GOOD_ANSWER, "retrieved_contexts": [CONTEXT]},
        {"user_input": QUESTION, "response": BAD_ANSWER, "retrieved_contexts": [CONTEXT]},
    ]
    metric = GroundjudgeMetric()
    first = evaluate(EvaluationDataset.from_list(rows), metrics=[metric], show_progress=False, raise_exceptions=True)
    assert metric.outcome_for(rows[0]).report.mode == "cascade"
    assert metric.outcome_for(rows[0]).success
    wrong = metric.outcome_for(rows[1])
    assert not wrong.success and "contradicted" in wrong.reason
    sent = len(cascade_environment.requests)
    assert sent > 0
    again = evaluate(
        EvaluationDataset.from_list(rows), metrics=[GroundjudgeMetric()], show_progress=False, raise_exceptions=True
    )
    assert len(cascade_environment.requests) == sent  # a new metric, the same default evaluator: all from the cache
    assert again.scores == first.scores


# -- DeepEval -------------------------------------------------------------------------------------------------------


def test_deepeval_assert_test_and_evaluate(nli_evaluator: Evaluator, shared_nli: Any) -> None:
    needs("deepeval", "deepeval")
    from deepeval import assert_test, evaluate
    from deepeval.test_case import LLMTestCase

    from groundjudge.adapters.deepeval import GroundjudgeMetric

    good = LLMTestCase(input=QUESTION, actual_output=GOOD_ANSWER, retrieval_context=[CONTEXT])
    bad = LLMTestCase(input=QUESTION, actual_output=INVENTED, retrieval_context=[CONTEXT])
    assert_test(good, [GroundjudgeMetric(evaluator=nli_evaluator)])
    with pytest.raises(AssertionError, match="UNSUPPORTED"):
        assert_test(bad, [GroundjudgeMetric(evaluator=nli_evaluator)])

    metric = GroundjudgeMetric(threshold=0.8, evaluator=nli_evaluator)
    assert metric.measure(bad) == metric.score and metric.success is False and not metric.is_successful()
    assert metric.report.verdict == "FAIL" and INVENTED in metric.reason

    passes = shared_nli.forward_passes
    result = evaluate([good, bad], [GroundjudgeMetric(evaluator=nli_evaluator)])
    data = {r.actual_output: r.metrics_data[0] for r in result.test_results}
    assert data[GOOD_ANSWER].success and data[GOOD_ANSWER].score >= 0.8
    assert not data[INVENTED].success and "UNSUPPORTED" in data[INVENTED].reason
    assert shared_nli.forward_passes == passes  # measured above already: the cache answers


def test_deepeval_an_answer_that_cannot_be_judged_is_an_error_not_a_score(nli_evaluator: Evaluator) -> None:
    """Issue 29: DeepEval's way of saying a metric gave no score is its ``error`` (as when ``measure`` raises and
    errors are ignored): no score, not successful, the reason kept."""
    needs("deepeval", "deepeval")
    from deepeval.test_case import LLMTestCase

    from groundjudge.adapters.deepeval import GroundjudgeMetric

    metric = GroundjudgeMetric(evaluator=nli_evaluator)
    metric.measure(LLMTestCase(input=QUESTION, actual_output=GOOD_ANSWER, retrieval_context=[" "]))
    assert metric.score is None and metric.error and "contexts" in metric.error and not metric.is_successful()
    assert metric.report.verdict == "ERROR" and "contexts" in metric.reason


def test_deepeval_no_argument_metric_uses_the_environment(from_environment: None, shared_nli: Any) -> None:
    needs("deepeval", "deepeval")
    from deepeval.test_case import LLMTestCase

    from groundjudge.adapters.deepeval import GroundjudgeMetric

    metric = GroundjudgeMetric()
    case = LLMTestCase(input=QUESTION, actual_output=GOOD_ANSWER, context=[CONTEXT])  # context when no retrieval
    assert metric.measure(case) >= 0.8 and metric.is_successful()
    assert metric.report.mode == "nli"
    assert DEFAULTS["evaluator"].nli is shared_nli  # the default evaluator, built from the environment


# -- Inspect --------------------------------------------------------------------------------------------------------


def test_inspect_eval_with_the_scorer(nli_evaluator: Evaluator, tmp_path: Path) -> None:
    needs("inspect_ai", "inspect")
    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ModelOutput, ModelUsage, get_model
    from inspect_ai.solver import generate

    from groundjudge.adapters.inspect import groundjudge_scorer

    answers = {"good": GOOD_ANSWER, "bad": INVENTED}

    def reply(messages: Any, *args: Any) -> Any:
        output = ModelOutput.from_content("mockllm/model", answers[messages[-1].text.split(":")[0]])
        output.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)  # else tiktoken downloads a file
        return output

    task = Task(
        dataset=[Sample(id=name, input=f"{name}: {QUESTION}", metadata={"contexts": [CONTEXT]}) for name in answers],
        solver=generate(),
        scorer=groundjudge_scorer(evaluator=nli_evaluator),
    )
    model = get_model("mockllm/model", custom_outputs=reply)
    (log,) = eval(task, model=model, log_dir=str(tmp_path / "logs"), display="none")
    assert log.status == "success", log.error
    scores = {s.id: s.scores["groundjudge"] for s in log.samples or []}
    assert scores["good"].value >= 0.8 and scores["good"].metadata["success"]
    assert scores["good"].metadata["verdict"] == "PASS"
    assert not scores["bad"].metadata["success"] and scores["bad"].metadata["claims"][0]["label"] == "UNSUPPORTED"
    assert "UNSUPPORTED" in (scores["bad"].explanation or "")
    metrics = log.results.scores[0].metrics if log.results else {}
    assert set(metrics) == {"mean", "stderr"}
    assert metrics["mean"].value == pytest.approx((scores["good"].value + scores["bad"].value) / 2)


def test_inspect_an_answer_that_cannot_be_judged_is_unscored(nli_evaluator: Evaluator, tmp_path: Path) -> None:
    """Issue 29: an ERROR answer (no sources) scored 0.0 and pulled the mean down like a real score; Inspect's way is
    an unscored Score (NaN, left out of the metrics) that keeps its explanation and metadata."""
    import math

    needs("inspect_ai", "inspect")
    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ModelOutput, ModelUsage, get_model
    from inspect_ai.solver import generate

    from groundjudge.adapters.inspect import groundjudge_scorer

    def reply(messages: Any, *args: Any) -> Any:
        output = ModelOutput.from_content("mockllm/model", GOOD_ANSWER)
        output.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
        return output

    samples = [
        Sample(id="good", input=QUESTION, metadata={"contexts": [CONTEXT]}),
        Sample(id="blank", input=QUESTION, metadata={"contexts": [" "]}),
    ]
    task = Task(dataset=samples, solver=generate(), scorer=groundjudge_scorer(evaluator=nli_evaluator))
    (log,) = eval(task, model=get_model("mockllm/model", custom_outputs=reply), log_dir=str(tmp_path), display="none")
    assert log.status == "success", log.error
    scores = {s.id: s.scores["groundjudge"] for s in log.samples or []}
    blank = scores["blank"]
    assert math.isnan(float(blank.value)) and blank.metadata["verdict"] == "ERROR"  # type: ignore[arg-type]
    assert not blank.metadata["success"] and "contexts" in (blank.explanation or "")
    mean = log.results.scores[0].metrics["mean"].value if log.results else None
    assert mean == pytest.approx(float(scores["good"].value))  # type: ignore[arg-type]  # the ERROR is left out


# -- promptfoo ------------------------------------------------------------------------------------------------------

USER_FILE = "from groundjudge.adapters.promptfoo import get_assert  # noqa: F401\n"

# promptfoo's wrapper.py, as far as an assertion sees it: the file's folder first on sys.path, the file loaded by
# path, get_assert(*args) from the input JSON, {"type": "final_result", "data": ...} to the output JSON
WRAPPER_CONTRACT = """
import importlib.util, json, os, sys
script, method, args_path, out_path = sys.argv[1:5]
sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
spec = importlib.util.spec_from_file_location(os.path.basename(script).rsplit(".", 1)[0], script)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
with open(args_path, encoding="utf-8") as f:
    args = json.load(f)
with open(out_path, "w", encoding="utf-8") as f:
    json.dump({"type": "final_result", "data": getattr(module, method)(*args)}, f, ensure_ascii=False)
"""


def promptfoo_wrapper(tmp_path: Path) -> Path:
    """promptfoo's own wrapper.py when its npm package is at hand (``PROMPTFOO_PACKAGE``: the package folder), else
    the same contract written out here."""
    package = os.environ.get("PROMPTFOO_PACKAGE")
    if package and (Path(package) / "dist" / "src" / "python" / "wrapper.py").is_file():
        return Path(package) / "dist" / "src" / "python" / "wrapper.py"
    path = tmp_path / "wrapper.py"
    path.write_text(WRAPPER_CONTRACT)
    return path


def subprocess_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GROUNDJUDGE_")}
    env.update(
        PYTHONPATH=str(ROOT),
        GROUNDJUDGE_NLI_MODEL=str(SHARED_MODEL),
        GROUNDJUDGE_CACHE_DIR=str(tmp_path / "promptfoo-cache"),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
    )
    return env


def promptfoo_context(output: str) -> dict[str, Any]:
    """What promptfoo hands a Python assertion besides the output (runAssertion's context)."""
    values = {"question": QUESTION, "contexts": [CONTEXT]}
    return {
        "prompt": QUESTION,
        "vars": values,
        "test": {"vars": values, "assert": [{"type": "python", "value": "file://groundjudge_assert.py"}]},
        "providerResponse": {"output": output},
        "config": {"threshold": 0.8},
    }


def test_promptfoo_assertion_as_promptfoo_calls_it(tmp_path: Path) -> None:
    (tmp_path / "groundjudge_assert.py").write_text(USER_FILE)
    args, out = tmp_path / "in.json", tmp_path / "out.json"
    args.write_text(json.dumps([INVENTED, promptfoo_context(INVENTED)]))
    out.write_text("")
    command = [sys.executable, str(promptfoo_wrapper(tmp_path)), str(tmp_path / "groundjudge_assert.py"), "get_assert"]
    done = subprocess.run(
        [*command, str(args), str(out)], cwd=tmp_path, env=subprocess_env(tmp_path), capture_output=True, timeout=600
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    message = json.loads(out.read_text())
    assert message["type"] == "final_result"
    result = message["data"]
    assert result["pass"] is False and result["score"] < 0.8 and "UNSUPPORTED" in result["reason"]
    assert result["metadata"]["claims"][0]["label"] == "UNSUPPORTED"
    assert result["namedScores"] == {"groundjudge": result["score"]}


def test_promptfoo_assertion_in_process(from_environment: None, shared_nli: Any) -> None:
    from groundjudge.adapters.promptfoo import get_assert

    good = get_assert(GOOD_ANSWER, promptfoo_context(GOOD_ANSWER))
    assert good["pass"] is True and good["score"] >= 0.8 and good["metadata"]["verdict"] == "PASS"
    passes = shared_nli.forward_passes
    assert get_assert(GOOD_ANSWER, promptfoo_context(GOOD_ANSWER)) == good
    assert shared_nli.forward_passes == passes  # every call shares the default evaluator and its cache
    strict = {**promptfoo_context(INVENTED), "config": {"threshold": 0.0, "contexts_var": "contexts"}}
    assert get_assert({"output": INVENTED}, strict)["pass"] is True  # the assertion's config sets the bar


def test_promptfoo_an_answer_that_cannot_be_judged_is_no_named_score(from_environment: None) -> None:
    """Issue 29: an ERROR answer gave the named score 0.0, lowering the metric's average like a real score. It fails,
    with its reason; its named score is left out (promptfoo averages a named score over the results that have it)
    and the metadata says it was not scored."""
    from groundjudge.adapters.promptfoo import get_assert

    context = promptfoo_context(GOOD_ANSWER)
    context["vars"] = {**context["vars"], "contexts": [" "]}
    result = get_assert(GOOD_ANSWER, context)
    assert result["pass"] is False and result["score"] == 0.0 and "contexts" in result["reason"]
    assert "namedScores" not in result or "groundjudge" not in result["namedScores"]
    assert result["metadata"]["verdict"] == "ERROR" and result["metadata"]["scored"] is False
    assert "contexts" in result["metadata"]["error"]


def promptfoo_command() -> list[str] | None:
    """A promptfoo command whose node it supports, else the package named by ``PROMPTFOO_PACKAGE`` run by node
    directly (past its start-up check of node's version: a developer's opt-in), else None."""
    command = shutil.which("promptfoo")
    if command is not None:
        try:
            done = subprocess.run([command, "--version"], capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired):
            done = None
        if done is not None and done.returncode == 0:
            return [command]
    package = os.environ.get("PROMPTFOO_PACKAGE")
    main = Path(package) / "dist" / "src" / "main.js" if package else None
    node = shutil.which("node")
    return [node, str(main)] if main is not None and main.is_file() and node else None


def test_promptfoo_eval_with_the_assertion(tmp_path: Path) -> None:
    command = promptfoo_command()
    if command is None:
        pytest.skip("no runnable promptfoo (npm install -g promptfoo@0.123, on node >= 22.22)")
    (tmp_path / "groundjudge_assert.py").write_text(USER_FILE)
    tests = [
        {"vars": {"answer": answer, "contexts": [CONTEXT]}, "description": name}
        for name, answer in (("good", GOOD_ANSWER), ("bad", INVENTED))
    ]
    config = {
        "prompts": ["{{answer}}"],
        "providers": ["echo"],  # the prompt comes back as the output: a fixed answer, no model
        "defaultTest": {"assert": [{"type": "python", "value": "file://groundjudge_assert.py"}]},
        "tests": tests,
    }
    (tmp_path / "promptfooconfig.yaml").write_text(json.dumps(config))  # JSON is YAML
    env = {**subprocess_env(tmp_path), "PROMPTFOO_PYTHON": sys.executable, "PROMPTFOO_DISABLE_TELEMETRY": "1"}
    env.update(PROMPTFOO_DISABLE_UPDATE="1", PROMPTFOO_CONFIG_DIR=str(tmp_path / "pf"), PROMPTFOO_CACHE_ENABLED="0")
    done = subprocess.run(
        [*command, "eval", "-c", "promptfooconfig.yaml", "-o", "out.json", "--no-progress-bar", "--no-cache"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        timeout=600,
    )
    assert (tmp_path / "out.json").is_file(), done.stdout.decode()[-2000:] + done.stderr.decode()[-2000:]
    results = json.loads((tmp_path / "out.json").read_text())["results"]["results"]
    passed = {r["testCase"]["description"]: r["success"] for r in results}
    assert passed == {"good": True, "bad": False}


def test_an_empty_retrieval_is_no_sources_not_the_ideal_documents() -> None:
    # DeepEval's adapter took 'retrieval_context if retrieval_context else context': a retrieval that found nothing
    # ([]) judged the answer against the test case's ideal documents, which the model never saw, and could pass it
    from groundjudge.adapters.common import retrieved_or

    ideal = ["The Eiffel Tower was completed in 1889."]
    assert retrieved_or([], ideal) == []
    assert retrieved_or(None, ideal) == ideal
    assert retrieved_or(["retrieved"], ideal) == ["retrieved"]


@pytest.mark.parametrize("flag", ["false", "no", "0", "", 1])
def test_a_contradiction_rule_that_is_no_yes_or_no_is_refused(
    cascade_environment: ScriptedLLMServer, flag: Any
) -> None:
    """promptfoo's ``config: {allow_contradicted: "false"}`` (quoted in YAML, or filled in from a variable) went
    through ``bool()``: any non-empty string, "false" too, let an answer with a contradicted claim pass. The rule
    takes true or false only; anything else is an ArgumentError, before anything is checked."""
    from groundjudge.adapters.common import Grounding
    from groundjudge.adapters.promptfoo import get_assert
    from groundjudge.errors import ArgumentError

    context = {**promptfoo_context(BAD_ANSWER), "config": {"threshold": 0.0}}
    strict = get_assert(BAD_ANSWER, context)
    assert strict["pass"] is False and "1 contradicted claim(s)" in strict["reason"]
    loose = get_assert(BAD_ANSWER, {**context, "config": {"threshold": 0.0, "allow_contradicted": True}})
    assert loose["pass"] is True
    requests = len(cascade_environment.requests)
    with pytest.raises(ArgumentError, match="allow_contradicted must be true or false"):
        get_assert(BAD_ANSWER, {**context, "config": {"threshold": 0.0, "allow_contradicted": flag}})
    with pytest.raises(ArgumentError, match="allow_contradicted must be true or false"):
        Grounding(threshold=0.0, allow_contradicted=flag)
    assert len(cascade_environment.requests) == requests
