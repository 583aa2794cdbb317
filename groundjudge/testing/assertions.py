"""Grounding assertions for test suites (the pytest plugin's helpers): :func:`assert_grounded`,
:func:`assert_file_grounded`, :class:`GroundingAssertionError`, and the default evaluator they use.

The defaults live in one dict, :data:`DEFAULTS` ("evaluator", "baseline"), that the pytest plugin fills for the
session and clears after it.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from groundjudge.errors import ArgumentError, CacheMissError, GroundjudgeError


class GroundingAssertionError(AssertionError, GroundjudgeError):
    """An answer (or a file of answers) is not grounded enough; the message lists the claims behind it."""


DEFAULTS: dict[str, Any] = {}  # set by the pytest plugin: "evaluator", "baseline"


def set_default_evaluator(evaluator: Any) -> None:
    """The evaluator :func:`assert_grounded` uses when given none (the pytest plugin sets it)."""
    DEFAULTS["evaluator"] = evaluator


def default_evaluator() -> Any:
    """The plugin's evaluator, else one built from the environment (nli mode without ``GROUNDJUDGE_LLM``)."""
    if DEFAULTS.get("evaluator") is None:
        import os

        from groundjudge.pipeline.evaluator import Evaluator

        DEFAULTS["evaluator"] = Evaluator(llm=os.environ.get("GROUNDJUDGE_LLM") or None)
    return DEFAULTS["evaluator"]


def _short(text: str, width: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def cache_miss(exc: CacheMissError, evaluator: Any, answer: str | None = None) -> CacheMissError:
    """A cache-only replay missed: the same error, its message naming the test, the answer, the call (the stage,
    from the client's message) and the fix."""
    import os

    test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0] or "this check"
    cache = getattr(getattr(evaluator, "cache", None), "directory", None)
    where = f" ({cache})" if cache is not None else ""
    what = f' for the answer "{_short(answer)}"' if answer is not None else ""
    return CacheMissError(
        f"cache-only replay missed in {test}{what}: {exc}. Fix: run this test once without --groundjudge-cache-only, "
        f"with the LLM's key, to record the replies, then commit or restore the cache directory{where} for CI"
    )


def check_min_score(min_score: Any, name: str = "min_score") -> float:
    """``min_score`` as a float from 0 to 1; anything else (NaN, a negative number, a string) is an ArgumentError
    naming the argument (``name``): no score is below NaN or a negative bar, so such a bar would pass every judged
    answer."""
    if isinstance(min_score, bool) or not isinstance(min_score, (int, float)) or not 0.0 <= min_score <= 1.0:
        raise ArgumentError(f"{name} must be a number from 0 to 1, not {min_score!r}")
    return float(min_score)


def grounding_problems(report: Any, min_score: float = 0.8, allow_contradicted: bool = False) -> list[str]:
    """Why ``report`` falls short (empty when it is grounded): its score, its verdict, contradicted claims, a stage
    that was meant to run and failed (``errors``, claims not judged: never grounded), a score that is no number
    (any part's: every :func:`groundjudge.tally.failed_row` falls short). The verdict's own reasons (which parts
    made it) follow in :func:`explain_report`."""
    s = report.scores
    problems = []
    if report.verdict == "ERROR":
        problems.append(f"the answer could not be evaluated: {'; '.join(report.errors) or 'ERROR'}")
    elif report.verdict == "NO_CLAIMS" or s.combined is None:
        problems.append("no claim could be checked (NO_CLAIMS)")
    elif not math.isfinite(s.combined):
        problems.append(f"combined score {s.combined} is not a finite number")
    elif s.combined < min_score:
        problems.append(f"combined score {s.combined:.3f} < {min_score}")
    if s.n_contradicted and not allow_contradicted:
        problems.append(f"{s.n_contradicted} contradicted claim(s)")
    if report.verdict != "ERROR" and (report.errors or s.n_errors):
        # a stage that was meant to run failed (a claim not judged, the NLI model, the QA check): whatever the score,
        # the answer was not checked as configured
        unjudged = [f"{s.n_errors} of {s.n_claims} claims not judged"] if s.n_errors else []
        problems.append(f"a check failed: {'; '.join([*unjudged, *report.errors])}")
    from groundjudge.tally import non_finite_scores

    if parts := [k for k in non_finite_scores(report) if k != "combined"]:  # a file another tool wrote: a failed row
        problems.append(f"scores that are no number: {', '.join(parts)}")
    return problems


def is_judged(report: Any) -> bool:
    """:func:`groundjudge.tally.is_judged` (a PASS, WARN or FAIL with a finite combined score: what an adapter
    scores), by its name here."""
    from groundjudge.tally import is_judged as judged

    return judged(report)


def vouches(report: Any) -> bool:
    """:func:`groundjudge.tally.vouches` (a judgement that no failure touched: what a gate may pair), by its name
    here."""
    from groundjudge.tally import vouches as vouched

    return vouched(report)


def explain_report(report: Any) -> list[str]:
    """Why ``report`` got its verdict (its reasons: which rules fired, with their numbers), then the claims that
    are not supported: verdict, route, reason and the closest source text."""
    from groundjudge.diagnose import closest_source

    lines = [f"  why: {reason}" for reason in report.verdict_reasons]
    bad = [c for c in report.claims if c.label != "SUPPORTED"]
    if bad:
        lines.append(f"claims not supported ({len(bad)} of {len(report.claims)}):")
    for c in bad:
        lines.append(f'  - [{c.label}, {c.route}] "{_short(c.claim.text)}"' + (f": {c.reason}" if c.reason else ""))
        doc, text = closest_source(c)
        if text:
            where = f"source {doc + 1}" if doc is not None else "sources"
            lines.append(f'      closest source text ({where}): "{_short(text)}"')
        else:
            lines.append("      no source text found for it")
    return lines


def assert_grounded(
    answer: str,
    sources: Any,
    min_score: float = 0.8,
    evaluator: Any = None,
    *,
    question: str | None = None,
    allow_contradicted: bool = False,
) -> Any:
    """Fail (``AssertionError``) unless ``answer`` is grounded in ``sources``: combined score >= ``min_score`` and
    no contradicted claim; returns the report. ``min_score`` is a number from 0 to 1 (else an ArgumentError).

    The failure message lists the claims that are not supported with their verdicts and the closest source text
    (the judge's verified quote, else the claim's best NLI passage). ``evaluator`` defaults to the pytest plugin's
    (``groundjudge_evaluator``: ``--groundjudge-llm``, ``--groundjudge-cache-only``), else an nli-mode one.
    """
    __tracebackhide__ = True  # pytest: the failure is the test's line and the message, not this function
    min_score = check_min_score(min_score)
    ev = evaluator if evaluator is not None else default_evaluator()
    try:
        report = ev.evaluate(answer, sources, question)
    except CacheMissError as exc:
        raise cache_miss(exc, ev, answer) from None  # the message says it all; no chain of library frames
    problems = grounding_problems(report, min_score, allow_contradicted)
    if problems:
        head = f"answer not grounded: {'; '.join(problems)} (verdict {report.verdict})"
        raise GroundingAssertionError("\n".join([head, f"  answer: {_short(answer)}", *explain_report(report)]))
    return report


def assert_file_grounded(
    path_or_rows: Any,
    min_score: float = 0.8,
    evaluator: Any = None,
    *,
    baseline: str | Path | None = None,
    alpha: float = 0.05,
    columns: dict[str, str] | None = None,
    allow_contradicted: bool = False,
    show: int = 5,
    allow_other_settings: bool = False,
) -> Any:
    """Evaluate a whole file of rows (JSONL, CSV, Parquet), a DataFrame, a Dataset or a list of dicts; returns the
    :class:`~groundjudge.review.notebook.Run`.

    Without ``baseline`` every answer must pass :func:`assert_grounded`'s bar. With ``baseline`` (a stored
    ``groundjudge score`` output of the same ids; default: the plugin's ``--groundjudge-baseline``) it fails on
    a significant regression against it (the paired tests of :func:`~groundjudge.review.compare.compare_runs`;
    the message names the metrics that got worse and the answers that changed most, with their claims), on any
    answer that failed in this run (ERROR, a stage that failed, a score that is no number: no failure passes a
    gate, whatever the baseline was), and on any answer the baseline cannot vouch for that misses the bar itself: a
    new id, or an answer that is not a real judgement (:func:`vouches`: ERROR, NO_CLAIMS, no finite score, a stage
    that failed) in this run or in the baseline; and on an answer of the baseline that this run lacks (it was not
    evaluated at all). The rows are drawn as ``compare --fail-if-worse`` draws them
    (:func:`~groundjudge.review.compare.gate_rows`). It also fails when
    the baseline was scored with other settings than this run (another judge, NLI model, preset or groundjudge's
    prompts: the difference would be partly the scoring's), unless ``allow_other_settings``. An input with no rows
    fails: a gate that checked nothing passes nothing. ``min_score`` is a number from 0 to 1 (else an ArgumentError).
    """
    __tracebackhide__ = True  # pytest: the failure is the test's line and the message, not this function
    min_score = check_min_score(min_score)
    ev = evaluator if evaluator is not None else default_evaluator()
    try:
        run = ev.run(path_or_rows, columns=columns)
    except CacheMissError as exc:  # its message names the row and the answer's id
        raise cache_miss(exc, ev) from None
    if not run.reports:  # a gate that checked nothing passes nothing (an empty file: the answers were never written)
        what = f"the file {path_or_rows}" if isinstance(path_or_rows, (str, Path)) else "the rows given"
        raise GroundingAssertionError(f"no answer to check: {what} held no rows")
    baseline = baseline if baseline is not None else DEFAULTS.get("baseline")
    by_id = {r.id: r for r in run.reports}
    if baseline is not None:
        from groundjudge.io.made_with import differ_text
        from groundjudge.io.reports import last_reports, read_reports
        from groundjudge.review.compare import compare_runs, gate_rows

        before, _ = last_reports(read_reports(baseline))  # one per id, its last, as compare reads a run
        result = compare_runs(before, run.reports, alpha=alpha)
        if result["paired"] == 0:
            raise GroundingAssertionError(f"the baseline {baseline} shares no ids with this run")
        if not allow_other_settings and (unlike := result["settings_differ"]):
            raise GroundingAssertionError(
                f"the baseline {baseline} (A) was scored with other settings than this run (B): {differ_text(unlike)}; "
                "a regression against it would be partly the scoring's. Score the baseline again with this run's "
                "settings, or pass allow_other_settings=True to gate anyway"
            )
        # what the paired tests cannot judge, drawn by compare's one rule (gate_rows): answers that failed here
        # (whatever the baseline was: no failure passes a gate), and answers the baseline cannot vouch for (a new id,
        # no real judgement on either side, a failure in the baseline: no score to compare, or one at its worst
        # value; one such row is not "significant"): each must meet the bar itself; an answer of the baseline that
        # this run lacks is not evaluated at all (dropping a failing answer would otherwise pass the gate it failed)
        rows = gate_rows(before, run.reports)
        alone = {r.id for r in (*rows.failed, *rows.alone)}
        unjudged = [
            (r, p) for r in run.reports if r.id in alone and (p := grounding_problems(r, min_score, allow_contradicted))
        ]
        missing = rows.missing
        if unjudged or missing:
            lines = []
            if unjudged:
                lines.append(f"{len(unjudged)} answers the baseline {baseline} cannot vouch for are not grounded:")
                for r, problems in unjudged[:show]:
                    lines.append(f"{r.id}: {'; '.join(problems)} (verdict {r.verdict})")
                    lines.extend(explain_report(r))
                if len(unjudged) > show:
                    lines.append(f"... and {len(unjudged) - show} more: {', '.join(r.id for r, _ in unjudged[show:])}")
            if missing:
                more = f" and {len(missing) - show} more" if len(missing) > show else ""
                lines.append(
                    f"{len(missing)} answers of the baseline {baseline} are missing from this run: "
                    f"{', '.join(missing[:show])}{more}"
                )
            raise GroundingAssertionError("\n".join(lines))
        if result["b_significantly_worse"]:
            lines = [f"significant regression against the baseline {baseline} ({result['paired']} paired answers):"]
            for name, m in result["metrics"].items():
                if m["b_worse"]:
                    lo, hi = m["ci95"]
                    lines.append(
                        f"  {name}: {m['mean_a']:.3f} -> {m['mean_b']:.3f} ({m['diff']:+.3f}, 95% CI "
                        f"[{lo:+.3f}, {hi:+.3f}], p={m['p_value']:.4f})"
                    )
            mc = result["mcnemar"]
            lines.append(f"  PASS lost {mc['pass_lost']}, gained {mc['pass_gained']} (McNemar p={mc['p_value']:.4f})")
            for row in result["most_changed"][:show]:
                lines.append(f"  {row['id']}: {row['verdict']}, combined {row['combined_diff']:+.3f}")
                lines.extend("  " + x for x in explain_report(by_id[row["id"]]))
            raise GroundingAssertionError("\n".join(lines))
        return run
    failing = [(r, p) for r in run.reports if (p := grounding_problems(r, min_score, allow_contradicted))]
    if failing:
        lines = [f"{len(failing)} of {len(run.reports)} answers not grounded (min_score {min_score}):"]
        for r, problems in failing[:show]:
            lines.append(f"{r.id}: {'; '.join(problems)} (verdict {r.verdict})")
            lines.extend(explain_report(r))
        if len(failing) > show:
            lines.append(f"... and {len(failing) - show} more: {', '.join(r.id for r, _ in failing[show:])}")
        raise GroundingAssertionError("\n".join(lines))
    return run
