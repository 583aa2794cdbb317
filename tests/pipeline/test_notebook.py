"""Notebook use: a run shows as a table, converts to DataFrames, and a re-run says it came from the cache."""

from __future__ import annotations

import importlib
import threading
import warnings
from pathlib import Path
from typing import Any

import pytest

from groundjudge import errors
from groundjudge.llm import Ledger
from groundjudge.pipeline.evaluator import Evaluator
from groundjudge.review import report
from groundjudge.testing import ScriptedLLMServer, route
from tests.pipeline.test_pipeline import BAD_ANSWER, CONTEXT, GOOD_ANSWER, HANDLERS, evaluator

ROWS = [
    {"id": "good", "answer": GOOD_ANSWER, "contexts": [CONTEXT]},
    {"id": "bad", "answer": BAD_ANSWER, "contexts": [CONTEXT]},
]


def test_rerunning_a_cell_is_free_and_says_so(shared_nli: Any, tmp_path: Path) -> None:
    with ScriptedLLMServer(route(HANDLERS)) as server:
        first = evaluator(server, shared_nli, tmp_path, qa=False).run(ROWS)
        assert first.llm.calls == 4 and first.llm.cost_usd > 0
        assert "4 billed" in first.cache_note and "this run cost nothing" not in first.cache_note
        requests = len(server.requests)
        # a new evaluator, as a re-executed cell builds one
        second = evaluator(server, shared_nli, tmp_path, qa=False).run(ROWS)
        assert len(server.requests) == requests
        assert second.llm.calls == 0 and second.llm.cached_calls == 4 and second.nli_computed == 0
        assert "Everything came from the cache: this run cost nothing." in second.cache_note
        assert "this run cost nothing" in second._repr_html_()

    frame = second.to_dataframe()
    assert list(frame.index) == ["good", "bad"] and list(frame["verdict"]) == ["PASS", "FAIL"]
    assert {"combined", "coverage", "contradicted_share", "cost_usd"} <= set(frame.columns)
    claims = second.claims_dataframe()
    assert len(claims) == 4 and set(claims["label"]) == {"SUPPORTED", "CONTRADICTED"}
    html = second[1]._repr_html_()
    assert "<b>FAIL</b>" in html and "CONTRADICTED" in html and "The source says 1889." in html
    assert "answers" in second._repr_html_() and len(second) == 2


def test_the_old_report_module_still_gives_each_moved_name_and_warns() -> None:
    """``groundjudge.review.report`` split into ``io.reports``, ``review.summary`` and ``review.notebook``; the old
    path (the README names ``groundjudge.review.report.summarize``) keeps working with a DeprecationWarning that
    names the new home, and gives the very same object."""
    assert set(report.MOVED) >= {
        "dumps", "finite_report", "read_reports", "is_report_file", "is_report_row", "write_parquet",
        "RunSummary", "Summarizer", "summarize", "summary_rows", "to_dataframe", "claims_dataframe", "Run",
    }  # fmt: skip
    for name, home in report.MOVED.items():
        with pytest.warns(DeprecationWarning, match=f"review.report.{name} moved to {home}.{name}"):
            moved = getattr(report, name)
        assert moved is getattr(importlib.import_module(home), name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(DeprecationWarning):
            exec("from groundjudge.review.report import summarize", {})
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        report.nothing  # noqa: B018
    assert "read_reports" in dir(report)


def test_a_stopped_run_hands_out_the_answers_it_finished(shared_nli: Any, tmp_path: Path) -> None:
    """A budget stop in ``Evaluator.run`` raised away every report: the answers finished (and paid for) before the
    stop were lost to the notebook. The error carries their :class:`Run`."""
    rows = [*ROWS, {"id": "late", "answer": GOOD_ANSWER + " It is tall.", "contexts": [CONTEXT]}]
    with ScriptedLLMServer(route(HANDLERS)) as server:
        ev = evaluator(server, shared_nli, tmp_path, qa=False, concurrency=1, window=1, ledger=Ledger(max_calls=3))
        with pytest.raises(errors.BudgetExceededError) as stopped:
            ev.run(rows, batch_size=1)
    run = stopped.value.run
    assert run is not None and [r.id for r in run] == ["good"] and run[0].verdict == "PASS"
    assert run.llm.calls == 3 and "3 billed" in run.cache_note


def test_settings_changed_after_the_evaluator_was_built_are_refused(nli_evaluator: Evaluator) -> None:
    """``ev.config.passage_tokens = 64`` between two cells was half applied: the steps read it live, while the
    reports' ``versions`` (computed once) still said ``passages=128``, and a changed ``t_support`` or ``budget_usd``
    was silently ignored (built into the thresholds and the ledger). Now the next call refuses, naming the change."""
    first = nli_evaluator.run(ROWS[:1])
    assert "passages=128/" in first[0].versions["evidence"]
    nli_evaluator.config.passage_tokens = 64
    with pytest.raises(errors.ConfigError, match=r"passage_tokens=64 \(was 128\).*build a new one"):
        nli_evaluator.run(ROWS[:1])
    with pytest.raises(errors.ConfigError, match="passage_tokens"):
        nli_evaluator.estimate(ROWS[:1])
    again = Evaluator(nli_evaluator.config, nli=nli_evaluator.nli, cache=nli_evaluator.cache).run(ROWS[:1])
    assert "passages=64/" in again[0].versions["evidence"]


def test_rerunning_an_nli_mode_cell_says_it_came_from_the_cache(nli_evaluator: Evaluator) -> None:
    """nli mode makes no LLM call, so a rerun whose every NLI pair came from the cache never said so (the note
    asked for cached LLM calls)."""
    first = nli_evaluator.run(ROWS)
    assert first.nli_computed > 0 and "this run cost nothing" not in first.cache_note
    again = nli_evaluator.run(ROWS)
    assert again.nli_computed == 0 and again.nli_cached == first.nli_computed + first.nli_cached
    assert "Everything came from the cache: this run cost nothing." in again.cache_note
    assert [r.model_dump(exclude={"usage"}) for r in again] == [r.model_dump(exclude={"usage"}) for r in first]


def test_frames_of_a_run_with_no_answer_or_no_claim_keep_their_columns(nli_evaluator: Evaluator) -> None:
    """A run whose answers all failed or had no claim gave a claims frame with no columns, and an empty run an
    answers frame with none: ``claims[claims["label"] == "CONTRADICTED"]`` or ``frame[["verdict"]]`` raised
    KeyError in the notebook cell instead of selecting nothing."""
    run = nli_evaluator.run(
        [
            {"id": "bad", "answer": GOOD_ANSWER, "contexts": "not a list"},
            {"id": "none", "answer": "", "contexts": [CONTEXT]},
        ]
    )
    assert [r.verdict for r in run] == ["ERROR", "NO_CLAIMS"]
    claims = run.claims_dataframe()
    assert claims[claims["label"] == "CONTRADICTED"].empty and "answer_id" in claims.columns
    frame = run.to_dataframe()
    assert list(frame["verdict"]) == ["ERROR", "NO_CLAIMS"]
    empty = nli_evaluator.run([]).to_dataframe()
    assert list(empty.columns) == list(frame.columns) and empty.index.name == "id"
    assert empty[["verdict", "combined", "cost_usd"]].empty


def test_a_rerun_whose_answers_failed_is_never_called_free(shared_nli: Any, tmp_path: Path) -> None:
    """A claims call answered HTTP 500 on every try: the answer is ERROR, and a rerun of the cell read its NLI pairs
    from the cache, made no billed call (failed calls are neither billed nor cached) and said "Everything came
    from the cache: this run cost nothing." over a run that sent every request again and failed again. The note
    now counts the failed answers and never calls such a run a free replay."""
    from groundjudge.testing import Reply

    handlers = {**HANDLERS, "claims": lambda req: Reply.error(500)}
    with ScriptedLLMServer(route(handlers)) as server:
        first = evaluator(server, shared_nli, tmp_path, qa=False).run(ROWS[:1])
        sent = len(server.requests)
        again = evaluator(server, shared_nli, tmp_path, qa=False).run(ROWS[:1])
        assert len(server.requests) > sent  # the rerun asked the failed call again
    for run in (first, again):
        assert run[0].verdict == "ERROR"
        assert "1 of 1 answers failed" in run.cache_note and "a rerun tries it again" in run.cache_note
        assert "cost nothing" not in run.cache_note and "cost nothing" not in run._repr_html_()
    assert again.nli_computed == 0 and again.llm.calls == 0  # what made the old note say "everything"


def test_the_answers_frame_has_every_failure_flag_in_every_run() -> None:
    """The frame took each answer's scores from their JSON form, which leaves ``claims_failed``, ``qa_failed``,
    ``n_nli_errors`` and the citation counts out while they are 0 / False: a run where nothing failed had no such
    columns (``frame[frame["claims_failed"]]`` raised KeyError), and one where some answer failed had NaN in them
    for the others (``~frame["claims_failed"]`` raised TypeError). Every run's frame now has the same columns, False
    and 0 where nothing failed."""
    from groundjudge.models import AnswerReport, Scores
    from groundjudge.review.notebook import to_dataframe

    clean = AnswerReport(id="ok", verdict="PASS", mode="nli", scores=Scores(n_claims=1, n_supported=1, combined=1.0))
    failed = Scores(n_claims=1, claims_failed=True, qa_failed=True, n_nli_errors=1)
    both = to_dataframe([clean, AnswerReport(id="bad", verdict="ERROR", mode="cascade", scores=failed)])
    alone, empty = to_dataframe([clean]), to_dataframe([])
    assert list(alone.columns) == list(both.columns) == list(empty.columns)
    assert list(both.loc[~both["claims_failed"]].index) == ["ok"]
    assert list(both["qa_failed"]) == [False, True] and list(both["n_nli_errors"]) == [0, 1]
    assert alone[alone["claims_failed"] | alone["qa_failed"]].empty
    assert {"n_citations", "n_citations_supporting", "n_citations_unchecked"} <= set(alone.columns)


def test_a_run_counts_its_own_nli_pairs_not_another_evaluators(shared_nli: Any, tmp_path: Path) -> None:
    """Every evaluator of a process shares one loaded model (``NLIModel.shared``), and ``Evaluator.run`` read its
    ``pairs_scored``: a second evaluator's work during the run (another cell's thread, another notebook tab's kernel
    thread) was counted as this run's "NLI pairs" and spoiled its cache note. Each run now counts its own scorer's."""
    from groundjudge.cache import Cache
    from groundjudge.config import Config

    alone = Evaluator(Config(mode="nli"), nli=shared_nli, cache=Cache(tmp_path / "alone")).run(ROWS, batch_size=1)
    assert alone.nli_computed > 0
    other = Evaluator(Config(mode="nli"), nli=shared_nli, cache=Cache(tmp_path / "other"))
    others: list[Any] = []

    def rows() -> Any:  # the other evaluator works while this run is under way
        yield ROWS[0]
        others.append(other.run([{**r, "id": f"o-{r['id']}"} for r in ROWS], batch_size=1))
        yield ROWS[1]

    run = Evaluator(Config(mode="nli"), nli=shared_nli, cache=Cache(tmp_path / "mine")).run(rows(), batch_size=1)
    assert others and (others[0].nli_computed, others[0].nli_cached) == (alone.nli_computed, alone.nli_cached)
    assert (run.nli_computed, run.nli_cached) == (alone.nli_computed, alone.nli_cached), run.cache_note


def test_two_evaluators_over_one_cache_folder_pay_once_for_the_same_rows(shared_nli: Any, tmp_path: Path) -> None:
    """Two evaluators on one cache folder (two cells, or a cell re-run while the first still runs in a thread), two
    threads each, scoring the same rows at once: every call that missed the cache in every thread was sent and
    billed, up to four times the calls the rows need. Now each distinct call is sent once; the evaluators' ledgers
    add up to what the server billed, and every thread gets the same reports."""
    from concurrent.futures import ThreadPoolExecutor

    from groundjudge.testing import Latency

    with ScriptedLLMServer(route(HANDLERS), latency=Latency(median=0.3)) as server:
        evaluators = [evaluator(server, shared_nli, tmp_path, qa=False) for _ in range(2)]
        assert evaluators[0].cache is not evaluators[1].cache  # two Cache objects on one folder
        start = threading.Barrier(4)

        def score(ev: Evaluator) -> Any:
            start.wait()
            return ev.run(ROWS)

        with ThreadPoolExecutor(4) as pool:
            runs = list(pool.map(score, [*evaluators, *evaluators]))
        assert len(server.requests) == server.billed == 4  # the rows' two claims and two judge calls
    assert sum(ev.usage.calls for ev in evaluators) == 4
    assert sum(ev.usage.cached_calls for ev in evaluators) == 4 * 4 - 4
    dumped = [[r.model_dump(exclude={"usage"}) for r in run] for run in runs]
    assert all(d == dumped[0] for d in dumped) and [r.verdict for r in runs[0]] == ["PASS", "FAIL"]


def test_an_interrupted_run_hands_out_the_answers_it_finished(shared_nli: Any, tmp_path: Path) -> None:
    """Ctrl-C in a cell during ``Evaluator.run`` raised KeyboardInterrupt with nothing on it: the answers finished
    (and paid for) before it were lost to the notebook, where a budget stop hands them out. The interrupt now
    carries their :class:`Run` as ``run``, as a stop does, and is raised as it came."""
    from groundjudge.cache import Cache
    from groundjudge.config import Config

    def rows() -> Any:  # Ctrl-C while the run reads its third row (one row in flight at a time)
        yield from ROWS
        raise KeyboardInterrupt

    ev = Evaluator(Config(mode="nli", window=1), nli=shared_nli, cache=Cache(tmp_path / "cache"))
    with pytest.raises(KeyboardInterrupt) as interrupted:
        ev.run(rows(), batch_size=1)
    run = getattr(interrupted.value, "run", None)
    assert run is not None and [r.id for r in run] == ["good", "bad"]
    assert run.nli_computed > 0 and "NLI pairs" in run.cache_note
