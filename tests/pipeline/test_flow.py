"""The run engine (groundjudge.pipeline.flow): rows stream through the stages, the call slots stay busy, reports
come out in input order and never depend on timing.

LLM calls through the real OpenAI SDK against the scripted server, whose replies wait a time drawn per request;
the shared NLI model by path.
"""

from __future__ import annotations

import contextlib
import hashlib
import random
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groundjudge.cache import Cache
from groundjudge.chunking import claim_sentences
from groundjudge.config import Config
from groundjudge.errors import DeferredCallError
from groundjudge.io.reports import dumps, finite_report
from groundjudge.models import AnswerReport, Claim, Sample
from groundjudge.pipeline.evaluator import Evaluator
from groundjudge.pipeline.flow import stream
from groundjudge.pipeline.steps import Steps
from groundjudge.pipeline.work import Work, error_report
from groundjudge.testing import RecordedRequest, Reply, ScriptedLLMServer, claims_in, fenced_block, prompt_name, route
from tests.conftest import make_test_client

pytestmark = pytest.mark.slow

FACTS = [
    "The bridge opened in 1932.",
    "The bridge is 503 metres long.",
    "It was designed by John Bradfield.",
    "It carries eight lanes of traffic.",
    "The bridge was painted grey.",
    "It was built by Dorman Long.",
    "The bridge opened in 1936.",
    "It is made of wood.",
]
SOURCE = (
    "The Sydney Harbour Bridge opened in 1932. The steel arch bridge is 503 metres long and was designed by "
    "John Bradfield; Dorman Long of Middlesbrough built it. It carries rail, vehicular and pedestrian traffic "
    "on eight lanes."
)


def _digest(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big")


def claims(req: RecordedRequest) -> Reply:
    answer = fenced_block(req, "ANSWER")
    sentences = [s.text for s in claim_sentences(answer)]
    out: dict[str, Any] = {"claims": [{"text": s, "source": s} for s in sentences]}
    if prompt_name(req) == "claims_qa":
        out["questions"] = [
            {"question": f"What does point {i} say?", "answer_from_answer": s.split()[-1]}
            for i, s in enumerate(sentences[:2], 1)
        ]
    return Reply.json(out)


def verify(req: RecordedRequest) -> Reply:
    """A verdict per claim decided by the claim's own text (so it never depends on which call came first)."""
    labels = ("SUPPORTED", "UNSUPPORTED", "CONTRADICTED")
    verdicts = [
        {
            "claim_id": cid,
            "verdict": labels[_digest(text) % 3],
            "reason": "scripted",
            "quotes": [{"source": 1, "text": "The steel arch bridge is 503 metres long"}],
        }
        for cid, text in claims_in(req).items()
    ]
    out: dict[str, Any] = {"verdicts": verdicts}
    if prompt_name(req) == "verify":
        import json

        listing = json.loads(fenced_block(req, "QUESTIONS") or "[]")
        out["answers"] = [{"id": q["id"], "context_answer": "1932"} for q in listing]
    return Reply.json(out)


class Delays:
    """Each reply waits a time drawn from the request's text and a seed, and ``late`` seconds more for a request that
    holds ``late_text``; counts calls in flight at the server."""

    def __init__(self, seed: int = 0, top: float = 0.02) -> None:
        self.seed, self.top = seed, top
        self.late_text: str | None = None
        self.late = 0.3
        self.in_flight = self.peak = 0
        self.lock = threading.Lock()

    def script(self) -> Any:
        inner = route({"claims": claims, "claims_qa": claims, "judge": verify, "verify": verify})

        def answer(req: RecordedRequest) -> Reply:
            wait = random.Random(f"{self.seed}:{req.text}").uniform(0, self.top)
            if self.late_text is not None and self.late_text in req.text:
                wait += self.late
            with self.lock:
                self.in_flight += 1
                self.peak = max(self.peak, self.in_flight)
            try:
                time.sleep(wait)  # the server's own thread for this request: the SDK sees a slow reply
                return inner(req)
            finally:
                with self.lock:
                    self.in_flight -= 1

        return answer


@pytest.fixture(scope="module")
def delays() -> Delays:
    return Delays()


@pytest.fixture(scope="module")
def server(delays: Delays) -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(delays.script()) as s:
        s.min_cached_prefix_tokens = 10**9  # no emulated prefix cache: its counts depend on which call came first
        yield s


def rows_of(answers: list[list[int]]) -> list[dict[str, Any]]:
    return [
        {"id": f"a{i}", "contexts": [SOURCE], "answer": " ".join(FACTS[j] for j in facts), "question": "Tell me."}
        for i, facts in enumerate(answers)
    ]


def run(
    server: ScriptedLLMServer, nli: Any, tmp: Path, rows: list[dict[str, Any]], nli_cache: bool = False, **kw: Any
) -> list[str]:
    """The reports of a run, every call made; every NLI pair scored by the model in this run's batches, or with
    ``nli_cache`` read from and written to a cache in ``tmp`` (a later batch reads what an earlier one wrote)."""
    batch_size = kw.pop("batch_size", 3)
    client = make_test_client(server, cache=Cache(tmp / "llm", mode="off"))
    cache = Cache(tmp / "nli", mode="use" if nli_cache else "off")
    ev = Evaluator(Config(llm="openai/gpt-4o-mini", **kw), nli=nli, client=client, cache=cache)
    return [dumps(finite_report(r)) for r in ev.evaluate_many(rows, batch_size=batch_size)]


@settings(max_examples=12, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(
    answers=st.lists(st.lists(st.integers(0, len(FACTS) - 1), min_size=0, max_size=3), min_size=1, max_size=9),
    concurrency=st.sampled_from([2, 4, 8]),
    window=st.sampled_from([None, 1, 2, 5]),
    batch_size=st.integers(1, 4),
    seed=st.integers(0, 10**6),
    qa=st.booleans(),
)
def test_reports_never_depend_on_timing_or_the_window(
    server: ScriptedLLMServer,
    delays: Delays,
    shared_nli: Any,
    tmp_path_factory: pytest.TempPathFactory,
    answers: list[list[int]],
    concurrency: int,
    window: int | None,
    batch_size: int,
    seed: int,
    qa: bool,
) -> None:
    """Byte for byte (usage too) the reports of one answer at a time, one call at a time: the stage-by-stage
    order, whatever the replies' waits, the concurrency and the window."""
    rows = rows_of(answers)
    delays.seed = seed
    one_at_a_time = run(
        server, shared_nli, tmp_path_factory.mktemp("a"), rows, concurrency=1, window=1, batch_size=batch_size, qa=qa
    )
    streamed = run(
        server,
        shared_nli,
        tmp_path_factory.mktemp("b"),
        rows,
        concurrency=concurrency,
        window=window,
        batch_size=batch_size,
        qa=qa,
    )
    assert streamed == one_at_a_time
    assert [r.split('"', 4)[3] for r in streamed] == [r["id"] for r in rows]


def test_the_call_slots_fill_across_stages_and_batches(
    server: ScriptedLLMServer, delays: Delays, shared_nli: Any, tmp_path: Path
) -> None:
    """A batch of 2 has at most 2 calls of one stage to make: the stage-by-stage engine never had more than 2 in
    flight. Streaming, claims calls of later batches and sources-side calls of earlier ones share the 6 slots."""
    delays.seed, delays.top, delays.peak = 1, 0.15, 0
    try:
        rows = rows_of([[i % 8, (i + 3) % 8] for i in range(30)])
        reports = run(server, shared_nli, tmp_path, rows, concurrency=6, batch_size=2, qa=True)
    finally:
        delays.top = 0.02
    assert len(reports) == 30
    assert delays.peak == 6


def test_no_call_slot_waits_for_the_qa_comparison(server: ScriptedLLMServer, shared_nli: Any, tmp_path: Path) -> None:
    """The QA check compares an answer's replies with the local model after its sources-side call; that CPU work
    runs on the NLI thread, so with one call slot the next answer's call goes out while the comparison runs (it
    used to wait: the slot's thread did the comparison). Batches of one answer: each is compared alone."""
    ended: list[float] = []

    class SlowSteps(Steps):  # the comparison of a slow CPU
        def _answers_agree(self, pairs: Any) -> list[float]:
            time.sleep(1.0)  # a margin a loaded CI machine's next call goes out well within
            ended.append(time.monotonic())
            return super()._answers_agree(pairs)

    class SlowComparison(Evaluator):
        @property
        def steps(self) -> Steps:
            return SlowSteps(super().steps.ctx)

    cache = Cache(tmp_path, mode="off")
    ev = SlowComparison(
        Config(llm="openai/gpt-4o-mini", qa=True, concurrency=1),
        nli=shared_nli,
        client=make_test_client(server, cache=cache),
        cache=cache,
    )
    first = len(server.requests)
    rows = rows_of([[2, 3], [3, 2]])  # replies "Bradfield." / "traffic." against "1932": only the model can tell
    reports = list(ev.evaluate_many(rows, batch_size=1))
    assert [r.id for r in reports] == ["a0", "a1"] and all(r.qa is not None and r.qa.score is not None for r in reports)
    sent = [r.received_at for r in server.requests[first:] if prompt_name(r) == "verify"]
    assert len(sent) == 2 and len(ended) == 2
    assert sent[1] < ended[0]  # the second answer's call did not wait for the first answer's comparison


def test_a_cut_batchs_qa_pairs_go_to_the_model_together_and_each_way_only_when_needed(
    server: ScriptedLLMServer, shared_nli: Any, tmp_path: Path
) -> None:
    """Issue 32: the QA comparison of a cut batch's answers is one model batch (the pairs of every answer, in input
    order, once none of the batch's sources-side calls is out), never one per answer; each pair is scored one way,
    and the other way only when it passes the first; the decisions are those of scoring both ways."""
    asked: list[list[tuple[str, str]]] = []
    scored: list[list[tuple[str, str]]] = []

    class Recording(Steps):
        def _answers_agree(self, pairs: Any) -> list[float]:
            asked.append(list(pairs))
            return super()._answers_agree(pairs)

    class RecordingEvaluator(Evaluator):
        @property
        def steps(self) -> Steps:
            return Recording(super().steps.ctx)

    cache = Cache(tmp_path, mode="off")
    ev = RecordingEvaluator(
        Config(llm="openai/gpt-4o-mini", qa=True, concurrency=4),
        nli=shared_nli,
        client=make_test_client(server, cache=cache),
        cache=cache,
    )
    scorer = ev.steps.scorer
    score = scorer.score

    def recorded(pairs: Any) -> Any:
        scored.append(list(pairs))
        return score(pairs)

    scorer.score = recorded  # type: ignore[method-assign]
    # the sources reply "1932": the model decides every pair but a3's first ("1932." settles it)
    rows = rows_of([[2, 3], [3, 2], [5, 1], [0, 4]])
    reports = list(ev.evaluate_many(rows, batch_size=3))
    assert [r.id for r in reports] == ["a0", "a1", "a2", "a3"]
    # one call for the first batch (three answers, input order), one for the second
    assert [len(a) for a in asked] == [6, 1]
    assert [p[1] for p in asked[0]] == ["What does point 1 say? 1932", "What does point 2 say? 1932"] * 3
    assert asked[0][0][0] == "What does point 1 say? Bradfield." and asked[0][2][0] == "What does point 1 say? traffic."
    both_ways = [(a, b) for pairs in asked for a, b in pairs]
    reverse = {(b, a) for a, b in both_ways}
    firsts = [pairs for pairs in scored if set(pairs) <= set(both_ways)]
    seconds = [pairs for pairs in scored if pairs and set(pairs) <= reverse]
    assert [len(p) for p in firsts] == [6, 1]
    full = scorer.model.predict(both_ways + [(b, a) for a, b in both_ways])
    n = len(both_ways)
    passes = [i for i in range(n) if full[i][0] >= 0.5]
    assert sum(len(p) for p in seconds) == len(passes)  # the other way only for those that pass the first
    agree = {p: min(full[i][0], full[n + i][0]) >= 0.5 for i, p in enumerate(both_ways)}
    got = {
        (f"{it.question} {it.answer_from_answer}", f"{it.question} {it.context_answer}"): it.consistent
        for r in reports
        for it in (r.qa.items if r.qa else [])
    }
    assert {p: got[p] for p in both_ways} == agree


def test_the_input_is_read_only_a_window_ahead(server: ScriptedLLMServer, shared_nli: Any, tmp_path: Path) -> None:
    """Memory stays flat: rows are pulled from the input only as reports go out (a window of 4 rows, batches of 2:
    at most one batch more than the window is read ahead)."""
    pulled = 0

    def rows() -> Iterator[dict[str, Any]]:
        nonlocal pulled
        for row in rows_of([[i % 8] for i in range(20)]):
            pulled += 1
            yield row

    cache = Cache(tmp_path, mode="off")
    ev = Evaluator(
        Config(llm="openai/gpt-4o-mini", concurrency=3, window=4, qa=False),
        nli=shared_nli,
        client=make_test_client(server, cache=cache),
        cache=cache,
    )
    ahead = []
    out = 0
    for _ in ev.evaluate_many(rows(), batch_size=2):
        out += 1
        ahead.append(pulled - out)
    assert out == 20
    assert max(ahead) <= 4 + 2, ahead


def test_an_abandoned_run_stops_its_threads(server: ScriptedLLMServer, shared_nli: Any, tmp_path: Path) -> None:
    """A caller that stops reading (a notebook cell interrupted, a break) leaves no call waiting to be sent."""
    cache = Cache(tmp_path, mode="off")
    ev = Evaluator(
        Config(llm="openai/gpt-4o-mini", concurrency=2, window=6, qa=False),
        nli=shared_nli,
        client=make_test_client(server, cache=cache),
        cache=cache,
    )
    reports = ev.evaluate_many(rows_of([[i % 8] for i in range(40)]), batch_size=2)
    next(reports)
    before = len(server.requests)
    reports.close()
    time.sleep(0.5)  # the calls already sent may finish; nothing new starts
    assert len(server.requests) <= before + 2


class _DeferredOnce:
    """Steps whose claims and sources-side calls are deferred until a parking answers their keys."""

    def __init__(self) -> None:
        self.answered: set[str] = set()
        self.log: list[tuple[str, list[int | None]]] = []

    def _call(self, key: str) -> None:
        if key not in self.answered:
            raise DeferredCallError("deferred", key=key)

    def claims_local(self, w: Work) -> bool:
        return False

    def claims_call(self, w: Work) -> None:
        self._call(f"claims-{w.row}")
        w.claims = [Claim(id="c1", text=f"claim {w.row}")]

    def nli_stage(self, batch: list[Work]) -> None:
        self.log.append(("nli", [w.row for w in batch]))

    def needs_verify(self, w: Work) -> bool:
        return bool(w.claims)

    def verify(self, w: Work) -> None:
        self._call(f"verify-{w.row}")

    def needs_compare(self, w: Work) -> bool:
        return False

    def compare(self, works: list[Work]) -> None:
        raise AssertionError("never asked")

    def needs_second(self, w: Work) -> bool:
        return False

    def second(self, w: Work) -> None:
        raise AssertionError("never asked")

    def report(self, w: Work) -> AnswerReport:
        return error_report(f"claims {len(w.claims)}", w.row, w.sample.id)


class _Parking:
    def __init__(self, steps: _DeferredOnce, answer: bool) -> None:
        self.steps, self.answer = steps, answer

    def settle(self, step: str, works: list[Work]) -> list[Work]:
        self.steps.log.append((step, [w.row for w in works]))
        if not self.answer:  # the dry run: counted, never sent
            return []
        for w in works:
            self.steps.answered.update(w.deferred)
            w.deferred = []
        return works

    def again(self, step: Callable[[Work], None]) -> Callable[[Work], None]:
        return step


@pytest.mark.parametrize("concurrency", [1, 4])
def test_deferred_calls_park_their_answers_until_every_answer_waits_then_each_step_is_settled_in_stage_order(
    concurrency: int,
) -> None:
    """Provider batch mode and the dry run go through the flow: a deferred call parks its answer; once every
    admitted answer is parked or done, the parked answers of the earliest step are settled together and run that
    step again; an answer left with deferred calls goes no further (and holds no batch's NLI stage back)."""
    cut = [Work(sample=Sample(id=f"a{n}", answer="x", contexts=["s"]), row=n) for n in (1, 2, 3)]
    steps = _DeferredOnce()
    reports = list(stream([list(cut)], steps, concurrency=concurrency, window=1, parking=_Parking(steps, True)))
    assert [r.errors for r in reports] == [["claims 1"]] * 3
    assert steps.log == [("claims", [1, 2, 3]), ("nli", [1, 2, 3]), ("verify", [1, 2, 3])]

    cut = [Work(sample=Sample(id=f"a{n}", answer="x", contexts=["s"]), row=n) for n in (1, 2, 3)]
    dry = _DeferredOnce()
    reports = list(stream([list(cut)], dry, concurrency=concurrency, parking=_Parking(dry, False)))
    assert [r.errors for r in reports] == [["claims 0"]] * 3 and [w.deferred for w in cut] == [
        [f"claims-{n}"] for n in (1, 2, 3)
    ]
    assert dry.log == [("claims", [1, 2, 3]), ("nli", [])]


def test_the_default_window_holds_four_cut_batches() -> None:
    """At concurrency 8 with batches of 32, two cut batches in flight (64 rows) kept 0.72-0.75 of the call slots
    busy on long answers with QA, four (128) 0.90-0.95 (``default_window``'s docstring): the window holds four cut
    batches, or 8 rows a call slot where that is more."""
    from groundjudge.pipeline.flow import default_window

    assert default_window(8, 32) == 128
    assert default_window(32, 32) == 256
    assert default_window(1, 1) == 8


@settings(max_examples=10, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(
    answers=st.lists(st.lists(st.integers(0, len(FACTS) - 1), min_size=1, max_size=3), min_size=4, max_size=9),
    concurrency=st.sampled_from([4, 8]),
    batch_size=st.integers(1, 2),
    seed=st.integers(0, 10**6),
    qa=st.booleans(),
)
def test_reports_never_depend_on_timing_with_the_nli_cache_on(
    server: ScriptedLLMServer,
    delays: Delays,
    shared_nli: Any,
    tmp_path_factory: pytest.TempPathFactory,
    answers: list[list[int]],
    concurrency: int,
    batch_size: int,
    seed: int,
    qa: bool,
) -> None:
    """With the NLI cache on, a later cut batch reads the pairs an earlier one wrote (the answers share claims
    across batches): the cut batches' NLI runs in input order, so that which batch scored a shared pair never
    depends on the replies' waits (a forward pass's probabilities move with the other pairs in it). Byte for byte
    the reports of one answer at a time, and a rerun from the warm cache gives them again."""
    rows = rows_of(answers)
    delays.seed = seed
    kw = dict(nli_cache=True, batch_size=batch_size, qa=qa)
    one_at_a_time = run(server, shared_nli, tmp_path_factory.mktemp("one"), rows, concurrency=1, window=1, **kw)
    streamed = tmp_path_factory.mktemp("streamed")
    delays.late_text = rows[0]["answer"]  # the first cut batch is late: the batches behind it are ready first
    try:
        assert run(server, shared_nli, streamed, rows, concurrency=concurrency, **kw) == one_at_a_time
    finally:
        delays.late_text = None
    assert run(server, shared_nli, streamed, rows, concurrency=concurrency, **kw) == one_at_a_time  # warm cache


class _Ordered:
    """Steps without a model or an LLM, one answer a cut batch, recording what the NLI thread runs. Answer 0's QA
    comparison holds the NLI thread until answer 1's comparison and answer 2's NLI stage both wait for it (answer
    2's claims call returns only once answer 1's comparison waits)."""

    def __init__(self, waiting: Callable[[], list[tuple[str, list[int | None]]]]) -> None:
        self.waiting = waiting  # the NLI thread's tasks submitted and not yet taken, as the log names them
        self.log: list[tuple[str, list[int | None]]] = []

    def _until(self, task: tuple[str, list[int | None]]) -> None:
        deadline = time.monotonic() + 20
        while task not in self.waiting():
            assert time.monotonic() < deadline, f"{task} never waited: {self.waiting()}"
            time.sleep(0.005)

    def claims_local(self, w: Work) -> bool:
        return False

    def claims_call(self, w: Work) -> None:
        if w.row == 2:
            self._until(("compare", [1]))
        w.claims = [Claim(id="c1", text=f"claim {w.row}")]

    def nli_stage(self, batch: list[Work]) -> None:
        self.log.append(("nli", [w.row for w in batch]))

    def needs_verify(self, w: Work) -> bool:
        return True

    def verify(self, w: Work) -> None:
        pass

    def needs_compare(self, w: Work) -> bool:
        return True

    def compare(self, works: list[Work]) -> None:
        self.log.append(("compare", [w.row for w in works]))
        if [w.row for w in works] == [0]:
            self._until(("nli", [2]))

    def needs_second(self, w: Work) -> bool:
        return False

    def second(self, w: Work) -> None:
        raise AssertionError("never asked")

    def report(self, w: Work) -> AnswerReport:
        return error_report("done", w.row, w.sample.id)


def test_the_nli_thread_runs_a_waiting_nli_stage_before_a_waiting_qa_comparison(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An NLI stage starts a chain of calls (its escalated claims' sources-side calls, then that batch's comparison)
    that waits on replies, not on the CPU; a QA comparison ends one. With both waiting, the NLI thread takes the NLI
    stage, so the last batch's calls are not held behind the comparisons before it (the run's tail: issue 32). It
    took them as they came, the comparison first."""
    from groundjudge.pipeline import flow

    pools: list[Any] = []
    made = flow._CallPool.__init__

    def keep(self: Any, *args: Any, **kw: Any) -> None:
        made(self, *args, **kw)
        pools.append(self)

    monkeypatch.setattr(flow._CallPool, "__init__", keep)

    def waiting() -> list[tuple[str, list[int | None]]]:
        nli = [p for p in pools if p.name == "groundjudge-nli"]
        with nli[0]._lock if nli else contextlib.nullcontext():
            tasks = [fn for _, _, fn in nli[0]._heap] if nli else []
        named = {"_nli_task": "nli", "_compare_task": "compare"}  # each a functools.partial of the flow's task
        return [(named[t.func.__name__], [w.row for w in getattr(t.args[0], "works", t.args[0])]) for t in tasks]

    steps = _Ordered(waiting)
    cut = [[Work(sample=Sample(id=f"a{n}", answer="x", contexts=["s"]), row=n)] for n in range(3)]
    reports = list(stream(cut, steps, concurrency=4))  # type: ignore[arg-type]
    assert [r.errors for r in reports] == [["done"]] * 3
    ran = steps.log[steps.log.index(("compare", [0])) :]
    assert ran == [("compare", [0]), ("nli", [2]), ("compare", [1]), ("compare", [2])]
