"""A reviewer's latest decision is the one with the latest ``decided_at`` (ties, and lines without a time: file
order), in the one rule every reader of reviews goes through (``review.metrics.review_labels``).

An earlier review found "latest" taken as the last line of the file: with team review (several reviewers' or
several exports' files put together, lines written out of order) an older decision overrode a newer one, so a
reviewer who changed their mind taught their old label, or a claim two reviewers now agree on was left out as
disputed (and the other way round).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from groundjudge.cli.root import app
from groundjudge.errors import InputError
from groundjudge.io.reports import dumps
from groundjudge.models import AnswerReport, Claim, ClaimVerdict, Scores
from groundjudge.review.metrics import parse_reviews, review_labels
from tests.review.test_disputed_reviews import _labels, _line

T9, T10, T11 = "2026-11-30T09:00:00.000+00:00", "2026-11-30T10:00:00.000Z", "2026-11-30T11:00:00.000+00:00"


def test_the_latest_decided_at_counts_not_the_last_line() -> None:
    # ann's exports of yesterday and today put together, today's first: her latest word is today's
    assert _labels([_line("c1", "CONTRADICTED", "ann", T11), _line("c1", "SUPPORTED", "ann", T10)])[0] == {
        "c1": "CONTRADICTED"
    }
    # a team's files merged: ann changed her mind to agree with ben; her older line read last does not dispute it
    lines = [
        _line("c1", "CONTRADICTED", "ann", T11),
        _line("c1", "CONTRADICTED", "ben", T10),
        _line("c1", "SUPPORTED", "ann", T9),
        # and the other way round: ann agreed with ben at first, then disagreed
        _line("c2", "SUPPORTED", "ann", T11),
        _line("c2", "CONTRADICTED", "ben", T10),
        _line("c2", "CONTRADICTED", "ann", T9),
    ]
    assert _labels(lines) == ({"c1": "CONTRADICTED"}, ["c2"])
    every = parse_reviews(lines, per_reviewer=True)  # what reviewers_agreement reads: each one's latest
    assert sorted((r.claim_id, r.reviewer, r.label) for r in every) == [
        ("c1", "ann", "CONTRADICTED"),
        ("c1", "ben", "CONTRADICTED"),
        ("c2", "ann", "SUPPORTED"),
        ("c2", "ben", "CONTRADICTED"),
    ]


def test_ties_and_lines_without_a_time_keep_file_order() -> None:
    # the same time: the later line
    assert _labels([_line("c1", "SUPPORTED", "ann", T10), _line("c1", "UNSUPPORTED", "ann", T10)])[0] == {
        "c1": "UNSUPPORTED"
    }
    # no time (a hand-made file, the static page's cleared line): made after the lines before it
    assert _labels([_line("c1", "SUPPORTED", "ann", None), _line("c1", "UNSUPPORTED", "ann", None)])[0] == {
        "c1": "UNSUPPORTED"
    }
    assert _labels([_line("c1", "SUPPORTED", "ann", T10), _line("c1", None, "ann", None)])[0] == {}  # cleared
    # ... and so after the time of the lines before it: a line older than that is older than it too
    lines = [_line("c1", "SUPPORTED", "ann", T10), _line("c1", "UNSUPPORTED", "ann", None)]
    assert _labels([*lines, _line("c1", "CONTRADICTED", "ann", T9)])[0] == {"c1": "UNSUPPORTED"}
    assert _labels([*lines, _line("c1", "CONTRADICTED", "ann", T11)])[0] == {"c1": "CONTRADICTED"}


def test_an_older_withdrawal_or_adjudication_read_later_changes_nothing() -> None:
    lines = [
        _line("c1", "SUPPORTED", "ann", T11),
        _line("c1", None, "ann", T10),  # she cleared an earlier verdict, then gave this one
        _line("c2", "SUPPORTED", "ann", T9),
        _line("c2", "CONTRADICTED", "ben", T9),
        _line("c2", "CONTRADICTED", "cat", T11, adjudicated=True),
        _line("c2", "SUPPORTED", "dan", T10, adjudicated=True),  # an earlier adjudication, superseded by cat's
    ]
    assert _labels(lines) == ({"c1": "SUPPORTED", "c2": "CONTRADICTED"}, [])


def test_unnamed_lines_out_of_order_are_one_reviewers_latest_word_and_said() -> None:
    lines = [_line("c1", "CONTRADICTED", None, T11), _line("c1", "SUPPORTED", None, T10)]
    settled = review_labels(parse_reviews(lines, per_reviewer=True))
    assert [r.label for r in settled.labels] == ["CONTRADICTED"] and settled.unnamed_changes == 1


def test_a_decided_at_that_is_no_time_is_refused_naming_the_line() -> None:
    # read as no time, it would let its line override a newer one by file order
    with pytest.raises(InputError, match=r"row 2, field 'decided_at'.*'yesterday' is not an ISO 8601 time"):
        parse_reviews([_line("c1", "SUPPORTED", "ann", T10), _line("c1", "UNSUPPORTED", "ann", "yesterday")])


def test_metrics_reads_the_latest_decision_of_files_put_together(tmp_path: Path) -> None:
    claim = ClaimVerdict(claim=Claim(id="c1", text="claim c1"), label="CONTRADICTED", route="judge")
    report = AnswerReport(id="a", verdict="FAIL", mode="cascade", scores=Scores(n_claims=1), claims=[claim])
    (tmp_path / "run.jsonl").write_text(dumps(report) + "\n")
    joined = tmp_path / "joined.jsonl"  # cat today.jsonl yesterday.jsonl
    joined.write_text(_line("c1", "CONTRADICTED", "ann", T11) + "\n" + _line("c1", "SUPPORTED", "ann", T10) + "\n")
    res = CliRunner().invoke(app, ["metrics", str(tmp_path / "run.jsonl"), "--reviews", str(joined), "--json"])
    assert res.exit_code == 0, res.output
    m = json.loads(res.stdout)
    assert (m["n"], m["agreement"]) == (1, 1.0)  # groundjudge's CONTRADICTED against ann's latest word


def test_a_browser_time_is_read_on_python_3_10(monkeypatch: pytest.MonkeyPatch) -> None:
    # the review page writes decided_at with toISOString (a final "Z"); Python 3.10, which groundjudge supports,
    # parses no "Z" in fromisoformat, so every line of the page's export was refused as "not an ISO 8601 time" there
    import datetime as stdlib

    from groundjudge.review import metrics

    class Python310(stdlib.datetime):
        """``fromisoformat`` as Python 3.10 has it: no "Z" for UTC."""

        @classmethod
        def fromisoformat(cls, text: str) -> stdlib.datetime:
            if text[-1:] in ("Z", "z"):
                raise ValueError(f"Invalid isoformat string: {text!r}")
            return stdlib.datetime.fromisoformat(text)

    monkeypatch.setattr(metrics, "datetime", Python310)
    at = metrics.decided_time("2026-11-30T10:00:00.000Z", 1)
    assert at == stdlib.datetime(2026, 11, 30, 10, tzinfo=stdlib.timezone.utc)
    lines = [_line("c1", "SUPPORTED", "ann", T11), _line("c1", "CONTRADICTED", "ann", "2026-11-30T10:00:00.000z")]
    assert _labels(lines) == ({"c1": "SUPPORTED"}, [])


def test_the_page_says_unnamed_lines_count_their_latest_decision() -> None:
    # the page's ask for a name said "the last line counting" after review_labels took the latest decided_at (4a9d30a)
    from groundjudge.review.html import render_html

    claim = ClaimVerdict(claim=Claim(id="c1", text="claim c1"), label="CONTRADICTED", route="judge")
    report = AnswerReport(id="a", verdict="FAIL", mode="cascade", scores=Scores(n_claims=1), claims=[claim])
    page = render_html([report])
    assert "the latest decision counting" in page and "the last line counting" not in page
