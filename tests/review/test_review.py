"""The review queue: riskiest first, decisions by mouse and keyboard, kept over a reload, exported, and scored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from groundjudge.cli import app
from groundjudge.errors import InputError
from groundjudge.io.reports import dumps
from groundjudge.models import AnswerReport, ClaimNLI, ClaimVerdict, Scores
from groundjudge.review.html import render_html, risk_key, risk_reasons, run_identity
from groundjudge.review.metrics import cohen_kappa, join_reviews, parse_reviews, review_metrics
from tests.review.claims import claim_at
from tests.review.test_html import browser, click, keys  # noqa: F401 - browser: the module-scoped Chromium fixture
from tests.review.test_plots import pixel_variance, png_pixels

CONTEXT = "The Eiffel Tower in Paris was completed in 1889 for the World's Fair. It is 330 metres tall."
VERSIONS = {"nli": "gj-nli-minilm-l6@abc", "llm": "openai/gpt-4o-mini"}


def _claim(
    answer: str, cid: str, text: str, label: str, route: str, ent: float, *, checked: bool = True, flags: Any = ()
) -> ClaimVerdict:
    return ClaimVerdict(
        claim=claim_at(answer, cid, text),
        label=label,
        route=route,
        nli=ClaimNLI(entailment=ent, contradiction=0.05, passages_scored=1, passages_total=1),
        reason=f"{label.lower()} because",
        flags=list(flags),
        contradiction_checked=checked,
        error="judge left it out" if label == "ERROR" else None,
    )


def _report(rid: str, verdict: str, combined: float | None, claims: list[tuple[Any, ...]]) -> AnswerReport:
    answer = " ".join(c[1] for c in claims)
    cvs = [_claim(answer, c[0], c[1], c[2], c[3], c[4], **(c[5] if len(c) > 5 else {})) for c in claims]
    return AnswerReport(
        id=rid,
        verdict=verdict,
        mode="cascade",
        scores=Scores(combined=combined, claims=combined, n_claims=len(cvs), n_judged=len(cvs)),
        claims=cvs,
        answer=answer,
        contexts=[CONTEXT],
        versions=VERSIONS,
    )


def queue_reports() -> list[AnswerReport]:
    """Four answers in file order; the queue puts them r-fail, r-error, r-warn, r-pass."""
    return [
        _report(
            "r-pass",
            "PASS",
            0.95,
            [
                ("c1", "The tower is in Paris.", "SUPPORTED", "judge", 0.97),
                ("c2", "It is 330 metres tall.", "SUPPORTED", "judge", 0.93),
            ],
        ),
        _report(
            "r-warn",
            "WARN",
            0.6,
            [
                ("c1", "It is 300 metres tall.", "UNSUPPORTED", "nli", 0.15, {"checked": False, "flags": ["conflict"]}),
                ("c2", "It stands in Paris.", "SUPPORTED", "nli", 0.91, {"checked": False}),
            ],
        ),
        _report(
            "r-fail",
            "FAIL",
            0.4,
            [
                ("c1", "The tower is in Paris.", "SUPPORTED", "judge", 0.88),
                ("c2", "It was completed in 1899.", "CONTRADICTED", "judge", 0.3),
            ],
        ),
        _report("r-error", "ERROR", None, [("c1", "It was built by Gustave Eiffel.", "ERROR", "judge", 0.5)]),
    ]


# -- the queue's order and the run's identity, without a browser -------------------------------------------------


def test_queue_is_riskiest_first() -> None:
    reports = queue_reports()
    assert [r.id for r in sorted(reports, key=risk_key)] == ["r-fail", "r-error", "r-warn", "r-pass"]
    assert risk_reasons(reports[2]) == ["FAIL", "1 contradicted", "combined 0.40"]
    assert risk_reasons(reports[1]) == ["2 contradictions not checked", "1 conflict"]
    assert risk_reasons(reports[3]) == ["ERROR", "1 claim error"]  # one: no plural ("1 wrong citations" was one)
    # among equally failed answers: a contradicted claim first, then the lower combined score
    low = _report("low", "FAIL", 0.1, [("c1", "The tower is in Paris.", "UNSUPPORTED", "judge", 0.1)])
    contradicted = _report("contra", "FAIL", 0.6, [("c1", "It was completed in 1899.", "CONTRADICTED", "judge", 0.1)])
    higher = _report("higher", "FAIL", 0.5, [("c1", "The tower is in Paris.", "UNSUPPORTED", "judge", 0.1)])
    assert [r.id for r in sorted([higher, low, contradicted], key=risk_key)] == ["contra", "low", "higher"]
    # same verdict and score: unverified quotes, then unchecked or conflicting claims, come first
    plain = _report("plain", "WARN", 0.7, [("c1", "The tower is in Paris.", "SUPPORTED", "judge", 0.9)])
    unchecked = _report(
        "unchecked", "WARN", 0.7, [("c1", "The tower is in Paris.", "SUPPORTED", "nli", 0.9, {"checked": False})]
    )
    unverified = _report(
        "unverified",
        "WARN",
        0.7,
        [("c1", "The tower is in Paris.", "UNSUPPORTED", "judge", 0.9, {"flags": ["unverified_quote"]})],
    )
    assert [r.id for r in sorted([plain, unchecked, unverified], key=risk_key)] == ["unverified", "unchecked", "plain"]


def test_page_embeds_the_queue_order_and_run_identity() -> None:
    reports = queue_reports()
    page = render_html(reports)
    blob = page.split("<script type='application/json' id='gj-data'>", 1)[1].split("</script>", 1)[0]
    data = json.loads(blob)
    assert [r["id"] for r in data["reports"]] == ["r-fail", "r-error", "r-warn", "r-pass"]
    assert data["run"] == run_identity(sorted(reports, key=risk_key))
    assert data["risk"][0] == ["FAIL", "1 contradicted", "combined 0.40"]
    # the identity changes with the versions or the claims, so decisions on another run are not shown here
    other = [r.model_copy(update={"versions": {**VERSIONS, "llm": "openai/gpt-4o"}}) for r in reports]
    assert run_identity(other) != run_identity(reports)
    assert run_identity(reports[:3]) != run_identity(reports)
    assert "<svg" in page and "gj-histogram" in page  # the score distribution is in the header


# -- reviews: reading, joining, agreement ------------------------------------------------------------------------


def _line(rid: str, cid: str, claim: str, label: str, gj: str, route: str = "judge", **kw: Any) -> str:
    return json.dumps(
        {"id": rid, "claim_id": cid, "claim": claim, "label": label, "groundjudge_label": gj, "route": route, **kw}
    )


def test_reviews_are_validated_and_the_last_decision_wins() -> None:
    lines = [
        _line("r-fail", "c2", "It was completed in 1899.", "SUPPORTED", "CONTRADICTED"),
        "",
        _line("r-fail", "c2", "It was completed in 1899.", "unsupported", "CONTRADICTED", note="checked twice"),
    ]
    (only,) = parse_reviews(lines)
    assert only.label == "UNSUPPORTED" and only.note == "checked twice" and only.line == 3
    with pytest.raises(InputError, match=r"row 1, field 'label'"):
        parse_reviews([_line("a", "c1", "x", "MAYBE", "SUPPORTED")])
    with pytest.raises(InputError, match=r"row 2, field 'claim_id'"):
        parse_reviews([_line("a", "c1", "x", "SUPPORTED", "SUPPORTED"), json.dumps({"id": "a", "label": "SUPPORTED"})])
    with pytest.raises(InputError, match="row 1: not JSON"):
        parse_reviews(["{nope"])


def test_a_line_without_a_verdict_is_no_label_for_any_reader(tmp_path: Path) -> None:
    """The review page exports a note or citation choice made without a verdict as ``"label": null``: read as no
    label by every reader of reviews (and, as the service's cleared decision, it withdraws its reviewer's earlier
    verdict: tests/review/test_disputed_reviews.py); a line with no label key at all is still an error (not a
    review export)."""
    lines = [
        _line("r-fail", "c2", "It was completed in 1899.", "UNSUPPORTED", "CONTRADICTED"),
        json.dumps(
            {
                "id": "r-fail",
                "claim_id": "c1",
                "claim": "The tower is in Paris.",
                "label": None,
                "note": "ask",
                "citation": "WRONG",
                "groundjudge_citation": "OTHER_SUPPORTS",
                "run": "abc",
            }
        ),
        json.dumps(
            {
                "id": "r-fail",
                "claim_id": "c2",
                "claim": "It was completed in 1899.",
                "label": None,
                "note": "a second look, no verdict",
            }
        ),
    ]
    for per_reviewer in (False, True):
        (only,) = parse_reviews(lines[:2], per_reviewer)
        assert (only.claim_id, only.label, only.line) == ("c2", "UNSUPPORTED", 1)
        assert parse_reviews(lines, per_reviewer) == []  # the third line: the same (unnamed) reviewer cleared c2
    with pytest.raises(InputError, match=r"row 1, field 'label': missing"):
        parse_reviews([json.dumps({"id": "a", "claim_id": "c1", "claim": "x"})])
    with pytest.raises(InputError, match=r"row 1, field 'claim': missing"):
        parse_reviews([json.dumps({"id": "a", "claim_id": "c1", "label": None})])
    # the readers of files: metrics, and compare's and calibrate's read_reviews
    out = _write_out(tmp_path / "out.jsonl", queue_reports())
    notes_only = tmp_path / "notes.jsonl"
    notes_only.write_text(lines[1] + "\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["metrics", str(out), "--reviews", str(notes_only)])
    said = " ".join(result.output.split())
    assert result.exit_code == 2 and "no verdict in it" in said and "Traceback" not in said
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text("\n".join(lines[:2]) + "\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["metrics", str(out), "--reviews", str(mixed)])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert (summary["n"], summary["unmatched"]) == (1, 0)


def test_review_metrics_against_a_hand_computation() -> None:
    reports = queue_reports()
    reviews = parse_reviews(
        [
            _line("r-fail", "c1", "The tower is in Paris.", "SUPPORTED", "SUPPORTED"),
            _line("r-fail", "c2", "It was completed in 1899.", "UNSUPPORTED", "CONTRADICTED"),
            _line("r-warn", "c1", "It is 300 metres tall.", "CONTRADICTED", "UNSUPPORTED", "nli"),
            _line("r-warn", "c2", "It stands in Paris.", "SUPPORTED", "SUPPORTED", "nli", reviewer="bo"),
            _line("r-pass", "c1", "The tower is in Paris.", "SUPPORTED", "CONTRADICTED"),  # label changed since
            _line("r-pass", "c2", "A different claim text.", "SUPPORTED", "SUPPORTED"),  # another run: unmatched
            _line("nobody", "c1", "x", "SUPPORTED", "SUPPORTED"),  # unmatched
        ]
    )
    join = join_reviews(reports, reviews)
    assert len(join.matched) == 5 and len(join.unmatched) == 2 and join.changed_since_review == 1
    m = review_metrics(reports, reviews)
    gold = ["SUPPORTED", "UNSUPPORTED", "CONTRADICTED", "SUPPORTED", "SUPPORTED"]
    pred = ["SUPPORTED", "CONTRADICTED", "UNSUPPORTED", "SUPPORTED", "SUPPORTED"]
    labels = ["SUPPORTED", "UNSUPPORTED", "CONTRADICTED"]
    assert m["n"] == 5 and m["agreement"] == pytest.approx(3 / 5)
    assert m["labels"] == labels
    assert m["confusion"] == [[3, 0, 0], [0, 0, 1], [0, 1, 0]]  # rows: reviewer, columns: groundjudge
    assert m["kappa"] == pytest.approx(cohen_kappa(gold, pred, labels))
    assert m["kappa"] == pytest.approx((3 / 5 - (9 + 1 + 1) / 25) / (1 - 11 / 25))
    assert m["binary"]["confusion"] == [[3, 0], [0, 2]] and m["binary"]["kappa"] == pytest.approx(1.0)
    assert m["by_route"]["judge"]["n"] == 3 and m["by_route"]["nli"]["n"] == 2
    assert m["by_route"]["nli"]["confusion"] == [[1, 0, 0], [0, 0, 0], [0, 1, 0]]
    assert m["unmatched"] == 2 and m["reviewers"] == ["bo"]
    with pytest.raises(ValueError, match="none of the 1 reviews"):
        review_metrics(reports, parse_reviews([_line("nobody", "c1", "x", "SUPPORTED", "SUPPORTED")]))


def test_review_metrics_carry_intervals_and_the_corrected_rate() -> None:
    m = review_metrics(queue_reports(), parse_reviews(_QUEUE_REVIEWS))
    # two reviewed claims of one answer are not independent: agreement's interval comes from resampling answers
    assert m["agreement_ci"][0] <= m["agreement"] <= m["agreement_ci"][1]
    assert m["kappa_ci"][0] <= m["kappa"] <= m["kappa_ci"][1] and m["binary"]["kappa_ci"] == [1.0, 1.0]
    corrected = m["corrected_unsupported_rate"]
    # the file's 7 claims, 3 not SUPPORTED (an ERROR counts as flagged); 2 + 3 reviewed, far from 20 of each
    assert corrected["raw"] == pytest.approx(3 / 7) and corrected["n"] == 7
    assert corrected["labels"] == {"level": "claim", "positives": 2, "negatives": 3}
    assert corrected["value"] is None and corrected["needs"] == {"positives": 18, "negatives": 17}


_QUEUE_REVIEWS = [
    _line("r-fail", "c1", "The tower is in Paris.", "SUPPORTED", "SUPPORTED"),
    _line("r-fail", "c2", "It was completed in 1899.", "UNSUPPORTED", "CONTRADICTED"),
    _line("r-warn", "c1", "It is 300 metres tall.", "CONTRADICTED", "UNSUPPORTED", "nli"),
    _line("r-warn", "c2", "It stands in Paris.", "SUPPORTED", "SUPPORTED", "nli"),
    _line("r-pass", "c1", "The tower is in Paris.", "SUPPORTED", "SUPPORTED"),
]


def _reviewed_run() -> tuple[list[AnswerReport], list[str]]:
    """30 reviewed answers of two claims (the first SUPPORTED locally, the second UNSUPPORTED by the judge) and 10
    unreviewed answers whose claims are SUPPORTED. Reviewers: the first claim is wrong in answers 24-29 (6 missed),
    the second is right in answers 22-29 (8 false alarms)."""
    reports, lines = [], []
    for i in range(40):
        one, two = f"Claim {i} one.", f"Claim {i} two."
        second = "UNSUPPORTED" if i < 30 else "SUPPORTED"
        reports.append(
            _report(f"a{i}", "WARN", 0.5, [("c1", one, "SUPPORTED", "nli", 0.9), ("c2", two, second, "judge", 0.2)])
        )
        if i < 30:
            lines.append(_line(f"a{i}", "c1", one, "SUPPORTED" if i < 24 else "UNSUPPORTED", "SUPPORTED", "nli"))
            lines.append(_line(f"a{i}", "c2", two, "UNSUPPORTED" if i < 22 else "SUPPORTED", "UNSUPPORTED"))
    return reports, lines


def test_metrics_reviews_command_prints_the_corrected_rate(tmp_path: Path) -> None:
    reports, lines = _reviewed_run()
    out = _write_out(tmp_path / "out.jsonl", reports)
    reviews = tmp_path / "reviews.jsonl"
    reviews.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["metrics", str(out), "--reviews", str(reviews)])
    assert result.exit_code == 0, result.output
    last = json.loads(result.output.strip().splitlines()[-1])
    corrected = last["corrected_unsupported_rate"]
    # positives: 6 + 22 reviewed UNSUPPORTED, 22 flagged: sensitivity 22/28; negatives: 24 + 8, 24 not flagged:
    # specificity 0.75; raw 30 of 80 claims = 0.375; (0.375 - 0.25) / (22/28 - 0.25) = 0.233333. The local route
    # has 6 reviewed positives only, so one pooled pair corrects both routes
    assert corrected["labels"] == {"level": "claim", "positives": 28, "negatives": 32}
    assert corrected["sensitivity"] == pytest.approx(22 / 28) and corrected["specificity"] == pytest.approx(0.75)
    assert corrected["raw"] == pytest.approx(0.375) and corrected["by"] == "pooled"
    assert corrected["value"] == pytest.approx(0.125 / (22 / 28 - 0.25))
    assert corrected["ci"][0] < corrected["value"] < corrected["ci"][1]
    assert corrected["routes"]["nli"]["positives"] == 6 and corrected["routes"]["judge"]["negatives"] == 8
    # 80 claims in 40 answers of two: the raw rate's interval resamples answers (each answer holds one flagged
    # claim of two, or none), so it is not claim-level Wilson
    assert corrected["raw_ci"] != pytest.approx([0.2723, 0.4911], abs=1e-3)
    assert last["agreement_ci"][0] <= last["agreement"] <= last["agreement_ci"][1]
    said = " ".join(result.output.split())
    assert f"corrected for the checker's error: {100 * corrected['value']:.1f}%" in said
    assert "unsupported claims (raw): 37.5%" in said


def test_reviews_and_gold_rows_label_together_and_a_review_wins_on_its_claim() -> None:
    reports, lines = _reviewed_run()
    # gold SUPPORTED on the 10 unreviewed answers (their first claim, as metrics reads a gold row) and, against the
    # reviewer, on answer 29, whose first claim the reviewer found UNSUPPORTED
    gold = {f"a{i}" for i in range(29, 40)}
    labelled = [r.model_copy(update={"label": "SUPPORTED"}) if r.id in gold else r for r in reports]
    m = review_metrics(labelled, parse_reviews(lines))
    corrected = m["corrected_unsupported_rate"]
    assert corrected["labels"] == {"level": "claim", "positives": 28, "negatives": 42}
    assert corrected["specificity"] == pytest.approx(34 / 42)


def test_an_error_verdict_is_a_column_of_its_own() -> None:
    reviews = parse_reviews([_line("r-error", "c1", "It was built by Gustave Eiffel.", "SUPPORTED", "ERROR")])
    m = review_metrics(queue_reports(), reviews)
    assert m["labels"] == ["SUPPORTED", "UNSUPPORTED", "CONTRADICTED", "ERROR"]
    assert m["confusion"][0] == [0, 0, 0, 1] and m["agreement"] == 0.0


def _write_out(path: Path, reports: list[AnswerReport]) -> Path:
    path.write_text("".join(dumps(r) + "\n" for r in reports), encoding="utf-8")
    return path


def test_metrics_reviews_command_errors(tmp_path: Path) -> None:
    out = _write_out(tmp_path / "out.jsonl", queue_reports())
    bad = tmp_path / "bad.jsonl"
    bad.write_text(_line("r-fail", "c1", "The tower is in Paris.", "YES", "SUPPORTED") + "\n")
    result = CliRunner().invoke(app, ["metrics", str(out), "--reviews", str(bad)])
    said = " ".join(result.output.split())  # rich wraps long paths
    assert result.exit_code == 2 and "row 1, field 'label'" in said and "Traceback" not in said
    result = CliRunner().invoke(app, ["metrics", str(out), "--reviews", str(tmp_path / "missing.jsonl")])
    assert result.exit_code == 2 and "no file" in result.output


def test_calibrate_reads_reviews_joined_to_the_out_file(tmp_path: Path) -> None:
    # ten reviewed claims at known entailments: the reviewers' labels are calibrate's gold
    claims = [(f"c{i}", f"Claim number {i} holds.", "UNSUPPORTED", "nli", i / 10 + 0.05) for i in range(10)]
    report = _report("many", "WARN", 0.5, claims)
    out = _write_out(tmp_path / "out.jsonl", [report, *queue_reports()])
    reviews = tmp_path / "reviews.jsonl"
    reviews.write_text(
        "".join(
            _line("many", cid, text, "SUPPORTED" if ent > 0.5 else "UNSUPPORTED", "UNSUPPORTED", "nli") + "\n"
            for cid, text, _, _, ent in claims
        )
        + _line("elsewhere", "c1", "x", "SUPPORTED", "SUPPORTED")
        + "\n"
    )
    config = tmp_path / "thresholds.json"
    svg = tmp_path / "reliability.svg"
    result = CliRunner().invoke(
        app,
        [
            "calibrate",
            str(out),
            "--reviews",
            str(reviews),
            "--target",
            "0.9",
            "--min-decided",
            "2",
            "--out",
            str(config),
            "--reliability",
            str(svg),
            "--bins",
            "5",
        ],
    )
    assert result.exit_code == 0, result.output
    fit = json.loads(result.stdout.strip().splitlines()[-1])
    assert fit["n"] == 10  # the ten reviewed claims, nothing else (the unmatched review is left out)
    assert fit["t_support"] == pytest.approx(0.55)
    assert json.loads(config.read_text())["t_support"] == pytest.approx(0.55)
    assert "1 reviews match no claim" in result.stderr
    text = svg.read_text()
    assert text.startswith("<?xml") and "xmlns='http://www.w3.org/2000/svg'" in text
    assert text.count("class='bar'") == 5 and "data-count='2'" in text
    # --reviews needs the OUT file the decisions were made on, not input rows
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"id": "x", "claim": "c", "contexts": ["c"], "label": "SUPPORTED"}) + "\n")
    result = CliRunner().invoke(app, ["calibrate", str(rows), "--reviews", str(reviews), "--out", str(config)])
    assert result.exit_code == 2 and "OUT" in result.output


# -- in the browser: click and type through the queue, reload, export, score -----------------------------------


def _current(driver: Any) -> tuple[str, str]:
    cur = driver.execute_script("return window.groundjudgeReview.current()")
    return cur["id"], cur["claim_id"]


def test_reviewer_works_through_the_queue_reloads_exports_and_scores(
    browser: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    reports = queue_reports()
    out = _write_out(tmp_path / "out.jsonl", reports)
    page = tmp_path / "review.html"
    result = CliRunner().invoke(app, ["report", str(out), "--html", str(page)])
    assert result.exit_code == 1, result.output  # the queue holds failed rows: the page is written, the exit says so
    browser.set_window_size(1280, 900)
    browser.get(page.as_uri())
    browser.execute_script("localStorage.clear()")  # the module's browser may have run other pages before
    browser.refresh()
    assert [c.get_attribute("id") for c in browser.find_elements(By.CSS_SELECTOR, ".answer")] == [
        "answer-r-fail",
        "answer-r-error",
        "answer-r-warn",
        "answer-r-pass",
    ]
    help_line = browser.find_element(By.ID, "help").text
    assert "j/k" in help_line and "1 SUPPORTED" in help_line and "a accept" in help_line and "n note" in help_line
    assert browser.find_element(By.ID, "progress").text == "0 of 7 claims decided"
    reviewer = browser.find_element(By.ID, "reviewer")
    reviewer.send_keys("alice")
    reviewer.send_keys(Keys.ESCAPE)  # leave the field: keys drive the queue again
    browser.find_element(By.ID, "autoadvance").click()  # this walk moves by hand (auto-advance: test_review_page)

    assert _current(browser) == ("r-fail", "c1")  # the queue opens on its first claim
    keys(browser, "a")  # accept SUPPORTED
    keys(browser, "j")
    assert _current(browser) == ("r-fail", "c2")
    keys(browser, "3", "n")  # UNSUPPORTED, then a note; digits typed in the note are text, not verdicts
    keys(browser, "source says 1889, 2 sources", Keys.ESCAPE)
    assert browser.find_element(By.ID, "note").get_attribute("value") == "source says 1889, 2 sources"
    keys(browser, "j", "a")  # an ERROR claim has no verdict to accept: nothing is recorded
    assert _current(browser) == ("r-error", "c1")
    assert "Not decided yet" in browser.find_element(By.ID, "decision-state").text
    keys(browser, "2")
    keys(browser, Keys.ARROW_DOWN)
    assert _current(browser) == ("r-warn", "c1")
    supported = browser.find_element(By.CSS_SELECTOR, "#decide button[data-label='SUPPORTED']")
    click(browser, supported)  # the mouse works too
    keys(browser, "k")
    assert _current(browser) == ("r-error", "c1")
    keys(browser, Keys.ARROW_RIGHT, Keys.ARROW_RIGHT, "a")
    assert _current(browser) == ("r-warn", "c2")
    # a click on a claim selects it; a verdict then changes, the latest one counts
    click(browser, browser.find_element(By.CSS_SELECTOR, "#answer-r-pass .claim[data-claim='c2']"))
    assert _current(browser) == ("r-pass", "c2")
    keys(browser, "1", "3", "1")
    # r-pass c1 stays undecided
    assert browser.find_element(By.ID, "progress").text == "6 of 7 claims decided"
    expected = {
        ("r-fail", "c1"): ("SUPPORTED", "SUPPORTED", ""),
        ("r-fail", "c2"): ("UNSUPPORTED", "CONTRADICTED", "source says 1889, 2 sources"),
        ("r-error", "c1"): ("CONTRADICTED", "ERROR", ""),
        ("r-warn", "c1"): ("SUPPORTED", "UNSUPPORTED", ""),
        ("r-warn", "c2"): ("SUPPORTED", "SUPPORTED", ""),
        ("r-pass", "c2"): ("SUPPORTED", "SUPPORTED", ""),
    }

    def reviewed_on_page() -> dict[tuple[str, str], str]:
        out = {}
        for node in browser.find_elements(By.CSS_SELECTOR, ".claim.decided"):
            card = node.find_element(By.XPATH, "ancestor::section[@class='answer']")
            out[(card.get_attribute("id").removeprefix("answer-"), node.get_attribute("data-claim"))] = (
                node.get_attribute("data-review")
            )
        return out

    assert reviewed_on_page() == {k: v[0] for k, v in expected.items()}

    # decisions survive a reload; the queue reopens on the first undecided claim, the note is back
    browser.refresh()
    assert browser.find_element(By.ID, "progress").text == "6 of 7 claims decided"
    assert reviewed_on_page() == {k: v[0] for k, v in expected.items()}
    assert _current(browser) == ("r-pass", "c1")
    assert browser.find_element(By.ID, "reviewer").get_attribute("value") == "alice"
    click(browser, browser.find_element(By.CSS_SELECTOR, "#answer-r-fail .claim[data-claim='c2']"))
    assert browser.find_element(By.ID, "note").get_attribute("value") == "source says 1889, 2 sources"
    assert "Your verdict: UNSUPPORTED (groundjudge: CONTRADICTED)" in browser.find_element(By.ID, "detail").text

    # export: the download the button makes, and the same text from the page's hook
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    browser.execute_cdp_cmd("Page.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
    click(browser, browser.find_element(By.ID, "export"))
    run = browser.execute_script("return window.groundjudgeReview.run")
    exported = downloads / f"groundjudge-reviews-{run}.jsonl"
    import time

    for _ in range(100):
        if exported.is_file() and exported.stat().st_size:
            break
        time.sleep(0.05)
    text = exported.read_text(encoding="utf-8")
    assert text == browser.execute_script("return window.groundjudgeReview.exportJsonl()")
    lines = [json.loads(x) for x in text.splitlines()]
    assert len(lines) == 6
    for line in lines:
        label, gj, note = expected[(line["id"], line["claim_id"])]
        assert list(line) == [
            "id",
            "claim_id",
            "claim",
            "label",
            "groundjudge_label",
            "route",
            "note",
            "reviewer",
            "decided_at",
            "run",
        ]
        assert (line["label"], line["groundjudge_label"], line["note"], line["reviewer"]) == (label, gj, note, "alice")
        report = next(r for r in reports if r.id == line["id"])
        claim = next(c for c in report.claims if c.claim.id == line["claim_id"])
        assert line["claim"] == claim.claim.text and line["route"] == claim.route and line["run"] == run
        assert line["decided_at"].endswith("Z")

    # the export is what 'metrics --reviews' reads
    result = CliRunner().invoke(app, ["metrics", str(out), "--reviews", str(exported)])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    # reviewer (rows) vs groundjudge (columns), SUPPORTED / UNSUPPORTED / CONTRADICTED / ERROR
    assert summary["level"] == "review" and summary["n"] == 6 and summary["agreement"] == pytest.approx(3 / 6)
    assert summary["labels"] == ["SUPPORTED", "UNSUPPORTED", "CONTRADICTED", "ERROR"]
    assert summary["confusion"] == [[3, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1], [0, 0, 0, 0]]
    gold = [v[0] for v in expected.values()]
    pred = [v[1] for v in expected.values()]
    assert summary["kappa"] == pytest.approx(cohen_kappa(gold, pred, summary["labels"]))
    assert summary["by_route"]["nli"]["n"] == 2 and summary["by_route"]["judge"]["n"] == 4
    assert summary["reviewers"] == ["alice"] and summary["unmatched"] == 0

    # another run (other versions) has its own decisions: none of these show there
    other = tmp_path / "other.html"
    other.write_text(render_html([r.model_copy(update={"versions": {"nli": "other"}}) for r in reports]))
    browser.get(other.as_uri())
    assert browser.find_element(By.ID, "progress").text == "0 of 7 claims decided"

    # the header's score distribution is drawn: a bar per verdict with a score, and the page is not blank
    browser.get(page.as_uri())
    bars = browser.find_elements(By.CSS_SELECTOR, "#distribution svg.gj-histogram rect.bar")
    assert sorted(b.get_attribute("data-group") for b in bars) == ["FAIL", "PASS", "WARN"]
    shot = tmp_path / "review.png"
    browser.execute_script("window.scrollTo(0, 0)")
    browser.save_screenshot(str(shot))
    assert pixel_variance(png_pixels(shot.read_bytes())) > 100
