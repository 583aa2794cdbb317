"""Issue 18: no injected failure gives a better score or verdict than the honest run, over generated inputs.

Hypothesis generates a few answers about a generated fact table (each sentence of an answer states a fact its
sources support, contradict or do not hold) and a fault plan: per answer, what goes wrong with the call that reads
the answer, with the call that reads the sources, with the NLI model, and with the provider batch. The honest
run and the faulty run go through the same cascade (real OpenAI or Anthropic SDK against one ScriptedLLMServer
per test, the shared NLI model), and for every answer the faulty report must be no better than the honest one:

- verdict rank never rises, with ``PASS (3) > WARN (2) > FAIL (1) > ERROR = NO_CLAIMS (0)``: an answer that could
  not be judged, or that has nothing to judge, never beats any judgement;
- the combined score and the NLI and QA parts never rise; the claim part's lower bound (SUPPORTED over all
  claims, the share of supported claims, the one the combined score takes) never rises, and the worst-case
  hallucination ratio ((contradicted + errors) / claims) never falls. A score that is missing counts as the
  lowest: a faulty run may lose a score, an honest run that has none must not gain one;
- the fault is recorded in the answer's ``errors`` whenever it reached the pipeline;
- the pytest gates (``grounding_problems``, and ``assert_file_grounded`` against the honest run as baseline) never
  pass a faulty run where the honest one fails, and ``summarize`` counts no more PASSes, no fewer failed rows and
  no higher total of combined scores.
- issue 29: whenever a fault reached a stage that was meant to run (the faulty report's ``errors``, or claims in
  error), its verdict is not PASS and ``assert_grounded``'s rule (``grounding_problems``, the one every adapter
  applies) fails it, at any bar. This was ``tests/test_gate_property.py``, which ran the same generated faulty runs
  a second time; it is held here on the faulty run this test makes anyway.

The reported ``scores.claims`` (SUPPORTED over judged claims) is not held to this: by design it leaves failed
claims out and stands beside ``coverage`` (stages/score.py); its lower bound above is what scores and verdicts use.
"""

from __future__ import annotations

import copy
import json
import re
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from groundjudge.cache import Cache
from groundjudge.config import Config
from groundjudge.io.reports import dumps
from groundjudge.llm import RetryPolicy
from groundjudge.models import AnswerReport, Usage
from groundjudge.pipeline.evaluator import Evaluator
from groundjudge.review.notebook import Run
from groundjudge.review.summary import summarize
from groundjudge.testing import (
    GroundingAssertionError,
    RecordedRequest,
    Reply,
    ScriptedLLMServer,
    assert_file_grounded,
    claims_in,
    fenced_block,
    prompt_name,
)
from groundjudge.testing.assertions import grounding_problems
from tests.conftest import make_test_client

RANK = {"PASS": 3, "WARN": 2, "FAIL": 1, "ERROR": 0, "NO_CLAIMS": 0}
NAMES = [
    "Arlen", "Brisko", "Corvane", "Delmora", "Estrid", "Fenwold", "Galbrin", "Hollis", "Istra", "Jorvik",
    "Kelmar", "Lunden",
]  # fmt: skip
PER_ANSWER = 4  # answer i talks about NAMES[4 i : 4 i + 4] only: every request tells whose answer it is
SENTENCE = "The {name} bridge was built in {year}."
FACT = re.compile(r"The (\w+) bridge was built in (\d{4})")
QUESTION = re.compile(r"When was the (\w+) bridge built\?")

LLM_FAULTS = [
    "error400", "error429", "error500", "error503", "refusal", "content_filter", "malformed_body", "truncated",
    "empty_text", "empty_json", "nan", "missing_ids", "wrong_ids", "no_questions", "no_answers",
]  # fmt: skip
# the faults that leave some claims judged and others not are the ones a score could hide: drawn more often
WEIGHTED = [*LLM_FAULTS, "missing_ids", "missing_ids", "missing_ids", "wrong_ids", "nan"]
BATCH_FAULTS = [None, "damaged_state", "expired", "status_errors"]


@dataclass(frozen=True)
class Fact:
    name: str
    kind: str  # supported, contradicted, unsupported (the answer's sentence), extra (only in the sources)
    true_year: int
    said_year: int


@dataclass
class Case:
    """Generated answers and their sources, and the fault plan of one example."""

    facts: list[list[Fact]]  # per answer
    faults: dict[tuple[int, str], Any]  # (answer, "answer" | "sources") -> LLM fault; (answer, "nli") -> names
    drop_mask: int
    batch_fault: str | None
    fired: set[tuple[int, str]] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, i: int) -> str:
        return " ".join(SENTENCE.format(name=f.name, year=f.said_year) for f in self.facts[i] if f.kind != "extra")

    def context(self, i: int) -> str:
        known = [f for f in self.facts[i] if f.kind != "unsupported"]
        return " ".join(SENTENCE.format(name=f.name, year=f.true_year) for f in known) or "Nothing about bridges."

    def rows(self) -> list[dict[str, Any]]:
        return [
            {"id": f"a{i}", "answer": self.answer(i), "contexts": [self.context(i)]} for i in range(len(self.facts))
        ]

    def fact(self, name: str) -> Fact | None:
        return next((f for facts in self.facts for f in facts if f.name == name), None)

    def fire(self, key: tuple[int, str]) -> None:
        with self.lock:
            self.fired.add(key)


@st.composite
def cases(draw: st.DrawFn) -> Case:
    n_answers = draw(st.integers(2, 3))
    facts = []
    for i in range(n_answers):
        names = NAMES[i * PER_ANSWER : (i + 1) * PER_ANSWER]
        # half the answers are faithful (an honest PASS to lose), the others mix in contradicted and unsupported facts
        pool = ["supported", "extra"] if draw(st.booleans()) else ["supported", "contradicted", "unsupported", "extra"]
        kinds = draw(st.lists(st.sampled_from(pool), min_size=2, max_size=4))
        if all(k == "extra" for k in kinds):
            kinds[0] = "supported"
        row = []
        for name, kind in zip(names, kinds, strict=False):
            year = draw(st.integers(1800, 1990))
            said = year + draw(st.integers(1, 9)) if kind == "contradicted" else year
            row.append(Fact(name, kind, year, said))
        facts.append(row)
    faults: dict[tuple[int, str], Any] = {}
    for i in range(n_answers):
        for stage, odds in (("answer", 2), ("sources", 4)):
            if draw(st.integers(1, odds)) > 1:
                faults[(i, stage)] = draw(st.sampled_from(WEIGHTED))
        if draw(st.integers(0, 3)) == 0:  # NaN from the NLI model on some of this answer's claims
            faults[(i, "nli")] = set(draw(st.lists(st.sampled_from([f.name for f in facts[i]]), min_size=1)))
    return Case(facts, faults, draw(st.integers(0, 15)), draw(st.sampled_from(BATCH_FAULTS)))


# -- the honest script, and the faults -----------------------------------------------------------------------------


def whose(req: RecordedRequest) -> int:
    """The answer a request is about (each answer's names are its own)."""
    found = {NAMES.index(n) // PER_ANSWER for n in re.findall(r"\b[A-Z][a-z]+\b", req.text) if n in NAMES}
    assert len(found) == 1, found
    return found.pop()


def honest_reply(case: Case, req: RecordedRequest) -> Reply:
    """What a faithful model says: the answer's sentences as claims (and a question per sentence), and verdicts and
    the sources' replies from the fact table, with quotes copied from the sources."""
    name = prompt_name(req)
    if name in ("claims", "claims_qa"):
        sentences = re.findall(r"The \w+ bridge was built in \d{4}\.", fenced_block(req, "ANSWER"))
        out: dict[str, Any] = {"claims": [{"text": s, "source": s} for s in sentences]}
        if name == "claims_qa":
            out["questions"] = [
                {"question": f"When was the {n} bridge built?", "answer_from_answer": y}
                for n, y in (FACT.match(s).groups() for s in sentences)  # type: ignore[union-attr]
            ]
        return Reply.json(out)
    assert name in ("judge", "verify"), name
    verdicts = []
    for cid, text in claims_in(req).items():
        m = FACT.search(text)
        fact = case.fact(m.group(1)) if m else None
        if fact is None or fact.kind == "unsupported":
            verdicts.append({"claim_id": cid, "verdict": "UNSUPPORTED", "reason": "Not in the sources.", "quotes": []})
            continue
        quote = [{"source": 1, "text": SENTENCE.format(name=fact.name, year=fact.true_year)}]
        label = "SUPPORTED" if m and int(m.group(2)) == fact.true_year else "CONTRADICTED"
        verdicts.append({"claim_id": cid, "verdict": label, "reason": "The sources say so.", "quotes": quote})
    reply: dict[str, Any] = {"verdicts": verdicts}
    if name == "verify":
        answers = []
        for q in json.loads(fenced_block(req, "QUESTIONS") or "[]"):
            m = QUESTION.search(q["question"])
            fact = case.fact(m.group(1)) if m else None
            found = str(fact.true_year) if fact is not None and fact.kind != "unsupported" else "NOT_FOUND"
            answers.append({"id": q["id"], "context_answer": found})
        reply = {"answers": answers, **reply}
    return Reply.json(reply)


def faulty_reply(kind: str, good: Reply, req: RecordedRequest, drop_mask: int) -> Reply | None:
    """``good`` with the fault ``kind`` injected, or None when the fault cannot apply to this request."""
    if kind.startswith("error"):
        return Reply.error(int(kind[5:]))
    if kind == "refusal":
        return Reply.refusal()
    if kind == "content_filter":
        return Reply.content_filtered()
    if kind == "malformed_body":
        return Reply.malformed_body()
    if kind == "truncated":
        return Reply.truncated(good.content[: len(good.content) // 2])
    if kind == "empty_text":
        return Reply.text("")
    if kind == "empty_json":
        return Reply.json({})
    obj = copy.deepcopy(good.obj)
    if kind == "nan":  # NaN where a claim's text, a reply or a source number belongs
        if obj.get("verdicts") and obj["verdicts"][0]["quotes"]:
            obj["verdicts"][0]["quotes"][0]["source"] = float("nan")
        elif obj.get("verdicts"):
            obj["verdicts"][0]["verdict"] = float("nan")
        elif obj.get("answers"):
            obj["answers"][0]["context_answer"] = float("nan")
        elif obj.get("claims"):
            obj["claims"][0]["text"] = float("nan")
        else:
            return None
        return Reply.json(obj)
    if kind in ("missing_ids", "wrong_ids"):
        verdicts = obj.get("verdicts")
        if not verdicts:
            return None
        if kind == "wrong_ids":
            for v in verdicts:
                v["claim_id"] = "x" + v["claim_id"]
        else:
            keep = [v for j, v in enumerate(verdicts) if not drop_mask >> (j % 4) & 1]
            obj["verdicts"] = keep if len(keep) < len(verdicts) else verdicts[1:]
        return Reply.json(obj)
    if kind == "no_questions":
        if not obj.get("questions"):
            return None
        return Reply.json({**obj, "questions": []})
    if kind == "no_answers":
        if not obj.get("answers"):
            return None
        return Reply.json({**obj, "answers": []})
    raise AssertionError(kind)


def script_for(case: Case, faulty: bool) -> Callable[[RecordedRequest], Reply]:
    def script(req: RecordedRequest) -> Reply:
        good = honest_reply(case, req)
        if not faulty:
            return good
        i = whose(req)
        stage = "answer" if prompt_name(req) in ("claims", "claims_qa") else "sources"
        kind = case.faults.get((i, stage))
        bad = faulty_reply(kind, good, req, case.drop_mask) if kind else None
        if bad is None:
            return good
        case.fire((i, stage))
        return bad

    return script


def nan_model(shared: Any, case: Case) -> Any:
    """The shared model (same weights, same fingerprint) returning NaN for the claims the plan names."""
    model = copy.copy(shared)
    real = shared.predict
    poisoned = {(i, n) for (i, stage), names in case.faults.items() if stage == "nli" for n in names}

    def predict(pairs: Any) -> Any:
        out = real(pairs)
        for j, (_, hypothesis) in enumerate(pairs):
            for i, name in poisoned:
                if re.search(rf"\b{name}\b", hypothesis):
                    out[j] = np.nan
                    case.fire((i, "nli"))
        return out

    model.predict = predict
    return model


# -- running both -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Setup:
    provider: str
    qa: bool
    batch: bool
    attempts: int
    reasks: int


def setups() -> st.SearchStrategy[Setup]:
    """How a generated case is run: provider, QA on or off, provider batch mode, attempts and re-asks (the
    honesty property and the gate property draw from the same mixes)."""
    return st.builds(
        Setup,
        provider=st.sampled_from(["openai", "anthropic"]),
        qa=st.booleans(),
        batch=st.booleans(),
        attempts=st.integers(1, 2),
        reasks=st.integers(0, 1),
    )


def run(
    case: Case, setup: Setup, server: ScriptedLLMServer, nli: Any, root: Path, *, faulty: bool
) -> list[AnswerReport]:
    server.script = script_for(case, faulty)
    server.batch_expire_after = None
    server.batch_status_errors = 0
    state = root / "batches.json"
    if faulty and setup.batch:
        if case.batch_fault == "damaged_state":
            state.write_text("{ damaged")
        elif case.batch_fault == "expired":
            server.batch_expire_after = case.drop_mask % 3
        elif case.batch_fault == "status_errors":
            server.batch_status_errors = 1 + case.drop_mask % 3
    cache = Cache(root / "cache")
    retry = RetryPolicy(max_attempts=setup.attempts, max_total_seconds=5, initial_wait=0, max_wait=0, jitter=0)
    client = make_test_client(server, setup.provider, cache=cache, retry=retry, max_reasks=setup.reasks)
    batch = {"batch_api": True, "batch_state": str(state), "batch_poll_seconds": 0} if setup.batch else {}
    ev = Evaluator(Config(mode="cascade", qa=setup.qa, **batch), nli=nli, client=client, cache=cache)
    try:
        return list(ev.evaluate_many(case.rows()))
    finally:
        cache.close()


class Replay:
    """An evaluator whose run hands out reports already made (the gate's evaluator, without a third run)."""

    def __init__(self, reports: list[AnswerReport]) -> None:
        self.reports = reports

    def run(self, rows: Any, columns: Any = None) -> Run:
        return Run(self.reports, Usage(), 0, 0)


def gate_passes(reports: list[AnswerReport], baseline: Path) -> bool:
    try:
        assert_file_grounded([], evaluator=Replay(reports), baseline=baseline)
    except GroundingAssertionError:
        return False
    return True


# A pair's probabilities move in the 7th digit with the other pairs of its forward pass (docs/explanation/speed.md),
# and the NLI cache keeps 6 digits: a fault that takes a pair out of a pass (a NaN) moves its batch mates' scores by
# up to about 5e-7, both ways. Within that an answer is not scored "better"; any failure that raises a score does so
# by far more.
SAME_WITHIN = 1e-6


def at_most(faulty: float | None, honest: float | None) -> bool:
    """``faulty`` is no better than ``honest`` (beyond the forward pass's own noise); a missing score is the lowest."""
    if faulty is None:
        return True
    return honest is not None and faulty <= honest + SAME_WITHIN


def supported_share(r: AnswerReport) -> float | None:
    return r.scores.n_supported / r.scores.n_claims if r.scores.n_claims else None


def worst_ratio(r: AnswerReport) -> float:
    s = r.scores
    return (s.n_contradicted + s.n_errors) / s.n_claims if s.n_claims else 1.0


def nli_rescue(case: Case, honest: AnswerReport) -> bool:
    """Whether the plan makes the NLI model fail on a claim the honest run decided locally: the faulty run sends it
    to the judge instead (see test_an_nli_failure_sends_the_claim_to_the_judge_whose_verdict_stands)."""
    names = case.faults.get((int(honest.id[1:]), "nli"), set())
    return any(c.route == "nli" and any(n in c.claim.text for n in names) for c in honest.claims)


@settings(deadline=None, max_examples=25, database=None)
@given(case=cases(), setup=setups())
def test_no_injected_failure_scores_better_than_the_honest_run(
    module_server: ScriptedLLMServer, shared_nli: Any, case: Case, setup: Setup
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "honest").mkdir()
        (root / "faulty").mkdir()
        honest = run(case, setup, module_server, shared_nli, root / "honest", faulty=False)
        faulty = run(case, setup, module_server, nan_model(shared_nli, case), root / "faulty", faulty=True)
        assert [r.id for r in faulty] == [r.id for r in honest]
        rescued = {int(h.id[1:]) for h in honest if nli_rescue(case, h)}
        for h, f in zip(honest, faulty, strict=True):
            where = f"{f.id}: honest {h.verdict} {h.scores}, faulty {f.verdict} {f.scores} {f.errors}"
            assert not h.errors and h.verdict != "ERROR", where  # the honest run is honest
            i = int(f.id[1:])
            for part in ("nli", "qa"):
                assert at_most(getattr(f.scores, part), getattr(h.scores, part)), (part, where)
            assert worst_ratio(f) >= worst_ratio(h) - 1e-9, where
            if i not in rescued:  # see test_an_nli_failure_sends_the_claim_to_the_judge_whose_verdict_stands
                assert RANK[f.verdict] <= RANK[h.verdict], where
                assert at_most(f.scores.combined, h.scores.combined), where
                assert at_most(supported_share(f), supported_share(h)), where
                assert not grounding_problems(h) or grounding_problems(f), where
            fired = sorted(stage for a, stage in case.fired if a == i)
            batch_failed = setup.batch and case.batch_fault == "damaged_state"
            if fired or batch_failed:
                assert f.errors, (fired, where)  # the fault is in the report, not only in a better-looking score
            if f.errors or f.scores.n_errors:  # issue 29: a stage meant to run failed, so no gate passes the answer
                assert f.verdict != "PASS", where
                assert grounding_problems(f), where  # assert_grounded raises; every adapter fails it
                assert grounding_problems(f, min_score=0.0, allow_contradicted=True), where  # at any bar
            event(f"faulty report {'failed' if f.errors else 'clean'}: {f.verdict}")
        event(f"faults that reached the pipeline: {', '.join(sorted({s for _, s in case.fired})) or 'none'}")
        event(f"verdicts {sorted(r.verdict for r in honest)} -> {sorted(r.verdict for r in faulty)}")
        # the gates and the summary
        if rescued:
            return
        baseline = root / "honest.jsonl"
        baseline.write_text("".join(dumps(r) + "\n" for r in honest))
        assert not gate_passes(faulty, baseline) or gate_passes(honest, baseline)
        sh, sf = summarize(honest), summarize(faulty)
        assert sf.verdicts.get("PASS", 0) <= sh.verdicts.get("PASS", 0)
        assert sf.rows_failed >= sh.rows_failed
        total = lambda rs: sum(r.scores.combined or 0.0 for r in rs)  # noqa: E731
        assert total(faulty) <= total(honest) + SAME_WITHIN * len(honest)


def test_an_nli_failure_the_judge_recovers_from_is_still_in_errors(
    module_server: ScriptedLLMServer, shared_nli: Any, tmp_path: Path
) -> None:
    """Found by the property above: a claim the NLI model returned NaN for went to the judge, which decided it; the
    NLI part counted 0 for it, and nothing in ``errors`` said why the answer lost its PASS."""
    case = Case([[Fact("Arlen", "supported", 1889, 1889)]], {(0, "nli"): {"Arlen"}}, 0, None)
    setup = Setup("openai", qa=False, batch=False, attempts=1, reasks=0)
    (tmp_path / "h").mkdir()
    (tmp_path / "f").mkdir()
    (honest,) = run(case, setup, module_server, shared_nli, tmp_path / "h", faulty=False)
    (faulty,) = run(case, setup, module_server, nan_model(shared_nli, case), tmp_path / "f", faulty=True)
    assert honest.verdict == "PASS" and not honest.errors
    assert faulty.claims[0].label == "SUPPORTED" and faulty.claims[0].route == "judge"
    assert faulty.scores.nli == 0.0 and RANK[faulty.verdict] < RANK[honest.verdict]
    assert faulty.errors == ["NLI: claim c1 not scored: the NLI model returned a non-finite probability for this claim"]
    assert summarize([faulty]).rows_failed == 1


def test_an_nli_failure_sends_the_claim_to_the_judge_whose_verdict_stands(
    module_server: ScriptedLLMServer, shared_nli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The one way a failure may score better, and why it is the rule: in the cascade a claim the NLI model cannot
    score goes to the judge (as a claim too long for the model does), and the judge, the stronger checker, decides
    it. Found by the property above: the shared model reads "The Istra bridge was built in 1800." as unsupported by
    sources that say exactly that, and decides it locally (UNSUPPORTED); with the model returning NaN for it, the
    judge finds it SUPPORTED and the answer's combined score rises (0.05 -> 0.24). A failure never decides a claim
    itself: the NLI part still counts the failed claim 0, the failure is named in ``errors``, and the verdict is the
    judge's, which the honest run would have got with ``--mode llm``."""
    from groundjudge.checker import evidence

    # passages alone, as the checker read before issue 33's sentence windows: with them the shared model finds the
    # Istra claim (no misreading left to show here)
    monkeypatch.setattr(evidence, "SENTENCES", 0)
    facts = [Fact("Istra", "supported", 1800, 1800), Fact("Jorvik", "supported", 1800, 1800)]
    facts.append(Fact("Kelmar", "contradicted", 1873, 1874))
    case = Case([[], [], facts], {(2, "nli"): {"Istra"}}, 0, None)
    setup = Setup("openai", qa=False, batch=False, attempts=1, reasks=0)
    (tmp_path / "h").mkdir()
    (tmp_path / "f").mkdir()
    honest = run(case, setup, module_server, shared_nli, tmp_path / "h", faulty=False)[2]
    faulty = run(case, setup, module_server, nan_model(shared_nli, case), tmp_path / "f", faulty=True)[2]
    assert honest.claims[0].route == "nli" and honest.claims[0].label == "UNSUPPORTED"
    failed = faulty.claims[0]
    assert failed.route == "judge" and failed.label == "SUPPORTED" and failed.nli is not None and failed.nli.error
    assert any("NLI" in e and failed.claim.id in e for e in faulty.errors)  # the failure is reported
    assert at_most(faulty.scores.nli, honest.scores.nli)  # the failed claim counts 0 in the NLI part
