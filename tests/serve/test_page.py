"""The served review page in headless Chromium against the real service (SQLite): two reviewers, one after the
other in fresh browser sessions, sign in with their tokens (never in a URL), decide with the keyboard, see their
decisions come back from the database (not the browser's storage), and the team page shows both, their
disagreement, and the adjudicator's settlement; hostile text stays text. Screenshots at 1280x800 go to
``$GJ_SCREENS`` when it is set."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.serve.conftest import need_serve

need_serve()

from tests.conftest import fresh_browser
from tests.review.test_html import click, keys
from tests.serve.conftest import HOSTILE, Service, add_reviewer, bearer, export, make_report, write_run

IDS = ["p0", HOSTILE, "p2"]


@pytest.fixture(scope="module")
def svc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    folder = tmp_path_factory.mktemp("page")
    run = write_run(folder / "run.jsonl", [make_report(rid, hostile=rid == HOSTILE) for rid in IDS])
    db = f"sqlite:///{folder / 'review.sqlite'}"
    tokens = {"alice": add_reviewer(db, "alice"), "bob": add_reviewer(db, "bob", adjudicator=True)}
    service = Service([run], db, folder, "--overlap", "1", "--batch", "5").start()  # both review every answer
    try:
        yield {"service": service, "url": service.url + "/", "db": db, "tokens": tokens, "folder": folder}
    finally:
        service.stop()


@pytest.fixture(scope="module")
def browser(chromium: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    driver = fresh_browser(chromium, tmp_path_factory.mktemp("blank"))
    driver.set_window_size(1280, 800)
    yield driver
    fresh_browser(driver, tmp_path_factory.mktemp("blank"))


def wait(driver: Any, test: Any, timeout: float = 20) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(test)


def shot(driver: Any, name: str) -> None:
    folder = os.environ.get("GJ_SCREENS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(folder) / f"{name}.png"))


def sign_in(driver: Any, svc: dict[str, Any], who: str) -> None:
    from selenium.webdriver.common.by import By

    driver.delete_all_cookies()  # a fresh session: nobody signed in
    driver.get(svc["url"])
    box = wait(driver, lambda d: d.find_element(By.ID, "token"))
    box.send_keys(svc["tokens"][who])
    driver.find_element(By.ID, "signin").click()
    wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, ".answer .claim"))
    assert svc["tokens"][who] not in driver.current_url


def saved(driver: Any) -> bool:
    from selenium.webdriver.common.by import By

    st = driver.find_element(By.ID, "storage")
    return st.get_attribute("data-pending") == "0" and st.text == "saved in the team database"


def decide_all(driver: Any, first: str) -> None:
    """The first claim as ``first`` (a key: 1, 2 or 3), every other one accepted (a), as a reviewer would."""
    from selenium.webdriver.common.by import By

    n = len(driver.find_elements(By.CSS_SELECTOR, ".answer .text .claim"))
    keys(driver, first)
    for _ in range(n - 1):
        keys(driver, "a")
    wait(driver, saved)


def test_two_reviewers_decide_and_the_team_page_shows_and_settles_their_disagreement(
    browser: Any, svc: dict[str, Any], tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    browser.get(svc["url"])
    assert browser.find_element(By.ID, "token").get_attribute("type") == "password"
    shot(browser, "1-sign-in")

    sign_in(browser, svc, "alice")
    assert "alice" in browser.find_element(By.ID, "signed-in").text
    shot(browser, "2-alice-queue")
    assert browser.find_element(By.ID, "reviewer").get_attribute("readonly") is not None
    decide_all(browser, "2")
    assert browser.find_element(By.ID, "progress").text == "6 of 6 claims decided"
    shot(browser, "2-alice-decided")  # auto-advance ends on the last claim
    mine = httpx.get(svc["url"] + "api/decisions", headers=bearer(svc["tokens"]["alice"])).json()
    assert len(mine) == 6 and mine[0]["label"] == "CONTRADICTED"

    # the decisions come back from the database, not from this browser
    browser.execute_script("window.localStorage.clear(); window.sessionStorage.clear()")
    browser.refresh()
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".answer .claim.decided"))
    assert len(browser.find_elements(By.CSS_SELECTOR, ".answer .text .claim.decided")) == 6
    # hostile text is text: shown as written, never markup, never run
    assert browser.execute_script("return window.pwned === undefined")
    assert not browser.find_elements(By.CSS_SELECTOR, ".answer img, .answer b")
    texts = browser.execute_script("return document.getElementById('answers').textContent")
    assert '<img src=x onerror="window.pwned=1">' in texts
    click(browser, browser.find_element(By.ID, "signout"))
    wait(browser, lambda d: d.find_elements(By.ID, "token"))

    sign_in(browser, svc, "bob")
    decide_all(browser, "1")
    team = browser.find_element(By.ID, "team-progress")  # refreshed once bob's decisions are stored
    wait(browser, lambda d: team.text == "Team: 6 of 6 claims decided, 1 disagreement to settle")
    browser.execute_script("window.scrollTo(0, 0)")
    shot(browser, "3-bob-decided")

    click(browser, browser.find_element(By.ID, "team-link"))
    rows = wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "tr.disagreement"))
    assert len(rows) == 1 and rows[0].get_attribute("data-id") == "p0"
    said = {d.get_attribute("data-reviewer"): d.text for d in rows[0].find_elements(By.CSS_SELECTOR, ".decided")}
    assert "CONTRADICTED" in said["alice"] and "SUPPORTED" in said["bob"]
    people = {
        r.get_attribute("data-reviewer") for r in browser.find_elements(By.CSS_SELECTOR, "#reviewers tr[data-reviewer]")
    }
    assert people == {"alice", "bob"}
    assert "<img" not in browser.page_source.split("id='reviewers'")[0].split("<body>")[-1]  # escaped
    shot(browser, "4-team")
    rows[0].find_element(By.CSS_SELECTOR, "textarea").send_keys("the source says otherwise")
    click(browser, rows[0].find_element(By.CSS_SELECTOR, "button[data-label='CONTRADICTED']"))
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "tr.disagreement .settled"))
    shot(browser, "5-settled")

    lines = export(svc["db"], tmp_path / "export.jsonl")
    first = [x for x in lines if (x["id"], x["claim_id"]) == ("p0", "c0")]
    assert [(x["reviewer"], x["label"], x.get("adjudicated", False)) for x in first] == [
        ("alice", "CONTRADICTED", False),
        ("bob", "SUPPORTED", False),
        ("bob", "CONTRADICTED", True),
    ]
    assert len(lines) == 6 * 2 + 1


def session_of(url: str, token: str) -> str:
    """A new session cookie for ``token``'s reviewer, as signing in (in another tab) makes one."""
    r = httpx.post(url + "signin", data={"token": token}, follow_redirects=False)
    assert r.status_code == 303
    return r.cookies["gj_session"]


def test_a_page_whose_reviewer_signed_in_again_elsewhere_saves_and_never_as_another_reviewer(
    browser: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    run = write_run(tmp_path / "run.jsonl", [make_report("s0", n_claims=3)])
    db = f"sqlite:///{tmp_path / 'review.sqlite'}"
    tokens = {"alice": add_reviewer(db, "alice"), "bob": add_reviewer(db, "bob")}
    service = Service([run], db, tmp_path).start()
    try:
        svc = {"url": service.url + "/", "tokens": tokens}
        sign_in(browser, svc, "alice")
        # alice signs in again in another tab: this browser's cookie is the new session's, this page holds the old
        # session's CSRF token
        browser.add_cookie({"name": "gj_session", "value": session_of(svc["url"], tokens["alice"]), "path": "/"})
        keys(browser, "2")
        wait(browser, saved)
        mine = httpx.get(svc["url"] + "api/decisions", headers=bearer(tokens["alice"])).json()
        assert [(d["claim_id"], d["label"]) for d in mine] == [("c0", "CONTRADICTED")]

        # bob signs in in this browser: alice's page saves nothing as bob, and keeps her decision waiting
        browser.add_cookie({"name": "gj_session", "value": session_of(svc["url"], tokens["bob"]), "path": "/"})
        keys(browser, "1")
        st = browser.find_element(By.ID, "storage")
        wait(browser, lambda d: "signed in as bob" in st.text)
        assert st.get_attribute("data-pending") == "1"
        assert httpx.get(svc["url"] + "api/decisions", headers=bearer(tokens["bob"])).json() == []
        # alice signs in again: her waiting decision is saved as hers
        browser.add_cookie({"name": "gj_session", "value": session_of(svc["url"], tokens["alice"]), "path": "/"})
        wait(browser, saved)
        mine = httpx.get(svc["url"] + "api/decisions", headers=bearer(tokens["alice"])).json()
        assert [(d["claim_id"], d["label"]) for d in mine] == [("c0", "CONTRADICTED"), ("c1", "SUPPORTED")]
    finally:
        service.stop()


def test_a_note_longer_than_the_service_keeps_is_cut_at_its_limit_and_the_verdict_saved(
    browser: Any, tmp_path: Path
) -> None:
    # a reviewer who pasted a long excerpt into the note: the service refused the whole decision (422), its verdict
    # with it, while the page showed the claim decided
    from selenium.webdriver.common.by import By

    from groundjudge.serve.store import MAX_NOTE

    run = write_run(tmp_path / "run.jsonl", [make_report("s0")])
    db = f"sqlite:///{tmp_path / 'review.sqlite'}"
    tokens = {"alice": add_reviewer(db, "alice")}
    service = Service([run], db, tmp_path).start()
    try:
        svc = {"url": service.url + "/", "tokens": tokens}
        sign_in(browser, svc, "alice")
        keys(browser, "2")
        wait(browser, saved)
        keys(browser, "k")  # back to the first claim
        note = browser.find_element(By.ID, "note")
        note.click()
        browser.execute_script("arguments[0].value = 'x'.repeat(arguments[1])", note, MAX_NOTE - 10)  # typed before
        note.send_keys("y" * 30)  # the last of a long paste
        wait(browser, lambda d: saved(d) and len(note.get_attribute("value")) == MAX_NOTE)
        mine = httpx.get(svc["url"] + "api/decisions", headers=bearer(tokens["alice"])).json()
        assert [(d["claim_id"], d["label"], len(d["note"])) for d in mine] == [("c0", "CONTRADICTED", MAX_NOTE)]
    finally:
        service.stop()


def test_the_pages_counts_are_the_whole_queues_when_it_holds_a_window_of_it(browser: Any, tmp_path: Path) -> None:
    # 56 finished answers of 60: the page holds the 4 unfinished and the 50 latest finished; its counts (the header's
    # and the bar's) are the whole queue's, and move with each decision
    from selenium.webdriver.common.by import By

    run = write_run(tmp_path / "run.jsonl", [make_report(f"w{i:02d}", n_claims=1) for i in range(60)])
    db = f"sqlite:///{tmp_path / 'review.sqlite'}"
    token = add_reviewer(db, "alice")
    service = Service([run], db, tmp_path, "--batch", "60", "--max-open", "60").start()
    try:
        url = service.url + "/"
        mine = httpx.post(url + "api/queue/next", headers=bearer(token)).json()["answers"]
        for a in mine[:56]:
            body = {"id": a["id"], "claim_id": "c0", "label": "SUPPORTED"}
            assert httpx.post(url + "api/decisions", json=body, headers=bearer(token)).status_code == 200
        sign_in(browser, {"url": url, "tokens": {"alice": token}}, "alice")
        said = browser.find_element(By.ID, "queue-decided")
        assert said.text == "Decided so far: 56 of 60 claims, 56 of 60 answers."
        assert browser.find_element(By.ID, "progress").text == "56 of 60 claims decided"
        assert browser.find_element(By.ID, "progress-answers").text == "56 of 60 answers done"
        keys(browser, "1")
        wait(browser, saved)
        assert said.text == "Decided so far: 57 of 60 claims, 57 of 60 answers."
    finally:
        service.stop()
