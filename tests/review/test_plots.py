"""Inline SVG plots: the numbers they draw, and the pages that show them (compare --html, calibrate --reliability)."""

from __future__ import annotations

import json
import math
import struct
import zlib
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
from typer.testing import CliRunner

from groundjudge.cli import app
from groundjudge.io.reports import dumps
from groundjudge.learn.calibrate import expected_calibration_error, reliability_bins
from groundjudge.models import AnswerReport, Claim, ClaimNLI, ClaimVerdict, Scores
from groundjudge.review.compare import align_claims, changed_claims, compare_runs, verdict_table
from groundjudge.review.html import render_compare_html
from groundjudge.review.plots import Interval, ReliabilityBin, histogram_svg, interval_svg, reliability_svg, standalone
from tests.review.test_html import browser  # noqa: F401 - the module-scoped headless Chromium fixture

# -- PNG pixels without an imaging library ----------------------------------------------------------------------


def png_pixels(data: bytes) -> list[tuple[int, ...]]:
    """The pixels of an 8-bit, non-interlaced RGB or RGBA PNG (what Chromium's screenshots are)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    assert header is not None
    width, height, depth, color, _, _, interlace = header
    assert depth == 8 and color in (2, 6) and interlace == 0, header
    bpp = 3 if color == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows: list[bytearray] = []
    prev = bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    return [tuple(r[x * bpp : x * bpp + 3]) for r in rows[::4] for x in range(0, width, 4)]  # every 4th pixel


def pixel_variance(pixels: list[tuple[int, ...]]) -> float:
    """Variance of the pixels' brightness: 0 for a blank (one-colour) image."""
    lum = [sum(p) / 3 for p in pixels]
    mean = sum(lum) / len(lum)
    return sum((v - mean) ** 2 for v in lum) / len(lum)


def _svg(text: str) -> ElementTree.Element:
    return ElementTree.fromstring(text)  # inline SVG is well-formed XML too


# -- the plot functions ------------------------------------------------------------------------------------------


def test_histogram_counts_stack_by_group_and_skip_non_finite() -> None:
    svg = histogram_svg(
        {"PASS": [0.95, 0.91, 1.0, 0.85], "FAIL": [0.1, 0.15, 0.92, float("nan"), None], "<b>&": [0.5]}, bins=10
    )
    root = _svg(svg)
    bars = [(r.get("data-group"), int(r.get("data-bin", -1)), int(r.get("data-count", 0))) for r in root.iter("rect")]
    bars = [b for b in bars if b[0] is not None]
    assert sorted(bars) == sorted(
        [("PASS", 9, 3), ("PASS", 8, 1), ("FAIL", 1, 2), ("FAIL", 9, 1), ("<b>&", 5, 1)]
    )  # 1.0 falls in the last bin; NaN and None are left out
    assert "n=8" in svg and "<b>" not in svg and "&lt;b&gt;&amp;" in svg
    heights = {(r.get("data-group"), r.get("data-bin")): float(r.get("height", 0)) for r in root.iter("rect")}
    # the tallest stack (bin 9: 3 PASS + 1 FAIL) fills the plot; heights are proportional to counts
    assert heights[("PASS", "9")] == pytest.approx(3 * heights[("FAIL", "9")], abs=0.2)
    assert heights[("FAIL", "1")] == pytest.approx(2 * heights[("FAIL", "9")], abs=0.2)
    empty = histogram_svg({"PASS": []})
    assert "no data" in empty and "class='bar'" not in empty
    with pytest.raises(ValueError):
        histogram_svg({}, bins=0)


def test_interval_plot_places_estimates_and_zero() -> None:
    rows = [
        Interval("combined", -0.2, -0.3, -0.1, bad=True, note="B worse"),
        Interval("claims", 0.05, -0.05, 0.15),
        Interval("qa", math.nan, 0.0, 0.1),
    ]
    root = _svg(interval_svg(rows))
    groups = [g for g in root.iter("g") if g.get("class") == "interval"]
    assert [g.get("data-name") for g in groups] == ["combined", "claims"]  # the NaN row is left out
    zero = next(e for e in root.iter("line") if e.get("class") == "zero")
    x0 = float(zero.get("x1", 0))
    for g, est in zip(groups, (-0.2, 0.05), strict=True):
        cx = float(next(g.iter("circle")).get("cx", 0))
        assert (cx < x0) == (est < 0)
    assert next(groups[0].iter("circle")).get("fill") == "#c62828"  # a regression is red
    assert "no data" in interval_svg([])


def test_reliability_bins_by_hand() -> None:
    pred = [0.05, 0.12, 0.5, 0.55, 0.58, 0.99, 1.0, math.nan, 1.5]
    gold = [False, True, False, True, True, True, False, True, True]
    bins = reliability_bins(pred, gold, n_bins=4)
    assert [b.count for b in bins] == [2, 0, 3, 2]  # 1.0 in the last bin; NaN and out-of-range left out
    assert bins[0].mean_predicted == pytest.approx(0.085) and bins[0].observed == 0.5
    assert bins[1].observed is None and bins[1].mean_predicted is None
    assert bins[2].observed == pytest.approx(2 / 3) and bins[3].observed == 0.5
    ece = expected_calibration_error(bins)
    assert ece == pytest.approx((2 * abs(0.085 - 0.5) + 3 * abs(1.63 / 3 - 2 / 3) + 2 * abs(0.995 - 0.5)) / 7)
    assert expected_calibration_error(reliability_bins([], [])) is None
    root = _svg(reliability_svg(bins))
    bars = [r for r in root.iter("rect") if r.get("class") == "bar"]
    assert [int(r.get("data-count", 0)) for r in bars] == [2, 3, 2]
    counts = [t.text for t in root.iter("text") if t.get("class") == "count"]
    assert counts == ["2", "3", "2"]
    assert any(e.get("class") == "diagonal" for e in root.iter("line"))
    file_text = standalone(reliability_svg(bins))
    assert ElementTree.fromstring(file_text.split("\n", 1)[1]).tag == "{http://www.w3.org/2000/svg}svg"
    assert "no data" in reliability_svg([ReliabilityBin(0, 1, 0, None, None)])


# -- compare --html --------------------------------------------------------------------------------------------


def _cv(cid: str, text: str, label: str, route: str = "judge") -> ClaimVerdict:
    return ClaimVerdict(
        claim=Claim(id=cid, text=text),
        label=label,
        route=route,
        nli=ClaimNLI(entailment=0.5, passages_scored=1),
    )


def _run(version: str) -> list[AnswerReport]:
    """Twelve answers; in v2 the combined score drops by 0.2 and three answers flip PASS -> FAIL."""
    out = []
    for i in range(12):
        worse = version == "v2"
        flip = worse and i < 3
        claims = [_cv("c1", f"Fact {i} one.", "SUPPORTED"), _cv("c2", f"Fact {i} two.", "SUPPORTED")]
        if flip:
            claims[1] = _cv("c2", f"Fact {i} two.", "CONTRADICTED")
            claims.append(_cv("c3", f"A new <claim> {i}.", "UNSUPPORTED", "nli"))
        combined = 0.9 - (0.2 if worse else 0.0) + 0.01 * (i % 3)
        out.append(
            AnswerReport(
                id=f"a{i}",
                verdict="FAIL" if flip else "PASS",
                mode="cascade",
                scores=Scores(
                    combined=combined,
                    claims=combined,
                    contradicted_share=(1 - combined) / 2 + (0.3 if flip else 0.0),
                    n_claims=len(claims),
                ),
                claims=claims,
            )
        )
    return out


def test_changed_claims_side_by_side() -> None:
    a, b = _run("v1"), _run("v2")
    table = verdict_table(a, b)
    assert table == {"labels": ["PASS", "FAIL"], "counts": [[9, 3], [0, 0]], "paired": 12}
    rows = align_claims(a[0], b[0])
    assert [(x and x.claim.id, y and y.claim.id) for x, y in rows] == [("c1", "c1"), ("c2", "c2"), (None, "c3")]
    changed = changed_claims(a, b)
    assert [c["id"] for c in changed] == ["a0", "a1", "a2"]  # only the answers whose verdict or claims changed
    assert [r["changed"] for r in changed[0]["claims"]] == [False, True, True]
    assert changed[0]["claims"][1]["a"]["label"] == "SUPPORTED" and changed[0]["claims"][1]["b"]["label"] == (
        "CONTRADICTED"
    )
    # the same text in another case or spacing is the same claim
    x = AnswerReport(id="x", verdict="PASS", mode="nli", scores=Scores(), claims=[_cv("c9", "Fact  ONE.", "SUPPORTED")])
    matched = align_claims(x, a[0])[0][1]
    assert matched is not None and matched.claim.id == "c1"
    # claims are paired by text, not by position: B listing them in another order changes nothing
    swapped = a[0].model_copy(update={"claims": list(reversed(a[0].claims))})
    pairs = [(p.claim.text, q.claim.text) for p, q in align_claims(a[0], swapped) if p and q]
    assert pairs == [("Fact 0 one.", "Fact 0 one."), ("Fact 0 two.", "Fact 0 two.")]
    assert not any(r["id"] == "a0" for r in changed_claims(a, [swapped, *a[1:]]))


def test_compare_page_in_the_browser(browser: Any, tmp_path: Path) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By

    a, b = tmp_path / "v1.jsonl", tmp_path / "v2.jsonl"
    a.write_text("".join(dumps(r) + "\n" for r in _run("v1")))
    b.write_text("".join(dumps(r) + "\n" for r in _run("v2")))
    page = tmp_path / "cmp.html"
    result = CliRunner().invoke(app, ["compare", str(a), str(b), "--json", "--html", str(page)])
    assert result.exit_code == 0, result.output
    stats = json.loads(result.stdout)
    assert stats["metrics"]["combined"]["b_worse"]
    text = page.read_text(encoding="utf-8")
    assert "<script" not in text and "http" not in text  # static, nothing fetched
    assert "A new &lt;claim&gt; 0." in text  # claim text is escaped
    browser.set_window_size(1100, 1400)
    browser.get(page.as_uri())
    intervals = browser.find_elements(By.CSS_SELECTOR, "#differences svg g.interval")
    names = [g.get_attribute("data-name") for g in intervals]
    assert names[:2] == ["combined", "claims"] and "contradicted_share (lower is better)" in names
    combined = stats["metrics"]["combined"]
    assert float(intervals[0].get_attribute("data-estimate")) == pytest.approx(combined["diff"], abs=1e-5)
    assert intervals[0].find_element(By.TAG_NAME, "circle").get_attribute("fill") == "#c62828"
    metrics_table = browser.find_element(By.ID, "metrics-table").text
    lo, hi = combined["ci95"]
    assert f"[{lo:+.3f}, {hi:+.3f}]" in metrics_table and "B worse" in metrics_table
    cell = browser.find_element(By.CSS_SELECTOR, "#flip-table td[data-a='PASS'][data-b='FAIL']")
    assert cell.text == "3" and "flip" in (cell.get_attribute("class") or "")
    assert browser.find_element(By.CSS_SELECTOR, "#flip-table td[data-a='PASS'][data-b='PASS']").text == "9"
    assert "PASS lost 3, gained 0" in browser.find_element(By.ID, "flips").text
    answers = browser.find_elements(By.CSS_SELECTOR, "#changed .answer")
    assert sorted(x.get_attribute("data-id") for x in answers) == ["a0", "a1", "a2"]
    first = answers[0]
    changed_rows = first.find_elements(By.CSS_SELECTOR, "tr.changed")
    assert len(changed_rows) == 2
    left, right = changed_rows[0].find_elements(By.TAG_NAME, "td")
    assert "SUPPORTED" in left.text and "CONTRADICTED" in right.text and "two." in left.text and "two." in right.text
    assert "(no such claim)" in changed_rows[1].find_elements(By.TAG_NAME, "td")[0].text
    size = browser.execute_script(
        "const r = document.querySelector('#differences svg').getBoundingClientRect(); return [r.width, r.height]"
    )
    assert size[0] > 300 and size[1] > 80
    shot = tmp_path / "compare.png"
    browser.save_screenshot(str(shot))
    assert pixel_variance(png_pixels(shot.read_bytes())) > 100


def test_compare_html_with_nothing_changed(tmp_path: Path) -> None:
    runs = _run("v1")
    page = render_compare_html(runs, runs, compare_runs(runs, runs))
    assert "No answer&#x27;s verdict or claims changed." in page or "No answer's verdict or claims changed." in page


# -- calibrate --reliability -----------------------------------------------------------------------------------


def _labelled_out(tmp_path: Path) -> Path:
    reports = []
    for i in range(40):
        ent = (i + 0.5) / 40
        supported = (i * 7919) % 40 < i  # more often SUPPORTED as entailment rises
        cv = _cv("c1", f"Claim {i}.", "SUPPORTED" if ent > 0.5 else "UNSUPPORTED", "nli")
        cv.nli = ClaimNLI(entailment=ent, contradiction=0.01, passages_scored=1)
        reports.append(
            AnswerReport(
                id=f"q{i}",
                verdict="PASS",
                mode="nli",
                scores=Scores(combined=ent),
                claims=[cv],
                label="SUPPORTED" if supported else "UNSUPPORTED",
            )
        )
    out = tmp_path / "labelled.jsonl"
    out.write_text("".join(dumps(r) + "\n" for r in reports))
    return out


def test_calibrate_writes_a_reliability_page(browser: Any, tmp_path: Path) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By

    out = _labelled_out(tmp_path)
    page = tmp_path / "reliability.html"
    result = CliRunner().invoke(
        app,
        ["calibrate", str(out), "--out", str(tmp_path / "t.json"), "--min-decided", "2", "--reliability", str(page)],
    )
    assert result.exit_code == 0, result.output
    assert "expected calibration error" in result.stderr
    browser.set_window_size(900, 900)
    browser.get(page.as_uri())
    bars = browser.find_elements(By.CSS_SELECTOR, "#reliability svg.gj-reliability rect.bar")
    assert [int(b.get_attribute("data-count")) for b in bars] == [4] * 10
    rows = browser.find_elements(By.CSS_SELECTOR, "#bins tr")[1:]
    assert len(rows) == 10 and rows[0].find_elements(By.TAG_NAME, "td")[1].text == "4"
    labels = [json.loads(x)["label"] for x in out.read_text().splitlines()]
    observed = sum(label == "SUPPORTED" for label in labels[36:]) / 4
    assert float(bars[-1].get_attribute("data-observed")) == pytest.approx(observed)
    assert browser.find_element(By.CSS_SELECTOR, "#reliability svg line.diagonal").is_displayed()
    shot = tmp_path / "reliability.png"
    browser.save_screenshot(str(shot))
    assert pixel_variance(png_pixels(shot.read_bytes())) > 100


def test_reliability_needs_html_or_svg(tmp_path: Path) -> None:
    out = _labelled_out(tmp_path)
    result = CliRunner().invoke(app, ["calibrate", str(out), "--reliability", str(tmp_path / "r.png")])
    assert result.exit_code == 2 and ".html or .svg" in result.output


def test_blank_png_has_no_variance() -> None:
    # the screenshot check itself: a one-colour PNG is blank, a two-colour one is not
    def png(rows: list[bytes], width: int) -> bytes:
        def chunk(kind: bytes, body: bytes) -> bytes:
            return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

        raw = b"".join(b"\x00" + r for r in rows)
        ihdr = struct.pack(">IIBBBBB", width, len(rows), 8, 2, 0, 0, 0)
        return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")

    white = [b"\xff\xff\xff" * 8] * 8
    assert pixel_variance(png_pixels(png(white, 8))) == 0
    half = [b"\xff\xff\xff" * 8] * 4 + [b"\x00\x00\x00" * 8] * 4
    assert pixel_variance(png_pixels(png(half, 8))) > 1000
