"""Reviewers' agreement with each other (issue 31): read from a ``review export`` (each reviewer's latest decision
on a claim, the adjudication last), kappa with its interval by :func:`agreement_intervals`, beside agreement with
groundjudge; the readers that keep one decision per claim take the adjudicated label."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from groundjudge.cli.root import app
from groundjudge.models import AnswerReport, Claim, ClaimVerdict, Scores
from groundjudge.review.metrics import (
    CLAIM_LABELS,
    agreement_intervals,
    parse_reviews,
    read_reviews,
    review_labels,
    reviewers_agreement,
)


def _reports() -> list[AnswerReport]:
    return [
        AnswerReport(
            id=f"a{i}",
            verdict="FAIL",
            mode="cascade",
            scores=Scores(n_claims=2),
            claims=[
                ClaimVerdict(claim=Claim(id=f"c{j}", text=f"claim {i}.{j}"), label="SUPPORTED", route="judge")
                for j in range(2)
            ],
        )
        for i in range(6)
    ]


def _line(aid: str, cid: str, label: str, who: str, **extra: object) -> str:
    i, j = aid[1:], cid[1:]
    return json.dumps({"id": aid, "claim_id": cid, "claim": f"claim {i}.{j}", "label": label, "reviewer": who, **extra})


ANN = [
    "SUPPORTED",
    "SUPPORTED",
    "CONTRADICTED",
    "UNSUPPORTED",
    "SUPPORTED",
    "SUPPORTED",
    "UNSUPPORTED",
    "SUPPORTED",
    "CONTRADICTED",
    "SUPPORTED",
    "SUPPORTED",
    "UNSUPPORTED",
]
BEN = [
    "SUPPORTED",
    "UNSUPPORTED",
    "CONTRADICTED",
    "UNSUPPORTED",
    "SUPPORTED",
    "SUPPORTED",
    "UNSUPPORTED",
    "SUPPORTED",
    "SUPPORTED",
    "SUPPORTED",
    "SUPPORTED",
    "UNSUPPORTED",
]
CLAIMS = [(f"a{i}", f"c{j}") for i in range(6) for j in range(2)]


def _export() -> list[str]:
    lines = []
    for (aid, cid), a, b in zip(CLAIMS, ANN, BEN, strict=True):
        lines += [_line(aid, cid, "CONTRADICTED", "ann"), _line(aid, cid, a, "ann"), _line(aid, cid, b, "ben")]
        if a != b:
            lines.append(_line(aid, cid, "UNSUPPORTED", "cat", adjudicated=True))
    lines.append(_line("a0", "c0", "CONTRADICTED", "dan").replace("claim 0.0", "another text"))  # another run
    return lines


def test_reviewers_agreement_is_kappa_with_its_interval_over_each_pair() -> None:
    every = parse_reviews(_export(), per_reviewer=True)
    got = reviewers_agreement(_reports(), every)
    assert got is not None
    expected = agreement_intervals(ANN, BEN, CLAIM_LABELS, [a for a, _ in CLAIMS])
    assert got["n"] == got["claims"] == 12 and got["answers"] == 6
    assert got["disagree"] == 2 and got["adjudicated"] == 2 and got["reviewers"] == ["ann", "ben"]
    assert got["agreement"] == expected["agreement"] == 10 / 12
    assert got["kappa_ci"] == expected["kappa_ci"] and got["kappa"] is not None
    assert got["kappa_ci"][0] <= got["kappa"] <= got["kappa_ci"][1]


def test_one_decision_per_claim_is_the_adjudicated_one_else_the_agreed_one() -> None:
    lines = _export()
    final = {(r.id, r.claim_id): r for r in parse_reviews(lines)}
    assert final == {(r.id, r.claim_id): r for r in review_labels(parse_reviews(lines, per_reviewer=True)).labels}
    for (aid, cid), a, b in zip(CLAIMS, ANN, BEN, strict=True):
        r = final[(aid, cid)] if (aid, cid) != ("a0", "c0") else None
        if r is None:
            continue
        assert (r.label, r.adjudicated) == (("UNSUPPORTED", True) if a != b else (b, False))


def test_no_pair_no_agreement() -> None:
    assert reviewers_agreement(_reports(), parse_reviews([_line("a1", "c1", "SUPPORTED", "ann")], True)) is None


def test_metrics_prints_reviewers_agreement_beside_agreement_with_groundjudge(tmp_path: Path) -> None:
    from groundjudge.io.reports import dumps

    scored = tmp_path / "run.jsonl"
    scored.write_text("".join(dumps(r) + "\n" for r in _reports()), encoding="utf-8")
    reviews = tmp_path / "export.jsonl"
    reviews.write_text("\n".join(_export()) + "\n", encoding="utf-8")
    assert len(read_reviews(reviews, per_reviewer=True)) == 12 * 2 + 2 + 1
    result = CliRunner().invoke(app, ["metrics", str(scored), "--reviews", str(reviews)])
    assert result.exit_code == 0, result.output
    assert (
        "reviewers with each other: n=12 pairs on 12 claims of 6 answers (ann, ben), agreement 83.3%" in result.output
    )
    assert "adjudicated 2" in result.output
    last = json.loads(result.stdout.strip().splitlines()[-1])
    assert last["reviewers_agreement"]["n"] == 12
    # a0 c0's last line is of another text (a review of another run): it matches nothing, and no longer hides the
    # decisions on this run's claim
    assert (last["n"], last["unmatched"]) == (12, 1)
