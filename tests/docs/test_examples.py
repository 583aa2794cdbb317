"""Issue 30: every Python example of the manual and the README runs.

The blocks of one page run in order in one namespace, as a reader would paste them, in a scratch folder that holds
the repository's ``fixtures/``. LLM calls go through the real SDKs to a :class:`ScriptedLLMServer` (its base URL in
``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL``; ``tests/docs/scripted_model.py`` answers plausibly); the local checker
is the shared small model. A block that cannot run says why in its info string: ```python skip="reason"```; one that
needs an optional tool names its module: ```python requires="ragas"``` (skipped, with the reason, where it is not
installed).
"""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from groundjudge.testing import ScriptedLLMServer
from tests.conftest import SHARED_MODEL
from tests.docs.blocks import ROOT, Block, blocks, pages
from tests.docs.scripted_model import SCRIPT

PYTHON = {"python", "py", "pycon"}


def python_pages() -> list[Path]:
    return [p for p in pages() if any(b.lang in PYTHON for b in blocks(p))]


@pytest.fixture(scope="module")
def llm() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(SCRIPT) as server:
        yield server


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, llm: ScriptedLLMServer) -> Path:
    """A folder to run a page's examples in, with the environment a reader's would have (keys, a model, a cache)."""
    work = tmp_path / "work"
    work.mkdir()
    shutil.copytree(ROOT / "fixtures", work / "fixtures")
    monkeypatch.chdir(work)
    monkeypatch.setenv("OPENAI_BASE_URL", llm.openai_base_url)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", llm.anthropic_base_url)
    monkeypatch.setenv("GROUNDJUDGE_NLI_MODEL", str(SHARED_MODEL))
    monkeypatch.setenv("GROUNDJUDGE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("GROUNDJUDGE_LLM", raising=False)
    return work


def _skip_reason(block: Block) -> str | None:
    if "skip" in block.attrs:
        return block.attrs["skip"] or "no reason given"
    module = block.attrs.get("requires")
    if module and importlib.util.find_spec(module) is None:
        return f"needs {module} (its extra is not installed)"
    return None


@pytest.mark.slow
@pytest.mark.parametrize("page", python_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_python_examples_of_a_page_run(page: Path, scratch: Path) -> None:
    from groundjudge.testing import assertions

    saved = assertions.DEFAULTS.get("evaluator")
    namespace: dict[str, object] = {"__name__": "__docs__"}
    ran, skipped = 0, []
    try:
        for block in blocks(page):
            if block.lang not in PYTHON:
                continue
            reason = _skip_reason(block)
            if reason:
                skipped.append(f"{block.where}: {reason}")
                continue
            code = compile(block.code, block.where, "exec")
            exec(code, namespace)  # the manual's own example
            ran += 1
    finally:
        assertions.set_default_evaluator(saved)  # an example may have set the pytest gate's evaluator
    assert ran or skipped
    for reason in skipped:
        assert reason.split(": ", 1)[1], reason  # every skipped block says why


def test_every_skipped_block_says_why() -> None:
    problems = []
    for page in pages():
        for block in blocks(page):
            if block.lang in PYTHON and "skip" in block.attrs and len(block.attrs["skip"]) < 10:
                problems.append(f"{block.where}: skip={block.attrs['skip']!r} is not a reason")
    assert not problems, "\n".join(problems)


def test_most_python_examples_run() -> None:
    """Skips are the exception: at least four blocks in five run (those that need a tool's extra count as run)."""
    python = [b for p in pages() for b in blocks(p) if b.lang in PYTHON]
    skipped = [b for b in python if "skip" in b.attrs]
    assert len(python) >= 15 and len(skipped) * 5 <= len(python), (len(python), [b.where for b in skipped])
