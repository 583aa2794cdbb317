"""The static review page's export as a careless reviewer makes it: the name, two tabs, a reload, a cleared verdict,
long and hostile notes and names; what the readers make of the files. Headless Chromium."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from groundjudge.models import AnswerReport, Claim, ClaimVerdict, Scores
from groundjudge.review.html import render_html
from groundjudge.review.metrics import parse_reviews, review_labels
from tests.review.test_html import browser, click, keys  # noqa: F401 - browser: the module-scoped Chromium fixture


def _reports() -> list[AnswerReport]:
    claims = [
        ClaimVerdict(claim=Claim(id=f"c{i}", text=f"Fact {i} holds."), label="UNSUPPORTED", route="judge")
        for i in range(3)
    ]
    return [
        AnswerReport(
            id="a",
            verdict="FAIL",
            mode="cascade",
            scores=Scores(combined=0.2, n_claims=3),
            answer="Fact 0 holds. Fact 1 holds. Fact 2 holds.",
            contexts=["Facts."],
            claims=claims,
        )
    ]


def _open(driver: Any, path: Path, page: str, clear: bool = True) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    driver.get(path.as_uri())
    if clear:
        driver.execute_script("localStorage.clear()")
        driver.refresh()
    assert driver.execute_script("return window.pwned === undefined")


def _select(driver: Any, claim: str) -> None:
    from selenium.webdriver.common.by import By

    click(driver, driver.find_element(By.CSS_SELECTOR, f".crow[data-claim='{claim}'] .ctext"))


def _export(driver: Any) -> list[dict[str, Any]]:
    return [json.loads(x) for x in driver.execute_script("return window.groundjudgeReview.exportJsonl()").splitlines()]


def _labels(*exports: list[dict[str, Any]]) -> dict[str, str]:
    lines = [json.dumps(x) for export in exports for x in export]  # cat first.jsonl second.jsonl
    return {r.claim_id: r.label for r in review_labels(parse_reviews(lines, per_reviewer=True)).labels}


def test_two_tabs_and_two_paths_of_one_page_keep_each_others_decisions(browser: Any, tmp_path: Path) -> None:  # noqa: F811
    # each tab wrote its whole copy of the decisions: the tab saving last erased what the other decided since it
    # opened (the same page opened from two paths shares the storage too: file:// pages share one)
    from selenium.webdriver.common.by import By

    page = render_html(_reports())
    _open(browser, tmp_path / "one" / "page.html", page)
    first = browser.current_window_handle
    browser.switch_to.new_window("tab")
    _open(browser, tmp_path / "two" / "page.html", page, clear=False)
    second = browser.current_window_handle
    browser.switch_to.window(first)
    _select(browser, "c0")
    keys(browser, "1")
    browser.switch_to.window(second)
    _select(browser, "c1")
    keys(browser, "2")
    _select(browser, "c2")
    keys(browser, "n", "from tab two")
    browser.switch_to.window(first)
    assert browser.find_element(By.ID, "progress").text == "2 of 3 claims decided"  # tab two's, shown here
    _select(browser, "c0")
    keys(browser, "3")  # tab one's later change of mind, after tab two's saves
    for handle in (first, second):
        browser.switch_to.window(handle)
        browser.refresh()
        got = {x["claim_id"]: (x["label"], x["note"]) for x in _export(browser)}
        assert got == {"c0": ("UNSUPPORTED", ""), "c1": ("CONTRADICTED", ""), "c2": (None, "from tab two")}
    browser.switch_to.window(second)
    browser.close()
    browser.switch_to.window(first)


def test_a_cleared_verdict_is_exported_as_its_withdrawal(browser: Any, tmp_path: Path) -> None:  # noqa: F811
    # clearing a verdict dropped the claim from the next export: put after the first export (cat), the verdict the
    # reviewer took back still taught the claim
    from selenium.webdriver.common.by import By

    _open(browser, tmp_path / "page.html", render_html(_reports()))
    browser.find_element(By.ID, "reviewer").send_keys("ann")
    _select(browser, "c0")
    keys(browser, "2")
    _select(browser, "c1")
    keys(browser, "1")
    before = _export(browser)
    assert _labels(before) == {"c0": "CONTRADICTED", "c1": "SUPPORTED"}
    _select(browser, "c0")
    click(browser, browser.find_element(By.CSS_SELECTOR, "#decide button[data-action='clear']"))
    browser.refresh()  # kept across a reload
    after = _export(browser)
    assert [(x["claim_id"], x["label"], x["reviewer"]) for x in after] == [
        ("c0", None, "ann"),
        ("c1", "SUPPORTED", "ann"),
    ]
    # the withdrawal carries its time: put after an older export of the same verdict, it stays the latest line
    cleared_at = datetime.fromisoformat(after[0]["decided_at"].replace("Z", "+00:00"))
    assert cleared_at > datetime.fromisoformat(before[0]["decided_at"].replace("Z", "+00:00"))
    assert _labels(after, before) == {"c1": "SUPPORTED"}
    assert _labels(before, after) == {"c1": "SUPPORTED"}
    assert "cleared verdict" in browser.find_element(By.ID, "export-holds").text
    # decided again: a verdict, no longer a withdrawal
    _select(browser, "c0")
    keys(browser, "3")
    assert _labels(before, _export(browser)) == {"c0": "UNSUPPORTED", "c1": "SUPPORTED"}


def test_an_export_carries_the_name_typed_after_deciding_and_asks_for_one(browser: Any, tmp_path: Path) -> None:  # noqa: F811
    # the name went only on decisions made after it was typed (and never on a note alone): a reviewer who typed it
    # before exporting exported unnamed lines, read with everyone else's unnamed lines as one reviewer's
    from selenium.webdriver.common.by import By

    downloads = tmp_path / "downloads"
    downloads.mkdir()
    browser.execute_cdp_cmd("Page.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
    _open(browser, tmp_path / "page.html", render_html(_reports()))
    assert "warn" in browser.find_element(By.ID, "reviewer").get_attribute("class")
    _select(browser, "c0")
    keys(browser, "1")
    _select(browser, "c2")
    keys(browser, "n", "a note alone")
    assert browser.find_element(By.ID, "export-as").text == "without a reviewer name"
    # an export without a name asks for one first
    assert browser.execute_script("return window.groundjudgeReview.download()") is False
    ask = browser.find_element(By.ID, "name-ask")
    assert ask.is_displayed() and browser.switch_to.active_element.get_attribute("id") == "reviewer"
    assert not list(downloads.iterdir())
    browser.find_element(By.ID, "reviewer").send_keys("  ann  ")
    assert not ask.is_displayed()
    assert browser.find_element(By.ID, "export-as").text == "as ann"
    assert [(x["claim_id"], x.get("reviewer")) for x in _export(browser)] == [("c0", "ann"), ("c2", "ann")]
    assert browser.execute_script("return window.groundjudgeReview.download()") is True
    # one who wants no name: one click more, and the lines carry none
    browser.execute_script("localStorage.removeItem('groundjudge-reviewer')")
    browser.refresh()
    browser.execute_script(
        "const k = 'groundjudge-review:' + window.groundjudgeReview.run;"
        "const all = JSON.parse(localStorage.getItem(k)); Object.values(all).forEach(d => delete d.reviewer);"
        "localStorage.setItem(k, JSON.stringify(all))"
    )
    browser.refresh()
    click(browser, browser.find_element(By.ID, "export"))
    click(browser, browser.find_element(By.ID, "name-anon"))
    assert not browser.find_element(By.ID, "name-ask").is_displayed()
    assert all("reviewer" not in x for x in _export(browser))


def test_hostile_names_and_a_long_hostile_note_round_trip(browser: Any, tmp_path: Path) -> None:  # noqa: F811
    # a name with a direction override read as another name than it showed (and two look-alike names as two
    # reviewers); markup in names and notes must stay text; a 100 KB note must survive a reload and the export
    from selenium.webdriver.common.by import By

    _open(browser, tmp_path / "page.html", render_html(_reports()))
    name = '<img src=x onerror="window.pwned=1">\u202enna\u202c\u200b\tann\n' + "x" * 200
    browser.execute_script("localStorage.setItem('groundjudge-reviewer', arguments[0])", name)
    browser.refresh()
    clean = '<img src=x onerror="window.pwned=1">nna ann ' + "x" * 200
    clean = clean[:80].strip()
    assert browser.find_element(By.ID, "reviewer").get_attribute("value") == clean
    note = ("<script>window.pwned=2</script>\u202eetoN \u05e9\u05dc\u05d5\u05dd &amp; " * 2000)[:100_000]
    _select(browser, "c1")
    browser.execute_script(
        "const n = document.getElementById('note'); n.value = arguments[0]; n.dispatchEvent(new Event('input'))", note
    )
    keys(browser, "3")
    browser.refresh()
    assert browser.execute_script("return window.pwned === undefined")
    (line,) = _export(browser)
    assert (line["label"], line["note"], line["reviewer"]) == ("UNSUPPORTED", note, clean)
    assert browser.find_element(By.ID, "export-as").text == f"as {clean}"
    assert not browser.find_elements(By.CSS_SELECTOR, "#bar img, #detail script")
    _select(browser, "c1")
    assert browser.find_element(By.ID, "note").get_attribute("value") == note
