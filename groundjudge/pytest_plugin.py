"""A pytest plugin (entry point ``pytest11``): grounding checks as tests, for gating prompt changes in CI.

Fixtures: ``groundjudge_evaluator`` (one :class:`~groundjudge.pipeline.Evaluator` per session, also the default of
:func:`groundjudge.testing.assert_grounded` and :func:`~groundjudge.testing.assert_file_grounded`) and
``groundjudge_baseline`` (the stored run to compare against, or None).

Options (command line, or the ini keys in brackets, e.g. in ``[tool.pytest.ini_options]``):

- ``--groundjudge-llm provider/model`` (``groundjudge_llm``): the LLM judge; without it, nli mode (no LLM).
- ``--groundjudge-base-url URL`` (``groundjudge_base_url``): an OpenAI-compatible or proxy server.
- ``--groundjudge-cache-only`` (``groundjudge_cache_only``): replay from the cache; a call that is not cached fails
  the test instead of spending. No API key is needed (a cache-only client is built without one: nothing is
  sent). It needs the judge the cache was recorded with (``--groundjudge-llm`` or ``GROUNDJUDGE_LLM``): without
  one pytest stops with a usage error before any test runs, not an nli-mode run that replays nothing.
- ``--groundjudge-cache-dir DIR`` (``groundjudge_cache_dir``): the cache to replay (commit it, or restore it in CI).
- ``--groundjudge-nli-model ID_OR_PATH`` (``groundjudge_nli_model``).
- ``--groundjudge-baseline FILE`` (``groundjudge_baseline``): a stored ``groundjudge score`` output; with it,
  ``assert_file_grounded`` fails on a significant regression against it, and on an answer the baseline cannot
  vouch for (a new id, ERROR, NO_CLAIMS) that misses the bar itself, or that is missing from the run.

Pytest picks its rootdir and ini file from the paths on its command line before any plugin's options are known, so
an option's value written after a space (``--groundjudge-baseline ../scored_v1.jsonl``) is taken as a test path for
that choice. When that changes the ini file, the project's settings would silently go unread: the plugin stops
with a usage error that names the ``=`` form (``--groundjudge-baseline=../scored_v1.jsonl``), which is always safe.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

_OPTIONS = {
    "llm": "provider/model of the LLM judge (default: nli mode, no LLM)",
    "base_url": "server of an OpenAI-compatible model, or a proxy",
    "cache_dir": "groundjudge cache directory (what --groundjudge-cache-only replays)",
    "nli_model": "NLI model id or path",
    "baseline": "stored 'groundjudge score' output; assert_file_grounded fails on a significant regression against it",
}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("groundjudge", "groundjudge grounding checks")
    for name, help_text in _OPTIONS.items():
        group.addoption(_flag(name), dest=f"groundjudge_{name}", help=help_text)
        parser.addini(f"groundjudge_{name}", help_text, default=None)
    group.addoption(
        "--groundjudge-cache-only",
        dest="groundjudge_cache_only",
        action="store_true",
        default=None,
        help="replay LLM answers from the cache; an uncached call fails the test (no keys, no spend)",
    )
    parser.addini("groundjudge_cache_only", "replay LLM answers from the cache only", type="bool", default=False)


def _flag(name: str) -> str:
    return f"--groundjudge-{name.replace('_', '-')}"


def _settings_without(config: pytest.Config, values: Sequence[str]) -> tuple[Path, Path | None] | None:
    """The rootdir and ini pytest would have picked had ``values`` not been on its command line (pytest's own rule);
    None when this pytest does not expose the rule."""
    try:
        from _pytest.config.findpaths import determine_setup  # pytest's own rule (no public API)

        early = config.known_args_namespace
        rootpath, inipath, *_ = determine_setup(
            inifile=early.inifilename,
            override_ini=early.override_ini,
            args=[arg for arg in early.file_or_dir if arg not in values],
            rootdir_cmd_arg=early.rootdir or None,
            invocation_dir=config.invocation_params.dir,
        )
    except (ImportError, TypeError, AttributeError):
        return None
    return rootpath, inipath


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, args: list[str]) -> None:
    """Refuse an option value after a space that pytest took as a test path when it chose its ini file, when that
    changed which ini file (which settings) pytest reads."""
    flags = {_flag(name) for name in _OPTIONS}
    spaced = [(flag, value) for flag, value in pairwise(args) if flag in flags and os.path.exists(value)]
    if not spaced:
        return
    meant = _settings_without(early_config, [value for _, value in spaced])
    used = (early_config.rootpath, early_config.inipath)
    if meant is not None and meant[1] == used[1]:
        return  # the same ini file (or none either way): the same settings, whatever the rootdir
    written = ", ".join(f"{value} (the value of {flag}, written after a space)" for flag, value in spaced)
    safe = " ".join(f"{flag}={value}" for flag, value in spaced)
    project = "" if meant is None else f" instead of {meant[0]} (ini file: {meant[1] or 'none'})"
    raise pytest.UsageError(
        f"groundjudge: pytest took {written} as a test path when it chose its rootdir and ini file, before the "
        f"groundjudge plugin could claim it: it chose {used[0]} (ini file: {used[1] or 'none'}){project}, so this "
        "project's settings (groundjudge_llm, groundjudge_nli_model, groundjudge_cache_dir, ...) would go unread. "
        f"Write the value with '=': {safe}"
    )


def _option(config: pytest.Config, name: str) -> Any:
    """A command-line option, else its ini value, else None."""
    value = config.getoption(f"groundjudge_{name}", default=None)
    if value is None:
        value = config.getini(f"groundjudge_{name}")
    return value if value not in ("", [], False) else None  # an ini bool's default False is "not given"


def _judge(config: pytest.Config) -> Any:
    """The session's LLM judge: the option, else its ini key, else $GROUNDJUDGE_LLM (as default_evaluator() reads
    it); None for nli mode."""
    return _option(config, "llm") or os.environ.get("GROUNDJUDGE_LLM") or None


def pytest_configure(config: pytest.Config) -> None:
    """A cache-only replay with no judge set is refused once, before any test runs: nli mode replays nothing, so the
    judge the cache was recorded with would go unasked and an answer it failed would pass (the manual's CI line once
    left the judge out)."""
    if _option(config, "cache_only") and not _judge(config):
        raise pytest.UsageError(
            "groundjudge: --groundjudge-cache-only replays a judge's recorded replies, but no judge is set "
            "(--groundjudge-llm, the groundjudge_llm ini key, or GROUNDJUDGE_LLM): the tests would run in nli mode "
            "and replay nothing. Name the judge the cache was recorded with, e.g. --groundjudge-llm openai/gpt-4o-mini"
        )


@pytest.fixture(scope="session")
def groundjudge_evaluator(pytestconfig: pytest.Config) -> Iterator[Any]:
    """The session's :class:`~groundjudge.pipeline.Evaluator`, configured by the ``--groundjudge-*`` options."""
    from groundjudge.config import Config
    from groundjudge.pipeline.evaluator import Evaluator
    from groundjudge.testing import assertions

    llm = _judge(pytestconfig)
    cache_only = bool(_option(pytestconfig, "cache_only"))
    values = {
        "llm": llm,
        "base_url": _option(pytestconfig, "base_url"),
        "cache_dir": _option(pytestconfig, "cache_dir"),
        "nli_model": _option(pytestconfig, "nli_model"),
        "cache_mode": "only" if cache_only else None,
    }
    try:
        evaluator = Evaluator(Config.make(**{k: v for k, v in values.items() if v is not None}))
        assertions.set_default_evaluator(evaluator)
        assertions.DEFAULTS["baseline"] = _option(pytestconfig, "baseline")
        yield evaluator
    finally:
        assertions.DEFAULTS.clear()


@pytest.fixture(scope="session")
def groundjudge_baseline(pytestconfig: pytest.Config) -> str | None:
    """The ``--groundjudge-baseline`` file, or None."""
    value = _option(pytestconfig, "baseline")
    return None if value is None else str(value)


@pytest.fixture(autouse=True)
def _groundjudge_defaults(request: pytest.FixtureRequest) -> None:
    """Make the plugin's evaluator the default of ``assert_grounded`` in tests that use a groundjudge option."""
    if "groundjudge_evaluator" in request.fixturenames:
        return
    config = request.config
    if any(_option(config, name) is not None for name in (*_OPTIONS, "cache_only")):
        request.getfixturevalue("groundjudge_evaluator")
