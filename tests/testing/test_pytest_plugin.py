"""The pytest plugin: a tiny test file run by pytest (pytester, in this process), nli mode with the shared model,
cache-only replay of the cascade against the scripted server, and the baseline gate.

The inner runs are in-process so that torch and the shared model load once, not once a run (10 s of CPU each).
pytester drops, after each test, the modules that test imported first; a second import of torch in one process
breaks it. So :func:`heavy_modules_first` imports everything an inner run can reach before pytester takes its
snapshot, and :func:`fresh_defaults` keeps the plugin's process-wide defaults from one inner run out of the next."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from importlib.metadata import entry_points
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groundjudge.models import AnswerReport, AnswerVerdict, Scores, Usage
from groundjudge.review.notebook import Run
from groundjudge.testing import (
    GroundingAssertionError,
    Reply,
    ScriptedLLMServer,
    assert_file_grounded,
    assert_grounded,
    grounding_problems,
    route,
)
from tests.conftest import ROOT, SHARED_MODEL
from tests.pipeline.test_pipeline import BAD_ANSWER, CONTEXT, GOOD_ANSWER, HANDLERS

pytest_plugins = ["pytester"]


@pytest.fixture(scope="module", autouse=True)
def heavy_modules_first(shared_nli: Any) -> None:
    """The shared model (torch, transformers, its architecture's module) and the LLM adapters, loaded before any
    test's pytester snapshot."""
    import groundjudge.llm.anthropic
    import groundjudge.llm.openai
    import groundjudge.pipeline.evaluator
    import groundjudge.pytest_plugin  # noqa: F401


@pytest.fixture(autouse=True)
def fresh_defaults() -> Iterator[None]:
    """``assert_grounded``'s process-wide default evaluator and baseline, empty for each test and after it."""
    from groundjudge.testing import assertions

    saved = dict(assertions.DEFAULTS)
    assertions.DEFAULTS.clear()
    yield
    assertions.DEFAULTS.clear()
    assertions.DEFAULTS.update(saved)


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
    from groundjudge.pipeline.evaluator import Evaluator

    ev = Evaluator(Config(mode="nli"), nli=shared_nli, cache=Cache(tmp_path / "c"))
    assert assert_grounded(GOOD_ANSWER, [CONTEXT], evaluator=ev).verdict == "PASS"
    with pytest.raises(AssertionError) as exc:
        assert_grounded(INVENTED, [CONTEXT], evaluator=ev)
    assert isinstance(exc.value, GroundingAssertionError)
    message = str(exc.value)
    assert message.startswith("answer not grounded: combined score") and "(verdict FAIL)" in message
    assert "\n  why: FAIL: combined " in message  # the verdict's own reasons, with the parts behind the score
    assert f'[UNSUPPORTED, nli] "{INVENTED}"' in message and "closest source text (source 1)" in message
    assert assert_grounded(INVENTED, [CONTEXT], min_score=0.0, evaluator=ev).verdict == "FAIL"


def test_nli_mode_gate_lists_the_unsupported_claims(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makepyfile(test_answers=TEST_FILE)
    result = pytester.runpytest_inprocess(
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
    # the closest text is the sentence that settles it (a sentence window, issue 33), not the passage's first words
    assert (
        'closest source text (source 1): "It was designed by the company of Gustave Eiffel and completed in 1889' in out
    )


def test_cache_only_replays_without_keys_or_calls(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_answers=TEST_FILE)
    with ScriptedLLMServer(route(HANDLERS)) as server:
        llm = ["--groundjudge-llm", "openai/gpt-4o-mini", "--groundjudge-base-url", server.openai_base_url]
        common = [*plugin_args(), *llm, "--groundjudge-nli-model", str(SHARED_MODEL), "-p", "no:cacheprovider"]
        common += ["--groundjudge-cache-dir", str(tmp_path / "cache")]
        first = pytester.runpytest_inprocess(*common)
        first.assert_outcomes(passed=1, failed=1)
        out = first.stdout.str()
        assert '[CONTRADICTED, judge] "The Eiffel Tower was completed in 1899.": The source says 1889.' in out
        assert 'closest source text (source 1): "completed in 1889"' in out
        calls = len(server.requests)
        assert calls == 4  # two answers, two calls each
        monkeypatch.delenv("OPENAI_API_KEY")  # CI replays with no key
        replay = pytester.runpytest_inprocess(*common, "--groundjudge-cache-only")
        replay.assert_outcomes(passed=1, failed=1)
        assert len(server.requests) == calls  # nothing sent
        assert "The source says 1889." in replay.stdout.str()
        # an answer that was never cached fails its test with the cache miss instead of spending
        pytester.makepyfile(
            test_new=f"from groundjudge.testing import assert_grounded\n\n"
            f"def test_new():\n    assert_grounded({INVENTED!r}, [{CONTEXT!r}])\n"
        )
        new = pytester.runpytest_inprocess(*common, "--groundjudge-cache-only", "test_new.py")
        new.assert_outcomes(failed=1)
        missed = new.stdout.str()
        assert "CacheMissError" in missed and len(server.requests) == calls
        # issue 22: the miss names the test, the answer, the call (the stage) and the fix, ahead of any library frame
        said = " ".join(missed.split())
        assert re.search(r"cache-only replay missed in \S*test_new\.py::test_new ", said), missed
        assert f'for the answer "{INVENTED}"' in said and re.search(r"the claims(_qa)? call", said)
        assert "run this test once without --groundjudge-cache-only" in said and str(tmp_path / "cache") in said
        assert "client.py" not in missed and "During handling" not in missed, missed


def test_a_cache_only_replay_with_no_judge_is_refused(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CI line of the manual replayed with ``--groundjudge-cache-only`` and no ``--groundjudge-llm``: with no
    GROUNDJUDGE_LLM either, the session ran in nli mode, replayed nothing, and passed an answer the recorded judge
    had failed. A cache-only replay with no judge set is now a usage error naming the fix, before any test runs."""
    from groundjudge.testing import claims_in
    from tests.pipeline.test_pipeline import source_answers

    def strict(req: Any) -> Reply:  # a judge stricter than the local model: nothing is supported
        listing = [
            {"claim_id": cid, "verdict": "UNSUPPORTED", "reason": "Not stated.", "quotes": []} for cid in claims_in(req)
        ]
        return Reply.json({"answers": source_answers(req), "verdicts": listing})

    pytester.makepyfile(
        test_answer=f"from groundjudge.testing import assert_grounded\n\n"
        f"def test_good():\n    assert_grounded({GOOD_ANSWER!r}, [{CONTEXT!r}])\n"
    )
    monkeypatch.delenv("GROUNDJUDGE_LLM", raising=False)
    with ScriptedLLMServer(route({**HANDLERS, "judge": strict, "verify": strict})) as server:
        common = [*plugin_args(), "--groundjudge-nli-model", str(SHARED_MODEL), "-p", "no:cacheprovider"]
        common += ["--groundjudge-cache-dir", str(tmp_path / "cache")]
        llm = ["--groundjudge-llm", "openai/gpt-4o-mini", "--groundjudge-base-url", server.openai_base_url]
        recorded = pytester.runpytest_inprocess(*common, *llm)
        recorded.assert_outcomes(failed=1)
        assert "[UNSUPPORTED, judge]" in recorded.stdout.str()
        calls = len(server.requests)
        replay = pytester.runpytest_inprocess(*common, "--groundjudge-cache-only")  # the judge forgotten
        assert len(server.requests) == calls
    assert replay.ret == pytest.ExitCode.USAGE_ERROR  # refused once, before any test: no test ran
    assert "1 passed" not in replay.stdout.str()
    said = " ".join(replay.stderr.str().split())
    assert "--groundjudge-cache-only replays a judge's recorded replies, but no judge is set" in said
    assert "--groundjudge-llm" in said and "GROUNDJUDGE_LLM" in said


def test_the_baseline_fixture_is_the_option_or_none(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """``groundjudge_baseline`` is None without the option, else the file given (a str): on the command line, in
    the ini file, or both (the command line wins)."""
    ini, cli = tmp_path / "from_ini.jsonl", tmp_path / "from_cli.jsonl"
    cases: list[tuple[list[str], str | None]] = [
        ([], None),
        (["--groundjudge-baseline", str(cli)], str(cli)),
        (["-o", f"groundjudge_baseline={ini}"], str(ini)),
        (["-o", f"groundjudge_baseline={ini}", "--groundjudge-baseline", str(cli)], str(cli)),
    ]
    for options, expected in cases:
        kind = "str" if expected is not None else "type(None)"  # a Path (or anything else) that compares equal fails
        pytester.makepyfile(
            test_fixture="def test_it(groundjudge_baseline):\n"
            f"    assert (type(groundjudge_baseline), groundjudge_baseline) == ({kind}, {expected!r})\n"
        )
        result = pytester.runpytest_inprocess(*plugin_args(), *options, "-p", "no:cacheprovider")
        assert result.ret == 0, (options, result.stdout.str())


def rows(bad: set[int]) -> list[dict[str, Any]]:
    return [{"id": f"r{i}", "answer": INVENTED if i in bad else GOOD_ANSWER, "contexts": [CONTEXT]} for i in range(8)]


def test_baseline_gate_fails_only_on_a_significant_regression(pytester: pytest.Pytester, tmp_path: Path) -> None:
    # the stored run, scored by the command line as CI would have (in this process: heavy_modules_first)
    from typer.testing import CliRunner

    from groundjudge.cli import app

    for name, bad in (("base", {0}), ("same", {0}), ("one_more", {0, 1}), ("regressed", set(range(8)))):
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows(bad)))  # base: one answer already failing
    baseline = tmp_path / "baseline.jsonl"
    scored = CliRunner().invoke(
        app,
        [
            *("score", str(tmp_path / "base.jsonl"), "--out", str(baseline)),
            *("--nli-model", str(SHARED_MODEL), "--cache-dir", str(tmp_path / "cache"), "--no-progress"),
        ],
    )
    assert scored.exit_code == 0, scored.output
    pytester.makepyfile(
        test_gate=f"""
from groundjudge.testing import assert_file_grounded

def test_same():
    assert_file_grounded({str(tmp_path / "same.jsonl")!r})

def test_one_more():
    assert_file_grounded({str(tmp_path / "one_more.jsonl")!r})

def test_regressed():
    assert_file_grounded({str(tmp_path / "regressed.jsonl")!r})
"""
    )
    args = [*plugin_args(), "--groundjudge-nli-model", str(SHARED_MODEL), "-p", "no:cacheprovider"]
    args += ["--groundjudge-cache-dir", str(tmp_path / "cache")]
    gated = pytester.runpytest_inprocess(*args, "--groundjudge-baseline", str(baseline))
    gated.assert_outcomes(passed=2, failed=1)  # r0 failing already, and one more, are not significant
    out = gated.stdout.str()
    assert "test_regressed" in out and "significant regression against the baseline" in out
    assert "combined:" in out and "PASS lost 7" in out and "claims not supported" in out
    # without a baseline every answer must pass
    strict = pytester.runpytest_inprocess(*args)
    strict.assert_outcomes(failed=3)
    out = strict.stdout.str()
    assert "1 of 8 answers not grounded" in out and "2 of 8 answers" in out and "8 of 8 answers" in out


# -- the gate's decision: what must fail (each guards a mutation of grounding_problems that no other test caught) --


def report(
    verdict: AnswerVerdict,
    combined: float | None,
    contradicted: int = 0,
    errors: list[str] | None = None,
    *,
    id: str = "a",
) -> AnswerReport:
    """A report built by hand: 10 claims (none for NO_CLAIMS), ``contradicted`` of them contradicted."""
    n = 0 if verdict == "NO_CLAIMS" else 10
    scores = Scores(
        combined=combined, n_claims=n, n_judged=n, n_supported=n - contradicted, n_contradicted=contradicted
    )
    return AnswerReport(id=id, verdict=verdict, mode="cascade", scores=scores, errors=errors or [])


class Fixed:
    """An evaluator that returns the reports it was given (to test the assertions' decisions alone)."""

    def __init__(self, *reports: Any) -> None:
        self.reports = list(reports)

    def evaluate(self, answer: str, sources: Any, question: str | None = None) -> Any:
        (only,) = self.reports
        return only

    def run(self, rows: Any, columns: Any = None) -> Run:
        return Run(self.reports, Usage(), 0, 0)


def test_a_contradicted_claim_fails_whatever_the_score() -> None:
    contradicted = report("WARN", 0.95, contradicted=1)
    assert grounding_problems(contradicted, min_score=0.0) == ["1 contradicted claim(s)"]
    assert grounding_problems(contradicted, min_score=0.0, allow_contradicted=True) == []
    with pytest.raises(GroundingAssertionError, match=r"1 contradicted claim\(s\) \(verdict WARN\)"):
        assert_grounded("x", ["y"], min_score=0.0, evaluator=Fixed(contradicted))
    assert assert_grounded("x", ["y"], 0.0, Fixed(contradicted), allow_contradicted=True) is contradicted
    with pytest.raises(GroundingAssertionError, match="1 of 1 answers not grounded"):
        assert_file_grounded([], min_score=0.0, evaluator=Fixed(contradicted))


def test_min_score_is_the_bar() -> None:
    middling = report("WARN", 0.6)
    assert grounding_problems(middling) == ["combined score 0.600 < 0.8"]  # the default bar is 0.8
    assert grounding_problems(middling, min_score=0.5) == []
    assert grounding_problems(middling, min_score=0.61) == ["combined score 0.600 < 0.61"]
    with pytest.raises(GroundingAssertionError, match=r"combined score 0.600 < 0.8 \(verdict WARN\)"):
        assert_grounded("x", ["y"], evaluator=Fixed(middling))
    assert assert_grounded("x", ["y"], min_score=0.5, evaluator=Fixed(middling)) is middling
    with pytest.raises(GroundingAssertionError, match=r"1 of 2 answers not grounded \(min_score 0.8\)"):
        assert_file_grounded([], evaluator=Fixed(report("PASS", 0.9), middling))
    assert_file_grounded([], min_score=0.5, evaluator=Fixed(report("PASS", 0.9), middling))


@pytest.mark.parametrize("bar", [math.nan, -0.5, 1.5, "0.8", None, True])
def test_a_bar_that_is_no_number_from_0_to_1_is_refused(bar: Any) -> None:
    """min_score NaN (or below 0) passed every judged answer: a FAIL at 0.003 passed ``assert_grounded``."""
    failing = report("FAIL", 0.003)
    for check in (
        lambda: assert_grounded("x", ["y"], min_score=bar, evaluator=Fixed(failing)),
        lambda: assert_file_grounded([], min_score=bar, evaluator=Fixed(failing)),
    ):
        with pytest.raises(ValueError, match="min_score must be a number from 0 to 1"):
            check()


def test_a_file_with_no_rows_fails_the_gate(tmp_path: Path) -> None:
    """An empty file (the step that writes the answers wrote none) passed ``assert_file_grounded``: 0 of 0 failing."""
    empty = tmp_path / "answers.jsonl"
    empty.write_text("\n")
    with pytest.raises(GroundingAssertionError, match=f"no answer to check: the file {re.escape(str(empty))} held"):
        assert_file_grounded(empty, evaluator=Fixed())
    with pytest.raises(GroundingAssertionError, match="no answer to check: the rows given held no rows"):
        assert_file_grounded([], evaluator=Fixed())
    assert_file_grounded([], evaluator=Fixed(report("PASS", 0.9)))


@pytest.mark.parametrize("combined", [None, 0.95])
def test_an_answer_that_was_not_evaluated_fails(combined: float | None) -> None:
    # an ERROR can carry a score (some claims judged, the rest could flip the verdict); it still is no pass
    error = report("ERROR", combined, errors=["ServerError: HTTP 500"])
    assert grounding_problems(error, min_score=0.0) == ["the answer could not be evaluated: ServerError: HTTP 500"]
    assert grounding_problems(error, min_score=0.0, allow_contradicted=True) != []
    with pytest.raises(GroundingAssertionError, match="could not be evaluated"):
        assert_grounded("x", ["y"], min_score=0.0, evaluator=Fixed(error))
    with pytest.raises(GroundingAssertionError, match="1 of 2 answers not grounded"):
        assert_file_grounded([], min_score=0.0, evaluator=Fixed(report("PASS", 1.0), error))
    no_claims = report("NO_CLAIMS", combined)
    assert grounding_problems(no_claims, min_score=0.0) == ["no claim could be checked (NO_CLAIMS)"]
    with pytest.raises(GroundingAssertionError, match=r"no claim could be checked \(NO_CLAIMS\)"):
        assert_grounded("x", ["y"], min_score=0.0, evaluator=Fixed(no_claims))


def test_a_judge_outage_fails_the_gate(shared_nli: Any, tmp_path: Path) -> None:
    from groundjudge.cache import Cache
    from groundjudge.config import Config
    from groundjudge.pipeline.evaluator import Evaluator
    from tests.conftest import make_test_client

    with ScriptedLLMServer(lambda req: Reply.error(500, message="the judge is down")) as server:
        cache = Cache(tmp_path / "c")
        ev = Evaluator(Config(), nli=shared_nli, client=make_test_client(server, cache=cache), cache=cache)
        with pytest.raises(GroundingAssertionError) as exc:
            assert_grounded(GOOD_ANSWER, [CONTEXT], min_score=0.0, evaluator=ev, allow_contradicted=True)
        assert server.requests  # it was asked, and failed
    message = str(exc.value)
    assert message.startswith("answer not grounded: the answer could not be evaluated: ServerError")
    assert "the judge is down" in message and "(verdict ERROR)" in message


def test_nli_mode_errors_and_empty_answers_fail(shared_nli: Any, tmp_path: Path) -> None:
    from groundjudge.cache import Cache
    from groundjudge.config import Config
    from groundjudge.pipeline.evaluator import Evaluator

    ev = Evaluator(Config(mode="nli"), nli=shared_nli, cache=Cache(tmp_path / "c"))
    too_long = "The Eiffel Tower " + "is very tall and " * 300 + "stands in Paris."  # past the NLI window
    with pytest.raises(
        GroundingAssertionError,
        match=r"could not be evaluated: NLI: claim c1 not scored: .*split it into smaller claims \(verdict ERROR\)",
    ):
        assert_grounded(too_long, [CONTEXT], min_score=0.0, evaluator=ev)
    with pytest.raises(GroundingAssertionError, match=r"no claim could be checked \(NO_CLAIMS\)"):
        assert_grounded("Thanks for asking.", [CONTEXT], min_score=0.0, evaluator=ev)
    rows = [
        {"id": "good", "answer": GOOD_ANSWER, "contexts": [CONTEXT]},
        {"id": "long", "answer": too_long, "contexts": [CONTEXT]},
    ]
    assert assert_file_grounded(rows[:1], evaluator=ev).reports[0].verdict == "PASS"
    with pytest.raises(GroundingAssertionError) as exc:
        assert_file_grounded(rows, min_score=0.0, evaluator=ev, baseline=None)
    assert str(exc.value).startswith("1 of 2 answers not grounded (min_score 0.0):\nlong: the answer could not be")


def test_without_options_the_plugin_builds_nothing_and_the_environment_counts(pytester: pytest.Pytester) -> None:
    """Installed in every project: with no groundjudge option it must not replace the default evaluator (which
    honours GROUNDJUDGE_LLM) by an nli-only one."""
    pytester.makepyfile(
        test_plain="""
from groundjudge.testing import assertions

def test_plain(request):
    assert "groundjudge_evaluator" not in request.fixturenames
    assert "evaluator" not in assertions.DEFAULTS
"""
    )
    result = pytester.runpytest_inprocess(*plugin_args(), "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_a_baseline_vouches_only_for_answers_it_has(shared_nli: Any, tmp_path: Path) -> None:
    """New ids and answers that failed to be evaluated have no paired score: each must meet the bar itself."""
    from groundjudge.cache import Cache
    from groundjudge.config import Config
    from groundjudge.io.reports import dumps
    from groundjudge.pipeline.evaluator import Evaluator

    ev = Evaluator(Config(mode="nli"), nli=shared_nli, cache=Cache(tmp_path / "c"))
    good = {"id": "good", "answer": GOOD_ANSWER, "contexts": [CONTEXT]}
    baseline = tmp_path / "baseline.jsonl"
    baseline.write_text("".join(dumps(r) + "\n" for r in ev.run([good]).reports))
    assert assert_file_grounded([good], evaluator=ev, baseline=baseline).reports[0].verdict == "PASS"
    too_long = "The Eiffel Tower " + "is very tall and " * 300 + "stands in Paris."  # past the NLI window: ERROR
    for extra in ({"id": "new", "answer": BAD_ANSWER, "contexts": [CONTEXT]}, {**good, "answer": too_long}):
        rows = [good, extra] if extra["id"] == "new" else [extra]
        with pytest.raises(GroundingAssertionError, match="cannot vouch for"):
            assert_file_grounded(rows, evaluator=ev, baseline=baseline)


def write_baseline(path: Path, reports: list[AnswerReport]) -> Path:
    from groundjudge.io.reports import dumps

    path.write_text("".join(dumps(r) + "\n" for r in reports))
    return path


@pytest.mark.parametrize(
    ("before", "now", "why"),
    [
        # the answer PASSed in the baseline and now has no claim to check (a score or not): nothing was judged
        (
            report("PASS", 0.9),
            report("NO_CLAIMS", None),
            r"no claim could be checked \(NO_CLAIMS\) \(verdict NO_CLAIMS\)",
        ),
        (
            report("PASS", 0.9),
            report("NO_CLAIMS", 0.95),
            r"no claim could be checked \(NO_CLAIMS\) \(verdict NO_CLAIMS\)",
        ),
        (report("PASS", 0.9), report("PASS", math.nan), r"combined score nan is not a finite number \(verdict PASS\)"),
        # the baseline had nothing to compare it with: a FAIL now is judged against nothing
        (report("NO_CLAIMS", None), report("FAIL", 0.3), r"combined score 0.300 < 0.8 \(verdict FAIL\)"),
        (report("ERROR", None, errors=["x"]), report("FAIL", 0.3), r"combined score 0.300 < 0.8 \(verdict FAIL\)"),
        # a stage that was meant to run and failed (named in errors) is no judgement as configured, on either side:
        # the run's failed QA check passed the gate it fails without a baseline, and a baseline's failure scored at
        # its worst value vouched for a lower score now
        (
            report("PASS", 0.9),
            report("WARN", 0.9, errors=["QA: the check failed: HTTP 500"]),
            r"a check failed: QA: the check failed: HTTP 500 \(verdict WARN\)",
        ),
        (
            report("WARN", 0.4, errors=["QA: the check failed: HTTP 500"]),
            report("FAIL", 0.3),
            r"combined score 0.300 < 0.8 \(verdict FAIL\)",
        ),
    ],
)
def test_a_baseline_cannot_vouch_for_what_was_not_judged(
    tmp_path: Path, before: AnswerReport, now: AnswerReport, why: str
) -> None:
    """NO_CLAIMS (or a score that is not a number) in the run, or anything but a scored PASS, WARN or FAIL in the
    baseline, is no paired comparison: like an ERROR or a new id, the answer must meet the bar itself."""
    passing = [report("PASS", 0.9, id=f"r{i}") for i in range(3)]
    baseline = write_baseline(tmp_path / "baseline.jsonl", [*passing, before.model_copy(update={"id": "odd"})])
    run = [*passing, now.model_copy(update={"id": "odd"})]
    with pytest.raises(GroundingAssertionError, match="1 of 4 answers not grounded"):
        assert_file_grounded([], evaluator=Fixed(*run))  # the same run without a baseline fails it
    with pytest.raises(GroundingAssertionError) as exc:
        assert_file_grounded([], evaluator=Fixed(*run), baseline=baseline)
    head, *rest = str(exc.value).splitlines()
    assert head == f"1 answers the baseline {baseline} cannot vouch for are not grounded:"
    assert re.fullmatch(f"odd: {why}", rest[0])


def test_an_answer_missing_from_the_run_fails_the_baseline_gate(tmp_path: Path) -> None:
    """Dropping the answer that failed would otherwise pass the gate it failed."""
    before = [report("PASS", 0.9, id=f"r{i}") for i in range(3)] + [report("ERROR", None, errors=["x"], id="r3")]
    baseline = write_baseline(tmp_path / "baseline.jsonl", before)
    with pytest.raises(GroundingAssertionError, match="r3: the answer could not be evaluated"):
        assert_file_grounded([], evaluator=Fixed(*before), baseline=baseline)
    with pytest.raises(GroundingAssertionError) as exc:
        assert_file_grounded([], evaluator=Fixed(*before[1:3]), baseline=baseline, show=1)
    assert str(exc.value) == f"2 answers of the baseline {baseline} are missing from this run: r0 and 1 more"
    assert_file_grounded([], evaluator=Fixed(*before[:3], report("PASS", 0.9, id="r3")), baseline=baseline)


def test_a_baseline_scored_with_other_settings_is_no_gate(tmp_path: Path) -> None:
    """A baseline scored with another judge, NLI model, preset or groundjudge's prompts passed or failed the gate on
    a difference that was partly the scoring's. Now the gate refuses it, naming the settings, unless told to gate
    anyway; the device alone (the same weights) and a key older reports lack are no difference."""
    made = {"nli_model": "m@1/nli/cpu-float32", "llm": "openai/gpt-4o-mini", "prompt.judge": "3"}
    now = [report("PASS", 0.9, id=f"r{i}").model_copy(update={"versions": made}) for i in range(3)]
    other = [r.model_copy(update={"versions": {**made, "llm": "openai/gpt-4o"}}) for r in now]
    baseline = write_baseline(tmp_path / "baseline.jsonl", other)
    with pytest.raises(GroundingAssertionError, match="other settings than this run") as exc:
        assert_file_grounded([], evaluator=Fixed(*now), baseline=baseline)
    assert "llm: openai/gpt-4o in A, openai/gpt-4o-mini in B" in str(exc.value)
    assert_file_grounded([], evaluator=Fixed(*now), baseline=baseline, allow_other_settings=True)
    device = [r.model_copy(update={"versions": {**made, "nli_model": "m@1/nli/cuda-float16"}}) for r in now]
    assert_file_grounded([], evaluator=Fixed(*now), baseline=write_baseline(tmp_path / "gpu.jsonl", device))
    older = [r.model_copy(update={"versions": {**made, "verdict": "preset=default"}}) for r in now]
    assert_file_grounded([], evaluator=Fixed(*older), baseline=write_baseline(tmp_path / "same.jsonl", now))
    # a baseline resumed with --retry-errors holds an id's failed report before its last one: only the last counts,
    # as compare reads a run (a failed first try with a mistyped judge refused the gate; compare passed it)
    typo = report("ERROR", None, errors=["x"], id="r0").model_copy(
        update={"versions": {**made, "llm": "openai/gpt-4o-mnii"}}
    )
    assert_file_grounded([], evaluator=Fixed(*now), baseline=write_baseline(tmp_path / "resumed.jsonl", [typo, *now]))


GATE_FAILURES = """
from groundjudge.models import AnswerReport, Claim, ClaimVerdict, Scores, Usage
from groundjudge.io.reports import dumps
from groundjudge.review.notebook import Run
from groundjudge.testing import assert_file_grounded, assert_grounded

def failing(id):
    claim = ClaimVerdict(claim=Claim(id="c1", text=f"The claim of {id}."), label="UNSUPPORTED", route="nli")
    scores = Scores(combined=0.1, n_claims=1, n_judged=1)
    return AnswerReport(id=id, verdict="FAIL", mode="nli", scores=scores, claims=[claim])

class Fixed:
    def __init__(self, *reports):
        self.reports = list(reports)
    def evaluate(self, answer, sources, question=None):
        return self.reports[0]
    def run(self, rows, columns=None):
        return Run(self.reports, Usage(), 0, 0)

def test_answer():
    assert_grounded("An answer.", ["A source."], evaluator=Fixed(failing("a1")))

def test_file():
    assert_file_grounded([], evaluator=Fixed(failing("q7"), failing("q9")))

def test_baseline(tmp_path):
    same = failing("q1")
    (tmp_path / "b.jsonl").write_text(dumps(same) + "\\n")
    assert_file_grounded([], evaluator=Fixed(same, failing("q8")), baseline=tmp_path / "b.jsonl")
"""


def test_a_gate_failure_shows_the_answers_not_the_library(pytester: pytest.Pytester) -> None:
    """The assertions hide their own frames (``__tracebackhide__``): a failure is the test's line, then the message,
    which leads with the answer ids, their verdicts and claims."""
    pytester.makepyfile(test_gate=GATE_FAILURES)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=3)
    out = result.stdout.str()
    assert "assertions.py" not in out and "raise GroundingAssertionError" not in out, out
    # each failure, line after line: the test's call, the head of the message, the answers with verdicts and claims
    blocks = [
        [
            '>       assert_grounded("An answer.", [[]"A source."], evaluator=Fixed(failing("a1")))',  # [[] is a [
            "E       *GroundingAssertionError: answer not grounded: combined score 0.100 < 0.8 (verdict FAIL)",
            "E         answer: An answer.",
            "E       claims not supported (1 of 1):",
            'E         - [[]UNSUPPORTED, nli] "The claim of a1."',
        ],
        [
            '>       assert_file_grounded([[]], evaluator=Fixed(failing("q7"), failing("q9")))',
            "E       *GroundingAssertionError: 2 of 2 answers not grounded (min_score 0.8):",
            "E       q7: combined score 0.100 < 0.8 (verdict FAIL)",
            "E       claims not supported (1 of 1):",
            'E         - [[]UNSUPPORTED, nli] "The claim of q7."',
            "E             no source text found for it",
            "E       q9: combined score 0.100 < 0.8 (verdict FAIL)",
        ],
        [
            '>       assert_file_grounded([[]], evaluator=Fixed(same, failing("q8")), baseline=tmp_path / "b.jsonl")',
            "E       *GroundingAssertionError: 1 answers the baseline */b.jsonl cannot vouch for are not grounded:",
            "E       q8: combined score 0.100 < 0.8 (verdict FAIL)",
            "E       claims not supported (1 of 1):",
            'E         - [[]UNSUPPORTED, nli] "The claim of q8."',
        ],
    ]
    for block in blocks:
        result.stdout.fnmatch_lines(block, consecutive=True)


# -- the baseline gate over generated runs: a baseline vouches only for what it judged, and worse never passes --

SCORES = (0.0, 0.2, 0.5, 0.7, 0.85, 0.9, 1.0)


def scored(id: str, combined: float, contradicted: int = 0) -> AnswerReport:
    verdict: AnswerVerdict = "PASS" if combined >= 0.8 else "WARN" if combined >= 0.5 else "FAIL"
    return report(verdict, combined, contradicted, id=id)


@st.composite
def answer(draw: st.DrawFn, id: str, clean: bool = False) -> AnswerReport:
    """A report as a run has them: scored (some with a contradicted claim), unless ``clean`` now and then ERROR or
    NO_CLAIMS."""
    kind = draw(st.sampled_from(["scored"] * 12 + ([] if clean else ["ERROR", "NO_CLAIMS"])))
    if kind == "ERROR":
        return report("ERROR", draw(st.sampled_from([None, 0.9])), errors=["ServerError: HTTP 500"], id=id)
    if kind == "NO_CLAIMS":
        return report("NO_CLAIMS", None, id=id)
    return scored(id, draw(st.sampled_from(SCORES)), draw(st.sampled_from([0, 0, 0, 1])))


def lowered(r: AnswerReport, by: float) -> AnswerReport:
    assert r.scores.combined is not None
    return scored(r.id, max(0.0, r.scores.combined - by), r.scores.n_contradicted)


@st.composite
def worse(draw: st.DrawFn, run: list[AnswerReport], baseline_ids: set[str], scores_only: bool) -> list[AnswerReport]:
    """``run`` with one answer made worse: ERROR, NO_CLAIMS, a lower score, or (an id of the baseline) missing;
    ``scores_only``: a lower score wherever there is one to lower (what the paired tests alone must catch)."""
    i = draw(st.integers(0, len(run) - 1))
    old = run[i]
    lower = old.verdict in ("PASS", "WARN", "FAIL") and bool(old.scores.combined)
    kinds = ["ERROR", "NO_CLAIMS"] + (["missing"] if old.id in baseline_ids else [])
    kind = "lower" if lower and scores_only else draw(st.sampled_from(kinds + (["lower"] * 2 if lower else [])))
    if kind == "missing":
        return run[:i] + run[i + 1 :]
    if kind == "ERROR":
        new = report("ERROR", draw(st.sampled_from([None, old.scores.combined])), errors=["Timeout"], id=old.id)
    elif kind == "NO_CLAIMS":
        new = report("NO_CLAIMS", None, id=old.id)
    else:
        new = lowered(old, draw(st.sampled_from([0.05, 0.3, 1.0])))
    return [*run[:i], new, *run[i + 1 :]]


@st.composite
def runs(draw: st.DrawFn) -> tuple[list[AnswerReport], list[list[AnswerReport]]]:
    """A baseline; the new run (its scores lower or not, maybe new ids), and that run as it gets worse one injected
    failure at a time. Half the baselines are all scored with no new id, and their runs get worse by lower scores
    (mostly), so that the paired tests decide."""
    clean = draw(st.booleans())
    n = draw(st.integers(6 if clean else 1, 10))  # 6 paired answers: the fewest where the paired tests can say p < 0.05
    before = [draw(answer(f"r{i}", clean)) for i in range(n)]
    shift = draw(st.sampled_from([0, 0, 0.05, 0.3]))  # every score drifts down: a significant regression, given n
    # a scored answer scores the same or lower; one the baseline has no score for is anything now
    run = [
        lowered(r, shift + draw(st.sampled_from([0, 0, 0.05, 0.3, 1.0]))) if judged(r) else draw(answer(r.id))
        for r in before
    ]
    run += [draw(answer(f"new{i}")) for i in range(0 if clean else draw(st.sampled_from([0, 0, 1, 2])))]
    steps = [run]
    for _ in range(draw(st.integers(1, 3))):
        if not run:
            break
        run = draw(worse(run, {r.id for r in before}, clean))
        steps.append(run)
    return before, steps


def gate(run: list[AnswerReport], baseline: Path | None) -> str | None:
    """The gate's failure message, or None when it passes."""
    try:
        assert_file_grounded([], evaluator=Fixed(*run), baseline=baseline, show=100)
    except GroundingAssertionError as exc:
        return str(exc)
    return None


def brief(run: list[AnswerReport]) -> str:
    return ", ".join(f"{r.id} {r.verdict} {r.scores.combined} ({r.scores.n_contradicted} contradicted)" for r in run)


def judged(r: AnswerReport) -> bool:
    return r.verdict in ("PASS", "WARN", "FAIL") and r.scores.combined is not None


@settings(deadline=None, max_examples=100, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(generated=runs())
def test_a_baseline_never_passes_what_it_cannot_vouch_for(
    tmp_path: Path, generated: tuple[list[AnswerReport], list[list[AnswerReport]]]
) -> None:
    """Runs made worse one failure at a time (ERROR, NO_CLAIMS, a lower score, a missing answer): the gate with a
    baseline fails every run the same call without it fails for an answer the baseline did not judge, and once
    failing it stays failing."""
    before, steps = generated
    baseline = write_baseline(tmp_path / "baseline.jsonl", before)
    had = {r.id: r for r in before}
    verdicts = []
    for run in steps:
        strict, gated = gate(run, None), gate(run, baseline)
        # an answer that misses the bar, and that the baseline did not judge (new id, or no real verdict on either
        # side): the strict gate fails it, and so must the gate with the baseline, naming it
        unvouched = [
            r.id for r in run if grounding_problems(r) and not (r.id in had and judged(r) and judged(had[r.id]))
        ]
        if unvouched:
            assert strict is not None
            assert gated is not None, f"passed with the baseline: {unvouched}"
            assert all(f"\n{i}: " in gated for i in unvouched) or "shares no ids" in gated, gated
        verdicts.append((strict, gated))
    # each injected failure leaves a failing gate failing (the strict gate cannot know of a missing answer)
    for ((strict, gated), run), ((now_strict, now_gated), after) in pairwise(zip(verdicts, steps, strict=True)):
        if gated is not None:
            assert now_gated is not None, f"{gated}\n-- passes once the run is --\n{brief(after)}"
        if strict is not None and len(after) == len(run):
            assert now_strict is not None, f"{strict}\n-- passes once the run is --\n{brief(after)}"


@pytest.mark.parametrize("form", ["space", "equals", "space, inside"])
def test_a_baseline_outside_the_project_keeps_the_projects_settings(pytester: pytest.Pytester, form: str) -> None:
    """``--groundjudge-baseline PATH`` as the README writes it, with PATH outside the project: pytest picks its
    rootdir and ini from the paths on its command line before the plugin can claim PATH as the option's value, so
    the project's settings would silently go unread. The ``=`` form keeps them; the space form either keeps them
    too or stops with a usage error that names the ``=`` form, never runs with other settings."""
    project = pytester.path / "project"
    (project / "tests").mkdir(parents=True)
    (project / "pyproject.toml").write_text('[tool.pytest.ini_options]\ngroundjudge_cache_dir = "from-ini"\n')
    baseline = (project if form == "space, inside" else pytester.path / "elsewhere") / "runs" / "scored_v1.jsonl"
    baseline.parent.mkdir(parents=True)
    baseline.write_text("")
    (project / "tests" / "test_settings.py").write_text(
        "def test_it(pytestconfig, groundjudge_baseline):\n"
        "    assert pytestconfig.getini('groundjudge_cache_dir') == 'from-ini'\n"
        f"    assert groundjudge_baseline == {str(baseline)!r}\n"
    )
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.chdir(project)
    try:
        option = (
            [f"--groundjudge-baseline={baseline}"] if form == "equals" else ["--groundjudge-baseline", str(baseline)]
        )
        result = pytester.runpytest_inprocess(*plugin_args(), *option, "-p", "no:cacheprovider")
    finally:
        monkeypatch.undo()
    said = result.stdout.str() + result.stderr.str()
    if form != "space" or result.ret == 0:  # a path inside the project moves nothing: no reason to refuse it
        assert result.ret == 0, said
        return
    assert result.ret == pytest.ExitCode.USAGE_ERROR, said
    assert f"Write the value with '=': --groundjudge-baseline={baseline}" in said, said
    assert f"instead of {project} (ini file: {project / 'pyproject.toml'})" in said, said


def test_a_repeated_id_cannot_hide_an_answer_from_the_baseline_gate(shared_nli: Any, tmp_path: Path) -> None:
    """``Evaluator.run`` (and so ``assert_file_grounded``) scored a repeated id as a second report under the same
    id, where ``groundjudge score`` makes it that row's ERROR: the baseline pairs an id's last report, so a failing
    answer followed by a passing one under its id passed the gate. The repeat is the row's ERROR (id ``row-N``)."""
    from groundjudge.cache import Cache
    from groundjudge.config import Config
    from groundjudge.pipeline.evaluator import Evaluator

    ev = Evaluator(Config(mode="nli"), nli=shared_nli, cache=Cache(tmp_path / "c"))
    good = {"id": "good", "answer": GOOD_ANSWER, "contexts": [CONTEXT]}
    baseline = write_baseline(tmp_path / "baseline.jsonl", ev.run([good]).reports)
    rows = [{**good, "answer": "Paris is in Italy."}, good]
    run = ev.run(rows)
    assert [r.id for r in run] == ["good", "row-2"] and run[1].verdict == "ERROR"
    assert "duplicate id 'good': row 1 has it already" in run[1].errors[0]
    with pytest.raises(GroundingAssertionError, match="row-2"):
        assert_file_grounded(rows, evaluator=ev, baseline=baseline)
