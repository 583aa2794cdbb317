"""Attacks on the commands that read report files (``report``, ``metrics``, ``compare``, ``diagnose``): files a
stopped ``--retry-errors`` run leaves (an id reported twice), runs that lost answers, and the gate
(``compare --fail-if-worse``) on them."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from groundjudge.cli import app
from groundjudge.io.reports import dumps, last_reports
from groundjudge.models import AnswerReport, Scores
from groundjudge.review.compare import compare_runs
from groundjudge.review.metrics import label_metrics
from groundjudge.tally import summarize
from tests.review.generated_runs import LABEL_SETS, failed_whole, fates, made_to_fail
from tests.review.test_quantities import _report

runner = CliRunner()


def _write(path: Path, reports: list[AnswerReport]) -> Path:
    path.write_text("".join(dumps(r) + "\n" for r in reports), encoding="utf-8")
    return path


def test_report_counts_an_id_reported_twice_once(tmp_path: Path) -> None:
    # a --retry-errors run stopped before it compacted OUT: r0's old ERROR line, then its new report
    out = _write(
        tmp_path / "out.jsonl", [failed_whole("r0"), _report("r1", ["SUPPORTED"] * 4), _report("r0", ["SUPPORTED"])]
    )
    result = runner.invoke(app, ["report", str(out), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    # two answers, both PASS: the stale ERROR line is neither a third answer nor a failed row
    assert summary["n"] == 2 and summary["verdicts"] == {"PASS": 2}
    assert summary["rows_failed"] == 0 and summary["failures"] == []
    assert "1 earlier report(s)" in result.stderr
    # diagnose looks at the answer as it now stands: nothing failed
    diagnosed = runner.invoke(app, ["diagnose", str(out), "--json"])
    assert diagnosed.exit_code == 0 and diagnosed.stdout.strip() == "", diagnosed.output


def test_last_reports_keeps_the_last_of_each_id_where_it_stands() -> None:
    a0, b, a1, c, b1 = (
        failed_whole("a"),
        _report("b", ["SUPPORTED"]),
        _report("a", ["SUPPORTED"]),
        failed_whole("c"),
        failed_whole("b"),
    )
    kept, dropped = last_reports([a0, b, a1, c, b1])
    assert [r.id for r in kept] == ["a", "c", "b"] and dropped == 2
    assert kept[0] is a1 and kept[2] is b1  # the last one counts, even when it is the ERROR
    assert last_reports([]) == ([], 0)


def test_compare_gate_fails_a_run_that_failed_on_answers_the_other_scored(tmp_path: Path) -> None:
    # B failed whole on half the answers (ERROR: no score to pair) and matches A on the rest: the paired tests see
    # only the rest, and B looked no worse; a failure must never pass the gate
    a = [_report(f"r{i}", ["SUPPORTED"] * 3 + ["UNSUPPORTED"]) for i in range(40)]
    b = [failed_whole(r.id) if i < 20 else r for i, r in enumerate(a)]
    assert {r.verdict for r in a} == {"WARN"}  # no PASS lost: McNemar sees nothing either
    result = compare_runs(a, b)
    assert not result["b_significantly_worse"]
    assert result["b_lost"]["failed"] == 20 and result["b_lost"]["failed_ids"][0] == "r0"
    assert result["b_worse"]
    pa, pb = _write(tmp_path / "a.jsonl", a), _write(tmp_path / "b.jsonl", b)
    gate = runner.invoke(app, ["compare", str(pa), str(pb), "--fail-if-worse", "--json"])
    assert gate.exit_code == 1, gate.output
    assert json.loads(gate.stdout)["b_worse"] and "20 answers failed in B " in gate.stderr
    # the other way round, B repaired what A failed on: not worse
    assert runner.invoke(app, ["compare", str(pb), str(pa), "--fail-if-worse"]).exit_code == 0


def test_compare_gate_fails_a_run_that_lacks_answers(tmp_path: Path) -> None:
    # B stopped (a budget, a cache-only miss) after 5 of A's 40 answers: the 5 match, the 35 were never evaluated
    a = [_report(f"r{i}", ["SUPPORTED"] * 3 + ["UNSUPPORTED"]) for i in range(40)]
    pa, pb = _write(tmp_path / "a.jsonl", a), _write(tmp_path / "b.jsonl", a[:5])
    gate = runner.invoke(app, ["compare", str(pa), str(pb), "--fail-if-worse"])
    assert gate.exit_code == 1, gate.output
    assert "35 answers of A that b.jsonl lacks" in gate.output
    # B answering more than A (new ids) loses nothing; the same run never fails its own gate
    assert runner.invoke(app, ["compare", str(pb), str(pa), "--fail-if-worse"]).exit_code == 0
    assert runner.invoke(app, ["compare", str(pa), str(pa), "--fail-if-worse"]).exit_code == 0


@settings(deadline=None, max_examples=60, database=None)
@given(
    claims=st.lists(LABEL_SETS, min_size=1, max_size=30),
    fate=st.data(),
)
def test_no_failure_or_loss_in_b_passes_the_compare_gate(claims: list[list[str]], fate: st.DataObject) -> None:
    # the invariant behind the two cases above, over generated runs: B is A with some answers failed (ERROR) or
    # lost (a stop) and the rest as they were, or worse; whatever the paired tests find, the gate fails B
    a = [_report(f"r{i}", labels) for i, labels in enumerate(claims)]
    kinds = fate.draw(st.lists(st.sampled_from(["same", "failed", "lost"]), min_size=len(a), max_size=len(a)))
    if all(k == "same" for k in kinds):
        kinds[fate.draw(st.integers(0, len(a) - 1))] = fate.draw(st.sampled_from(["failed", "lost"]))
    b = [failed_whole(r.id) if k == "failed" else r for r, k in zip(a, kinds, strict=True) if k != "lost"]
    result = compare_runs(a, b)
    assert result["b_worse"], (kinds, result["b_lost"])
    assert result["b_lost"]["failed"] == kinds.count("failed") and result["b_lost"]["missing"] == kinds.count("lost")
    assert not compare_runs(a, a)["b_worse"]  # and a run never fails against itself


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("combined", 1e308, "scores.combined 1e+308 is outside [0, 1]"),  # overflowed the summary's histogram
        ("combined", 5.0, "scores.combined 5.0 is outside [0, 1]"),  # raised B's mean past a regression
        ("nli", -3.0, "scores.nli -3.0 is outside [0, 1]"),
        ("n_claims", -2, "scores.n_claims -2 is negative"),
    ],
)
def test_a_score_no_run_writes_is_not_read(tmp_path: Path, key: str, value: float, said: str) -> None:
    rows = [json.loads(dumps(_report(f"r{i}", ["SUPPORTED"] * 3 + ["UNSUPPORTED"]))) for i in range(4)]
    rows[1]["scores"][key] = value
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    good = _write(tmp_path / "good.jsonl", [_report(f"r{i}", ["SUPPORTED"] * 4) for i in range(4)])
    for args in (["report", str(bad)], ["compare", str(good), str(bad), "--fail-if-worse"], ["diagnose", str(bad)]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (args, result.output)  # a usage error naming the line, never a traceback
        assert f"line 2 (id 'r1'): {said}" in " ".join(result.output.split()), result.output
    # the edges are scores: 0 and 1 read
    rows[1]["scores"][key] = 0
    bad.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert runner.invoke(app, ["report", str(bad)]).exit_code == 0


def _answers_with_failures() -> list[AnswerReport]:
    """Answer-level gold labels: 10 consistent answers read as consistent; of 10 hallucinated ones the checker
    missed 5 and failed whole on 5 (ERROR: no claims, no prediction); one consistent answer with no claims."""

    def labelled(r: AnswerReport, label: str) -> AnswerReport:
        return r.model_copy(update={"label": label})

    reports = [labelled(_report(f"c{i}", ["SUPPORTED"]), "consistent") for i in range(10)]
    reports += [labelled(_report(f"m{i}", ["SUPPORTED"]), "hallucinated") for i in range(5)]
    reports += [labelled(failed_whole(f"e{i}"), "hallucinated") for i in range(5)]
    reports += [labelled(failed_whole("n0").model_copy(update={"verdict": "NO_CLAIMS", "errors": []}), "consistent")]
    return reports


def test_an_answer_that_failed_is_no_detected_hallucination_in_metrics() -> None:
    # answer-level gold labels: 10 consistent answers read as consistent; of 10 hallucinated ones the checker missed
    # 5 and failed whole on 5 (ERROR: no claims, no prediction). A failure must not count as a detection: it counted
    # as "hallucinated" (no claim is not every claim SUPPORTED), so the outage doubled the recall
    reports = _answers_with_failures()
    m = label_metrics(reports)
    assert m["level"] == "answer" and m["n"] == 21
    assert m["labels"] == ["consistent", "hallucinated", "ERROR", "NO_CLAIMS"]
    assert m["confusion"][:2] == [[10, 0, 0, 1], [5, 0, 5, 0]]
    assert m["per_label"]["hallucinated"]["recall"] == 0.0
    assert m["balanced_accuracy"] == pytest.approx((10 / 11 + 0 / 10) / 2)


def test_the_benchmarks_interval_counts_a_failed_answer_as_the_headline_does() -> None:
    # benchmarks/accuracy.py prints label_metrics' balanced accuracy with a bootstrap interval of its own; the
    # interval still called an ERROR or NO_CLAIMS answer 'hallucinated' (a detection), so on a run with failures the
    # interval sat far above the point it was printed beside (here [75, 75] around 45.5): one rule, labelled_prediction
    from benchmarks.accuracy import balanced_accuracy_ci

    reports = _answers_with_failures()
    m = label_metrics(reports)
    lo, hi = balanced_accuracy_ci([{"label": r.label} for r in reports], reports, claim_level=False)
    assert [lo, hi] == [round(100 * x, 1) for x in m["balanced_accuracy_ci"]]
    assert lo <= 100 * m["balanced_accuracy"] <= hi


def _reworded(report: AnswerReport, texts: list[str], labels: list[str]) -> AnswerReport:
    """The answer with its claims' texts and labels replaced, the claim ids (c0, c1, ...) kept: each run numbers its
    own claims, so a reworded answer has the same ids over other texts."""
    claims = [
        c.model_copy(update={"claim": c.claim.model_copy(update={"text": t}), "label": label})
        for c, t, label in zip(report.claims, texts, labels, strict=True)
    ]
    return report.model_copy(update={"claims": claims})


def test_compare_counts_claim_changes_by_text_not_labels_that_moved(tmp_path: Path) -> None:
    """'4 claim label changes' for a two-claim answer: the count was the labels that left A plus those that came in
    B, over any text. A team comparing prompts needs the claims of the same text whose label changed, told apart
    from the claims only one version has."""
    base = _report("q1", ["SUPPORTED", "SUPPORTED"])
    a = _reworded(base, ["The tower is 330 metres tall.", "It was built from 1887."], ["SUPPORTED", "SUPPORTED"])
    b = _reworded(base, ["The tower is 300 metres tall.", "It was built in 1900."], ["UNSUPPORTED", "UNSUPPORTED"])
    result = compare_runs([a], [b])
    (row,) = result["most_changed"]
    assert (row["claim_label_changes"], row["claims_only_a"], row["claims_only_b"]) == (0, 2, 2)
    # one claim kept word for word and relabelled, the other reworded
    relabelled = _reworded(
        base, ["The tower is 330 metres tall.", "It was built in 1900."], ["CONTRADICTED", "UNSUPPORTED"]
    )
    (row,) = compare_runs([a], [relabelled])["most_changed"]
    assert (row["claim_label_changes"], row["claims_only_a"], row["claims_only_b"]) == (1, 1, 1)
    # the same claims in another order: nothing moved
    assert compare_runs([a], [a.model_copy(update={"claims": a.claims[::-1]})])["most_changed"] == []
    printed = runner.invoke(
        app, ["compare", str(_write(tmp_path / "a.jsonl", [a])), str(_write(tmp_path / "b.jsonl", [b]))]
    )
    assert printed.exit_code == 0, printed.output
    text = " ".join(printed.output.split())
    assert "q1: PASS->" in text
    assert "0 claims of the same text relabelled, 2 claims only in A, 2 claims only in B" in text, text
    assert "label changes" not in text


def test_compare_says_when_the_runs_were_scored_with_other_settings(tmp_path: Path) -> None:
    """compare read A and B made with another NLI model or preset as it reads two prompt versions: the numbers
    moved with the answers unchanged, without a word."""
    a = [
        r.model_copy(update={"versions": {"nli_model": "m@1/nli/cpu-float32", "verdict": "preset=default"}})
        for r in (_report("q1", ["SUPPORTED"]), _report("q2", ["SUPPORTED"]))
    ]
    b = [
        r.model_copy(update={"versions": {"nli_model": "m@2/nli/cuda-float16", "verdict": "preset=research"}})
        for r in a
    ]
    pa, pb = _write(tmp_path / "a.jsonl", a), _write(tmp_path / "b.jsonl", b)
    result = runner.invoke(app, ["compare", str(pa), str(pb)])
    said = " ".join(result.stderr.split())
    assert result.exit_code == 0, result.output
    assert "a.jsonl (A) and b.jsonl (B) were scored with other settings" in said, said
    assert "nli_model: m@1/nli/cpu-float32 in A, m@2/nli/cuda-float16 in B" in said
    assert "verdict: preset=default in A, preset=research in B" in said
    # a value from a file is anyone's: a terminal escape in it is shown escaped, never sent to the terminal
    hostile = [r.model_copy(update={"versions": {**r.versions, "llm": "x\x1b[2Jy"}}) for r in b]
    _write(tmp_path / "h.jsonl", hostile)
    warned = runner.invoke(app, ["compare", str(pa), str(tmp_path / "h.jsonl")]).stderr
    assert "\x1b" not in warned and '"x\\u001b[2Jy" in B' in " ".join(warned.split())
    as_json = json.loads(runner.invoke(app, ["compare", str(pa), str(pb), "--json"]).stdout)
    assert as_json["settings_differ"]["verdict"] == {"a": "preset=default", "b": "preset=research"}
    # a gate on such a comparison passed B (exit 0) on a difference that was partly the scoring's: now no gate (2),
    # unless told to gate anyway
    gate = runner.invoke(app, ["compare", str(pa), str(pb), "--fail-if-worse"])
    assert gate.exit_code == 2 and "error: no gate: a.jsonl (A) and b.jsonl (B)" in " ".join(gate.stderr.split())
    forced = runner.invoke(app, ["compare", str(pa), str(pb), "--fail-if-worse", "--allow-other-settings"])
    assert forced.exit_code == 0, forced.output
    # the same settings (the device aside), or reports without versions (older files): nothing said
    same = [r.model_copy(update={"versions": {**r.versions, "nli_model": "m@1/nli/cuda-float16"}}) for r in a]
    _write(pb, same)
    assert "other settings" not in runner.invoke(app, ["compare", str(pa), str(pb)]).stderr
    assert runner.invoke(app, ["compare", str(pa), str(pb), "--fail-if-worse"]).exit_code == 0
    _write(pb, [r.model_copy(update={"versions": {}}) for r in a])
    assert "other settings" not in runner.invoke(app, ["compare", str(pa), str(pb)]).stderr


def test_compare_reads_a_key_older_reports_lack_as_no_difference_on_either_side(tmp_path: Path) -> None:
    # a run resumed across the upgrade: its earlier reports lack versions.verdict and versions.scoring (LATER_KEYS),
    # its later ones have them; the settings are the same, so comparing it with itself (or with a run of the same
    # settings) names no setting, in either order
    old = {"nli_model": "m/abc/cpu-fp32", "prompts": "p1"}
    new = {**old, "verdict": "min_citation_precision=off", "scoring": "x=1"}
    mixed = [
        _report(f"r{i}", ["SUPPORTED"] * 2).model_copy(update={"versions": old if i < 3 else new}) for i in range(6)
    ]
    a = _write(tmp_path / "a.jsonl", mixed)
    b = _write(tmp_path / "b.jsonl", [r.model_copy(update={"versions": new}) for r in mixed])
    for x, y in ((a, a), (a, b), (b, a)):
        result = runner.invoke(app, ["compare", str(x), str(y), "--json"])
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["settings_differ"] == {}, (x.name, y.name)
        assert "other settings" not in result.stderr
    # a key both name with other values is still said
    other = _write(tmp_path / "c.jsonl", [r.model_copy(update={"versions": {**new, "scoring": "x=2"}}) for r in mixed])
    result = runner.invoke(app, ["compare", str(a), str(other), "--json"])
    assert json.loads(result.stdout)["settings_differ"] == {"scoring": {"a": "x=1", "b": "x=2"}}


def test_compare_runs_and_its_page_say_when_the_runs_were_scored_with_other_settings() -> None:
    """The library's comparison (a notebook's, the prompt-change tutorial's) and the compare page said nothing when A
    and B were scored with other settings: only the CLI's warning and gates did. Now ``compare_runs`` carries
    ``settings_differ`` (the CLI and the pytest baseline gate read it there), and the page warns with the settings
    named, their values escaped and cut."""
    from groundjudge.review.html import render_compare_html

    a = [
        r.model_copy(update={"versions": {"nli_model": "m@1/nli/cpu-float32", "verdict": "preset=default"}})
        for r in (_report("q1", ["SUPPORTED"]), _report("q2", ["SUPPORTED"]))
    ]
    hostile = "<script>alert(1)</script>" + "x" * 400
    b = [r.model_copy(update={"versions": {**r.versions, "verdict": "preset=research", "llm": hostile}}) for r in a]
    result = compare_runs(a, b)
    assert result["settings_differ"] == {
        "verdict": {"a": "preset=default", "b": "preset=research"},
        "llm": {"a": "(none)", "b": hostile},
    }
    page = render_compare_html(a, b, result)
    assert "id='settings-differ'" in page and "A and B were scored with other settings" in page
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "x" * 301 not in page and "preset=research" in page
    # alike (the device aside), or reports without versions (older files): nothing said
    same = [r.model_copy(update={"versions": {**r.versions, "nli_model": "m@1/nli/cuda-float16"}}) for r in a]
    for other in (same, [r.model_copy(update={"versions": {}}) for r in a]):
        alike = compare_runs(a, other)
        assert alike["settings_differ"] == {}
        assert "settings-differ" not in render_compare_html(a, other, alike)


@settings(deadline=None, max_examples=60, database=None)
@given(claims=st.lists(LABEL_SETS, min_size=1, max_size=30), fate=st.data())
def test_every_row_the_summary_counts_failed_fails_the_compare_gate(
    claims: list[list[str]], fate: st.DataObject
) -> None:
    # the gate counted B's failures by the verdict ERROR alone, while the run's own summary (report, score's exit
    # 1) counts a row failed when a stage failed (errors) or a score is not a number: such a B passed the gate
    a = [_report(f"r{i}", labels) for i, labels in enumerate(claims)]
    kinds = fate.draw(fates(len(a)))  # the strategies the baseline gate's property test draws from too
    b = [r if k == "same" else made_to_fail(r, k) for r, k in zip(a, kinds, strict=True)]
    failed = len(kinds) - kinds.count("same")
    assert summarize(b).rows_failed == failed
    result = compare_runs(a, b)
    assert result["b_lost"]["failed"] == failed, (kinds, result["b_lost"])
    assert result["b_worse"]


def test_a_run_whose_scores_are_not_numbers_fails_the_compare_gate(tmp_path: Path) -> None:
    # a file another tool wrote (or a hand edit): every answer PASS, its combined score NaN; report counts each a
    # failed row, and the gate passed it (the pairs left out of combined, nothing ERROR)
    a = [_report(f"r{i}", ["SUPPORTED"] * 4) for i in range(20)]
    rows = [json.loads(dumps(r)) for r in a]
    for row in rows:
        row["scores"]["combined"] = math.nan
    pa, pb = _write(tmp_path / "a.jsonl", a), tmp_path / "b.jsonl"
    pb.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    assert json.loads(runner.invoke(app, ["report", str(pb), "--json"]).stdout)["rows_failed"] == 20
    gate = runner.invoke(app, ["compare", str(pa), str(pb), "--fail-if-worse"])
    assert gate.exit_code == 1, gate.output
    assert "20 answers failed in B " in gate.stdout


def test_an_answer_the_baseline_could_not_judge_is_no_pass_for_a_fail(tmp_path: Path) -> None:
    # A failed (ERROR) or made no claim (NO_CLAIMS) on answers B now judges FAIL: no pair, no PASS lost, nothing the
    # paired tests or McNemar see; a baseline that failed throughout passed any B, even one that fails everything
    bad = [_report(f"r{i}", ["UNSUPPORTED"] * 4) for i in range(20)]
    assert {r.verdict for r in bad} == {"FAIL"}
    no_claims = AnswerReport(id="r0", verdict="NO_CLAIMS", mode="nli", scores=Scores())
    for a in ([failed_whole(r.id) for r in bad], [no_claims.model_copy(update={"id": r.id}) for r in bad]):
        result = compare_runs(a, bad)
        assert result["b_lost"]["unvouched"] == 20 and result["b_lost"]["unvouched_ids"][0] == "r0"
        assert result["b_worse"]
    pa, pb = _write(tmp_path / "a.jsonl", [failed_whole(r.id) for r in bad]), _write(tmp_path / "b.jsonl", bad)
    gate = runner.invoke(app, ["compare", str(pa), str(pb), "--fail-if-worse"])
    assert gate.exit_code == 1, gate.output
    assert "20 answers FAIL in B that A does not vouch for" in gate.stdout
    from groundjudge.review.html import render_compare_html

    assert "20 answers FAIL in B that A does not vouch for" in render_compare_html(a, bad, compare_runs(a, bad))
    # B repairing them (PASS, or a WARN) is no loss
    good = [_report(f"r{i}", ["SUPPORTED"] * 4) for i in range(20)]
    assert not compare_runs([failed_whole(r.id) for r in good], good)["b_worse"]


def test_the_gate_refuses_runs_with_no_answer_both_judged(tmp_path: Path) -> None:
    # A failed throughout (a key missing in CI, the judge down) and B judged every answer WARN: nothing was
    # compared, and the gate said "B is not significantly worse than A" and exited 0
    pa = _write(tmp_path / "a.jsonl", [failed_whole(f"r{i}") for i in range(20)])
    pb = _write(tmp_path / "b.jsonl", [_report(f"r{i}", ["SUPPORTED"] * 3 + ["UNSUPPORTED"]) for i in range(20)])
    gate = runner.invoke(app, ["compare", str(pa), str(pb), "--fail-if-worse"])
    assert gate.exit_code == 2, gate.output
    assert "error: no gate: no answer has a score in both" in " ".join(gate.stderr.split())
    assert runner.invoke(app, ["compare", str(pa), str(pb)]).exit_code == 0  # without the gate: the tables, said
    # both failed throughout: B's failures fail the gate, whatever A was (no failure passes a gate)
    gate = runner.invoke(app, ["compare", str(pa), str(pa), "--fail-if-worse"])
    assert gate.exit_code == 1 and "20 answers failed in B " in gate.stdout, gate.output
