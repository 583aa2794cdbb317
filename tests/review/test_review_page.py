"""The review page a reviewer can decide on (issue 22): the sources in full with the evidence marked and linked from
each claim, search, auto-advance, the next-undecided key, the end of the queue, progress, the legend, one verdict
chip per card, the header; checked in headless Chromium at 1280x800 and 1920x1080, screenshots included."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from groundjudge.models import (
    AnswerReport,
    ClaimNLI,
    ClaimVerdict,
    Passage,
    Quote,
    Scores,
    SecondJudging,
    SecondVerdict,
)
from groundjudge.review.html import render_html
from groundjudge.review.page_sources import KINDS, Mark, claim_links, highlight, source_marks
from tests.review.claims import claim_at
from tests.review.test_html import browser, click, keys  # noqa: F401 - browser: the module-scoped Chromium fixture
from tests.review.test_plots import pixel_variance, png_pixels

# -- the highlight function: offsets on the raw text, escaped piece by piece -------------------------------------

_TAG = re.compile(r"<[^>]*>")
HOSTILE_TEXT = '</script><img src=x onerror="window.pwned=1">&amp; "q" \'s\' \u2028 🧪👩‍🔬 \r\n\x00 end'


def _shown(out: str) -> str:
    """What a browser shows of ``highlight``'s output: the tags dropped, the entities read."""
    return html.unescape(_TAG.sub("", out))


marks_st = st.lists(
    st.builds(
        Mark,
        start=st.integers(-5, 80),
        end=st.integers(-5, 80),
        kind=st.sampled_from(KINDS),
        ref=st.from_regex(r"c[0-9]{1,2}-(q[0-9]|entail|contra)", fullmatch=True),
    ),
    max_size=8,
)


@settings(max_examples=300, deadline=None, database=None)
@given(text=st.text(alphabet=st.characters(codec="utf-8"), max_size=60) | st.just(HOSTILE_TEXT), marks=marks_st)
@example(text="<b>&</b>", marks=[Mark(0, 3, "quote", "c0-q0"), Mark(2, 99, "entail", "c0-entail")])
@example(
    text="abc", marks=[Mark(5, 9, "quote", "c1-q0"), Mark(2, 1, "contra", "c1-contra"), Mark(-3, 0, "quote", "c2-q0")]
)
def test_highlight_keeps_the_text_and_adds_only_its_own_tags(text: str, marks: list[Mark]) -> None:
    out = highlight(text, marks)
    assert _shown(out) == text.replace("\x00", "\ufffd")  # the text, whole and in order
    # every tag is one of ours, closed, never nested: nothing from the text became markup
    tags = re.findall(r"<[^>]*>", out)
    assert all(re.fullmatch(r'<mark class="hl [a-z ]+" data-hl="[a-z0-9 -]+">|</mark>', t) for t in tags), tags
    assert tags[0::2] == [t for t in tags if t != "</mark>"] and all(t == "</mark>" for t in tags[1::2])
    assert "<" not in _TAG.sub("", out) and ">" not in _TAG.sub("", out)
    # each character is marked exactly by the marks that cover it (clipped to the text)
    pos = 0
    for m in re.finditer(r'<mark class="hl ([a-z ]+)" data-hl="([^"]*)">(.*?)</mark>|([^<]+)', out, re.S):
        piece = html.unescape(m.group(3) if m.group(3) is not None else m.group(4))
        covering = [k for k in marks if max(0, k.start) <= pos and pos + len(piece) <= min(len(text), k.end)]
        if m.group(3) is None:
            assert not covering
        else:
            assert set(m.group(1).split()) == {k.kind for k in covering}
            assert set(m.group(2).split()) == {k.ref for k in covering}
        pos += len(piece)
    assert pos == len(text)


# -- reports for the page --------------------------------------------------------------------------------------

FILLER = "Station {i} of the line serves the old town; trains stop there every {m} minutes on weekdays. "
NEEDLE = "The museum opens at 9 am and closes at 5 pm, every day except Monday."


def long_source() -> str:
    before = "".join(FILLER.format(i=i, m=5 + i % 7) for i in range(40))
    return before + NEEDLE + " " + "".join(FILLER.format(i=i, m=3 + i % 5) for i in range(40, 60))


def _cv(answer: str, cid: str, text: str, label: str, **kw: Any) -> ClaimVerdict:
    return ClaimVerdict(claim=claim_at(answer, cid, text), label=label, route="judge", **kw)


def page_reports(n_extra: int = 2) -> list[AnswerReport]:
    """A FAIL whose quote lies deep in a long source (collapsed), with NLI passages and an unverified quote; a
    hostile answer whose marks overlap and run out of range; clean answers after them."""
    src = long_source()
    short = "Opening hours change in summer; ask at the desk."
    answer = "The museum opens at 9 am. It closes at 7 pm. Entry is free for children."
    q = src.index("opens at 9 am")
    c = src.index("closes at 5 pm")
    first = [
        _cv(answer, "c1", "The museum opens at 9 am.", "SUPPORTED",
            quotes=[Quote(text="opens at 9 am", doc=0, start=q, end=q + 13, verified=True, match="exact")],
            nli=ClaimNLI(entailment=0.97, passages_scored=3, passages_total=9,
                         entailment_passage=Passage(doc=0, start=q - 20, end=q + 40, text=src[q - 20 : q + 40])),
            reason="The source says it opens at 9 am.", contradiction_checked=True),
        _cv(answer, "c2", "It closes at 7 pm.", "CONTRADICTED",
            quotes=[Quote(text="closes at 5 pm", doc=0, start=c, end=c + 14, verified=True, match="exact")],
            nli=ClaimNLI(entailment=0.02, contradiction=0.91, passages_scored=3, passages_total=9,
                         contradiction_passage=Passage(doc=0, start=c - 10, end=c + 30, text=src[c - 10 : c + 30])),
            reason="The source says 5 pm. " * 40, contradiction_checked=True),
        _cv(answer, "c3", "Entry is free for children.", "UNSUPPORTED",
            quotes=[Quote(text="children go free", verified=False, problem="not found")],
            nli=ClaimNLI(entailment=0.1, passages_scored=9, passages_total=9,
                         entailment_passage=Passage(doc=1, start=0, end=len(short), text=short)),
            reason="Nothing in the sources says so.", contradiction_checked=True),
    ]  # fmt: skip
    out = [
        AnswerReport(
            id="museum", verdict="FAIL", mode="cascade", verdict_reasons=["FAIL: 1 of 3 claims contradicted"],
            scores=Scores(combined=0.3, claims=0.33, coverage=1.0, n_claims=3, n_judged=3), claims=first,
            question="When is the museum open?", answer=answer, contexts=[src, short],
            versions={"nli": "gj-nli-minilm-l6@abc", "llm": "openai/gpt-4o-mini"},
        )
    ]  # fmt: skip
    bad = '</script><img src=x onerror="window.pwned=1"> ' + "x" * 300  # a long word: no horizontal overflow
    hostile_ctx = f"Hostile {bad} and the shop opens at 8 am."
    h_answer = f"It says {bad}. The shop opens at 8 am."
    h = hostile_ctx.index("the shop opens")
    out.append(
        AnswerReport(
            id="hostile <b>", verdict="WARN", mode="cascade",
            scores=Scores(combined=0.6, claims=0.5, coverage=1.0, n_claims=2, n_judged=2),
            claims=[
                _cv(h_answer, "c1", f"It says {bad}.", "UNSUPPORTED", reason=f"because {bad}",
                    quotes=[Quote(text=bad, doc=0, start=8, end=8 + len(bad), verified=True),
                            Quote(text="x", doc=5, start=0, end=1, verified=True)],  # a document it does not have
                    nli=ClaimNLI(entailment=0.2, entailment_passage=Passage(doc=0, start=-4, end=10_000, text=""))),
                _cv(h_answer, "c2", "The shop opens at 8 am.", "SUPPORTED",
                    quotes=[Quote(text="the shop opens at 8 am", doc=0, start=h, end=h + 22, verified=True)],
                    nli=ClaimNLI(entailment=0.9, entailment_passage=Passage(doc=0, start=h - 5, end=h + 3, text=""))),
            ],
            answer=h_answer, contexts=[hostile_ctx],
        )
    )  # fmt: skip
    for i in range(n_extra):
        text = f"Plain answer {i} is right."
        out.append(
            AnswerReport(
                id=f"plain-{i}", verdict="PASS", mode="cascade", scores=Scores(combined=0.95, n_claims=1),
                claims=[_cv(text, "c1", text, "SUPPORTED",
                            quotes=[Quote(text=text, doc=0, start=0, end=len(text), verified=True)])],
                answer=text, contexts=[text],
            )
        )  # fmt: skip
    return out


def test_marks_and_links_of_a_report() -> None:
    museum, hostile = page_reports(0)
    marks = source_marks(museum)
    assert sorted((m.kind, m.ref) for m in marks[0]) == [
        ("contra", "c1-contra"),
        ("entail", "c0-entail"),
        ("quote", "c0-q0"),
        ("quote", "c1-q0"),
    ]
    assert [(m.kind, m.ref) for m in marks[1]] == [("entail", "c2-entail")]
    links = claim_links(museum)
    assert [[ln["kind"] for ln in claim] for claim in links] == [
        ["quote", "entail"],
        ["quote", "contra"],
        ["unverified", "entail"],
    ]
    # a quote on a document the report does not have is neither marked nor linked
    assert 5 not in source_marks(hostile) and all(ln.get("doc") != 5 for ln in claim_links(hostile)[0])

    # the most contradicting passage of a SUPPORTED claim is not evidence: not marked, not linked
    supported = museum.claims[0]
    assert supported.label == "SUPPORTED" and supported.nli is not None
    supported.nli.contradiction_passage = Passage(doc=1, start=0, end=5, text="")
    assert 1 not in {m_doc for m_doc, ms in source_marks(museum).items() if any(m.kind == "contra" for m in ms)}
    assert [ln["kind"] for ln in claim_links(museum)[0]] == ["quote", "entail"]


def test_the_sources_are_in_the_page_escaped_and_marked() -> None:
    page = render_html(page_reports(0))
    sources = page.split("<div id='gj-sources' hidden>", 1)[1].split("</div><script>", 1)[0]
    assert "<img" not in sources and "</script" not in sources and "&lt;img src=x" in sources
    assert sources.count('<div class="src-text"') == 3
    first = sources.split('id="gj-src-0-1"', 1)[0]  # the museum's long source (refs are per answer)
    # the quote, cut where the overlapping NLI passages start and end, each piece naming every mark over it
    pieces = re.findall(r'<mark class="hl ([a-z ]+)" data-hl="([^"]*\bc0-q0\b[^"]*)">([^<]*)</mark>', first)
    assert "".join(p[2] for p in pieces) == "opens at 9 am" and len(pieces) == 2
    assert pieces[1][:2] == ("quote entail contra", "c0-q0 c0-entail c1-contra")


# -- in the browser ---------------------------------------------------------------------------------------------


def _open(driver: Any, tmp_path: Path, reports: list[AnswerReport], size: tuple[int, int], **kw: Any) -> None:
    page = tmp_path / "page.html"
    page.write_text(render_html(reports, **kw), encoding="utf-8")
    driver.set_window_size(*size)
    driver.get(page.as_uri())
    driver.execute_script("localStorage.clear()")  # the module's driver may have run other pages before
    driver.refresh()
    # the window's size is the outer one: make the viewport the size asked for
    inner = driver.execute_script("return [window.innerWidth, window.innerHeight]")
    driver.set_window_size(2 * size[0] - inner[0], 2 * size[1] - inner[1])
    driver.execute_script("window.scrollTo(0, 0)")


def _current(driver: Any) -> tuple[str, str] | None:
    cur = driver.execute_script("return window.groundjudgeReview.current()")
    return None if cur is None else (cur["id"], cur["claim_id"])


def _in_view(driver: Any, element: Any) -> bool:
    return bool(
        driver.execute_script(
            "const r = arguments[0].getBoundingClientRect();"
            "return r.height > 0 && r.top >= 0 && r.bottom <= window.innerHeight && r.left >= 0 "
            "&& r.right <= window.innerWidth",
            element,
        )
    )


@pytest.mark.parametrize("size", [(1280, 800), (1920, 1080)], ids=["1280x800", "1920x1080"])
def test_the_first_screen_at_common_sizes(browser: Any, tmp_path: Path, size: tuple[int, int]) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By

    _open(browser, tmp_path, page_reports(), size, only_flagged=True)  # as the issue saw it
    assert browser.execute_script("return [window.innerWidth, window.innerHeight]") == list(size)
    # nothing wider than the window, even a 300-character word in an answer and a source
    assert browser.execute_script("return document.documentElement.scrollWidth") <= size[0]
    header = browser.find_element(By.TAG_NAME, "header")
    queue = browser.find_element(By.ID, "queue")
    assert _in_view(browser, queue) and "2 of 4 answers in this queue, 5 claims to decide" in queue.text
    assert "riskiest first" in queue.text and "only the flagged answers" in queue.text
    assert "Decided so far: 0 of 5 claims, 0 of 2 answers." in header.text
    legend = browser.find_element(By.ID, "legend")
    assert _in_view(browser, legend)
    for word in ("SUPPORTED", "CONTRADICTED", "UNSUPPORTED", "decided by you", "judge's quote", "NLI support passage"):
        assert word in legend.text
    # costs and versions are folded away
    assert not browser.find_element(By.ID, "summary").is_displayed()
    first = browser.find_elements(By.CSS_SELECTOR, ".answer")[0]
    assert first.get_attribute("id") == "answer-museum"
    chips = first.find_elements(By.CSS_SELECTOR, ".badge")
    assert [c.text for c in chips] == ["FAIL"] and _in_view(browser, chips[0])  # one verdict chip, on screen
    assert first.find_element(By.TAG_NAME, "h2").text.count("combined") == 1
    assert browser.find_element(By.ID, "progress").text == "0 of 5 claims decided"
    shot = tmp_path / "first.png"
    browser.save_screenshot(str(shot))
    assert pixel_variance(png_pixels(shot.read_bytes())) > 100  # not a blank page
    assert browser.execute_script("return window.pwned === undefined")


def test_sources_are_whole_collapsed_searchable_and_linked(browser: Any, tmp_path: Path) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    _open(browser, tmp_path, page_reports(0), (1280, 800))
    card = browser.find_element(By.ID, "answer-museum")
    blocks = card.find_elements(By.CSS_SELECTOR, ".src .src-text")
    assert len(blocks) == 2
    long_block = blocks[0]
    text_of = "return arguments[0].textContent"
    assert browser.execute_script(text_of, long_block) == long_source()  # the whole source, as it is
    assert "clamped" in long_block.get_attribute("class")  # long: collapsed, with a toggle
    toggle = card.find_element(By.CSS_SELECTOR, ".src .toggle")
    assert toggle.text.startswith("Show all of this source (")
    # search: marks every match, opens the collapsed source that holds one
    box = card.find_element(By.CSS_SELECTOR, ".search input")
    keys(browser, "/")  # the key for the current card's search box
    assert browser.switch_to.active_element == box
    keys(browser, "CLOSES at 5")  # typed into the box, not taken as keys
    assert _current(browser) == ("museum", "c1")
    hits = card.find_elements(By.CSS_SELECTOR, "mark.hit")
    assert [h.text for h in hits] == ["closes at 5"]  # one match, split by no mark: the quote covers it
    assert "clamped" not in long_block.get_attribute("class") and toggle.text == "Show less"
    assert card.find_element(By.CSS_SELECTOR, ".search .hits").text == "1 match in 1 source"
    assert browser.execute_script(text_of, long_block) == long_source()  # the marks did not change the text
    box.clear()
    box.send_keys("station 4")  # across the NLI passage's edge, and in several places
    hits = card.find_elements(By.CSS_SELECTOR, "mark.hit")
    assert len({h.get_attribute("data-n") for h in hits}) == 11  # Station 4 and 40 to 49
    assert "".join(h.text for h in hits if h.get_attribute("data-n") == "10").lower() == "station 4"
    current = lambda: {h.get_attribute("data-n") for h in hits if "cur" in h.get_attribute("class")}  # noqa: E731
    assert current() == {"0"}
    box.send_keys(Keys.ENTER)  # the next match
    assert current() == {"1"}
    box.clear()
    box.send_keys("museum opens at 9")  # across the edges of the marks: one match in pieces
    hits = card.find_elements(By.CSS_SELECTOR, "mark.hit")
    assert len(hits) > 1 and {h.get_attribute("data-n") for h in hits} == {"0"}
    assert "".join(h.text for h in hits) == "museum opens at 9"
    box.send_keys("zzz")
    assert not card.find_elements(By.CSS_SELECTOR, "mark.hit")
    assert card.find_element(By.CSS_SELECTOR, ".search .hits").text == "not in the sources"
    box.send_keys(Keys.ESCAPE)
    browser.find_element(By.TAG_NAME, "body").click()
    click(browser, toggle)
    assert "clamped" in long_block.get_attribute("class")
    # the claim's row links to its quote: the source opens, scrolls there, the mark flashes
    browser.execute_script("window.scrollTo(0, 0)")
    row = card.find_element(By.CSS_SELECTOR, ".crow[data-claim='c2']")
    assert row.find_element(By.CSS_SELECTOR, ".lab").text == "CONTRADICTED"
    link = row.find_element(By.CSS_SELECTOR, "button.link.quote")
    click(browser, link)
    quote = card.find_element(By.CSS_SELECTOR, "mark.hl.quote[data-hl~='c1-q0']")
    assert quote.text == "closes at 5 pm" and "flash" in quote.get_attribute("class")
    assert "clamped" not in long_block.get_attribute("class") and _in_view(browser, quote)
    assert _current(browser) == ("museum", "c2")
    assert "active" in quote.get_attribute("class")  # the selected claim's evidence stays outlined
    # the NLI passages are marked and linked too; a quote not in the sources says so
    contra = row.find_element(By.CSS_SELECTOR, "button.link.contra")
    assert contra.text.startswith("NLI contradiction passage")
    unverified = card.find_element(By.CSS_SELECTOR, ".crow[data-claim='c3'] .nolink")
    assert unverified.text == "quote not in the sources"
    click(browser, card.find_element(By.CSS_SELECTOR, ".crow[data-claim='c3'] button.link.entail"))
    passage = card.find_element(By.CSS_SELECTOR, "mark.hl.entail[data-hl~='c2-entail']")
    assert passage.text == "Opening hours change in summer; ask at the desk." and _in_view(browser, passage)
    # the detail pane links there as well; the long reason is cut, with a toggle
    click(browser, card.find_element(By.CSS_SELECTOR, ".claim[data-claim='c2']"))
    detail = browser.find_element(By.ID, "detail")
    assert detail.find_element(By.CSS_SELECTOR, "button.link.quote").is_displayed()
    assert detail.find_element(By.CSS_SELECTOR, ".toggle").text.startswith("Show all of the reason")
    # hostile text: marks overlap and run past the text; nothing ran, the text is whole
    hostile = browser.find_element(By.ID, "answer-hostile <b>")
    ctx = page_reports(0)[1].contexts[0]
    assert browser.execute_script(text_of, hostile.find_element(By.CSS_SELECTOR, ".src-text")) == ctx
    assert len(hostile.find_elements(By.CSS_SELECTOR, "mark.hl")) >= 3
    assert browser.execute_script("return window.pwned === undefined")


def test_auto_advance_next_undecided_and_the_end_of_the_queue(browser: Any, tmp_path: Path) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By

    _open(browser, tmp_path, page_reports(1), (1280, 800))
    progress = browser.find_element(By.ID, "progress")
    done = browser.find_element(By.ID, "done")
    assert _current(browser) == ("museum", "c1") and not done.is_displayed()
    keys(browser, "a")  # accept: the page moves on to the next claim by itself
    assert _current(browser) == ("museum", "c2")
    keys(browser, "2")
    assert _current(browser) == ("museum", "c3")
    assert progress.text == "2 of 6 claims decided"
    assert "0 of 3 answers done" in browser.find_element(By.ID, "progress-answers").text
    assert browser.find_element(By.CSS_SELECTOR, "#answer-museum .card-progress").text == "2 of 3 decided"
    # auto-advance off: a decision stays; "u" jumps to the next undecided claim, past decided ones
    browser.find_element(By.ID, "autoadvance").click()
    keys(browser, "k", "k")
    assert _current(browser) == ("museum", "c1")
    keys(browser, "3")
    assert _current(browser) == ("museum", "c1")
    keys(browser, "u")
    assert _current(browser) == ("museum", "c3")
    keys(browser, "1", "u")
    assert _current(browser) == ("hostile <b>", "c1")
    assert "1 of 3 answers done" in browser.find_element(By.ID, "progress-answers").text
    browser.find_element(By.ID, "autoadvance").click()  # on again
    keys(browser, "a", "a")
    assert _current(browser) == ("plain-0", "c1") and not done.is_displayed()
    # the filters hide the one answer left: the sign says the undecided claims are in hidden answers
    pass_box = browser.find_element(By.CSS_SELECTOR, "#filters input[value='PASS']")
    click(browser, pass_box)
    assert done.is_displayed() and "No undecided claim in the answers shown: 1 more in answers the filters hide" in (
        done.text
    )
    click(browser, pass_box)
    assert not done.is_displayed()
    keys(browser, "a")  # the last one: the end of the queue says so, and stays on the claim
    assert _current(browser) == ("plain-0", "c1")
    assert done.is_displayed() and "End of the queue: all 6 claims are decided" in done.text
    assert progress.text == "6 of 6 claims decided"
    assert "3 of 3 answers done" in browser.find_element(By.ID, "progress-answers").text
    exported = browser.execute_script("return window.groundjudgeReview.exportJsonl()").splitlines()
    assert len(exported) == 6
    # the setting is kept with the decisions; a reload reopens where it was
    browser.refresh()
    assert browser.find_element(By.ID, "autoadvance").is_selected()
    assert browser.find_element(By.ID, "done").is_displayed()


def test_a_long_answer_is_cut_and_opens_for_its_claims(browser: Any, tmp_path: Path) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By

    answer = "The first claim is here. " + "Filler words go on and on. " * 120 + "The last claim is here."
    claims = [
        _cv(answer, "c1", "The first claim is here.", "SUPPORTED"),
        _cv(answer, "c2", "The last claim is here.", "UNSUPPORTED"),
    ]
    report = AnswerReport(id="long", verdict="WARN", mode="cascade", scores=Scores(n_claims=2), claims=claims,
                          answer=answer, contexts=["A short source."])  # fmt: skip
    _open(browser, tmp_path, [report], (1280, 800))
    body = browser.find_element(By.CSS_SELECTOR, "#answer-long .text")
    toggle = browser.find_element(By.CSS_SELECTOR, "#answer-long .text + .toggle")
    assert "clamped" in body.get_attribute("class")
    assert toggle.text == f"Show all of the answer ({len(answer):,} characters)"
    assert browser.execute_script("return window.scrollY") == 0  # a fresh queue opens at the top
    keys(browser, "j")  # the next claim lies in the cut part: the answer opens for it
    assert _current(browser) == ("long", "c2") and "clamped" not in body.get_attribute("class")
    assert toggle.text == "Show less"
    click(browser, toggle)
    assert "clamped" in body.get_attribute("class")


def test_the_detail_shows_the_second_judges_verdict_beside_the_first(browser: Any, tmp_path: Path) -> None:  # noqa: F811
    """A reviewer deciding a claim the two judges disagree on sees what the second one said, marked as a
    disagreement; one that agrees is shown plainly, one that failed says so; hostile text stays text."""
    from selenium.webdriver.common.by import By

    reports = page_reports(0)
    museum = reports[0]
    hostile = '<img src=x onerror="window.pwned=1"> the source says nothing of 7 pm'
    museum.second_judge = SecondJudging(model="anthropic/claude-haiku-4-5", why=["FAIL"], claims=3, disagree=1)
    c1, c2, c3 = museum.claims
    c1.second_judge, c1.judges_disagree = SecondVerdict(label="SUPPORTED", reason="It opens at 9 am."), False
    c2.second_judge, c2.judges_disagree = SecondVerdict(label="UNSUPPORTED", reason=hostile), True
    c3.second_judge = SecondVerdict(label="ERROR", error="the second judge's call timed out")
    _open(browser, tmp_path, reports, (1280, 800))

    def second(cid: str) -> tuple[str, str, str]:
        card = browser.find_element(By.ID, "answer-museum")
        click(browser, card.find_element(By.CSS_SELECTOR, f".claim[data-claim='{cid}']"))
        detail = browser.find_element(By.ID, "detail")
        terms = detail.find_elements(By.TAG_NAME, "dt")
        at = [t.text for t in terms].index("second judge")
        dd = detail.find_elements(By.TAG_NAME, "dd")[at]
        model, _, said = dd.text.partition("\n")
        assert model == "anthropic/claude-haiku-4-5"  # the model in the value, not in the label (issue 29 §4)
        return terms[at].text, said, dd.get_attribute("class") or ""

    assert second("c1")[1:] == ("SUPPORTED: It opens at 9 am.", "")
    _, said, cls = second("c2")
    assert said == f"disagrees: UNSUPPORTED: {hostile}" and "flag" in cls
    _, said, cls = second("c3")
    assert said == "no verdict: the second judge's call timed out" and "flag" in cls
    assert browser.execute_script("return window.pwned === undefined")
    # an answer the second judge did not look at: no such row
    click(browser, browser.find_element(By.ID, "answer-hostile <b>").find_element(By.CSS_SELECTOR, ".claim"))
    texts = [t.text for t in browser.find_element(By.ID, "detail").find_elements(By.TAG_NAME, "dt")]
    assert "verdict" in texts and not any(t.startswith("second judge") for t in texts)


def test_a_long_label_leaves_the_detail_values_their_width(browser: Any, tmp_path: Path) -> None:  # noqa: F811
    """Issue 29 §4: at 1280x800 the label ``second judge (provider/model)`` took the detail panel's label column
    so wide that the values wrapped a few letters a line."""
    from selenium.webdriver.common.by import By

    reports = page_reports(0)
    museum = reports[0]
    museum.second_judge = SecondJudging(model="openai-compatible/qwen2.5-72b-instruct-awq", why=["FAIL"], claims=3)
    museum.claims[0].second_judge = SecondVerdict(label="SUPPORTED", reason="It opens at 9 am, the source says.")
    museum.claims[0].judges_disagree = False
    _open(browser, tmp_path, reports, (1280, 800))
    click(
        browser, browser.find_element(By.ID, "answer-museum").find_element(By.CSS_SELECTOR, ".claim[data-claim='c1']")
    )
    widths = browser.execute_script(
        "const dl = document.querySelector('#detail dl');"
        "const width = n => n.getBoundingClientRect().width;"
        "return [width(dl), ...[...dl.querySelectorAll('dd')].map(width)]"
    )
    browser.save_screenshot(str(tmp_path / "detail-second-judge-1280x800.png"))
    assert min(widths[1:]) >= 0.55 * widths[0], widths


def test_a_wrong_citation_shows_on_its_claim_and_a_reviewer_can_decide_it(browser: Any, tmp_path: Path) -> None:  # noqa: F811
    """Issue 29 §2: a claim citing [1] but supported only by [2] showed only "1 wrong citations" on its card. The
    claim's row and its detail say so, and a reviewer's decision on the citation is exported with the verdict, in
    lines `metrics --reviews` and `learn.labels` read as before."""
    import json

    from selenium.webdriver.common.by import By

    from groundjudge.review.metrics import parse_reviews

    reports = page_reports(0)
    museum = reports[0]
    museum.claims[0].cited, museum.claims[0].citation = [2], "OTHER_SUPPORTS"  # the judge quoted source 1
    museum.claims[1].cited, museum.claims[1].citation = [1], "CITED_SUPPORTS"
    _open(browser, tmp_path, reports, (1280, 800))
    card = browser.find_element(By.ID, "answer-museum")
    rows = {r.get_attribute("data-claim"): r for r in card.find_elements(By.CSS_SELECTOR, ".crow[data-claim]")}
    assert rows["c1"].find_element(By.CSS_SELECTOR, ".cite-wrong").text == "wrong citation [2]"
    assert not rows["c2"].find_elements(By.CSS_SELECTOR, ".cite-wrong")
    click(browser, card.find_element(By.CSS_SELECTOR, ".claim[data-claim='c1']"))
    detail = browser.find_element(By.ID, "detail")
    terms = [t.text for t in detail.find_elements(By.TAG_NAME, "dt")]
    said = detail.find_elements(By.TAG_NAME, "dd")[terms.index("citation")]
    assert said.text == "cites [2]: wrong citation: only a source it does not cite supports it (the judge quoted [1])"
    assert "flag" in (said.get_attribute("class") or "")
    click(browser, detail.find_element(By.CSS_SELECTOR, "#cite-decide button[data-citation='WRONG']"))
    # no verdict yet: the choice is exported all the same (it stayed in the browser, and was lost on closing it),
    # with a null label that no reader takes for a label
    exported = browser.execute_script("return window.groundjudgeReview.exportJsonl()")
    line = json.loads(exported)
    assert (line["claim_id"], line["label"], line["citation"], line["groundjudge_citation"]) == (
        "c1",
        None,
        "WRONG",
        "OTHER_SUPPORTS",
    )
    assert "decided_at" not in line and parse_reviews(exported.splitlines()) == []
    holds = browser.find_element(By.ID, "export-holds")
    assert holds.text == (
        "the export holds 0 verdicts and 1 note or citation choice without a verdict (label null: no label for "
        "metrics, calibrate or tune)"
    )
    click(browser, browser.find_element(By.CSS_SELECTOR, "#detail button[data-label='SUPPORTED']"))
    assert holds.text == "the export holds 1 verdict"
    exported = browser.execute_script("return window.groundjudgeReview.exportJsonl()")
    line = json.loads(exported.splitlines()[0])
    assert (line["claim_id"], line["label"], line["citation"], line["groundjudge_citation"]) == (
        "c1",
        "SUPPORTED",
        "WRONG",
        "OTHER_SUPPORTS",
    )
    assert [(r.claim_id, r.label) for r in parse_reviews(exported.splitlines())] == [("c1", "SUPPORTED")]


def _nli_failed_reports() -> list[AnswerReport]:
    """The museum answer with its second claim's NLI check failed (as ``checker.evidence`` records a non-finite
    score: the defaults, 0, and the error), the judge's verdict standing; the error text hostile."""
    reports = page_reports(0)
    reports[0].claims[1].nli = ClaimNLI(passages_total=9, error=f"non-finite probability {HOSTILE_TEXT}")
    return reports


def test_a_failed_nli_check_is_no_score_in_the_queue_reasons_nor_in_the_marks() -> None:
    from groundjudge.review.html import risk_reasons
    from groundjudge.review.page_sources import nli_passages

    museum = _nli_failed_reports()[0]
    assert "1 NLI check failed" in risk_reasons(museum)
    # a failed check's passage (a report edited by hand, or written by another tool) is no evidence to mark
    museum.claims[1].nli.contradiction_passage = Passage(doc=0, start=0, end=5, text="x")  # type: ignore[union-attr]
    assert nli_passages(museum.claims[1]) == []
    assert [ln["kind"] for ln in claim_links(museum)[1]] == ["quote"]


def test_a_failed_nli_check_shows_as_failed_not_as_entailment_zero(browser: Any, tmp_path: Path) -> None:  # noqa: F811
    """A claim whose NLI check failed showed "entailment 0.000 / contradiction 0.000": to a reviewer, strong
    evidence against the claim. Its detail, its row and its tooltip say the check failed, with no NLI number."""
    from selenium.webdriver.common.by import By

    _open(browser, tmp_path, _nli_failed_reports(), (1280, 800))
    card = browser.find_element(By.ID, "answer-museum")
    assert "1 NLI check failed" in [s.text for s in card.find_elements(By.CSS_SELECTOR, ".risk")]
    node = card.find_element(By.CSS_SELECTOR, ".claim[data-claim='c2']")
    assert node.get_attribute("title") == "CONTRADICTED (NLI check failed): It closes at 7 pm."
    row = card.find_element(By.CSS_SELECTOR, ".crow[data-claim='c2']")
    assert row.find_element(By.CSS_SELECTOR, ".nli-failed").text == "NLI check failed"
    first = card.find_element(By.CSS_SELECTOR, ".crow[data-claim='c1']")
    assert not first.find_elements(By.CSS_SELECTOR, ".nli-failed")
    click(browser, node)
    detail = browser.find_element(By.ID, "detail")
    terms = [t.text for t in detail.find_elements(By.TAG_NAME, "dt")]
    assert "entailment" not in terms and "contradiction" not in terms and "passages scored" not in terms
    said = detail.find_elements(By.TAG_NAME, "dd")[terms.index("NLI")]
    assert said.text.startswith("NLI check failed: non-finite probability </script><img src=x onerror=")
    assert "flag" in (said.get_attribute("class") or "")
    assert "0.000" not in detail.text
    assert browser.execute_script("return window.pwned === undefined")
    # a claim whose check ran keeps its numbers
    click(browser, card.find_element(By.CSS_SELECTOR, ".claim[data-claim='c1']"))
    terms = [t.text for t in browser.find_element(By.ID, "detail").find_elements(By.TAG_NAME, "dt")]
    assert "entailment" in terms and "NLI" not in terms


def test_a_note_without_a_verdict_is_exported_and_read_as_no_label(browser: Any, tmp_path: Path) -> None:  # noqa: F811
    """A note on a claim the reviewer did not label stayed in the browser, left out of the export without a word,
    and was lost when they closed it. The export holds it (label null), the bar says what the export holds, and
    ``metrics --reviews`` reads the file as the verdicts alone."""
    import json

    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from typer.testing import CliRunner

    from groundjudge.cli import app
    from groundjudge.io.reports import dumps
    from groundjudge.review.metrics import parse_reviews

    reports = page_reports(0)
    _open(browser, tmp_path, reports, (1280, 800))
    holds = browser.find_element(By.ID, "export-holds")
    assert holds.text == "the export holds 0 verdicts"
    browser.find_element(By.ID, "autoadvance").click()  # stay on the claim decided
    assert _current(browser) == ("museum", "c1")
    keys(browser, "n", f"check the desk {HOSTILE_TEXT[:40]}", Keys.ESCAPE)  # a note, no verdict
    keys(browser, "j", "2", "n", "closes at 5", Keys.ESCAPE)  # a verdict with a note
    keys(browser, "j", "n", " ", Keys.ESCAPE)  # a blank note is nothing to export
    assert holds.text == (
        "the export holds 1 verdict and 1 note or citation choice without a verdict (label null: no label for "
        "metrics, calibrate or tune)"
    )
    exported = browser.execute_script("return window.groundjudgeReview.exportJsonl()")
    lines = [json.loads(x) for x in exported.splitlines()]
    assert [(x["claim_id"], x["label"], x["note"]) for x in lines] == [
        ("c1", None, f"check the desk {HOSTILE_TEXT[:40]}"),
        ("c2", "CONTRADICTED", "closes at 5"),
    ]
    assert [(r.claim_id, r.label) for r in parse_reviews(exported.splitlines())] == [("c2", "CONTRADICTED")]
    # a reload keeps the note; the file the button writes is what the readers read
    browser.refresh()
    assert browser.execute_script("return window.groundjudgeReview.exportJsonl()") == exported
    out = tmp_path / "out.jsonl"
    out.write_text("".join(dumps(r) + "\n" for r in reports), encoding="utf-8")
    reviews = tmp_path / "reviews.jsonl"
    reviews.write_text(exported, encoding="utf-8")
    result = CliRunner().invoke(app, ["metrics", str(out), "--reviews", str(reviews)])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert (summary["n"], summary["unmatched"], summary["confusion"][2][2]) == (1, 0, 1)  # CONTRADICTED, agreed
    assert "n=1 of 1 reviews" in " ".join(result.output.split())
