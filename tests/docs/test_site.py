"""Issue 30: the manual builds with ``mkdocs build --strict`` (offline: no broken link, no page left out of the nav, no
reference to an option or field that does not exist), has at least ten pages and names every ``score`` option.

The site is built once a session (a few seconds). Without mkdocs (the ``docs`` extra) the tests skip, saying
so, except under CI, where ``.ci/run`` installs it and they must run.
"""

from __future__ import annotations

import fcntl
import html
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.blocks import ROOT, gj_reference


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The built site: built once for the whole run, whichever worker asks first (the others wait on a lock)."""
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        if os.environ.get("CI"):
            pytest.fail("mkdocs and mkdocs-material are missing under CI: the dev extra installs them (.[docs])")
        pytest.skip("mkdocs is not installed: pip install -e '.[docs]' to build and test the manual")
    # one folder for every xdist worker of this run: a worker's base folder is inside the run's; without xdist the
    # run's own base folder (its parent is every run's, where another run's site, built from another tree, was reused)
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    out, failure = shared / "docs-site", shared / "docs-site.failed"
    with (shared / "docs-site.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (out / "index.html").is_file() and not failure.is_file():
            result = subprocess.run(
                [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                cwd=ROOT,
                capture_output=True,
                text=True,
                env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
                timeout=600,
            )
            if result.returncode != 0:
                failure.write_text(result.stderr[-6000:])
    assert not failure.is_file(), f"mkdocs build --strict failed:\n{failure.read_text()}"
    return out


def text_of(page: Path) -> str:
    """A built page's text, tags off, entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", " ", page.read_text(encoding="utf-8")))


def test_the_site_has_at_least_ten_pages(site: Path) -> None:
    pages = [p for p in site.rglob("*.html") if p.name != "404.html"]
    assert len(pages) >= 10, [str(p.relative_to(site)) for p in pages]
    for section in ("tutorials", "how-to", "reference", "explanation", "benchmarks"):
        assert any(p.relative_to(site).parts[0] == section for p in pages), section


def test_the_cli_reference_names_every_score_option_and_every_command(site: Path) -> None:
    page = text_of(site / "reference" / "cli.html")
    commands = gj_reference.cli_commands()
    for command in commands:
        assert command.name in page, command.name
    score = next(c for c in commands if c.path == ["score"])
    missing = [o for p in score.params for o in p.opts if o not in page]
    assert not missing, missing


def test_the_config_reference_lists_every_field(site: Path) -> None:
    from groundjudge.config import Config

    page = text_of(site / "reference" / "config.html")
    missing = [name for name in Config.model_fields if name not in page]
    assert not missing, missing


def test_no_marker_is_left_unexpanded_and_the_api_is_rendered(site: Path) -> None:
    for page in site.rglob("*.html"):
        assert "<!-- gj:" not in page.read_text(encoding="utf-8"), page
    api = text_of(site / "reference" / "python-api.html")
    for name in ("Evaluator", "score_file", "assert_grounded", "ScriptedLLMServer", "RunResult"):
        assert name in api, name
    reports = text_of(site / "reference" / "reports.html")
    assert "verdict_reasons" in reports and "contradicted_share" in reports


def test_the_build_fails_on_a_broken_link(tmp_path: Path) -> None:
    """--strict is what makes the build a check: a link to a page that does not exist fails it."""
    if importlib.util.find_spec("mkdocs") is None:
        pytest.skip("mkdocs is not installed")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\n[gone](missing.md)\n")
    (tmp_path / "mkdocs.yml").write_text("site_name: t\nnav:\n  - index.md\n")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=300,
    )
    assert result.returncode != 0 and "missing.md" in result.stderr


def test_the_errors_page_lists_the_messages_from_the_source(site: Path) -> None:
    page = text_of(site / "reference" / "errors.html")
    assert "EXIT_PENDING" in page and "BudgetExceededError" in page
    assert "a JSON object of settings, not" in page  # Config.load's message, read from groundjudge/config.py


def test_every_code_fence_in_the_manual_is_closed() -> None:
    """docs/tutorials/review.md closed a bash block with two fences: the second opened a code block that ran to the
    end of the page, so the rest of the tutorial showed as code (mkdocs --strict does not see it)."""
    for page in sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]):
        lines = page.read_text(encoding="utf-8").splitlines()
        fence: tuple[int, str] | None = None  # (line, indentation) of the fence that opened a block
        for n, line in enumerate(lines, start=1):
            stripped = line.lstrip()
            if not stripped.startswith("```"):
                continue
            indent = line[: len(line) - len(stripped)]
            if fence is None:
                fence = (n, indent)
            elif stripped.strip() == "```" and indent == fence[1]:
                if n == fence[0] + 1:
                    pytest.fail(f"{page.relative_to(ROOT)}:{n}: an empty code block (a fence doubled?)")
                fence = None
        assert fence is None, f"{page.relative_to(ROOT)}:{fence[0]}: a code block is never closed"
