"""Reports in a notebook: pandas frames (one row per answer, one per claim) and :class:`Run`, what
:meth:`Evaluator.run <groundjudge.pipeline.evaluator.Evaluator.run>` returns (shown as a summary table)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from groundjudge.models import AnswerReport, Scores, Usage
from groundjudge.review.summary import summarize, summary_rows

_USAGE_COLUMNS = ("calls", "cached_calls", "cost_usd", "unsettled_cost_usd", "errors", "label")
_CLAIM_COLUMNS = (
    "answer_id", "claim_id", "claim", "label", "route", "entailment", "contradiction", "supported", "reason",
    "quotes", "flags", "error",
)  # fmt: skip


def to_dataframe(reports: Iterable[AnswerReport]) -> Any:
    """One row per answer (pandas needed: ``pip install groundjudge[pandas]``); ``cost_usd`` is empty (NaN) for an
    answer whose calls went to a model without a price; ``unsettled_cost_usd`` is the part of it that is the worst
    case of calls sent with no reply (at most, not billed)."""
    import pandas as pd

    rows = []
    for r in reports:
        row: dict[str, Any] = {"id": r.id, "verdict": r.verdict, "verdict_reasons": "; ".join(r.verdict_reasons)}
        row["mode"] = r.mode
        row.update(r.scores.columns())
        row.update(
            {
                "calls": r.usage.calls,
                "cached_calls": r.usage.cached_calls,
                "cost_usd": r.usage.known_cost(),
                "unsettled_cost_usd": r.usage.unsettled_cost_usd,  # of cost_usd, a worst case: calls with no reply
                "errors": "; ".join(r.errors),
                "label": r.label,
            }
        )
        rows.append(row)
    if not rows:  # no answer: the same columns, so that a cell selecting them works on an empty run too
        columns = ["id", "verdict", "verdict_reasons", "mode", *Scores().columns(), *_USAGE_COLUMNS]
        return pd.DataFrame(columns=columns).set_index("id")
    return pd.DataFrame(rows).set_index("id")


def claims_dataframe(reports: Iterable[AnswerReport]) -> Any:
    """One row per claim, with its answer's id."""
    import pandas as pd

    rows = []
    for r in reports:
        for c in r.claims:
            rows.append(
                {
                    "answer_id": r.id,
                    "claim_id": c.claim.id,
                    "claim": c.claim.text,
                    "label": c.label,
                    "route": c.route,
                    "entailment": c.nli.entailment if c.nli else None,
                    "contradiction": c.nli.contradiction if c.nli else None,
                    "supported": c.nli.supported if c.nli else None,  # the verdict head's probability, if any
                    "reason": c.reason,
                    "quotes": " | ".join(q.text for q in c.quotes),
                    "flags": ",".join(c.flags),
                    "error": c.error,
                }
            )
    return pd.DataFrame(rows, columns=list(_CLAIM_COLUMNS))


def _html_table(rows: list[tuple[str, str]]) -> str:
    from html import escape

    body = "".join(f"<tr><th style='text-align:left'>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in rows)
    return f"<table>{body}</table>"


class Run:
    """The reports of one :meth:`Evaluator.run`, their summary, and what came from the cache."""

    def __init__(self, reports: list[AnswerReport], llm: Usage, nli_computed: int, nli_cached: int) -> None:
        self.reports = reports
        self.summary = summarize(reports)
        self.llm = llm
        self.nli_computed = nli_computed
        self.nli_cached = nli_cached

    @property
    def cache_note(self) -> str:
        """What this run took from the cache and what it paid for, and how many answers failed: a failed call is
        never cached (nor counted in the calls), so a run whose answers failed is no free replay, whatever it
        read from the cache."""
        calls = self.llm.calls + self.llm.cached_calls
        pairs = self.nli_computed + self.nli_cached
        note = (
            f"LLM calls: {self.llm.cached_calls} of {calls} from the cache, {self.llm.calls} billed "
            f"(cost {self.llm.cost_text()}); NLI pairs: {self.nli_cached} of {pairs} from the cache"
        )
        if failed := self.summary.rows_failed:
            note += (
                f"; {failed} of {len(self.reports)} answers failed (ERROR or a failed check: see their errors); "
                "what failed is not cached, so a rerun tries it again"
            )
        elif (calls or pairs) and not self.llm.calls and not self.nli_computed:  # an nli-mode rerun makes no call
            note += ". Everything came from the cache: this run cost nothing."
        return note

    def to_dataframe(self) -> Any:
        return to_dataframe(self.reports)

    def claims_dataframe(self) -> Any:
        return claims_dataframe(self.reports)

    def __len__(self) -> int:
        return len(self.reports)

    def __iter__(self) -> Iterator[AnswerReport]:
        return iter(self.reports)

    def __getitem__(self, i: int) -> AnswerReport:
        return self.reports[i]

    def __repr__(self) -> str:
        return f"<Run of {len(self.reports)} answers: {self.summary.verdicts}; {self.cache_note}>"

    def _repr_html_(self) -> str:
        from html import escape

        return f"<p>{escape(self.cache_note)}</p>" + _html_table(summary_rows(self.summary))
