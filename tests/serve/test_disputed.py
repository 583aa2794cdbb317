"""A claim reviewers disagree on, with no adjudication, is no label: through the real service (``groundjudge review
serve`` in a subprocess, SQLite), ``review export`` marks it ``disputed`` and says how to settle it, the team's own
numbers and list show the same claims open, and metrics, calibrate and tune read the exported file without it (nor
the judge's verdict on it); once an adjudicator settles it, the adjudication teaches. A reviewer who changed their
mind is no disagreement: their latest decision counts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from tests.serve.conftest import need_serve

need_serve()

from groundjudge.cli.root import app
from groundjudge.models import AnswerReport, Claim, ClaimNLI, ClaimVerdict, Scores, Span
from tests.serve.conftest import Service, add_reviewer, bearer, write_run

runner = CliRunner()
N = 12  # claims c0..c11 of one answer
DISPUTED = "c10"  # ann SUPPORTED, ben UNSUPPORTED; the judge said UNSUPPORTED (a verdict calibrate would learn from)
CHANGED = "c11"  # ann SUPPORTED, then UNSUPPORTED as ben: agreed


def _entailment(i: int) -> float:
    return 0.95 if i == 10 else 0.15 if i == 11 else i / 10 + 0.05


def _label(i: int) -> str:
    """What both reviewers say of claim ``i`` (c10 aside): SUPPORTED above 0.5 entailment."""
    return "SUPPORTED" if _entailment(i) > 0.5 else "UNSUPPORTED"


def _report() -> AnswerReport:
    texts = [f"Claim number {i} holds." for i in range(N)]
    answer = " ".join(texts)
    claims = []
    for i, text in enumerate(texts):
        start = answer.index(text)
        judged = i == 10
        claims.append(
            ClaimVerdict(
                claim=Claim(id=f"c{i}", text=text, span=Span(text=text, start=start, end=start + len(text))),
                label="UNSUPPORTED",
                route="judge" if judged else "nli",
                nli=ClaimNLI(entailment=_entailment(i), contradiction=0.05, passages_scored=1, passages_total=1),
            )
        )
    return AnswerReport(
        id="many",
        answer=answer,
        contexts=["Some source text about the numbered claims."],
        verdict="FAIL",
        mode="cascade",
        scores=Scores(n_claims=N, combined=0.3),
        claims=claims,
    )


@pytest.fixture(scope="module")
def svc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    folder = tmp_path_factory.mktemp("disputed")
    run = write_run(folder / "run.jsonl", [_report()])
    db = f"sqlite:///{folder / 'review.sqlite'}"
    tokens = {"ann": add_reviewer(db, "ann"), "ben": add_reviewer(db, "ben"), "cat": add_reviewer(db, "cat", True)}
    service = Service([run], db, folder).start()
    try:
        s = {"url": service.url, "db": db, "tokens": tokens, "run": run, "folder": folder}
        for i in range(N):
            if i == 11:
                decide(s, "ann", "c11", "SUPPORTED")  # then she changes her mind: her latest counts
                decide(s, "ann", "c11", "UNSUPPORTED")
                decide(s, "ben", "c11", "UNSUPPORTED")
            elif i == 10:
                decide(s, "ann", DISPUTED, "SUPPORTED")
                decide(s, "ben", DISPUTED, "UNSUPPORTED")  # the last decision: what the readers taught before
            else:
                decide(s, "ann", f"c{i}", _label(i))
                decide(s, "ben", f"c{i}", _label(i))
        yield s
    finally:
        service.stop()


def decide(svc: dict[str, Any], who: str, claim_id: str, label: str, path: str = "/api/decisions") -> None:
    body = {"id": "many", "claim_id": claim_id, "label": label}
    r = httpx.post(svc["url"] + path, json=body, headers=bearer(svc["tokens"][who]), timeout=10)
    assert r.status_code == 200, r.text


def get(svc: dict[str, Any], path: str) -> Any:
    r = httpx.get(svc["url"] + path, headers=bearer(svc["tokens"]["ann"]), timeout=10)
    assert r.status_code == 200, r.text
    return r.json()


def export(svc: dict[str, Any], name: str) -> tuple[Path, list[dict[str, Any]], str]:
    out = svc["folder"] / name
    result = runner.invoke(app, ["review", "export", "--db", svc["db"], "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out, [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()], " ".join(result.stderr.split())


def calibrate(svc: dict[str, Any], reviews: Path) -> tuple[dict[str, Any], str]:
    config = svc["folder"] / "thresholds.json"
    args = ["calibrate", str(svc["run"]), "--reviews", str(reviews), "--target", "0.9", "--min-decided", "2"]
    result = runner.invoke(app, [*args, "--out", str(config)])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.strip().splitlines()[-1]), " ".join(result.stderr.split())


def metrics(svc: dict[str, Any], reviews: Path) -> tuple[dict[str, Any], str]:
    result = runner.invoke(app, ["metrics", str(svc["run"]), "--reviews", str(reviews), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), " ".join(result.stderr.split())


def test_an_open_disagreement_is_exported_as_disputed_and_the_team_pages_agree(svc: dict[str, Any]) -> None:
    _, lines, said = export(svc, "open.jsonl")
    status = {x["claim_id"]: x["status"] for x in lines}
    assert status == {f"c{i}": "disputed" if i == 10 else "agreed" for i in range(N)}
    assert [(x["reviewer"], x["label"]) for x in lines if x["claim_id"] == CHANGED] == [
        ("ann", "UNSUPPORTED"),  # her latest only
        ("ben", "UNSUPPORTED"),
    ]
    assert "1 claim(s) with reviewers who disagree and no adjudication" in said
    assert '"status": "disputed"' in said and "team page (/team)" in said and "POST /api/adjudications" in said
    # the service's own pages count the same claims open
    assert [d["claim_id"] for d in get(svc, "/api/disagreements?open_only=true")] == [DISPUTED]
    queue = get(svc, "/api/team")["queue"]
    assert (queue["disagreements_open"], queue["claims_agreed"], queue["claims_double_reviewed"]) == (1, 11, 12)
    with httpx.Client(base_url=svc["url"], headers={"Origin": svc["url"]}, timeout=10) as browser:
        assert browser.post("/signin", data={"token": svc["tokens"]["ann"]}).status_code == 303
        page = browser.get("/team").text
    assert page.count("open: teaches nothing until settled") == 1 and "export marks it disputed" in page


def test_metrics_measures_against_the_labels_without_the_disputed_claim(svc: dict[str, Any]) -> None:
    path = svc["folder"] / "open.jsonl"
    m, said = metrics(svc, path)
    assert (m["n"], m["disputed"], m["unmatched"]) == (11, 1, 0)  # the 11 claims with a label, c11 among them
    assert m["reviewers_agreement"]["n"] == 12 and m["reviewers_agreement"]["disagree"] == 1  # c10 still counts here
    assert f"1 claim in {path} left out" in said and "/team" in said


def test_calibrate_learns_neither_the_disputed_label_nor_the_judges(svc: dict[str, Any]) -> None:
    # the reviewers' labels on c0-c9 put t_support at 0.55; c10's disputed UNSUPPORTED at 0.95 (the last decision,
    # or the judge's verdict) would have moved it up
    fit, said = calibrate(svc, svc["folder"] / "open.jsonl")
    assert fit["n"] == 11 and fit["t_support"] == pytest.approx(0.55)
    assert "1 claim(s) of" in said and "reviewers disagree on taught nothing, nor did the judge's verdict" in said


def test_tune_takes_no_example_of_the_disputed_claim(svc: dict[str, Any]) -> None:
    from groundjudge.learn.tune import TuneSettings, load_examples

    logged: list[str] = []  # no tokenizer: no claim here has a quote to cut a passage around
    path = svc["folder"] / "open.jsonl"
    examples = {ex.id: ex for ex in load_examples([svc["run"], path], None, TuneSettings(), logged.append)}
    assert set(examples) == {f"many/c{i}" for i in range(N) if i != 10}  # not the judge's either
    assert examples["many/c11"].label == "UNSUPPORTED" and examples["many/c11"].source == "review"
    assert any("1 claim in open.jsonl left out" in x and "judge's verdict on them" in x for x in logged), logged


def test_once_settled_the_adjudication_teaches(svc: dict[str, Any]) -> None:
    decide(svc, "cat", DISPUTED, "SUPPORTED", "/api/adjudications")
    path, lines, said = export(svc, "settled.jsonl")
    assert {x["status"] for x in lines if x["claim_id"] == DISPUTED} == {"adjudicated"}
    assert "disagree" not in said
    assert get(svc, "/api/disagreements?open_only=true") == []
    m, said = metrics(svc, path)
    assert (m["n"], m["disputed"]) == (12, 0) and "left out" not in said
    fit, _ = calibrate(svc, path)
    assert fit["n"] == 12 and fit["t_support"] == pytest.approx(0.55)  # SUPPORTED at 0.95 keeps it
