"""groundjudge tune: training data from gold rows, judge verdicts and reviews; a claim-disjoint held-out slice; a
loadable model with its thresholds; interrupt and resume. A tiny random model keeps every test fast."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import typer
from typer.testing import CliRunner

from groundjudge.cache import Cache
from groundjudge.checker.head import VerdictHead
from groundjudge.checker.nli import NLIModel
from groundjudge.checker.profile import (
    MODEL_PROFILE_FILE,
    profile_for,
    read_model_head,
    read_model_profile,
    read_thresholds_model,
)
from groundjudge.cli.command import Command
from groundjudge.cli.learn import tune_command
from groundjudge.errors import ConfigError, InputError, NLIError
from groundjudge.learn.calibrate import fit_profile
from groundjudge.learn.tune import (
    STATE_DIR,
    TrainPair,
    TuneSettings,
    load_examples,
    split_by_claim,
    train,
    tune,
)
from groundjudge.models import AnswerReport, Claim, ClaimNLI, ClaimVerdict, Quote, Scores
from groundjudge.pipeline.evaluator import Evaluator
from tests.conftest import SHARED_MODEL, tiny_modernbert_model, write_jsonl

FAST = TuneSettings(epochs=2, batch_size=4, max_length=64, holdout=0.25, distill=0.5, l2sp=0.01)

PLACEHOLDERS = {0: "LABEL_0", 1: "LABEL_1"}


@pytest.fixture(scope="module")
def tiny(tiny_nli: Path) -> str:
    return str(tiny_nli)


@pytest.fixture(scope="module")
def tokenizer(tiny: str) -> Any:
    return NLIModel(tiny, device="cpu").tokenizer


def separable_pairs(n: int = 8) -> list[TrainPair]:
    """SUPPORTED claims that repeat their passage, UNSUPPORTED ones about dragons the passage does not mention. The
    words tell the labels apart only in the claim: the SUPPORTED pairs' passages speak of the dragons, and only the
    UNSUPPORTED pairs' passages of zebras, so that a loss that read every token of the pair, not the claim's alone,
    would learn the zebras and leave the claims as they were."""
    pairs = []
    for i in range(n):
        museum, dragons = f"The museum of town {i} opened in {1900 + i}.", f"Purple dragons guard the gate of town {i}."
        pairs.append(TrainPair(f"{dragons} {museum}", museum, "SUPPORTED"))
        zebras = f"Zebras graze near town {i}. {museum}"
        pairs.append(TrainPair(zebras, dragons, "UNSUPPORTED" if i % 2 else "CONTRADICTED"))
    return pairs


@pytest.fixture(scope="module")
def token_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random LettuceDetect-shaped token checker (ModernBERT, LABEL_0 / LABEL_1, 0 supported, declared in its
    groundjudge.json as the hub model's folder would be). Read only: copy it before writing into it."""
    corpus = [f"{r['contexts'][0]} {r['claim']}" for r in gold_rows(40)]
    corpus += [f"{p.premise} {p.claim}" for p in separable_pairs(20)] + ["Passage: Answer:"]
    base = tiny_modernbert_model(tmp_path_factory.mktemp("token") / "model", corpus * 5, PLACEHOLDERS)
    (base / MODEL_PROFILE_FILE).write_text(json.dumps({"format": 1, "kind": "token", "supported_label": 0}))
    return base


def gold_rows(n: int = 16) -> list[dict[str, Any]]:
    labels = ["SUPPORTED", "UNSUPPORTED", "UNSUPPORTED", "CONTRADICTED"]
    rows = []
    for i in range(n):
        city = f"city number {i}"
        rows.append(
            {
                "id": f"g{i}",
                "contexts": [f"The museum of {city} opened in {1900 + i}. It has {i + 3} rooms."],
                "claim": f"The museum of {city} opened in {1900 + i + (i % 4 == 3)}.",
                "label": labels[i % 4],
                "source_label": "x",
            }
        )
    # Factcheck-GPT style: the same claim against a second snippet
    rows += [{**r, "id": r["id"] + "b", "contexts": [r["contexts"][0] + " Tickets are cheap."]} for r in rows[:4]]
    return rows


LONG = " ".join(f"Sentence {i} talks about the weather in town {i} at length today." for i in range(30))
QUOTE = "Sentence 17 talks about the weather in town 17"


def scored_report() -> AnswerReport:
    start = LONG.index(QUOTE)

    def verdict(cid: str, text: str, label: str, route: str, quotes: list[Quote], flags: list[str] | None = None):  # type: ignore[no-untyped-def]
        return ClaimVerdict(claim=Claim(id=cid, text=text), label=label, route=route, quotes=quotes, flags=flags or [])

    good = Quote(text=QUOTE, doc=0, start=start, end=start + len(QUOTE), verified=True)
    claims = [
        verdict("c1", "Town 17 has weather.", "SUPPORTED", "judge", [good]),
        verdict("c2", "Town 99 is sunny.", "UNSUPPORTED", "judge", []),
        verdict("c3", "Town 3 is cold.", "SUPPORTED", "judge", [Quote(text="nowhere", verified=False)]),
        verdict("c4", "Town 4 is warm.", "SUPPORTED", "nli", []),
        verdict("c5", "Town 5 is wet.", "UNSUPPORTED", "judge", [], ["unverified_quote"]),
        verdict("c6", "Town 6 is dry.", "SUPPORTED", "nli", []),
    ]
    return AnswerReport(id="a1", verdict="WARN", mode="cascade", scores=Scores(), claims=claims, contexts=[LONG])


def test_training_claims_from_gold_judge_and_review(tmp_path: Path, tokenizer: Any) -> None:
    gold = write_jsonl(tmp_path / "gold.jsonl", gold_rows()[:2])
    scored = write_jsonl(tmp_path / "scored.jsonl", [scored_report().model_dump_json()])
    decision = {"id": "a1", "claim_id": "c6", "claim": "Town 6 is dry.", "label": "contradicted"}
    review = write_jsonl(tmp_path / "review.jsonl", [decision])
    settings = TuneSettings(passage_tokens=32, passage_overlap=8)
    examples = {ex.id: ex for ex in load_examples([gold, scored, review], tokenizer, settings)}
    # gold rows as they are; judged claims with verified evidence; a reviewed claim; nothing the NLI decided, no
    # SUPPORTED without a verified quote, nothing flagged unverified
    assert set(examples) == {"g0", "g1", "a1/c1", "a1/c2", "a1/c6"}
    assert examples["a1/c6"].label == "CONTRADICTED" and examples["a1/c6"].source == "review"
    assert examples["a1/c1"].source == "judge" and examples["a1/c2"].label == "UNSUPPORTED"
    # the premise of a judged claim is the pipeline-sized passage its quote came from, not the whole page
    (premise,) = examples["a1/c1"].premises
    assert QUOTE in premise and len(premise) < len(LONG) / 3


def test_a_review_line_without_a_verdict_teaches_nothing(tmp_path: Path, tokenizer: Any) -> None:
    # the review page exports a note (or a citation choice) made without a verdict as "label": null: no label, so
    # neither a training claim, nor an error (tune refused the whole file), nor a review of a claim to look up
    scored = write_jsonl(tmp_path / "scored.jsonl", [scored_report().model_dump_json()])
    review = write_jsonl(
        tmp_path / "review.jsonl",
        [
            {"id": "a1", "claim_id": "c6", "claim": "Town 6 is dry.", "label": None, "note": "ask the desk"},
            {"id": "a1", "claim_id": "c4", "claim": "Town 4 is warm.", "label": "UNSUPPORTED"},
            {"id": "gone", "claim_id": "c1", "claim": "Not in any score file.", "label": None, "citation": "WRONG"},
        ],
    )
    settings = TuneSettings(passage_tokens=32, passage_overlap=8)
    examples = {ex.id: ex for ex in load_examples([scored, review], tokenizer, settings)}
    assert set(examples) == {"a1/c1", "a1/c2", "a1/c4"}
    assert (examples["a1/c4"].label, examples["a1/c4"].source) == ("UNSUPPORTED", "review")
    # a later export where the reviewer cleared that verdict: it teaches nothing more (it taught UNSUPPORTED)
    later = write_jsonl(
        tmp_path / "later.jsonl", [{"id": "a1", "claim_id": "c4", "claim": "Town 4 is warm.", "label": None}]
    )
    examples = {ex.id: ex for ex in load_examples([scored, review, later], tokenizer, settings)}
    assert set(examples) == {"a1/c1", "a1/c2"}


def test_a_review_teaches_only_the_claim_it_was_made_on(tmp_path: Path, tokenizer: Any) -> None:
    # A review is joined by answer id, claim id and claim text, as metrics and calibrate join it. tune joined by the
    # ids alone: a review of another run (a v1 review beside the v2 OUT, the same ids for other claims) taught its
    # label to whatever claim the ids now name, and of two score files with the same ids the later one hid the
    # earlier's claims.
    report = scored_report()
    v2 = report.model_copy(deep=True)
    v2.claims[1].claim.text = "Town 99 is sunny and warm."  # c2 of the same answer id, another claim
    v1_file = write_jsonl(tmp_path / "v1.jsonl", [report.model_dump_json()])
    v2_file = write_jsonl(tmp_path / "v2.jsonl", [v2.model_dump_json()])
    review = {"id": "a1", "claim_id": "c2", "claim": "Town 99 is sunny.", "label": "SUPPORTED"}
    reviews = write_jsonl(tmp_path / "review.jsonl", [review])
    examples = load_examples([v1_file, v2_file, reviews], tokenizer)
    c2 = sorted((ex.claim, ex.label, ex.source) for ex in examples if ex.id == "a1/c2")
    assert c2 == [("Town 99 is sunny and warm.", "UNSUPPORTED", "judge"), ("Town 99 is sunny.", "SUPPORTED", "review")]
    with pytest.raises(InputError, match=r"row review.jsonl:1, field 'claim'.*another run"):
        load_examples([v2_file, reviews], tokenizer)


@pytest.mark.parametrize(
    "row,match",
    [
        ({"id": "x", "claim_id": "c9", "claim": "b", "label": "SUPPORTED"}, "no such claim"),
        # a review line by the one rule every reader of reviews uses (metrics, calibrate, compare): tune took a
        # decision without the claim it was made on, which the others refuse
        ({"id": "x", "claim_id": "c9", "label": "SUPPORTED"}, r"row bad.jsonl:1, field 'claim': missing"),
        ({"id": "x", "claim_id": "c9", "claim": "b", "label": "maybe"}, r"row bad.jsonl:1, field 'label': 'maybe'"),
        ({"id": "x", "contexts": ["a"], "claim": "b", "label": "maybe"}, "label"),
        ({"id": "x", "answer": "an answer", "contexts": ["a"]}, "neither a claim row"),
        # a claim row with no source text, or no claim: tune trained "SUPPORTED" on an empty premise, and a null
        # claim as the text "None"
        ({"id": "x", "contexts": [], "claim": "b", "label": "SUPPORTED"}, r"row bad.jsonl:1, field 'contexts'"),
        ({"id": "x", "contexts": [" \n"], "claim": "b", "label": "SUPPORTED"}, r"row bad.jsonl:1, field 'contexts'"),
        ({"id": "x", "contexts": ["a"], "claim": None, "label": "SUPPORTED"}, r"row bad.jsonl:1, field 'claim'"),
        ({"id": "x", "contexts": ["a"], "claim": " ", "label": "SUPPORTED"}, r"row bad.jsonl:1, field 'claim'"),
    ],
)
def test_bad_rows_are_input_errors(tmp_path: Path, tokenizer: Any, row: dict[str, Any], match: str) -> None:
    path = write_jsonl(tmp_path / "bad.jsonl", [row])
    with pytest.raises(InputError, match=match):
        load_examples([path], tokenizer)


def test_claim_rows_are_read_as_score_and_calibrate_read_them(tmp_path: Path, tokenizer: Any) -> None:
    """tune read gold claim rows by rules of its own: a row calibrate and score take (one passage under the singular
    ``context``, passages as ``{"id", "text"}`` objects, a number as the id) stopped tune ("neither a claim row",
    "contexts must be a list of strings"). Read by the row contract (``io.rows.parse_sample``)."""
    lyon, porto = "The Lyon museum opened in 1850.", "The Porto museum opened in 1853."
    rows = [
        {"id": 1, "context": lyon, "claim": lyon, "label": "SUPPORTED"},
        {"id": 2.0, "contexts": [{"id": "d1", "text": porto}], "claim": "It opened in 1900.", "label": "contradicted"},
    ]
    examples = load_examples([write_jsonl(tmp_path / "gold.jsonl", rows)], tokenizer)
    assert [(ex.id, ex.contexts, ex.label, ex.source) for ex in examples] == [
        ("1", [lyon], "SUPPORTED", "gold"),
        ("2", [porto], "CONTRADICTED", "gold"),
    ]


def test_held_out_slice_is_disjoint_by_claim_text(tmp_path: Path, tokenizer: Any) -> None:
    examples = load_examples([write_jsonl(tmp_path / "g.jsonl", gold_rows())], tokenizer)
    for seed in range(5):
        train, held = split_by_claim(examples, 0.25, seed)
        assert {e.claim for e in train}.isdisjoint({e.claim for e in held})
        assert len(train) + len(held) == len(examples) and held
        assert {e.label for e in held} == {"SUPPORTED", "UNSUPPORTED", "CONTRADICTED"}  # stratified


def nli(e: float, c: float) -> ClaimNLI:
    return ClaimNLI(entailment=e, contradiction=c, passages_scored=1)


def test_contradiction_is_called_only_where_it_is_a_real_contradiction() -> None:
    # high contradiction on claims that are merely unsupported: "not SUPPORTED" is precise, CONTRADICTED is not
    scores = [nli(0.9 + i / 1000, 0.0) for i in range(20)] + [nli(0.01, 0.95) for _ in range(20)]
    labels = ["SUPPORTED"] * 20 + ["UNSUPPORTED"] * 20
    assert fit_profile(scores, labels)["cascade"].t_contradict is None
    assert fit_profile(scores, labels)["nli"].t_contradict is None
    labels = ["SUPPORTED"] * 20 + ["CONTRADICTED"] * 20
    profile = fit_profile(scores, labels)
    assert profile["cascade"].t_contradict == pytest.approx(0.95) and profile["nli"].t_contradict == pytest.approx(0.95)
    assert 0.01 < profile["nli"].t_support <= 0.9  # any cut between the groups is best


def test_tune_writes_a_loadable_model_with_its_thresholds(tmp_path: Path, tiny: str) -> None:
    data = write_jsonl(tmp_path / "gold.jsonl", gold_rows())
    out = tmp_path / "tuned"
    result = tune([data], tiny, out, FAST, device="cpu")
    model = NLIModel(str(out), device="cpu")
    assert model.predict([("a b c", "a b")]).shape == (1, 3)
    # 5 held-out claims are far too few for thresholds (issue 18: tune stored cut-offs fitted on 15 claims, one of
    # them SUPPORTED, without a word): none is stored, the result says why, and the generic cut-offs apply
    assert (
        read_model_profile(out) is None and result["thresholds"] == {} and "at least 60" in result["thresholds_reason"]
    )
    assert profile_for(str(out)) == profile_for("some/unknown-model")
    meta = json.loads((out / MODEL_PROFILE_FILE).read_text())["meta"]
    assert meta["thresholds"] == {"stored": False, "reason": result["thresholds_reason"]}
    assert meta["base_model"] == tiny and meta["data"] == [str(data)] and meta["target"] == 0.9
    assert meta["held_out_after"] == result["after"] and meta["n_held_out"] == result["n_held_out"] > 0
    for key in ("nli_balanced_accuracy", "escalation_rate", "local_precision", "contradiction_precision"):
        assert key in result["before"] and key in result["after"]
    assert not (out / STATE_DIR / "checkpoint.pt").exists()  # the big checkpoint goes once the model is written
    # 5 held-out claims are far too few for a verdict head: none is stored, and the result says why
    assert result["head"]["fitted"] is False and "too small" in result["head"]["reason"]
    assert read_model_head(out) is None and meta["head"]["fitted"] is False
    before = NLIModel(tiny, device="cpu").model.state_dict()
    after = model.model.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)


# enough claims that the held-out slice (70%) can fit a verdict head: >= 60 claims, >= 15 SUPPORTED and 15 not
HEADED = TuneSettings(epochs=1, batch_size=8, max_length=64, holdout=0.7, distill=0.0)


def test_tune_stores_a_head_fitted_on_the_held_out_slice_and_the_pipeline_applies_it(
    tmp_path: Path, tiny: str, tokenizer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = write_jsonl(tmp_path / "gold.jsonl", gold_rows(100))
    out = tmp_path / "tuned"
    result = tune([data], tiny, out, HEADED, device="cpu", cache=Cache(tmp_path / "cache"))
    train, held = split_by_claim(load_examples([data], tokenizer), HEADED.holdout, HEADED.seed)
    stored = read_model_head(out)
    assert stored is not None and result["head"]["fitted"] is True
    head = VerdictHead(**stored)
    # fitted on the held-out claims, every one of them, and nothing else (the training claims are another count)
    assert head.meta["claims"] == len(held) == result["n_held_out"] != len(train)
    assert head.meta["supported"] == sum(ex.label == "SUPPORTED" for ex in held)
    tuned = NLIModel(str(out), device="cpu")
    assert head.model == tuned.identity and head.digest == result["head"]["digest"]
    assert (
        result["head"]["out_of_fold"] == head.meta["out_of_fold"]
        and "nli_balanced_accuracy" in head.meta["out_of_fold"]
    )
    meta = json.loads((out / MODEL_PROFILE_FILE).read_text())["meta"]
    assert meta["head"]["claims"] == len(held) and meta["head"]["out_of_fold"] == head.meta["out_of_fold"]
    assert read_model_profile(out) is not None  # the raw model's thresholds stay beside the head's
    assert read_thresholds_model(out) == tuned.identity  # and name the weights they were fitted on
    ev = Evaluator(nli=tuned, cache=Cache(tmp_path / "cache"))
    report = ev.evaluate_claim("The museum of city number 3 opened in 1903.", ["The museum opened in 1903."])
    assert report.versions["head"] == head.digest
    assert report.claims[0].nli is not None and report.claims[0].nli.supported is not None

    # the head is no part of the run key: --no-head on the same run resumes (no training step) and removes it
    steps: list[int] = []
    no_head = TuneSettings(**{**HEADED.__dict__, "head": False})
    again = tune([data], tiny, out, no_head, device="cpu", progress=lambda s, t, loss: steps.append(s))
    assert steps == [] and again["head"] == {"fitted": False, "reason": "not asked for (--no-head)"}
    assert (
        read_model_head(out) is None and "head" not in Evaluator(nli=tuned, cache=Cache(tmp_path / "cache")).versions()
    )
    # ... and asking again fits it again on the same held-out scores: read back from OUT's state folder, not scored
    # again (a rescoring without the cache could differ in the last digits, and the head with it)
    import groundjudge.learn.tune as tune_module

    def no_scoring(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the held-out claims were scored again")

    monkeypatch.setattr(tune_module, "score_claims", no_scoring)
    tune([data], tiny, out, HEADED, device="cpu", progress=lambda s, t, loss: steps.append(s))
    restored = read_model_head(out)
    assert steps == [] and restored is not None and VerdictHead(**restored).digest == head.digest
    # a store that cannot be read is scored again, and the head is the same
    monkeypatch.undo()
    (out / STATE_DIR / "held_out_scores.json").write_text('{"torn', encoding="utf-8")
    tune([data], tiny, out, HEADED, device="cpu", cache=Cache(tmp_path / "cache"))
    again_head = read_model_head(out)
    assert again_head is not None and VerdictHead(**again_head).digest == head.digest


@pytest.mark.parametrize("kind", ["nli", "token"])
def test_interrupt_and_resume_gives_the_same_model(tmp_path: Path, tiny: str, token_base: Path, kind: str) -> None:
    tiny = tiny if kind == "nli" else str(token_base)
    data = write_jsonl(tmp_path / "gold.jsonl", gold_rows())
    straight = tmp_path / "straight"
    tune([data], tiny, straight, FAST, device="cpu")

    resumed = tmp_path / "resumed"
    seen: list[int] = []

    def stop_at_3(step: int, total: int, loss: float) -> None:
        seen.append(step)
        if step == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        tune([data], tiny, resumed, FAST, device="cpu", checkpoint_every=2, progress=stop_at_3)
    assert (resumed / STATE_DIR / "checkpoint.pt").is_file()
    seen.clear()
    tune([data], tiny, resumed, FAST, device="cpu", progress=lambda s, t, loss: seen.append(s))
    assert seen[0] == 4  # went on from the checkpoint written at the interrupt
    a = NLIModel(str(straight), device="cpu").model.state_dict()
    b = NLIModel(str(resumed), device="cpu").model.state_dict()
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=1e-3)  # CPU kernels sum in varying order


def test_ctrl_c_names_this_runs_state_only_once_tune_has_written_it(
    tmp_path: Path, tiny: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C in tune: TuneInterrupted naming OUT/.tune once this run's state is there (a rerun resumes it); a plain
    KeyboardInterrupt before, even when OUT holds the .tune of another run (which a rerun refuses as it would
    have: the command must not say "kept, rerun to resume" about it)."""
    from groundjudge.learn.tune_out import TuneInterrupted

    data = write_jsonl(tmp_path / "gold.jsonl", gold_rows())
    other = write_jsonl(tmp_path / "other.jsonl", gold_rows(20))
    out = tmp_path / "tuned"
    with pytest.raises(KeyboardInterrupt):  # another run, stopped at its first step: its .tune stays in OUT
        tune([other], tiny, out, FAST, device="cpu", progress=lambda *_: (_ for _ in ()).throw(KeyboardInterrupt))
    assert (out / STATE_DIR / "run.json").is_file()

    from groundjudge.learn import tune as tune_module

    def stop(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as m, pytest.raises(KeyboardInterrupt) as before:  # while the data is read
        m.setattr(tune_module, "load_examples", stop)
        tune([data], tiny, out, FAST, device="cpu")
    assert not isinstance(before.value, TuneInterrupted)
    with pytest.raises(ConfigError, match="not empty"):  # what the rerun says of that OUT, as before the stop
        tune([data], tiny, out, FAST, device="cpu")

    fresh = tmp_path / "fresh"
    with pytest.raises(TuneInterrupted) as kept:
        tune([data], tiny, fresh, FAST, device="cpu", progress=lambda *_: (_ for _ in ()).throw(KeyboardInterrupt))
    assert kept.value.state == fresh / STATE_DIR
    assert tune([data], tiny, fresh, FAST, device="cpu")["training"]["steps"] > 0  # and the rerun resumes it


def test_a_checkpoint_resumes_on_an_accelerator(tmp_path: Path, tiny: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The checkpoint was read with ``map_location`` the training device: on a GPU the CPU random state came back
    on the GPU too, and ``torch.set_rng_state`` refused it ("RNG state must be a torch.ByteTensor"), so no tune
    interrupted on a GPU could resume. Here ``torch.load`` puts what it reads for a device other than the CPU where
    no CPU tensor may be ("meta"), as it would on an accelerator; the device is "cpu:0" (torch's CPU, by a name
    that is not "cpu")."""
    real_load = torch.load

    def load_onto(f: Any, map_location: Any = None, **kw: Any) -> Any:
        saved = real_load(f, map_location="cpu", **kw)
        if map_location != "cpu":
            saved["rng"] = saved["rng"].to("meta")
        return saved

    monkeypatch.setattr(torch, "load", load_onto)

    def stop_at_2(step: int, total: int, loss: float) -> None:
        if step == 2:
            raise KeyboardInterrupt

    pairs, settings = separable_pairs(4), TuneSettings(**{**FAST.__dict__, "distill": 0.0})
    with pytest.raises(KeyboardInterrupt):
        train(tiny, pairs, tmp_path / "out", settings, device="cpu:0", run_key="k", progress=stop_at_2)
    seen: list[int] = []
    train(tiny, pairs, tmp_path / "out", settings, device="cpu:0", run_key="k", progress=lambda s, t, x: seen.append(s))
    assert seen[0] == 3  # went on from the checkpoint written at the interrupt


def test_another_run_into_the_same_folder_is_refused_unless_overwritten(tmp_path: Path, tiny: str) -> None:
    data = write_jsonl(tmp_path / "gold.jsonl", gold_rows())
    out = tmp_path / "tuned"
    tune([data], tiny, out, FAST, device="cpu")
    other = TuneSettings(**{**FAST.__dict__, "epochs": 1})
    with pytest.raises(ConfigError, match="--overwrite"):
        tune([data], tiny, out, other, device="cpu")
    tune([data], tiny, out, other, device="cpu", overwrite=True)
    assert json.loads((out / MODEL_PROFILE_FILE).read_text())["meta"]["settings"]["epochs"] == 1
    stranger = tmp_path / "stranger"
    stranger.mkdir()
    (stranger / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="refusing"):
        tune([data], tiny, stranger, FAST, device="cpu", overwrite=True)


def test_a_run_whose_base_model_changed_is_not_resumed(tmp_path: Path, tiny: str) -> None:
    """The run key named the base model by its path only: a rerun after the folder's weights were replaced (a newer
    model saved at the same path) was taken for the same run, and the finished one was reported again, trained
    from the old weights, as this base's tuning."""
    from groundjudge.testing import tiny_nli_model

    base = tmp_path / "base"
    shutil.copytree(tiny, base)
    data = write_jsonl(tmp_path / "gold.jsonl", gold_rows())
    out = tmp_path / "tuned"
    tune([data], str(base), out, FAST, device="cpu")
    tune([data], str(base), out, FAST, device="cpu")  # the same run: resumed (finished), not refused
    shutil.rmtree(base)
    tiny_nli_model(base, SHARED_MODEL, seed=1)  # other weights at the same path
    with pytest.raises(ConfigError, match="holds no checkpoint of this run"):
        tune([data], str(base), out, FAST, device="cpu")


def test_bad_data_leaves_no_folder_that_refuses_the_corrected_run(tmp_path: Path, tiny: str) -> None:
    # tune wrote OUT/.tune/run.json (keyed by the data's hash) and OUT/groundjudge.json before it read the data: a
    # typo in a review file stopped it, and the run with the file corrected (another key) was refused, "not empty
    # and holds no checkpoint of this run ... pass --overwrite"
    rows = gold_rows()
    data = write_jsonl(tmp_path / "gold.jsonl", [*rows[:-1], {**rows[-1], "label": "SUPORTED"}])
    out = tmp_path / "tuned"
    with pytest.raises(InputError, match="label"):
        tune([data], tiny, out, FAST, device="cpu")
    assert not out.exists()
    write_jsonl(data, rows)
    tune([data], tiny, out, FAST, device="cpu")
    assert NLIModel(str(out), device="cpu").predict([("a b c", "a b")]).shape == (1, 3)


def test_command_prints_before_and_after(tmp_path: Path, tiny: str) -> None:
    from groundjudge.cli import app as groundjudge_app

    app = typer.Typer()
    app.command(cls=Command)(tune_command)  # the CLI's class: its error hook makes exit 2
    data = write_jsonl(tmp_path / "gold.jsonl", gold_rows())
    out = tmp_path / "tuned"
    helped = CliRunner().invoke(groundjudge_app, ["tune", "--help"])  # registered as 'groundjudge tune'
    assert helped.exit_code == 0 and "--base" in helped.output
    args = [str(data), "--base", tiny, "--out", str(out), "--epochs", "1", "--batch-size", "4", "--max-length", "64"]
    result = CliRunner().invoke(app, [*args, "--device", "cpu", "--no-progress", "--cache-dir", str(tmp_path / "c")])
    assert result.exit_code == 0, result.output
    last = json.loads(result.stdout.strip().splitlines()[-1])
    assert "before" in last and "after" in last and (out / MODEL_PROFILE_FILE).is_file()
    assert "held-out slice" in result.stdout
    assert last["head"]["fitted"] is False and "no verdict head stored" in result.stderr
    big = write_jsonl(tmp_path / "big.jsonl", gold_rows(100))
    more = [*("--out", str(tmp_path / "h"), "--epochs", "1", "--batch-size", "8", "--max-length", "64")]
    more += [*("--holdout", "0.7", "--device", "cpu", "--no-progress", "--cache-dir", str(tmp_path / "c"))]
    headed = CliRunner().invoke(app, [str(big), "--base", tiny, *more], env={"COLUMNS": "200"})  # rows unwrapped
    assert headed.exit_code == 0, headed.output
    assert "after + head" in headed.stdout and read_model_head(tmp_path / "h") is not None
    told = json.loads(headed.stdout.strip().splitlines()[-1])
    assert told["head"]["fitted"] is True
    # issue 33: each held-out precision comes with the interval it should land in on new rows
    oof = told["head"]["out_of_fold"]
    lo, hi = oof["local_precision_ci"]
    assert f"{100 * oof['local_precision']:.1f}% ({100 * lo:.1f}%-{100 * hi:.1f}%)" in headed.stdout
    skipped = CliRunner().invoke(app, [str(big), "--base", tiny, *more, "--no-head"], env={"COLUMNS": "200"})
    assert skipped.exit_code == 0, skipped.output  # resumed: --no-head is not another run
    assert "after + head" not in skipped.stdout and read_model_head(tmp_path / "h") is None
    bad = CliRunner().invoke(app, [str(tmp_path / "missing.jsonl"), "--base", tiny, "--out", str(tmp_path / "o2")])
    assert bad.exit_code == 2


def test_a_tuned_model_worse_on_its_held_out_slice_is_not_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 29 §7: tune saved a model whose held-out balanced accuracy fell (60.0 -> 53.3) without a word. Here
    training "learns" the labels backwards (entailment and contradiction swapped): OUT keeps the base model's
    weights, and the result and the log say so, once."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from groundjudge.learn import tune as tune_module

    def backwards(base: str, pairs: Any, out: Path, settings: Any, **_: Any) -> dict[str, Any]:
        model = AutoModelForSequenceClassification.from_pretrained(base)
        model.config.id2label = {i: {"entailment": "contradiction", "contradiction": "entailment"}.get(
            str(name).lower(), name) for i, name in model.config.id2label.items()}  # fmt: skip
        model.config.label2id = {name: i for i, name in model.config.id2label.items()}
        model.save_pretrained(str(out))
        AutoTokenizer.from_pretrained(base).save_pretrained(str(out))
        return {"steps": 0}

    monkeypatch.setattr(tune_module, "train", backwards)
    data = write_jsonl(tmp_path / "gold.jsonl", gold_rows(40))
    out = tmp_path / "tuned"
    said: list[str] = []
    settings = TuneSettings(max_length=64, holdout=0.5, distill=0.0)
    result = tune([data], str(SHARED_MODEL), out, settings, device="cpu", log=said.append)
    assert result["after"]["nli_balanced_accuracy"] < result["before"]["nli_balanced_accuracy"]
    assert result["kept"] == "base" and "worse on the held-out slice" in result["kept_reason"]
    assert sum("worse on the held-out slice" in m for m in said) == 1, said
    kept = NLIModel(str(out), device="cpu").model.state_dict()
    base = NLIModel(str(SHARED_MODEL), device="cpu").model.state_dict()
    assert all(torch.equal(base[k], kept[k]) for k in base)
    assert NLIModel(str(out), device="cpu").model.config.id2label == NLIModel(str(SHARED_MODEL)).model.config.id2label
    assert json.loads((out / MODEL_PROFILE_FILE).read_text())["meta"]["kept"] == "base"
    assert not any("no verdict head stored" in m for m in said)  # the command prints that, once


def test_tune_compares_the_models_as_they_will_be_used() -> None:
    """Issue 33 §4: with a verdict head on both sides the tuned model is judged by its head's out-of-fold balanced
    accuracy (what the pipeline will use), else by the NLI scores alone."""
    from groundjudge.learn.tune import compare_models

    before, after = {"nli_balanced_accuracy": 70.0}, {"nli_balanced_accuracy": 72.0}
    assert compare_models(before, after)["worse"] is False
    headed = compare_models(before, after, {"nli_balanced_accuracy": 78.0}, {"nli_balanced_accuracy": 75.0})
    assert headed["worse"] is True and headed["measure"].endswith("with a verdict head")
    assert (headed["before"], headed["after"]) == (78.0, 75.0)
    assert compare_models(before, after, {"nli_balanced_accuracy": 78.0}, None)["measure"].startswith("NLI-only")


def test_a_rerun_keeps_the_model_the_run_decided_on(tmp_path: Path, tiny: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run decides once whether OUT keeps the tuned model. A rerun of the finished run (``--no-head`` to drop the
    head, say) measured the models another way (NLI alone instead of with heads) and could swap OUT's tuned model for
    the base, so that asking for the head again fitted it on another model's scores."""
    from groundjudge.learn import tune as tune_module

    data = write_jsonl(tmp_path / "gold.jsonl", gold_rows(60))
    out = tmp_path / "tuned"
    first = tune([data], tiny, out, HEADED, device="cpu")
    weights = (out / "model.safetensors").read_bytes()
    worse = {"measure": "NLI-only balanced accuracy", "before": 70.0, "after": 50.0, "worse": True}
    monkeypatch.setattr(tune_module, "compare_models", lambda *a, **k: worse)
    again = tune([data], tiny, out, TuneSettings(**{**HEADED.__dict__, "head": False}), device="cpu")
    assert again["kept"] == first["kept"] and again["kept_reason"] == first["kept_reason"]
    assert (out / "model.safetensors").read_bytes() == weights


WORSE = {"measure": "NLI-only balanced accuracy", "before": 70.0, "after": 50.0, "worse": True}


def test_a_rerun_of_a_run_that_kept_the_base_reports_the_comparison_it_was_decided_on(
    tmp_path: Path, tiny: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rerun of a run that kept the base model (``--no-head`` to drop the head, say) measured OUT's weights, the
    base's, as the tuned model: its result said "worse (26.2 before, 26.2 after)", gave the base's numbers as the
    tuned model's and wrote them into groundjudge.json's meta."""
    from groundjudge.learn import tune as tune_module

    data = write_jsonl(tmp_path / "gold.jsonl", gold_rows())
    out = tmp_path / "tuned"
    with monkeypatch.context() as m:
        m.setattr(tune_module, "compare_models", lambda *a, **k: WORSE)
        first = tune([data], tiny, out, FAST, device="cpu")
    assert first["kept"] == "base"
    identity = NLIModel(str(out), device="cpu").identity  # what a head or thresholds fitted on OUT now name
    again = tune([data], tiny, out, FAST, device="cpu")
    assert again["kept"] == "base" and again["kept_reason"] == first["kept_reason"]
    # the base's weights written again are the same files: the tokenizer's were saved with the truncation and
    # padding its last call left (the first run had scored with it, the rerun had not), so OUT became another model
    assert NLIModel(str(out), device="cpu").identity == identity
    assert again["compared"] == first["compared"] and again["after"] == first["after"]
    assert json.loads((out / MODEL_PROFILE_FILE).read_text())["meta"]["held_out_after"] == first["after"]


def test_a_run_stopped_while_the_base_replaces_the_tuned_model_keeps_the_base(
    tmp_path: Path, tiny: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stop after OUT's weights were replaced by the base's (a tuned model worse than its base), while the base's
    held-out claims were scored again, left no decision in the run's state: the rerun measured the base's weights in
    OUT as the tuned model, found it no worse than the base, and said the tuned model was kept."""
    from groundjudge.learn import tune as tune_module

    data = write_jsonl(tmp_path / "gold.jsonl", gold_rows())
    out = tmp_path / "tuned"
    real_save = tune_module._save_base

    def save_then_stop(base_model: Any, folder: Path) -> None:
        real_save(base_model, folder)
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(tune_module, "compare_models", lambda *a, **k: WORSE)
        m.setattr(tune_module, "_save_base", save_then_stop)
        with pytest.raises(KeyboardInterrupt):
            tune([data], tiny, out, FAST, device="cpu")
    again = tune([data], tiny, out, FAST, device="cpu")
    assert again["kept"] == "base" and "worse on the held-out slice" in again["kept_reason"]
    assert again["compared"] == WORSE
    kept = NLIModel(str(out), device="cpu").model.state_dict()
    base = NLIModel(tiny, device="cpu").model.state_dict()
    assert all(torch.equal(base[k], kept[k]) for k in base)


def test_tune_refuses_a_checker_it_cannot_train_before_any_work(tmp_path: Path, tiny: str, token_base: Path) -> None:
    # tune trains a sequence classifier read as tokenizer pairs, or a token checker; a token checker crashed in the
    # distillation targets ("type list doesn't define __round__") after the pairs were built and scored, and a
    # sequence classifier read through a template was trained on pairs it never sees
    from transformers import AutoTokenizer, T5Config, T5ForConditionalGeneration

    data = write_jsonl(tmp_path / "gold.jsonl", gold_rows())
    templated = tmp_path / "templated" / "model"
    shutil.copytree(tiny, templated)
    (templated / MODEL_PROFILE_FILE).write_text(json.dumps({"format": 1, "template": "{premise} || {hypothesis}"}))
    seq2seq = tmp_path / "seq2seq" / "model"  # MiniCheck-Flan-T5 shape, tiny, with the token checker's tokenizer
    tok = AutoTokenizer.from_pretrained(str(token_base))
    config = T5Config(  # type: ignore[call-arg]
        vocab_size=len(tok), d_model=16, d_kv=8, d_ff=32, num_layers=1, num_heads=2, pad_token_id=tok.pad_token_id,
        eos_token_id=tok.sep_token_id, decoder_start_token_id=tok.pad_token_id,
    )  # fmt: skip
    T5ForConditionalGeneration(config).save_pretrained(str(seq2seq))
    tok.save_pretrained(str(seq2seq))
    assert NLIModel(str(seq2seq), device="cpu").kind == "seq2seq"
    for base, says in ((seq2seq, "is a seq2seq checker"), (templated, "reads its pairs through a template")):
        out = tmp_path / f"out-{base.parent.name}"
        with pytest.raises(ConfigError, match=says) as caught:
            tune([data], str(base), out, FAST, device="cpu")
        assert "groundjudge calibrate" in str(caught.value) and not out.exists()


def test_tune_trains_a_two_label_checker_and_the_tuned_model_runs_as_its_base(tmp_path: Path) -> None:
    # MiniCheck-DeBERTa / FactCG shape: two outputs with placeholder names, the supported one declared in the
    # folder's groundjudge.json. The labels came from the config's names (refused: "names no entailment label")
    # and the tuned folder lost the declaration, so it could not be loaded.
    from tests.conftest import tiny_deberta_model

    data = write_jsonl(tmp_path / "gold.jsonl", gold_rows())
    corpus = ["The tower is 330 metres tall.", "Cats are mammals.", "a b c d e f g"] * 50
    base = tiny_deberta_model(tmp_path / "binary" / "model", corpus, PLACEHOLDERS, vocab_size=30)
    (base / MODEL_PROFILE_FILE).write_text(json.dumps({"format": 1, "kind": "binary", "supported_label": 0}))
    out = tmp_path / "tuned"
    steps: list[int] = []
    tune([data], str(base), out, FAST, device="cpu", progress=lambda s, t, loss: steps.append(s))
    assert steps  # it trained
    tuned = NLIModel(str(out), device="cpu")
    assert tuned.kind == "binary" and tuned.supported_label == 0 and tuned.columns == [0, 1, None]
    probs = tuned.predict([("Cats are mammals.", "Cats are mammals.")])
    assert probs.shape == (1, 3) and probs[0, 2] == 0 and probs[0, 0] + probs[0, 1] == pytest.approx(1)


def test_tune_trains_a_token_checker_and_the_tuned_model_runs_as_its_base(tmp_path: Path, token_base: Path) -> None:
    """Issue 33: a LettuceDetect-shaped token checker (ModernBERT, two placeholder labels, the supported one and the
    passage's prompt declared in groundjudge.json) is trained, and the tuned folder loads and scores as its base."""
    base = tmp_path / "base"
    shutil.copytree(token_base, base)
    declared = {"format": 1, "kind": "token", "supported_label": 0, "template": "Passage: {premise}\nAnswer:"}
    (base / MODEL_PROFILE_FILE).write_text(json.dumps(declared))
    data = write_jsonl(tmp_path / "gold.jsonl", gold_rows())
    out = tmp_path / "tuned"
    steps: list[int] = []
    result = tune([data], str(base), out, FAST, device="cpu", progress=lambda s, t, loss: steps.append(s))
    assert steps and result["training"]["pairs_left_out"] == 0  # it trained, on every pair
    tuned, before = NLIModel(str(out), device="cpu"), NLIModel(str(base), device="cpu")
    assert tuned.kind == "token" and tuned.supported_label == 0 and tuned.template == declared["template"]
    assert tuned.identity.split("/", 1)[1] == before.identity.split("/", 1)[1]  # read the same way
    pairs = [("The museum of city number 3 opened in 1903.", "The museum opened in 1903."), ("a b", "c d")]
    probs = tuned.predict(pairs)
    assert probs.shape == (2, 3) and np.isfinite(probs).all() and (probs[:, 2] == 0).all()
    if result["kept"] == "tuned":
        weights = before.model.state_dict()
        assert any(not torch.equal(weights[k], v) for k, v in tuned.model.state_dict().items())


def _support_margin(model: NLIModel, pairs: list[TrainPair]) -> float:
    """Mean P(supported) as scoring reads it over the SUPPORTED pairs, less the mean over the others."""
    supported = model.predict([(p.premise, p.claim) for p in pairs])[:, 0]
    labels = np.array([p.label == "SUPPORTED" for p in pairs])
    return float(supported[labels].mean() - supported[~labels].mean())


def test_a_token_checker_learns_the_claims_reading(tmp_path: Path, token_base: Path) -> None:
    """The objective is the scoring reading: 1 - the largest P(unsupported) over the claim's tokens, against the
    label. Trained on a separable set, the tuned checker's P(supported) through ``NLIModel.predict`` separates the
    SUPPORTED pairs from the others by a margin its base does not have (a flipped label, or the largest taken over
    every token of the pair, fails this)."""
    pairs = separable_pairs()
    settings = TuneSettings(epochs=20, lr=1e-3, batch_size=4, max_length=128, warmup=0.0, distill=0.0)
    base = NLIModel(str(token_base), device="cpu")
    out = tmp_path / "tuned"
    train(str(token_base), pairs, out, settings, device="cpu", reader=base)
    tuned = NLIModel(str(out), device="cpu", supported_label=0)
    before, after = _support_margin(base, pairs), _support_margin(tuned, pairs)
    assert after > 0.75 and after > before + 0.75, (before, after)  # the claim read over every token: about 0.54


def test_a_token_checkers_distillation_targets_and_pairs_too_long_to_read(tmp_path: Path, token_base: Path) -> None:
    """The base's answers that the tuned token checker is distilled towards are its P(supported) as scoring reads
    it; a pair longer than max_length is left out of training (scoring never cuts one), and none left is an error."""
    from groundjudge.errors import NLIError
    from groundjudge.learn.tune import attach_base_probabilities

    base = NLIModel(str(token_base), device="cpu")
    pairs = separable_pairs(3)
    long = TrainPair(
        " ".join(p.premise for p in separable_pairs(20)), "The museum of town 1 opened in 1901.", "SUPPORTED"
    )
    settings = TuneSettings(epochs=1, batch_size=4, max_length=96, distill=0.5)
    attach_base_probabilities([*pairs, long], base, settings)
    read = base.predict([(p.premise, p.claim) for p in pairs])
    for p, row in zip(pairs, read, strict=True):
        assert p.base == pytest.approx([row[0], row[1]], abs=1e-5)  # [P(supported), P(not supported)]
    assert long.base == []
    result = train(str(token_base), [*pairs, long], tmp_path / "out", settings, device="cpu", reader=base)
    assert result["pairs_left_out"] == 1 and result["steps"] == 2
    with pytest.raises(NLIError, match="none of the 1 training pairs fits in 96 tokens"):
        train(str(token_base), [long], tmp_path / "none", settings, device="cpu", reader=base)


def test_a_pair_whose_claim_leaves_no_room_for_a_premise_is_left_out_not_a_crash(tmp_path: Path, tiny: str) -> None:
    """An NLI pair whose claim alone is longer than max_length cannot lose the end of its premise to fit: the
    tokenizer raised ("Sequence to truncate too short") for the whole batch, and tune stopped with a traceback on a
    judged or reviewed claim that long. Such a pair is left out of training (scoring refuses the claim too), as a
    token checker's too-long pair is; the others train."""
    from groundjudge.learn.tune import attach_base_probabilities

    base = NLIModel(tiny, device="cpu")
    pairs = separable_pairs(3)
    long = TrainPair("The museum opened in 1901.", " ".join(["The museum opened in 1901 and"] * 40), "SUPPORTED")
    settings = TuneSettings(epochs=1, batch_size=4, max_length=64, distill=0.5)
    attach_base_probabilities([*pairs, long], base, settings)
    assert long.base == [] and all(len(p.base) == 3 for p in pairs)
    result = train(tiny, [*pairs, long], tmp_path / "out", settings, device="cpu", reader=base)
    assert result["pairs_left_out"] == 1 and result["steps"] == 2


def test_an_nli_checkers_pairs_none_of_which_leaves_room_for_a_premise_are_refused_with_the_right_reason(
    tmp_path: Path, tiny: str
) -> None:
    """Every pair's claim too long for max_length: the error said "a nli checker's pairs are never cut" (the token
    checker's reason), but an NLI model's pairs are cut, in the premise; what leaves them out is the claim."""
    base = NLIModel(tiny, device="cpu")
    long = TrainPair("The museum opened in 1901.", " ".join(["The museum opened in 1901 and"] * 40), "SUPPORTED")
    settings = TuneSettings(epochs=1, batch_size=4, max_length=64)
    with pytest.raises(NLIError, match="none of the 1 training pairs fits in 64 tokens") as info:
        train(tiny, [long], tmp_path / "none", settings, device="cpu", reader=base)
    assert "never cut" not in str(info.value) and "claim" in str(info.value)


def test_a_torn_run_file_is_no_runs_to_resume_and_overwrite_clears_it(tmp_path: Path, tiny: str) -> None:
    # OUT/.tune/run.json was written in place: a kill mid-write left it torn, and every later tune into that OUT
    # raised a bare JSONDecodeError, --overwrite too
    data = write_jsonl(tmp_path / "gold.jsonl", gold_rows())
    out = tmp_path / "tuned"
    (out / ".tune").mkdir(parents=True)
    (out / ".tune" / "run.json").write_text('{"run_key": "ab')
    with pytest.raises(ConfigError, match="--overwrite"):
        tune([data], tiny, out, FAST, device="cpu")
    tune([data], tiny, out, FAST, device="cpu", overwrite=True)
    assert NLIModel(str(out), device="cpu").kind == "nli"


def test_train_called_alone_refuses_what_tune_refuses(tmp_path: Path, tiny: str) -> None:
    # benchmarks/tune.py calls train() directly: a model read through a template was trained on plain pairs
    templated = tmp_path / "templated"
    shutil.copytree(tiny, templated)
    (templated / MODEL_PROFILE_FILE).write_text(json.dumps({"format": 1, "template": "{premise} || {hypothesis}"}))
    with pytest.raises(ConfigError, match="through a template"):
        train(str(templated), [TrainPair("a b c", "a b", "SUPPORTED")], tmp_path / "out", FAST)


def test_a_run_whose_pairs_were_chosen_another_way_is_not_resumed(
    tmp_path: Path, tiny: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run key holds how the premises are chosen (``PAIRS_RULE``): a checkpoint whose training pairs another
    version chose (say, before a change of how they are chosen) is refused, not resumed with stale pairs."""
    import groundjudge.learn.tune as tune_module

    data = write_jsonl(tmp_path / "gold.jsonl", gold_rows())
    out = tmp_path / "tuned"
    tune([data], tiny, out, FAST, device="cpu")
    tune([data], tiny, out, FAST, device="cpu")  # the same run: resumed (finished), not refused
    monkeypatch.setattr(tune_module, "PAIRS_RULE", "passages alone")
    with pytest.raises(ConfigError, match="holds no checkpoint of this run"):
        tune([data], tiny, out, FAST, device="cpu")


def test_a_run_whose_files_teach_other_labels_is_not_resumed(
    tmp_path: Path, tiny: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run key holds the labelled claims the files yield, not only the files' bytes: when the rule that reads
    them changes what they teach (a claim reviewers disagree on, once taught its latest label, now taught nothing),
    a checkpoint trained on the old labels is refused, not resumed with them."""
    import groundjudge.learn.tune as tune_module

    data = write_jsonl(tmp_path / "gold.jsonl", gold_rows())
    out = tmp_path / "tuned"
    tune([data], tiny, out, FAST, device="cpu")
    read = tune_module.load_examples

    def one_label_flipped(*args: Any, **kwargs: Any) -> list[Any]:
        examples = read(*args, **kwargs)
        examples[0].label = "UNSUPPORTED" if examples[0].label == "SUPPORTED" else "SUPPORTED"
        return examples

    monkeypatch.setattr(tune_module, "load_examples", one_label_flipped)
    with pytest.raises(ConfigError, match="holds no checkpoint of this run"):
        tune([data], tiny, out, FAST, device="cpu")


def test_a_score_file_is_read_as_every_reader_of_reports_reads_it(tmp_path: Path, tokenizer: Any) -> None:
    # tune read report lines its own way: a --retry-errors run stopped before it compacted OUT leaves an id's old
    # report beside its new one, and tune trained on the old one's judged claims too (other texts: other keys); a
    # score no run writes (combined 5.0) was read
    old = scored_report()
    new = old.model_copy(deep=True)
    for v in new.claims:
        v.claim.text = v.claim.text.replace("Town", "City")
    both = write_jsonl(tmp_path / "out.jsonl", [old.model_dump_json(), new.model_dump_json()])
    claims = {ex.claim for ex in load_examples([both], tokenizer)}
    assert claims and all(c.startswith("City") for c in claims), claims
    bad = old.model_copy(deep=True)
    bad.scores.combined = 5.0
    with pytest.raises(InputError, match=r"row bad.jsonl:1: scores.combined 5.0 is outside \[0, 1\]"):
        load_examples([write_jsonl(tmp_path / "bad.jsonl", [bad.model_dump_json()])], tokenizer)
