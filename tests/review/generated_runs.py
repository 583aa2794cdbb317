"""Generated runs for the gates' property tests (``compare --fail-if-worse`` in ``tests/review``, the pytest baseline
gate in ``tests/testing``): one set of strategies, so that both gates are held to "no failure passes" on the same
runs. A run is answers with generated claim labels (``tests.review.test_quantities._report``: scored and decided
as the pipeline scores and decides them); a failure is one of the ways the run summary counts a failed row."""

from __future__ import annotations

from hypothesis import strategies as st

from groundjudge.models import AnswerReport, Scores

LABEL_SETS = st.lists(st.sampled_from(["SUPPORTED", "UNSUPPORTED", "CONTRADICTED"]), min_size=1, max_size=4)
"""One answer's claim labels."""

FAILURES = ("error", "errors", "nan", "nan_part", "part")
"""The ways :func:`made_to_fail` fails an answer."""


def failed_whole(rid: str) -> AnswerReport:
    """An answer that failed whole (the claims call failed, a judge outage): ERROR, no claim, no score."""
    return AnswerReport(id=rid, verdict="ERROR", mode="cascade", scores=Scores(), errors=["judge: HTTP 500"])


def made_to_fail(report: AnswerReport, how: str) -> AnswerReport:
    """``report`` failed in one of the ways the run's summary (and ``score``'s exit 1) counts a failed row, none of
    which raises a score: ``error``, ERROR (no score); ``errors``, a stage that failed and is named in ``errors``,
    the scores as they were; ``nan``, a combined score that is not a number (a file another tool wrote);
    ``nan_part``, the NLI part's; ``part``, a part failed (the QA check, else the NLI model): that part at its
    worst value (0), the combined score no higher, a WARN at best."""
    if how == "error":
        return failed_whole(report.id)
    if how == "errors":
        return report.model_copy(update={"errors": ["QA: the check failed: HTTP 500"]})
    if how in ("nan", "nan_part"):
        key = "combined" if how == "nan" else "nli"
        return report.model_copy(update={"scores": report.scores.model_copy(update={key: float("nan")})})
    s = report.scores
    part = "qa" if s.qa is not None else "nli"  # the QA check if it ran, else the NLI model
    old = getattr(s, part)
    combined = s.combined if s.combined is None or old is None else max(0.0, s.combined - 0.3 * old)
    scores = s.model_copy(update={part: None if old is None else 0.0, "combined": combined})
    verdict = "WARN" if report.verdict == "PASS" else report.verdict
    what = "QA: the check failed" if part == "qa" else "NLI: the model failed"
    return report.model_copy(update={"scores": scores, "verdict": verdict, "errors": [what]})


@st.composite
def fates(draw: st.DrawFn, n: int) -> list[str]:
    """What becomes of each of ``n`` answers: ``same``, or one of :data:`FAILURES`; at least one fails."""
    kinds = draw(st.lists(st.sampled_from(["same", *FAILURES]), min_size=n, max_size=n))
    if all(k == "same" for k in kinds):
        kinds[draw(st.integers(0, n - 1))] = draw(st.sampled_from(FAILURES))
    return kinds
