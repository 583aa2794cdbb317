"""The pytest plugin: a tiny test file run by pytest in a subprocess (pytester), nli mode with the shared model,
cache-only replay of the cascade against the scripted server, and the baseline gate."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest

from groundjudge.testing import GroundingAssertionError, ScriptedLLMServer, assert_grounded, route
from tests.conftest import ROOT, SHARED_MODEL
from tests.test_pipeline import BAD_ANSWER, CONTEXT, GOOD_ANSWER, HANDLERS

pytest_plugins = ["pytester"]

INVENTED = "The Eiffel Tower has a restaurant run by a famous chef on its second floor."

TEST_FILE = f"""
from groundjudge.testing import assert_grounded, assert_file_grounded

CONTEXT = {CONTEXT!r}

def test_good(groundjudge_evaluator):
    assert_grounded({GOOD_ANSWER!r}, [CONTEXT], evaluator=groundjudge_evaluator)

def test_bad():
    assert_grounded({BAD_ANSWER!r}, [CONTEXT], min_score=0.8)
"""


def plugin_args() -> list[str]:
    """Load the plugin by its entry point when the package is installed with it, else by name."""
    installed = any(ep.value == "groundjudge.pytest_plugin" for ep in entry_points(group="pytest11"))
    return [] if installed else ["-p", "groundjudge.pytest_plugin"]


def test_the_entry_point_is_declared() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["pytest11"] == {"groundjudge": "groundjudge.pytest_plugin"}


def test_assert_grounded_in_process(shared_nli: Any, tmp_path: Path) -> None:
    from groundjudge.cache import Cache
    from groundjudge.config import Config
    from groundjudge.pipeline import Evaluator

    ev = Evaluator(Config(mode="nli"), nli=shared_nli, cache=Cache(tmp_path / "c"))
    assert assert_grounded(GOOD_ANSWER, [CONTEXT], evaluator=ev).verdict == "PASS"
    with pytest.raises(AssertionError) as exc:
        assert_grounded(INVENTED, [CONTEXT], evaluator=ev)
    assert isinstance(exc.value, GroundingAssertionError)
    message = str(exc.value)
    assert message.startswith("answer not grounded: combined score") and "(verdict FAIL)" in message
    assert f'[UNSUPPORTED, nli] "{INVENTED}"' in message and "closest source text (source 1)" in message
    assert assert_grounded(INVENTED, [CONTEXT], min_score=0.0, evaluator=ev).verdict == "FAIL"


def test_nli_mode_gate_lists_the_unsupported_claims(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makepyfile(test_answers=TEST_FILE)
    result = pytester.runpytest_subprocess(
        *plugin_args(),
        "--groundjudge-nli-model",
        str(SHARED_MODEL),
        "--groundjudge-cache-dir",
        str(tmp_path / "cache"),
        "-p",
        "no:cacheprovider",
    )
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert "GroundingAssertionError: answer not grounded: combined score" in out
    assert '[UNSUPPORTED, nli] "It was completed in 1899."' in out
    assert 'closest source text (source 1): "The Eiffel Tower is a wrought-iron lattice tower' in out


def test_cache_only_replays_without_keys_or_calls(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_answers=TEST_FILE)
    with ScriptedLLMServer(route(HANDLERS)) as server:
        llm = ["--groundjudge-llm", "openai/gpt-4o-mini", "--groundjudge-base-url", server.openai_base_url]
        common = [*plugin_args(), *llm, "--groundjudge-nli-model", str(SHARED_MODEL), "-p", "no:cacheprovider"]
        common += ["--groundjudge-cache-dir", str(tmp_path / "cache")]
        first = pytester.runpytest_subprocess(*common)
        first.assert_outcomes(passed=1, failed=1)
        out = first.stdout.str()
        assert '[CONTRADICTED, judge] "The Eiffel Tower was completed in 1899.": The source says 1889.' in out
        assert 'closest source text (source 1): "completed in 1889"' in out
        calls = len(server.requests)
        assert calls == 4  # two answers, two calls each
        monkeypatch.delenv("OPENAI_API_KEY")  # CI replays with no key
        replay = pytester.runpytest_subprocess(*common, "--groundjudge-cache-only")
        replay.assert_outcomes(passed=1, failed=1)
        assert len(server.requests) == calls  # nothing sent
        assert "The source says 1889." in replay.stdout.str()
        # an answer that was never cached fails its test with the cache miss instead of spending
        pytester.makepyfile(
            test_new=f"from groundjudge.testing import assert_grounded\n\n"
            f"def test_new():\n    assert_grounded({INVENTED!r}, [{CONTEXT!r}])\n"
        )
        new = pytester.runpytest_subprocess(*common, "--groundjudge-cache-only", "test_new.py")
        new.assert_outcomes(failed=1)
        assert "CacheMissError" in new.stdout.str() and len(server.requests) == calls


def rows(bad: set[int]) -> list[dict[str, Any]]:
    return [{"id": f"r{i}", "answer": INVENTED if i in bad else GOOD_ANSWER, "contexts": [CONTEXT]} for i in range(8)]


def test_baseline_gate_fails_only_on_a_significant_regression(pytester: pytest.Pytester, tmp_path: Path) -> None:
    # the stored run, scored in a subprocess as CI would have (pytester restores sys.modules after this test, so
    # nothing heavy may be imported here)
    for name, bad in (("base", {0}), ("same", {0}), ("one_more", {0, 1}), ("regressed", set(range(8)))):
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows(bad)))  # base: one answer already failing
    baseline = tmp_path / "baseline.jsonl"
    scored = subprocess.run(
        [
            *(sys.executable, "-m", "groundjudge", "score", str(tmp_path / "base.jsonl"), "--out", str(baseline)),
            *("--nli-model", str(SHARED_MODEL), "--cache-dir", str(tmp_path / "cache"), "--no-progress"),
        ],
        capture_output=True,
        text=True,
    )
    assert scored.returncode == 0, scored.stderr
    pytester.makepyfile(
        test_gate=f"""
from groundjudge.testing import assert_file_grounded

def test_same(groundjudge_baseline):
    assert groundjudge_baseline in (None, {str(baseline)!r})
    assert_file_grounded({str(tmp_path / "same.jsonl")!r})

def test_one_more():
    assert_file_grounded({str(tmp_path / "one_more.jsonl")!r})

def test_regressed():
    assert_file_grounded({str(tmp_path / "regressed.jsonl")!r})
"""
    )
    args = [*plugin_args(), "--groundjudge-nli-model", str(SHARED_MODEL), "-p", "no:cacheprovider"]
    args += ["--groundjudge-cache-dir", str(tmp_path / "cache")]
    gated = pytester.runpytest_subprocess(*args, "--groundjudge-baseline", str(baseline))
    gated.assert_outcomes(passed=2, failed=1)  # r0 failing already, and one more, are not significant
    out = gated.stdout.str()
    assert "test_regressed" in out and "significant regression against the baseline" in out
    assert "combined:" in out and "PASS lost 7" in out and "claims not supported" in out
    # without a baseline every answer must pass
    strict = pytester.runpytest_subprocess(*args)
    strict.assert_outcomes(failed=3)
    out = strict.stdout.str()
    assert "1 of 8 answers not grounded" in out and "2 of 8 answers" in out and "8 of 8 answers" in out
