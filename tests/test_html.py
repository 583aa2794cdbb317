"""The HTML review page, opened in headless Chromium: what a reviewer sees and can click."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from groundjudge.cli import app
from groundjudge.html import render_html
from groundjudge.report import dumps
from groundjudge.testing import ScriptedLLMServer, route
from tests.test_pipeline import BAD_ANSWER, CONTEXT, GOOD_ANSWER, HANDLERS, evaluator


def _browser_paths() -> tuple[str, str] | None:
    chrome = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    driver = shutil.which("chromedriver")
    return (chrome, driver) if chrome and driver else None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    paths = _browser_paths()
    if paths is None:
        message = "headless Chromium needed: apt-get install chromium chromium-driver"
        if os.environ.get("CI"):
            pytest.fail(message)  # CI installs it; a missing browser there is a broken CI, not a skip
        pytest.skip(message)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = paths[0]
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=paths[1]), options=options)
    yield driver
    driver.quit()


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
    assert "answers: 3" in body and "verdicts:" in body
    cards = browser.find_elements(By.CSS_SELECTOR, ".answer")
    assert [c.get_attribute("id") for c in cards] == ["answer-good", "answer-bad", "answer-hostile"]
    bad = browser.find_element(By.ID, "answer-bad")
    assert bad.find_element(By.CSS_SELECTOR, ".badge").text == "FAIL"
    # claims are highlighted in place, coloured by verdict
    highlighted = {e.text: e.get_attribute("data-label") for e in bad.find_elements(By.CSS_SELECTOR, ".claim")}
    assert highlighted == {"The Eiffel Tower is in Paris.": "SUPPORTED", "It was completed in 1899.": "CONTRADICTED"}
    assert bad.text.startswith("FAIL")
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
    assert "http" not in page.read_text().split("<script type='application/json'")[0]  # no network resources
