"""The run summary and its rows for a table (``summary_rows``): :class:`RunSummary`, built one report at a time by
:class:`Summarizer` (a dataset of any size), lives in :mod:`groundjudge.tally` (below ``runs/``, which summarizes
with it) and keeps this path."""

from __future__ import annotations

from typing import Any

from groundjudge.models import Usage
from groundjudge.tally import CI, RunSummary, Summarizer, summarize

__all__ = [
    "RunSummary",
    "Summarizer",
    "corrected_rows",
    "needs_text",
    "not_rated_text",
    "second_rows",
    "summarize",
    "summary_rows",
]


def needs_text(c: dict[str, Any]) -> str:
    """Why a corrected rate (``corrected_unsupported_rate`` JSON) has no number, with how many more labels it needs."""
    things = f"{c['labels']['level']}s"
    needs = c.get("needs") or {}
    if needs.get("positives") or needs.get("negatives"):
        return (
            f"needs {needs['positives']} more labelled {things} that are not supported "
            f"(has {c['labels']['positives']}) and {needs['negatives']} more that are supported "
            f"(has {c['labels']['negatives']})"
        )
    return str(c.get("reason") or "no number")


def not_rated_text(not_rated: dict[str, int] | None) -> str:
    """`` (not rated: 2 NO_CLAIMS, 1 ERROR)``: the answers left out of an answer-level rate; empty when none."""
    if not not_rated:
        return ""
    return " (not rated: " + ", ".join(f"{n} {verdict}" for verdict, n in sorted(not_rated.items(), reverse=True)) + ")"


def corrected_rows(c: dict[str, Any] | None) -> list[tuple[str, str]]:
    """Table rows of a ``corrected_unsupported_rate`` (none without labels): the raw rate and the corrected one
    with their 95% intervals, or how many more labels the correction needs."""
    if c is None:
        return []
    things = f"{c['labels']['level']}s"

    def pct(x: float | None, ci: CI) -> str:
        if x is None:
            return "-"
        return f"{100 * x:.1f}%" + ("" if None in ci else f" [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]")  # type: ignore[operator]

    if c["value"] is None:
        corrected = f"no number: {needs_text(c)}"
    else:
        corrected = (
            f"{pct(c['value'], c['ci'])} (sensitivity {c['sensitivity']:.3f}, specificity {c['specificity']:.3f}; "
            f"{c['labels']['positives']} + {c['labels']['negatives']} labelled {things})"
        )
    return [
        (
            f"unsupported {things} (raw)",
            f"{pct(c['raw'], c['raw_ci'])} of {c['n']}{not_rated_text(c.get('not_rated'))}",
        ),
        (f"unsupported {things}, corrected for the checker's error", corrected),
    ]


def second_rows(j: dict[str, Any] | None) -> list[tuple[str, str]]:
    """The second judge's part of the summary table (none without a second judge)."""
    if j is None:
        return []
    usage = Usage(**j["usage"])
    failed = f"; failed on {j['errors']}" if j["errors"] else ""
    return [
        (
            f"second judge ({j['model']})",
            f"{j['answers']} answers, {j['claims_compared']} claims compared{failed}; cost {usage.cost_text()} "
            "(in the cost above)",
        ),
        ("judges disagree", f"{j['answers_disagree']} answers, {j['claims_disagree']} claims"),
    ]


def summary_rows(s: RunSummary) -> list[tuple[str, str]]:
    """The summary as (name, value) rows for a table; each share and mean with its 95% interval ``[lo, hi]``."""

    def pct(x: float | None, ci: CI | None = None) -> str:
        if x is None:
            return "-"
        return f"{100 * x:.1f}%" + ("" if ci is None or None in ci else f" [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]")  # type: ignore[operator]

    def num(x: float | None, ci: CI | None = None) -> str:
        if x is None:
            return "-"
        return f"{x:.3f}" + ("" if ci is None or None in ci else f" [{ci[0]:.3f}, {ci[1]:.3f}]")

    verdicts = ", ".join(f"{k} {v}" for k, v in sorted(s.verdicts.items()))
    u, n = s.usage, s.n
    per_answer = (
        f"{u.calls / n:.2f} billed + {u.cached_calls / n:.2f} from the cache; tokens in {u.input_tokens / n:.0f} "
        f"/ out {u.output_tokens / n:.0f}"
        if n
        else "-"
    )
    cached_share = (
        f"{pct(u.cached_input_tokens / u.input_tokens)} ({u.cached_input_tokens} of {u.input_tokens})"
        if u.input_tokens
        else "-"
    )
    unchecked = f"{s.contradiction_unchecked} of {s.claims} claims" if s.claims else "-"
    if s.contradiction_unchecked:
        unchecked += " (decided locally by a model with no calibrated contradiction head)"
    return [
        ("answers", str(s.n)),
        ("verdicts", verdicts or "-"),
        ("rows failed", str(s.rows_failed)),
        (
            f"answers scoring below {s.score_threshold:g}",
            f"{pct(s.answers_below_threshold_share, s.answers_below_threshold_share_ci)} of {s.answers_scored} scored"
            if s.answers_scored
            else "-",
        ),
        ("answers with a contradicted claim", pct(s.answers_contradicted_share, s.answers_contradicted_share_ci)),
        (
            "answers with a claim not supported",
            f"{pct(s.answers_not_supported_share, s.answers_not_supported_share_ci)} of {s.answers_rated}"
            f"{not_rated_text(s.answers_not_rated)}"
            if s.answers_rated
            else "-" + not_rated_text(s.answers_not_rated),
        ),
        *corrected_rows(s.corrected_unsupported_rate),
        (
            "mean share of claims contradicted / not supported",
            f"{pct(s.mean_contradicted_share, s.mean_contradicted_share_ci)} / "
            f"{pct(s.mean_not_supported_share, s.mean_not_supported_share_ci)}",
        ),
        ("contradiction not checked", unchecked),
        ("mean combined score / p10", f"{num(s.mean_combined, s.mean_combined_ci)} / {num(s.p10_combined)}"),
        (
            "mean claim / NLI / QA score",
            f"{num(s.mean_claim_score, s.mean_claim_score_ci)} / {num(s.mean_nli_score, s.mean_nli_score_ci)} / "
            f"{num(s.mean_qa_score, s.mean_qa_score_ci)}",
        ),
        ("mean coverage", pct(s.mean_coverage, s.mean_coverage_ci)),
        ("claims / escalated to judge", f"{s.claims} / {pct(s.escalation_rate, s.escalation_rate_ci)}"),
        ("NLI pairs scored", str(s.nli_pairs)),
        *(
            [
                (
                    "citation precision / recall",
                    f"{num(s.mean_citation_precision, s.mean_citation_precision_ci)} / "
                    f"{num(s.mean_citation_recall, s.mean_citation_recall_ci)} ({s.answers_citing} answers)",
                ),
                ("claims by citation", ", ".join(f"{k} {v}" for k, v in s.citations.items())),
            ]
            if s.answers_citing
            else []
        ),
        *([("errors by kind", ", ".join(f"{k} {v}" for k, v in s.error_types.items()))] if s.error_types else []),
        ("LLM calls (cached)", f"{s.usage.calls} ({s.usage.cached_calls})"),
        ("tokens in / out", f"{s.usage.input_tokens} / {s.usage.output_tokens}"),
        ("LLM requests per answer", per_answer),
        ("input tokens from the provider's prompt cache", cached_share),
        ("cost", s.usage.cost_text()),
        *second_rows(s.second_judge),
        ("worst", ", ".join(f"{rid} ({score:.2f})" for rid, score in s.worst) or "-"),
        *(("failed", failure) for failure in s.failures),
        *(("not passed", why) for why in s.not_passed),
    ]
