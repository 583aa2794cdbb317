"""The HTML review page, opened in headless Chromium: what a reviewer sees and can click."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from groundjudge.cli import app
from groundjudge.io.reports import dumps
from groundjudge.models import AnswerReport, Claim, ClaimNLI, ClaimVerdict, Quote, Scores
from groundjudge.review.html import render_html, risk_key
from groundjudge.review.page_assets import REVIEW_JS
from groundjudge.testing import ScriptedLLMServer, route
from tests.conftest import fresh_browser
from tests.pipeline.test_pipeline import BAD_ANSWER, CONTEXT, GOOD_ANSWER, HANDLERS, evaluator
from tests.review.claims import claim_at


@pytest.fixture(scope="module")
def browser(chromium: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The session's headless Chromium (conftest's ``chromium``), as a fresh one would be for each module."""
    return fresh_browser(chromium, tmp_path_factory.mktemp("blank"))


@pytest.fixture
def reports(shared_nli: Any, tmp_path_factory: pytest.TempPathFactory) -> list[Any]:
    hostile = 'The Eiffel Tower is in Paris. <img src=x onerror="window.pwned=1"><script>window.pwned=2</script>'
    with ScriptedLLMServer(route(HANDLERS)) as server:
        ev = evaluator(server, shared_nli, tmp_path_factory.mktemp("html"), qa=False)
        return list(
            ev.evaluate_many(
                [
                    {"id": "good", "answer": GOOD_ANSWER, "contexts": [CONTEXT], "question": "When was it completed?"},
                    {"id": "bad", "answer": BAD_ANSWER, "contexts": [CONTEXT]},
                    {"id": "hostile", "claim": hostile, "contexts": [CONTEXT]},
                ]
            )
        )


def test_reviewer_sees_highlighted_claims_and_evidence(browser: Any, reports: list[Any], tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    page = tmp_path / "review.html"
    page.write_text(render_html(reports), encoding="utf-8")
    browser.get(page.as_uri())
    body = browser.find_element(By.TAG_NAME, "body").text
    # the header says what is in the queue; the run's summary (costs, versions) is folded away and opens
    assert "3 of 3 answers in this queue, 5 claims to decide" in body and "verdicts:" not in body
    browser.find_element(By.CSS_SELECTOR, "#run summary").click()
    assert "answers: 3" in browser.find_element(By.ID, "run").text
    cards = browser.find_elements(By.CSS_SELECTOR, ".answer")
    # a queue, riskiest first: the FAIL with a contradicted claim, then the other flagged one, the clean PASS last
    assert [c.get_attribute("id") for c in cards] == ["answer-bad", "answer-hostile", "answer-good"]
    bad = browser.find_element(By.ID, "answer-bad")
    assert bad.find_element(By.CSS_SELECTOR, ".badge").text == "FAIL"
    # claims are highlighted in place, coloured by verdict
    highlighted = {e.text: e.get_attribute("data-label") for e in bad.find_elements(By.CSS_SELECTOR, ".claim")}
    assert highlighted == {"The Eiffel Tower is in Paris.": "SUPPORTED", "It was completed in 1899.": "CONTRADICTED"}
    assert bad.text.startswith("FAIL")
    # the card says which rule made the verdict, with its numbers (issue 18)
    assert "FAIL: 1 of 2 claims contradicted (0.50 > 0.10)" in bad.find_element(By.CSS_SELECTOR, ".reasons").text
    good = browser.find_element(By.ID, "answer-good").find_element(By.CSS_SELECTOR, ".reasons")
    assert good.text.startswith("PASS: combined")
    # clicking a claim shows its verdict, route, reason and the quote marked in the source passage
    bad.find_element(By.CSS_SELECTOR, ".claim.CONTRADICTED").click()
    detail = browser.find_element(By.ID, "detail")
    assert "The Eiffel Tower was completed in 1899." in detail.text
    assert "CONTRADICTED" in detail.text and "judge" in detail.text and "The source says 1889." in detail.text
    assert detail.find_element(By.TAG_NAME, "mark").text == "completed in 1889"
    assert "Gustave Eiffel" in detail.find_element(By.CSS_SELECTOR, ".passage").text
    # verdict filters hide and show answers
    fail_box = browser.find_element(By.CSS_SELECTOR, "#filters input[value='FAIL']")
    fail_box.click()
    assert not bad.is_displayed() and browser.find_element(By.ID, "answer-good").is_displayed()
    fail_box.click()
    assert bad.is_displayed()
    # text from answers and sources is shown as text, never run
    hostile = browser.find_element(By.ID, "answer-hostile")
    assert "<script>window.pwned=2</script>" in hostile.text
    assert browser.execute_script("return window.pwned === undefined")


def test_report_command_only_flagged(browser: Any, reports: list[Any], tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    scored = tmp_path / "scored.jsonl"
    scored.write_text("".join(dumps(r) + "\n" for r in reports))
    page = tmp_path / "flagged.html"
    result = CliRunner().invoke(app, ["report", str(scored), "--html", str(page), "--only-flagged"])
    assert result.exit_code == 0, result.output
    browser.get(page.as_uri())
    ids = [c.get_attribute("id") for c in browser.find_elements(By.CSS_SELECTOR, ".answer")]
    assert "answer-good" not in ids and "answer-bad" in ids
    # the header says what the queue holds and why
    queue = browser.find_element(By.ID, "queue").text
    assert queue.startswith("2 of 3 answers in this queue") and "only the flagged answers" in queue
    assert "--only-flagged" in queue and "riskiest first" in queue
    # no network resources: nothing the page names fetches from a server (the reports' text may hold an address:
    # versions.llm_server), and the browser fetched nothing
    head = page.read_text().split("<script type='application/json'")[0]
    assert not re.search(r"""(?:src|href|action|srcset|poster|data)\s*=\s*["']?\s*(?:https?:)?//""", head, re.I)
    assert not re.search(r"""url\(\s*["']?\s*(?:https?:)?//|@import""", head, re.I)
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0


# -- hostile text: nothing in a report may break the page -------------------------------------------------------

HOSTILE = [
    "</script>",
    "<!--<script>",
    "</SCRIPT \n>",
    "]]>",
    "-->",
    "line\u2028separator\u2029paragraph",
    'it\'s "quoted" `here`',
    "\u202eRTL override\u202c \u200fשלום עולם\u200e",
    "emoji 🧪👩‍🔬🇫🇷",
    "&amp; &lt; &#60; \\u003c",
    '<img src=x onerror="window.pwned=3">',
    "nul\x00 bell\x07 \r\n crlf",
]


def hostile_reports(strings: list[str] = HOSTILE, surrogate: bool = True) -> list[AnswerReport]:
    """Reports carrying hostile text in every field a reviewer sees: answer, contexts, claims, reasons, quotes."""
    out = []
    for i, bad in enumerate(strings):
        context = f"Source {i} says: {bad} and the shop opens at {i} am."
        answer = f"The shop opens at {i} am. It says {bad}."
        claims = []
        for j, text in enumerate([f"The shop opens at {i} am.", f"It says {bad}."]):
            quote = f"{bad} and the shop"
            q_start = context.index(quote)
            claims.append(
                ClaimVerdict(
                    claim=claim_at(answer, f"c{j + 1}", text),
                    label="SUPPORTED" if j == 0 else "CONTRADICTED",
                    route="judge",
                    nli=ClaimNLI(entailment=0.5, contradiction=0.1, passages_scored=1, passages_total=1),
                    reason=f"because {bad}",
                    quotes=[Quote(text=quote, doc=0, start=q_start, end=q_start + len(quote), verified=True)],
                    flags=[f"flag {bad}"],
                )
            )
        out.append(
            AnswerReport(
                id=f"h{i} {bad}",
                verdict="FAIL",
                mode="cascade",
                scores=Scores(combined=0.5, claims=0.5, coverage=1.0, n_claims=2, n_judged=2),
                claims=claims,
                question=f"What does it say? {bad}",
                answer=answer,
                contexts=[context, f"second {bad}"],
                errors=[f"an error naming {bad}"],
                metadata={"note": bad},
            )
        )
    # first, so that it is in the summary's list of failed rows as well as in the data: a lone surrogate
    lone = AnswerReport(id="surrogate", verdict="ERROR", mode="nli", scores=Scores(), errors=["bad \ud800 text"])
    return [lone, *out] if surrogate else out


class PageParser(HTMLParser):
    """The page as a browser's tokenizer sees it: each script element's attributes and text, and the visible text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self.text: list[str] = []
        self._in_script: dict[str, str | None] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "script":
            self._in_script = dict(attrs)
            self.scripts.append((self._in_script, ""))

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = None

    def handle_data(self, data: str) -> None:
        if self._in_script is not None:
            attrs, text = self.scripts[-1]
            self.scripts[-1] = (attrs, text + data)
        else:
            self.text.append(data)


def parse_page(page: str) -> tuple[PageParser, dict[str, Any]]:
    parser = PageParser()
    parser.feed(page)
    parser.close()
    assert [attrs.get("id") for attrs, _ in parser.scripts] == ["gj-data", None]  # nothing split or added a script
    attrs, blob = parser.scripts[0]
    assert attrs["type"] == "application/json"
    assert parser.scripts[1][1] == REVIEW_JS  # the page's code arrives whole
    return parser, json.loads(blob)


def test_page_data_round_trips_exactly_whatever_the_text(tmp_path: Path) -> None:
    # Issue 13: a source containing "<!--<script>" left the page blank. Checked without a browser, on every run.
    reports = hostile_reports()
    page = render_html(reports)
    (tmp_path / "review.html").write_text(page, encoding="utf-8")  # writable as UTF-8 despite the surrogate
    blob = page.split("<script type='application/json' id='gj-data'>", 1)[1].split("</script>", 1)[0]
    # what the HTML tokenizer reacts to inside a script element, and what JavaScript once took for line breaks
    for hazard in ("<", ">", "&", "\u2028", "\u2029"):
        assert hazard not in blob, hazard
    parser, data = parse_page(page)
    queue = sorted(reports, key=risk_key)  # the FAILs with a contradicted claim first, the ERROR without claims last
    assert [r["id"] for r in data["reports"]] == [r.id for r in queue] and queue[-1].id == "surrogate"
    assert data["reports"] == [r.model_dump(mode="json") for r in queue]
    back = [AnswerReport.model_validate(r) for r in data["reports"]]
    assert back == queue  # every answer, context, claim, reason, quote and error, exactly
    for r in back[:-1]:
        assert all(
            r.contexts[q.doc][q.start : q.end] == q.text for c in r.claims for q in c.quotes if q.doc is not None
        )
    visible = "".join(parser.text)
    assert f"answers: {len(reports)}" in visible and "bad \\ud800 text" in visible


def test_report_command_writes_a_page_that_parses(tmp_path: Path) -> None:
    scored = tmp_path / "scored.jsonl"
    scored.write_text("".join(dumps(r) + "\n" for r in hostile_reports()[1:]), encoding="utf-8")
    page = tmp_path / "review.html"
    result = CliRunner().invoke(app, ["report", str(scored), "--html", str(page), "--only-flagged"])
    assert result.exit_code == 1, result.output  # the page is written; its failed rows exit 1, as score's do
    _, data = parse_page(page.read_text(encoding="utf-8"))
    assert [r["id"] for r in data["reports"]] == [f"h{i} {bad}" for i, bad in enumerate(HOSTILE)]
    assert [c["claim"]["text"] for r in data["reports"] for c in r["claims"]] == [
        text for i, bad in enumerate(HOSTILE) for text in (f"The shop opens at {i} am.", f"It says {bad}.")
    ]


@pytest.mark.parametrize("strings", [HOSTILE, ["<!--<script>"]], ids=["all", "comment-script-alone"])
def test_hostile_text_renders_as_text_in_a_browser(browser: Any, tmp_path: Path, strings: list[str]) -> None:
    # "<!--<script>" with no "-->" after it is the case: the old page swallowed its own code and was blank
    from selenium.webdriver.common.by import By

    reports = hostile_reports(strings, surrogate=strings is HOSTILE)
    page = tmp_path / "hostile.html"
    page.write_text(render_html(reports), encoding="utf-8")
    browser.get(page.as_uri())
    cards = browser.find_elements(By.CSS_SELECTOR, ".answer")
    assert len(cards) == len(reports)  # not blank: every answer is on the page
    assert browser.execute_script("return window.pwned === undefined")
    by_id = {c.get_attribute("id"): c for c in cards}
    for i, bad in enumerate(strings[:2]):
        card = by_id[f"answer-h{i} {bad}"]
        assert card.find_element(By.CSS_SELECTOR, ".claim.CONTRADICTED").text == f"It says {bad}."
        card.find_element(By.CSS_SELECTOR, ".claim.CONTRADICTED").click()
        detail = browser.find_element(By.ID, "detail")
        assert f"because {bad}" in detail.text
        assert detail.find_element(By.TAG_NAME, "mark").text == f"{bad} and the shop"


def test_ci_sets_ci_itself_so_the_browser_tests_cannot_skip() -> None:
    # Issue 13: the browser tests skipped unless the caller happened to set CI.
    from tests.conftest import ROOT

    script = (ROOT / ".ci" / "run").read_text().splitlines()
    exports = [i for i, line in enumerate(script) if line.strip() == "export CI=true"]
    runs = [i for i, line in enumerate(script) if ".venv/bin/pytest" in line]
    assert exports and runs and exports[0] < runs[0]


def test_the_review_page_filters_answers_by_kind_of_error(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    def report(rid: str, kind: str) -> AnswerReport:
        cv = ClaimVerdict(claim=Claim(id="c1", text=f"claim {rid}"), label="UNSUPPORTED", route="nli", error_type=kind)
        return AnswerReport(id=rid, verdict="FAIL", mode="nli", scores=Scores(n_claims=1), claims=[cv])

    page = tmp_path / "kinds.html"
    page.write_text(render_html([report("n", "number"), report("d", "date")]), encoding="utf-8")
    browser.get(page.as_uri())
    select = Select(browser.find_element(By.ID, "error-type"))
    assert [o.get_attribute("value") for o in select.options] == ["", "date", "number"]
    select.select_by_value("date")
    hidden = {c.get_attribute("id") for c in browser.find_elements(By.CSS_SELECTOR, ".answer.hidden")}
    assert hidden == {"answer-n"}
    select.select_by_value("")
    assert not browser.find_elements(By.CSS_SELECTOR, ".answer.hidden")


def keys(driver: Any, *keys: str) -> None:
    """Press keys on the page, one at a time, as a reviewer would."""
    from selenium.webdriver.common.action_chains import ActionChains

    for k in keys:
        ActionChains(driver).send_keys(k).perform()


def click(driver: Any, element: Any) -> None:
    """Click as a reviewer would: with the element scrolled to mid-screen, clear of the sticky queue bar."""
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
    element.click()
