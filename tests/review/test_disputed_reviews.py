"""What a file of reviews teaches (:func:`review_labels`, the one rule of metrics, calibrate, tune and compare): per
claim the adjudication, else the label every reviewer gave (each reviewer's latest decision); a claim reviewers
disagree on with no adjudication is left out, in a ``review export`` (``status``) and in files without the field
(earlier versions', the static page's, hand-made ones) alike. The service's own export is tested through the
service in ``tests/serve/test_disputed.py``."""

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


def _line(cid: str, label: str | None, who: str | None, at: str | None = None, **extra: object) -> str:
    """A review line on claim ``cid`` of answer "a", by ``who`` (None: no reviewer), decided ``at`` (None: no time)."""
    row: dict[str, object] = {"id": "a", "claim_id": cid, "claim": f"claim {cid}", "label": label, **extra}
    if who is not None:
        row["reviewer"] = who
    if at is not None:
        row["decided_at"] = at
    return json.dumps(row)


def _labels(lines: list[str]) -> tuple[dict[str, str], list[str]]:
    settled = review_labels(parse_reviews(lines, per_reviewer=True))
    return {r.claim_id: r.label for r in settled.labels}, sorted(r.claim_id for r in settled.disputed)


def test_a_claim_reviewers_disagree_on_teaches_nothing_until_it_is_adjudicated() -> None:
    # a file as 'review export' wrote it before it said the claims' status: the same rule reads it
    lines = [
        _line("c1", "SUPPORTED", "ann"),
        _line("c1", "UNSUPPORTED", "ben"),  # open: taught UNSUPPORTED, the last line, before
        _line("c2", "SUPPORTED", "ann"),
        _line("c2", "CONTRADICTED", "ben"),
        _line("c2", "CONTRADICTED", "cat", adjudicated=True),
        _line("c3", "SUPPORTED", "ann"),  # one reviewer: their label
        _line("c4", "SUPPORTED", "ann"),
        _line("c4", "UNSUPPORTED", "ben"),
        _line("c4", "UNSUPPORTED", "ann"),  # ann changed her mind: no disagreement left
    ]
    labels, disputed = _labels(lines)
    assert labels == {"c2": "CONTRADICTED", "c3": "SUPPORTED", "c4": "UNSUPPORTED"} and disputed == ["c1"]
    assert {r.claim_id for r in parse_reviews(lines)} == {"c2", "c3", "c4"}  # every reader's one-per-claim view
    # and the other way round: ann agreed with ben, then changed her mind
    assert _labels(
        [_line("c1", "SUPPORTED", "ben"), _line("c1", "SUPPORTED", "ann"), _line("c1", "CONTRADICTED", "ann")]
    )[1] == ["c1"]


def test_lines_without_a_reviewer_are_one_reviewer_whose_last_word_counts() -> None:
    # the static page's export, or a file of one's own: a later line is a change of mind, not a second reviewer
    labels, disputed = _labels([_line("c1", "SUPPORTED", None), _line("c1", "CONTRADICTED", None)])
    assert labels == {"c1": "CONTRADICTED"} and disputed == []


def _cleared(cid: str, who: str | None, **extra: object) -> str:
    row = json.loads(_line(cid, "", who, **extra))
    row["label"] = None
    return json.dumps(row)


def test_a_cleared_verdict_withdraws_its_reviewers_earlier_one() -> None:
    # a line with a null label is its reviewer's latest decision: no verdict (the page's Clear, or a note alone, in a
    # later export of the same page; the service's cleared decision). It was skipped, so a withdrawn label still
    # taught (c1), and a reviewer who withdrew kept a claim disputed that the service says is agreed (c2)
    lines = [
        _line("c1", "SUPPORTED", "ann"),
        _cleared("c1", "ann"),
        _line("c2", "SUPPORTED", "ann"),
        _line("c2", "CONTRADICTED", "ben"),
        _cleared("c2", "ann", note="not sure any more"),
        _line("c3", "SUPPORTED", "ann"),
        _line("c3", "CONTRADICTED", "ben"),
        _line("c3", "SUPPORTED", "cat", adjudicated=True),
        _cleared("c3", "cat", adjudicated=True),  # an adjudication withdrawn: open again
        _cleared("c4", "ann", note="first a note"),
        _line("c4", "UNSUPPORTED", "ann"),  # then a verdict: it counts
        _line("c5", "SUPPORTED", "ann"),
        _cleared("c5", "ben", citation="WRONG"),  # another reviewer's note alone takes nothing away
        _line("c6", "SUPPORTED", None),
        _cleared("c6", None),  # the static page's export, no name: the same one reviewer
    ]
    labels, disputed = _labels(lines)
    assert labels == {"c2": "CONTRADICTED", "c4": "UNSUPPORTED", "c5": "SUPPORTED"} and disputed == ["c3"]
    assert {r.claim_id: r.label for r in parse_reviews(lines)} == labels  # every reader's one-per-claim view
    every = parse_reviews(lines, per_reviewer=True)  # what reviewers_agreement reads: no cleared line, no label ""
    assert all(r.label and not r.cleared for r in every)
    assert sorted((r.claim_id, r.reviewer) for r in every) == [
        ("c2", "ben"),
        ("c3", "ann"),
        ("c3", "ben"),
        ("c4", "ann"),
        ("c5", "ann"),
    ]


def test_the_exports_status_keeps_a_cut_file_from_teaching_one_side() -> None:
    # a file cut down to one reviewer's lines (grep ann export.jsonl): the status still says the claim is open
    labels, disputed = _labels(
        [
            _line("c1", "SUPPORTED", "ann", status="disputed"),
            _line("c2", "SUPPORTED", "ann", status="adjudicated"),  # its adjudication line cut away
            _line("c3", "SUPPORTED", "ann", status="agreed"),
        ]
    )
    assert labels == {"c3": "SUPPORTED"} and disputed == ["c1", "c2"]
    with pytest.raises(InputError, match=r"row 1, field 'status'.*'settled' is not one of agreed, disputed"):
        parse_reviews([_line("c1", "SUPPORTED", "ann", status="settled")])


def test_a_review_of_another_runs_claim_does_not_hide_this_ones() -> None:
    # the same ids for another claim text: another claim, neither replaces nor disputes the other
    other = _line("c1", "CONTRADICTED", "ben").replace("claim c1", "another text")
    settled = review_labels(parse_reviews([_line("c1", "SUPPORTED", "ann"), other], per_reviewer=True))
    assert sorted((r.claim, r.label) for r in settled.labels) == [
        ("another text", "CONTRADICTED"),
        ("claim c1", "SUPPORTED"),
    ]


def _run(path: Path) -> Path:
    claims = [ClaimVerdict(claim=Claim(id=f"c{i}", text=f"claim c{i}"), label="SUPPORTED", route="nli") for i in (1, 2)]
    report = AnswerReport(id="a", verdict="PASS", mode="cascade", scores=Scores(n_claims=2), claims=claims)
    path.write_text(dumps(report) + "\n", encoding="utf-8")
    return path


def test_compare_and_metrics_say_what_was_left_out_and_how_to_settle_it(tmp_path: Path) -> None:
    run = _run(tmp_path / "run.jsonl")
    open_ = tmp_path / "open.jsonl"
    open_.write_text("\n".join([_line("c1", "SUPPORTED", "ann"), _line("c1", "UNSUPPORTED", "ben")]) + "\n")
    result = CliRunner().invoke(app, ["compare", str(run), str(run), "--reviews", str(open_)])
    said = " ".join(result.stderr.split())
    assert result.exit_code == 2, result.output
    assert f"1 claim in {open_} left out" in said and "team page (/team)" in said
    assert "no claim in it has a label to use" in said
    result = CliRunner().invoke(app, ["metrics", str(run), "--reviews", str(open_)])
    assert result.exit_code == 2 and "reviewers disagree on every claim" in " ".join(result.output.split())
    both = tmp_path / "both.jsonl"
    both.write_text(open_.read_text() + _line("c2", "SUPPORTED", "ann") + "\n")
    result = CliRunner().invoke(app, ["metrics", str(run), "--reviews", str(both), "--json"])
    assert result.exit_code == 0, result.output
    m = json.loads(result.stdout)
    assert (m["n"], m["disputed"], m["agreement"]) == (1, 1, 1.0)


def test_unnamed_lines_that_disagree_are_said_when_read_as_one_reviewer(tmp_path: Path) -> None:
    # two static-page exports put together (cat ann.jsonl ben.jsonl) whose reviewers left the name box empty: read as
    # one reviewer's change of mind, the last file's label taught; every command that reads them says so, and how to
    # keep such a claim out (name the reviewers), instead of teaching the last label in silence
    lines = [_line("c1", "SUPPORTED", None), _line("c2", "SUPPORTED", None), _line("c1", "CONTRADICTED", None)]
    settled = review_labels(parse_reviews(lines, per_reviewer=True))
    assert settled.unnamed_changes == 1 and not settled.disputed
    note = settled.note("joined.jsonl") or ""
    assert "1 claim in joined.jsonl has lines without a reviewer" in note and "name each line's reviewer" in note
    named = review_labels(parse_reviews([_line("c1", "SUPPORTED", "ann"), _line("c1", "CONTRADICTED", "ann")]))
    assert named.unnamed_changes == 0 and named.note("x") is None  # a named reviewer's change of mind is theirs
    claim = ClaimVerdict(claim=Claim(id="c1", text="claim c1"), label="SUPPORTED", route="judge")
    report = AnswerReport(id="a", verdict="PASS", mode="cascade", scores=Scores(n_claims=1), claims=[claim])
    (tmp_path / "run.jsonl").write_text(dumps(report) + "\n")
    (tmp_path / "joined.jsonl").write_text("\n".join(lines) + "\n")
    res = CliRunner().invoke(
        app, ["metrics", str(tmp_path / "run.jsonl"), "--reviews", str(tmp_path / "joined.jsonl"), "--json"]
    )
    assert res.exit_code == 0, res.output
    assert "lines without a reviewer that give different labels" in res.stderr


def test_label_and_review_lines_read_their_ids_by_the_one_id_rule(tmp_path: Path) -> None:
    """An input row with id 1 (or pandas' 1.0) is reported as "1", but a labels file written from those input rows
    (compare --labels, metrics --labels) or a review file made by hand was refused: "missing or not a string". Both
    now read their ids by the one id rule; a fraction or true/false is still the line's error."""
    from groundjudge.review.metrics import read_labels

    labels = tmp_path / "labels.jsonl"
    labels.write_text(
        "".join(
            json.dumps(r) + "\n"
            for r in [
                {"id": 1, "label": "consistent"},
                {"id": 2.0, "label": "hallucinated"},
                {"id": " r3", "label": "consistent"},
            ]
        )
    )
    assert read_labels(labels) == {"1": "consistent", "2": "hallucinated", "r3": "consistent"}
    reviews = [json.dumps({"id": 7, "claim_id": "c0", "claim": "Claim.", "label": "SUPPORTED", "reviewer": "ann"})]
    assert [(r.id, r.label) for r in parse_reviews(reviews)] == [("7", "SUPPORTED")]
    for bad, why in ((2.5, "is 2.5, a number that is not an integer"), (True, "not true/false"), (None, "missing")):
        line = json.dumps({"id": bad, "claim_id": "c0", "claim": "Claim.", "label": "SUPPORTED"})
        with pytest.raises(InputError, match=f"field 'id'.*{why}"):
            parse_reviews([line])
