"""The benchmark scripts run end to end on small slices of the shared data and print their JSON line."""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import runpy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from groundjudge.errors import ArgumentError
from tests.conftest import ROOT, SHARED, SHARED_MODEL

DATA = SHARED / "benchmarks"


# Run in a process of its own: ray_engine.py starts Ray, and it keeps the check that a script runs standalone, as
# a user runs it. The others run in this process (``runpy``, as ``python benchmarks/X.py`` would), so that torch,
# transformers and the shared model load once per test worker, not once per script: 10-15 s of CPU saved on each.
OWN_PROCESS = frozenset({"ray_engine.py"})


def run(script: str, *args: str, cache: Path) -> dict[str, Any]:
    """Run ``benchmarks/SCRIPT`` with ``args``; its last stdout line, the JSON object every benchmark ends with."""
    argv = [f"benchmarks/{script}", *args, *(["--cache-dir", str(cache)] if script == "accuracy.py" else [])]
    env = {"GROUNDJUDGE_NLI_MODEL": str(SHARED_MODEL), "HF_HUB_OFFLINE": "1"}
    if script in OWN_PROCESS:
        result = subprocess.run(
            [sys.executable, *argv], cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True, timeout=600
        )
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout.strip().splitlines()[-1])
    out, err = io.StringIO(), io.StringIO()
    saved_env, saved_argv, saved_path, cwd = dict(os.environ), sys.argv, list(sys.path), os.getcwd()
    try:
        os.environ.update(env)
        sys.argv = argv
        os.chdir(ROOT)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                runpy.run_path(str(ROOT / argv[0]), run_name="__main__")
            except SystemExit as exc:
                assert exc.code in (0, None), f"{script} exited {exc.code}: {err.getvalue()[-3000:]}"
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        sys.argv, sys.path[:] = saved_argv, saved_path
        os.chdir(cwd)
    return json.loads(out.getvalue().strip().splitlines()[-1])


@pytest.mark.parametrize("name", ["factcheckgpt-stance", "wice-dev"])
def test_accuracy_on_claim_rows(name: str, tmp_path: Path) -> None:
    out = run("accuracy.py", "--data", str(DATA / f"{name}.jsonl"), "--limit", "10", cache=tmp_path)
    assert out["benchmark"] == name and out["mode"] == "nli" and out["n"] == 10
    for key in (
        "balanced_accuracy",
        "kappa",
        "escalation_rate",
        "nli_decided_precision",
        "pairs_scored",
        "seconds",
        "seed_balanced_accuracy",
    ):
        assert key in out
    assert 0 <= out["balanced_accuracy"] <= 100 and 0 <= out["escalation_rate"] <= 1 and out["pairs_scored"] >= 10


def test_accuracy_on_answer_rows_prints_the_references(tmp_path: Path) -> None:
    out = run("accuracy.py", "--data", str(DATA / "faithbench-dev.jsonl"), "--limit", "10", cache=tmp_path)
    assert out["n"] == 10 and out["claims"] > 10
    assert {"gpt_4o", "hhem-2.1"} <= set(out["references"]) and "balanced_accuracy_score_rule" in out


def test_nli_throughput(tmp_path: Path) -> None:
    out = run("nli_throughput.py", "--limit", "3", "--repeat", "1", cache=tmp_path)
    for key in (
        "naive_pairs_per_s",
        "ceiling_pairs_per_s",
        "groundjudge_pairs_per_s",
        "ceiling_ratio",
        "speedup_vs_naive",
        "pairs_naive",
        "pairs_groundjudge",
        "balanced_accuracy_naive",
        "balanced_accuracy_groundjudge",
    ):
        assert out[key] is not None, key
    assert out["pairs_groundjudge"] <= out["pairs_naive"]


HEAD_KEYS = (
    "nli_balanced_accuracy",
    "escalation_rate",
    "local_precision",
    "oracle_escalation_rate",
    "oracle_local_precision",
    "contradiction_precision",
    "contradiction_recall",
)


def test_tune_benchmark_runs_on_a_slice(tmp_path: Path) -> None:
    from groundjudge.testing import tiny_nli_model

    tiny = tiny_nli_model(tmp_path / "tiny", SHARED_MODEL)
    out = run(
        "tune.py",
        *("--limit", "150", "--epochs", "1", "--base", str(tiny), "--variants", "gold,noisy", "--holdout", "0.7"),
        *("--work", str(tmp_path / "work"), "--cache-dir", str(tmp_path / "cache")),
        cache=tmp_path,
    )
    assert out["benchmark"] == "tune" and set(out["eval_rows"]) == {"factcheckgpt-stance", "wice-dev"}
    for part in ("before", "gold", "noisy"):
        for name in ("factcheckgpt-stance", "wice-dev"):
            m = out[part][name]
            for key in ("nli_balanced_accuracy", "escalation_rate", "local_precision", "contradiction_recall"):
                assert key in m, (part, name, key)
        assert out[part]["seconds"] >= 0
    # the shared model's head learnt from the pooled train halves; each tuned model's from its held-out slice
    assert out["before_head"]["head"]["claims"] == sum(out["train_rows"].values())
    for variant in ("gold", "noisy"):
        part = out[f"{variant}_head"]
        assert part["head"]["claims"] == out[variant]["held_out"]["n"] and part["seconds"] >= 0
        assert part["head"]["digest"] != out["before_head"]["head"]["digest"]  # tune's own head, not the base's
        for name in ("factcheckgpt-stance", "wice-dev"):
            assert all(k in part[name] for k in HEAD_KEYS) and part[name]["head_scored"] > 0, (variant, name)


def test_tune_benchmark_skip_tune_measures_the_shared_model_with_and_without_a_head(tmp_path: Path) -> None:
    from groundjudge.testing import tiny_nli_model

    tiny = tiny_nli_model(tmp_path / "tiny", SHARED_MODEL)
    out = run(
        "tune.py",
        *("--limit", "150", "--base", str(tiny), "--skip-tune", "--cache-dir", str(tmp_path / "cache")),
        cache=tmp_path,
    )
    assert "gold" not in out and "noisy" not in out  # nothing trained
    head = out["before_head"]["head"]
    # fitted on the pooled train halves of both files, never on an eval half
    assert head["claims"] == sum(out["train_rows"].values()) != sum(out["eval_rows"].values())
    assert set(head["thresholds"]) == {"nli", "cascade"} and "nli_balanced_accuracy" in head["out_of_fold"]
    for part in ("before", "before_head"):
        for name in ("factcheckgpt-stance", "wice-dev"):
            m = out[part][name]
            assert m["n"] == out["eval_rows"][name] and all(k in m for k in HEAD_KEYS), (part, name)
            assert m["head_scored"] == (m["n"] if part == "before_head" else 0), (part, name)
        assert out[part]["seconds"] >= 0


def test_tune_benchmark_splits_measures_the_head_over_other_halvings(tmp_path: Path) -> None:
    from groundjudge.testing import tiny_nli_model

    tiny = tiny_nli_model(tmp_path / "tiny", SHARED_MODEL)
    args = ("--limit", "150", "--base", str(tiny), "--splits", "2", "--seed", "1", "--cache-dir", str(tmp_path / "c"))
    out = run("tune.py", *args, cache=tmp_path)["splits"]
    assert set(out) == {"factcheckgpt-stance", "wice-dev"}
    for name, v in out.items():
        assert [c["seed"] for c in v["seeds"]] == [1, 2], name  # from --seed: the first is the tables' halving
        values = [c["oracle"] for c in v["seeds"] if c["oracle"] is not None]
        assert v["range"] == ([min(values), max(values)] if values else None), name
        assert all(0 < c["supported_share"] < 1 for c in v["seeds"]), name


def test_tune_benchmark_sizes_measures_what_a_labelled_sample_buys_on_claims_it_left_out(tmp_path: Path) -> None:
    from groundjudge.testing import tiny_nli_model

    tiny = tiny_nli_model(tmp_path / "tiny", SHARED_MODEL)
    args = ("--limit", "150", "--base", str(tiny), "--sizes", "120", "--draws", "2")
    out = run("tune.py", *args, "--cache-dir", str(tmp_path / "cache"), cache=tmp_path)["sizes"]
    assert out["draws"] == 2 and set(out["sizes"]) == {"120"}
    for rule in ("raw", "fitted", "shift"):
        row = out["sizes"]["120"][rule]
        assert row["fits"] + row["no_fit"] == 2, rule
        for r in row["runs"]:
            if "error" in r:
                continue
            # measured on the rows the sample left out: no claim text on both sides
            assert r["rows"] >= 120 and r["texts_on_both_sides"] == 0, rule
            assert r["rows"] + r["measured_rows"] == out["rows"], rule
            told, ci = r["told_local_precision"], r["told_ci"]  # no interval where fewer than two halves decided
            assert (told is not None or ci is None) and (ci is None or ci[0] <= told <= ci[1]), rule


def test_tune_benchmark_cv_compares_with_and_without_a_head(tmp_path: Path) -> None:
    from groundjudge.testing import tiny_nli_model

    tiny = tiny_nli_model(tmp_path / "tiny", SHARED_MODEL)
    out = run(
        "tune.py",
        *("--limit", "150", "--base", str(tiny), "--cv", "2", "--epochs", "1", "--grid", '[{"distill": 0.0}]'),
        *("--work", str(tmp_path / "work"), "--cache-dir", str(tmp_path / "cache")),
        cache=tmp_path,
    )
    (row,) = out["cv"]
    assert row["head_folds"] == 2  # each validation fold (~75 claims) is enough for a head
    for key in ("crossfit_nli_balanced_accuracy", "crossfit_escalation_rate", "head_nli_balanced_accuracy"):
        assert row[key] is not None and row[key] >= 0, key
    # each dev file apart too (the pooled folds are mostly Factcheck-GPT's): its claims split over the two folds
    assert row["factcheckgpt"]["claims"] + row["wice"]["claims"] == pytest.approx(sum(out["train_rows"].values()) / 2)
    for name in ("factcheckgpt", "wice"):
        assert row[name]["folds"] == 2 and row[name]["head_folds"] == 2, name
        assert 0 <= row[name]["auc"] <= 1 and 0 <= row[name]["head_auc"] <= 1, name
        assert 0 <= row[name]["head_true_escalation"] <= 1, name


def test_accuracy_measures_a_tuned_models_cascade_with_its_stored_thresholds(tmp_path: Path) -> None:
    from groundjudge.checker.profile import write_model_profile
    from groundjudge.models import LocalThresholds
    from groundjudge.testing import tiny_nli_model

    tuned = tiny_nli_model(tmp_path / "tuned", SHARED_MODEL)
    stored = LocalThresholds(t_support=0.77, t_contradict=0.66, t_unsupported=0.11)
    write_model_profile(tuned, {"cascade": stored, "nli": LocalThresholds(t_support=0.5, t_contradict=None)})
    data = DATA / "factcheckgpt-stance.jsonl"
    out = run(
        "accuracy.py",
        "--data",
        str(data),
        "--limit",
        "10",
        "--mode",
        "cascade",
        "--nli-model",
        str(tuned),
        "--no-seed",
        cache=tmp_path,
    )
    assert out["mode"] == "cascade" and out["ran"] == "nli"  # no LLM: the NLI stage alone, the cascade's share
    assert out["cascade_thresholds"] == stored.model_dump()
    assert (
        0 <= out["escalation_rate"] <= 1 and "local_contradiction_precision" in out and "nli_decided_precision" in out
    )


def test_cost_benchmark_measures_calls_cache_and_batch(tmp_path: Path) -> None:
    out = run("cost.py", "--limit", "4", "--runs", "default,batch,replay", cache=tmp_path)
    assert out["requests_per_answer"] <= 2.0 and out["replay_requests"] == 0
    assert 0 < out["batch_cost_ratio"] <= 0.55 and 0 <= out["cached_input_share"] <= 1
    # issue 34: tokens per answer against RAGAS Faithfulness by the same count (chars/4), fresh and cached apart
    assert set(out["ratio_to_ragas"]) == {"factcheck", "faithbench"}
    assert all(0 < r <= out["target_ratio"] for r in out["ratio_to_ragas"].values())
    default = out["per_answer"]["factcheck/default"]
    assert default["fresh_input_per_answer"] + default["cached_input_per_answer"] == pytest.approx(
        default["input_per_answer"], abs=0.2
    )
    assert default["usd_per_answer"] <= default["usd_per_answer_no_cache"]


def test_accuracy_measures_a_tuned_models_cascade_with_its_heads_thresholds(tmp_path: Path) -> None:
    """With a head stored beside the weights, the local share is decided on the head's probability with the head's
    own thresholds, never the raw entailment thresholds stored beside them."""
    from groundjudge.checker.head import FEATURES, VerdictHead
    from groundjudge.checker.nli import NLIModel
    from groundjudge.checker.profile import write_model_head, write_model_profile
    from groundjudge.models import LocalThresholds
    from groundjudge.testing import tiny_nli_model

    tuned = tiny_nli_model(tmp_path / "tuned", SHARED_MODEL)
    raw = LocalThresholds(t_support=None, t_contradict=None, t_unsupported=0.0001)  # on the entailment: decides nothing
    write_model_profile(tuned, {"cascade": raw, "nli": LocalThresholds(t_support=0.5, t_contradict=None)})
    mine = LocalThresholds(t_support=0.9, t_contradict=None, t_unsupported=0.1)  # on the head's probability
    n = len(FEATURES)
    head = VerdictHead(
        mean=[0.0] * n,
        scale=[1.0] * n,
        coef=[0.0] * n,
        intercept=-6.0,  # every claim: P(SUPPORTED) 0.0025
        l2=1.0,
        model=NLIModel(str(tuned)).identity,
        thresholds={"nli": LocalThresholds(t_support=0.5, t_contradict=None), "cascade": mine},
    )
    write_model_head(tuned, head.model_dump())
    args = ["--data", str(DATA / "factcheckgpt-stance.jsonl"), "--limit", "10", "--mode", "cascade", "--no-seed"]
    out = run("accuracy.py", *args, "--nli-model", str(tuned), cache=tmp_path)
    assert out["cascade_thresholds"] == mine.model_dump()
    assert out["escalation_rate"] == 0.0  # all UNSUPPORTED locally on the head's scale
    plain = run("accuracy.py", *args, "--nli-model", str(tuned), "--no-head", cache=tmp_path)
    assert plain["cascade_thresholds"] == raw.model_dump()  # the model's own, on the entailment
    # the replays are of the raw model's rule: with a head in force the pipeline would score every piece and decide
    # on the head's scale, so they refuse it rather than measure something else
    for replay in ("--threshold-cv", "--cascade-margin-cv"):
        with pytest.raises(ArgumentError, match="pass --no-head"):
            run("accuracy.py", replay, "--nli-model", str(tuned), "--limit", "2", cache=tmp_path)


def test_conversations_benchmark_catches_every_self_supported_claim(tmp_path: Path) -> None:
    out = run("conversations.py", "--limit", "6", cache=tmp_path)
    for mode in ("nli", "cascade"):
        assert out[mode]["rows"] == 6 and out[mode]["errors"] == 0
        assert out[mode]["self_supported_caught"] == 1.0  # issue 20: 100% in every mode
        assert out[mode]["naive_self_supported"] > 0  # the control: counting the assistant's turns does accept them
    assert out["target_met"] is True


def test_citations_benchmark_on_a_slice(tmp_path: Path) -> None:
    out = run("citations.py", "--limit", "3", "--cache-dir", str(tmp_path), cache=tmp_path)
    assert out["benchmark"] == "citations" and out["n"] == 6
    for mode in ("nli", "cascade"):
        assert {"wrong_flagged", "right_accepted", "uncited_reported", "n_wrong", "n_right"} <= set(out[mode])
    assert out["cascade"]["errors"] == 0 and out["cascade"]["wrong_flagged"] == 1.0


def test_trust_benchmark_on_a_slice(tmp_path: Path) -> None:
    # every claim reviewed: the checker's error is measured on the whole run, so the corrected rate is the true rate
    # in every repetition (while the raw rate carries the judge's flips and the local model's mistakes)
    out = run(
        "trust.py",
        *("--data", str(DATA / "factcheckgpt-stance.jsonl"), "--claims", "130", "--repetitions", "4"),
        *("--review-share", "1", "--cache-dir", str(tmp_path)),
        cache=tmp_path,
    )
    assert out["benchmark"] == "trust" and out["repetitions"] == 4 and out["claims"] >= 130
    assert out["verified_runs"] == 1 and out["errors"] == 0 and out["judge_unmatched"] == 0
    assert out["reviews"] == out["claims"] and 0 < out["true_rate"] < 1
    assert out["corrected"]["no_number"] == 0 and out["corrected"]["coverage"] == 1.0
    assert out["corrected"]["rmse"] == pytest.approx(0, abs=1e-9)
    assert out["raw"]["rmse"] > 0.005 and 0 <= out["raw"]["coverage"] <= 1
    assert set(out["raw_error_by_route"]) == {"nli", "judge"} and "targets_met" in out


def test_savings_benchmark_compares_the_rule_with_every_piece(tmp_path: Path) -> None:
    """FaithBench rows 161-170 in the cascade: the rule skips pieces that scoring everything reads, some claims'
    support is lower with it (one is flagged weak that every piece clears), none is higher, and no label moves."""
    out = run("savings.py", "--limit", "10", "--offset", "160", cache=tmp_path)
    assert out["benchmark"] == "savings" and out["mode"] == "cascade" and out["answers"] == 10
    assert out["pairs_every_piece"] > out["pairs_with_rule"] > 0
    assert out["support_differs"] > 0 and out["support_higher_with_rule"] == 0 and out["labels_changed"] == 0
    assert out["labels_higher_with_rule"] == 0 and out["verdicts_better_with_rule"] == 0
    assert out["combined_higher_with_rule"] == 0
    assert out["weak_with_rule"] > out["weak_every_piece"]
    assert out["nli_part_lower_max"] > 0 and out["combined_lower_max"] >= 0


def test_throughput_benchmark_on_a_slice(tmp_path: Path) -> None:
    out = run(
        "throughput.py",
        *("--limit", "6", "--offset", "0", "--concurrency", "2,4", "--median", "0.05", "--sigma", "0.2"),
        *("--rate-limit", "20", "--warm-nli"),
        cache=tmp_path,
    )
    assert out["answers"] == 6 and set(out["span_utilisation"]) == {"2", "4"}
    for c in ("2", "4"):
        run_ = out["runs"][c]
        assert run_["rows"] == 6 and run_["calls"] == 12 and run_["errors"] == 0
        assert 0 < out["span_utilisation"][c] <= 1 and 0 < out["span_utilisation_nli_cached"][c] <= 1
        assert 0 < run_["greedy_same_replies"] <= 1  # each answer's two calls were told apart
        bound = out["greedy_bound"][c]
        assert 0 < bound["p10"] <= bound["mean"] <= bound["p90"] <= 1
        # issue 32: the bound max(ideal, NLI only) and how close the run came to it, cold and with the NLI cached
        assert run_["bound_s"] == max(run_["ideal_s"], run_["nli_only_s"]) and run_["wall/bound"] > 0
        assert out["wall_over_bound"][c] == run_["wall/bound"] and out["wall_over_bound_nli_cached"][c] > 0
        # where the local work sat: its steps ran, after the first claims replies, within the run's wall
        first, busy, idle = run_["local_first_s"], run_["local_busy_s"], run_["local_idle_s"]
        assert first > 0 and busy > 0 and idle >= 0
        assert first + busy + idle == pytest.approx(run_["wall_s"], abs=0.05)
    limited = out["rate_limited"]
    assert limited["rows_lost"] == 0 and limited["billed_twice"] == 0
    share = out["qa_share"]  # the QA comparison's model calls against the evidence NLI's, replayed alone
    assert share["evidence_pairs"] > 0 and share["evidence_cpu_s"] > 0 and share["qa_share"] >= 0
    assert share["qa_calls"] <= 2 * (6 // 32 + 1)  # one batch of answers: one way, then the other for those that pass
    # the cascade's whole local work against the NLI-only run's, replayed the same way (the first level's run)
    assert share["nli_only_pairs"] > 0 and share["nli_only_cpu_s"] > 0
    local, only = share["qa_cpu_s"] + share["evidence_cpu_s"], share["nli_only_cpu_s"]
    rounding = 0.01 / (only - 0.005) + local * 0.005 / (only * (only - 0.005)) + 0.0005  # times printed to 0.01 s
    assert share["local_over_nli_only"] == pytest.approx(local / only, abs=rounding)


def test_throughput_benchmark_on_short_answers(tmp_path: Path) -> None:
    out = run(
        "throughput.py",
        *("--short", "--limit", "4", "--offset", "0", "--concurrency", "4", "--median", "0.02", "--sigma", "0.2"),
        cache=tmp_path,
    )
    assert out["short"] and out["answers"] == 4 and out["runs"]["4"]["calls"] == 8 and out["runs"]["4"]["errors"] == 0


def test_the_greedy_bound_of_the_throughput_benchmark() -> None:
    from benchmarks.throughput import greedy_bound  # the repository root is on the path, as for tests.conftest

    # equal replies: 160 answers' claims calls fill five waves of 32, their second calls five more, no slot idles
    assert greedy_bound(160, 32, 1.0, 0.0, draws=3) == {"mean": 1.0, "p10": 1.0, "p90": 1.0}
    # one answer: two calls one after the other, one slot of 32 busy
    assert greedy_bound(1, 32, 1.0, 0.0, draws=3)["mean"] == round(1 / 32, 3)
    # 33 answers at 32 slots: the second wave of claims holds one call, and its second call goes alone at the end
    assert greedy_bound(33, 32, 1.0, 0.0, draws=3)["mean"] == round(66 / (32 * 3), 3)
    spread = greedy_bound(160, 32, 1.0, 0.5, draws=50)
    assert 0.7 < spread["mean"] < 0.95  # the lognormal tail: the last calls' slowest replies idle the other slots


def test_gpu_script_runs_its_cpu_branches(tmp_path: Path) -> None:
    """benchmarks/gpu.py is run on a lent GPU machine only; here its smoke run takes the CPU branch of each part."""
    out = run("gpu.py", "--smoke", "--parts", "dtype,batch,oom", "--device", "cpu", cache=tmp_path)
    assert out["env"]["device"] == "cpu" and out["dtype"]["pairs"] > 0
    for dtype in ("float32", "float16", "bfloat16"):
        stats = out["dtype"][dtype]
        assert stats["pairs_per_s"] > 0 and 0 <= stats["argmax_changed_share"] <= 1
    assert out["dtype"]["float32"]["argmax_changed"] == 0  # the reference against itself
    assert [b["asked"] for b in out["batch"]] == [16, 64] and not any(b["halved"] for b in out["batch"])
    assert out["oom"] == {"skipped": "no cuda"}


def test_accuracy_threshold_cv_replays_the_pipelines_own_rule(tmp_path: Path) -> None:
    """--threshold-cv scores every planned piece once and replays the fewer-pairs rule and the routing at each
    threshold of its grid: at a threshold away from the default (where the rule scores other pieces), each file's
    pairs and balanced accuracy are those of the pipeline itself run at that threshold."""
    limit, answers = "12", "4"
    out = run(
        "accuracy.py",
        *("--threshold-cv", "--limit", limit, "--cv-answers-limit", answers, "--cv-grid", "0.3:0.8:0.25"),
        cache=tmp_path,
    )
    assert out["grid"] == [0.3, 0.55, 0.8] and out["default"] == 0.55
    cv = out["cv"]
    assert cv["files"] == ["wice-dev", "factcheckgpt-stance"] and len(cv["picked"]) == 3
    assert all(len(seed) == 5 and set(seed) <= set(out["grid"]) for seed in cv["picked"])
    assert set(cv["out_of_fold_balanced_accuracy"]) == set(cv["files"]) and len(cv["out_of_fold_minus_default"]) == 3
    for name, n in (("wice-dev", limit), ("factcheckgpt-stance", limit), ("faithbench-dev", answers)):
        row = out["files"][name]
        assert row["default"]["t_support"] == 0.55 and row["median_picked"]["t_support"] == cv["median_picked"]
        for t in ("0.3", "0.8"):
            real = run(
                "accuracy.py",
                "--data",
                str(DATA / f"{name}.jsonl"),
                "--limit",
                n,
                "--no-seed",
                "--t-support",
                t,
                cache=tmp_path,
            )
            assert (row["pairs_curve"][t], row["curve"][t]) == (
                real["pairs_scored"],
                round(real["balanced_accuracy"], 2),
            ), (name, t)


def test_threshold_cv_picks_a_better_threshold_and_keeps_the_default_on_a_tie() -> None:
    import numpy as np

    from benchmarks.accuracy import cross_validate

    rng = np.random.default_rng(0)
    grid, n, files = [0.4, 0.5, 0.6], 200, ["a", "b"]
    units: dict[str, list[Any]] = {f: [f"{f}{i}" for i in range(n)] for f in files}
    gold = {f: rng.random(n) < 0.5 for f in files}

    def noisy(g: np.ndarray) -> np.ndarray:
        return np.where(rng.random(n) < 0.6, g, ~g)

    # right on every row at 0.4; at the default 0.5 and at 0.6, wrong on about 40% of them
    better = {f: np.stack([gold[f], noisy(gold[f]), noisy(gold[f])]) for f in files}
    out = cross_validate(grid, 0.5, better, gold, units, files, 5, 2)
    assert out["picked"] == [[0.4] * 5] * 2 and out["median_picked"] == 0.4 and out["beats_default"]
    assert all(x["ci"][0] > 0 for x in out["out_of_fold_minus_default"])
    # the same predictions at every threshold: a tie everywhere, the default picked and nothing beaten
    same = {f: np.stack([noisy(gold[f])] * 3) for f in files}
    tie = cross_validate(grid, 0.5, same, gold, units, files, 5, 2)
    assert tie["picked"] == [[0.5] * 5] * 2 and tie["median_picked"] == 0.5 and not tie["beats_default"]


def test_cascade_margin_cv_replays_the_pipelines_cascade_at_each_margin(
    tmp_path: Path, shared_nli: Any, server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--cascade-margin-cv replays the cascade (its thresholds, the product's rule and routing) at each margin: at
    today's margin and at 0, each file's local UNSUPPORTED decisions, escalations and pairs are those of the pipeline
    itself in the cascade (a scripted judge) with its selector's margin set so; 0.21 reaches 0 under the line, so it
    is today's rule; a smaller margin only adds local decisions and saves pairs; the folds pick from the grid."""
    from benchmarks.cost import verify
    from groundjudge.cache import Cache
    from groundjudge.checker.evidence import EvidenceSelector
    from groundjudge.config import Config
    from groundjudge.pipeline import steps as pipeline_steps
    from groundjudge.pipeline.evaluator import Evaluator
    from groundjudge.testing import route
    from tests.conftest import make_test_client

    limit = 12
    out = run(
        "accuracy.py",
        *("--cascade-margin-cv", "--limit", str(limit), "--cv-answers-limit", "4", "--margin-grid", "0:0.21:0.07"),
        cache=tmp_path,
    )
    grid = ["0.0", "0.07", "0.14", "0.21", "exact"]
    assert out["grid"] == grid and out["cascade_thresholds"]["t_unsupported"] == 0.21
    cv = out["cv"]
    assert cv["files"] == ["wice-dev", "factcheckgpt-stance"] and len(cv["out_of_fold"]) == 3
    assert all(len(seed) == 5 and set(seed) <= set(grid) for seed in cv["picked"]) and cv["median_picked"] in grid
    assert "pairs_per_claim" in out["files"]["faithbench-dev"]["margins"]["0.0"]
    for name in ("wice-dev", "factcheckgpt-stance", "faithbench-dev"):
        m = out["files"][name]["margins"]
        keys = ("local", "escalated", "pairs")
        assert [m["0.21"][k] for k in keys] == [m["exact"][k] for k in keys], name
        assert all(m[x]["fewer_local_than_exact"] == 0 for x in grid), name
        assert [m[x]["pairs"] for x in grid] == sorted(m[x]["pairs"] for x in grid), name
    wice = out["files"]["wice-dev"]["margins"]
    assert wice["0.0"]["pairs"] < wice["exact"]["pairs"] and wice["0.0"]["more_local_than_exact"] > 0

    server.script = route({"judge": verify})
    for label, margin in (("0.0", 0.0), ("exact", None)):
        # the pipeline's selector with the fewer-pairs margin under test
        monkeypatch.setattr(pipeline_steps, "EvidenceSelector", functools.partial(EvidenceSelector, margin=margin))
        for name in ("wice-dev", "factcheckgpt-stance"):
            rows = [json.loads(x) for x in (DATA / f"{name}.jsonl").read_text().splitlines()[:limit]]
            ev = Evaluator(
                Config(mode="cascade", qa=False),
                nli=shared_nli,
                client=make_test_client(server),
                cache=Cache(tmp_path),
            )
            reports = list(ev.evaluate_many(rows, batch_size=64))
            claims = [c for r in reports for c in r.claims]
            local = sum(c.route == "nli" and c.label == "UNSUPPORTED" for c in claims)
            escalated = round(sum(c.route == "judge" for c in claims) / len(claims), 4)
            cell = out["files"][name]["margins"][label]
            assert (local, escalated, sum(r.nli_pairs for r in reports)) == (
                cell["local"],
                cell["escalated"],
                cell["pairs"],
            ), (name, label)


def test_review_team_benchmark_on_a_small_database(tmp_path: Path) -> None:
    sizes = ["--answers", "40", "--decisions", "300", "--repeat", "1", "--writes", "3"]
    out = run("review_team.py", *sizes, cache=tmp_path)
    assert out["decisions"] == 300 and out["count_s_median"] >= 0 and out["decide_ms_median"] > 0
