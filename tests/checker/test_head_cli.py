"""The verdict head from the command line: 'calibrate' fits it (gold rows, reviews or the judge's verdicts), 'score'
applies or skips it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from groundjudge.checker.profile import MODEL_PROFILE_FILE, read_model_head, read_model_profile, write_model_head
from groundjudge.cli import app
from groundjudge.errors import InputError
from groundjudge.testing import RecordedRequest, Reply, ScriptedLLMServer, claims_in, fenced_block, route
from tests.conftest import SHARED_MODEL, write_jsonl

runner = CliRunner()

CITIES = ["Lyon", "Porto", "Gdansk", "Bergen", "Turin", "Ghent", "Krakow", "Seville", "Tallinn", "Utrecht", "Basel"]
CITIES += ["Bilbao", "Graz", "Aarhus", "Split", "Riga", "Bruges", "Malmo", "Cork", "Lille", "Verona", "Brno"]
CITIES += ["Zagreb", "Vilnius"]
# claims that share no word with any context: not grounded
STRAYS = [
    "Volunteers painted the harbour crane bright green last spring.",
    "A famous chef opened a noodle bar beside the railway depot.",
    "Local farmers grow saffron on terraces above the valley.",
    "Seventeen cyclists crossed the frozen lake before dawn.",
    "The orchestra recorded a jazz album inside an old mine.",
    "Children fed carrots to wild ponies on the marsh.",
]


def labelled_rows(n_places: int = 24) -> list[dict[str, Any]]:
    """Three claims a place: one copied from its context (SUPPORTED), one with another year (CONTRADICTED), one that
    shares no word with it (UNSUPPORTED). The random model's scores are noise; the head's word coverage is not."""
    rows = []
    for i, city in enumerate(CITIES[:n_places]):
        year, rooms = 1850 + 3 * i, 20 + i
        context = (
            f"The {city} municipal museum opened in {year} beside the cathedral square. "
            f"It shows {rooms} rooms of regional paintings and sculpture."
        )
        claims = [
            (f"The {city} municipal museum opened in {year}.", "SUPPORTED"),
            (f"The {city} municipal museum opened in {year + 40}.", "CONTRADICTED"),
            (f"{STRAYS[i % len(STRAYS)][:-1]} near {city} in year {i}.", "UNSUPPORTED"),
        ]
        for j, (claim, label) in enumerate(claims):
            rows.append({"id": f"{city}-{j}", "contexts": [context], "claim": claim, "label": label})
    return rows


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def stdout_json(result: Any) -> dict[str, Any]:
    return json.loads(next(x for x in result.stdout.splitlines() if x.startswith("{")))


def flat(text: str) -> str:
    return " ".join(text.split())  # rich wraps long lines


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("GROUNDJUDGE_NLI_MODEL", "no/such-hub-model")  # every test names its model


@pytest.fixture(scope="module")
def tiny(tiny_nli: Path) -> Path:
    return tiny_nli


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_jsonl(tmp_path_factory.mktemp("rows") / "labelled.jsonl", labelled_rows())


def calibrate(*args: str | Path) -> Any:
    result = runner.invoke(app, ["calibrate", *map(str, args)])
    assert result.exit_code == 0, result.output
    return result


def test_the_help_states_the_head_minimum() -> None:
    from groundjudge.checker import head

    command = typer.main.get_command(app).commands["calibrate"]  # type: ignore[attr-defined]
    (option,) = [p for p in command.params if p.name == "head"]
    assert f"it needs {head.MIN_CLAIMS}+ claims, {head.MIN_CLASS}+ SUPPORTED" in option.help


def test_calibrate_writes_a_head_and_score_applies_it_unless_told_not_to(
    tmp_path: Path, tiny: Path, rows: Path
) -> None:
    config = tmp_path / "cfg.json"
    cache = tmp_path / "c"
    result = calibrate(rows, "--out", config, "--target", "0.9", "--nli-model", tiny, "--cache-dir", cache)
    written = json.loads(config.read_text())
    # the head's own thresholds are in force: explicit ones in the config would override them
    assert set(written) == {"head", "nli_model"} and written["nli_model"] == str(tiny)
    head = written["head"]
    assert set(head["thresholds"]) == {"nli", "cascade"} and head["meta"]["claims"] == 72
    assert head["meta"]["source"] == str(rows) and head["meta"]["target"] == 0.9
    from groundjudge.checker.nli import NLIModel

    assert head["model"] == NLIModel(str(tiny)).identity
    fit = stdout_json(result)
    # issue 18: the line leads with what the config holds (the head's thresholds, out of fold), the raw fit beside
    # it marked in-sample (it led with the raw in-sample numbers while the config held the head's)
    assert {"t_support", "t_contradict", "t_unsupported", "n", "escalation_rate", "config"} <= set(fit)
    assert fit["n"] == 72 and fit["config"] == str(config)
    assert fit["in_force"] == "head" and fit["measured"] == "out-of-fold" and fit["raw"]["measured"] == "in-sample"
    cascade = head["thresholds"]["cascade"]
    assert (fit["t_support"], fit["t_unsupported"]) == (cascade["t_support"], cascade["t_unsupported"])
    assert fit["local_precision"] == fit["head"]["out_of_fold"]["local_precision"]
    assert set(fit["head"]) == {"l2", "claims", "out_of_fold"} and fit["head"]["claims"] == 72
    oof = fit["head"]["out_of_fold"]
    assert oof["nli_balanced_accuracy"] > 90  # word coverage tells the claims apart; the random model cannot
    said = flat(result.stderr)
    assert "Raw thresholds (on the entailment, in-sample):" in said and "Verdict head (72 claims" in said
    assert f"balanced accuracy {oof['nli_balanced_accuracy']:.1f}%" in said and "local precision" in said
    # issue 33: the precision to expect on new rows comes with the interval it should land in
    lo, hi = fit["local_precision_ci"]
    assert fit["local_precision_ci"] == oof["local_precision_ci"] and lo <= fit["local_precision"] <= hi
    assert f"local precision {fit['local_precision']:.3f} ({lo:.3f}-{hi:.3f} on new rows)" in said

    data = write_jsonl(tmp_path / "in.jsonl", labelled_rows(6))
    base = ["score", str(data), "--config", str(config), "--cache-dir", str(cache), "--no-progress"]
    with_head = tmp_path / "with.jsonl"
    assert runner.invoke(app, [*base, "--out", str(with_head)]).exit_code in (0, 1)
    reports = lines(with_head)
    assert len(reports) == 18 and all(r["versions"].get("head") for r in reports)
    assert all(r["claims"][0]["nli"]["supported"] is not None for r in reports)
    without = tmp_path / "without.jsonl"
    assert runner.invoke(app, [*base, "--out", str(without), "--no-head"]).exit_code in (0, 1)
    reports = lines(without)
    assert len(reports) == 18 and not any("head" in r["versions"] for r in reports)
    assert all(r["claims"][0]["nli"]["supported"] is None for r in reports)

    # a config's use_head false stands unless --head is given (the CLI's default must not override the file)
    off = tmp_path / "off.json"
    off.write_text(json.dumps({**written, "use_head": False}))
    base[3] = str(off)
    assert runner.invoke(app, [*base, "--out", str(tmp_path / "off.jsonl")]).exit_code in (0, 1)
    assert not any("head" in r["versions"] for r in lines(tmp_path / "off.jsonl"))
    assert runner.invoke(app, [*base, "--out", str(tmp_path / "on.jsonl"), "--head"]).exit_code in (0, 1)
    assert all(r["versions"].get("head") for r in lines(tmp_path / "on.jsonl"))


def test_too_few_claims_or_no_head_write_the_thresholds_only(tmp_path: Path, tiny: Path, rows: Path) -> None:
    few = write_jsonl(tmp_path / "few.jsonl", labelled_rows(10))  # 30 claims, 10 SUPPORTED
    config = tmp_path / "few.json"
    args: list[str | Path] = ["--out", config, "--nli-model", tiny, "--cache-dir", tmp_path / "c"]
    result = calibrate(few, *args)
    assert "no verdict head: it needs at least 60 scored claims" in flat(result.stderr)
    assert "got 30, 10 SUPPORTED" in flat(result.stderr)
    written = json.loads(config.read_text())
    assert "head" not in written and {"t_support", "t_contradict", "t_unsupported"} <= set(written)
    assert written["use_head"] is False  # entailment thresholds: a head stored with the model must not read them
    assert stdout_json(result)["head"] is None

    config = tmp_path / "plain.json"
    result = calibrate(rows, *args[2:], "--out", config, "--no-head")
    written = json.loads(config.read_text())
    assert "head" not in written and {"t_support", "t_contradict", "t_unsupported"} <= set(written)
    fit = stdout_json(result)
    assert fit["head"] is None and fit["n"] == 72 and written["t_unsupported"] == fit["t_unsupported"]
    assert "no verdict head" not in result.stderr and "Verdict head" not in result.stderr


def test_save_to_model_stores_the_head_and_no_head_removes_it(tmp_path: Path, tiny: Path, rows: Path) -> None:
    model = tmp_path / "model"
    shutil.copytree(tiny, model)
    # a stale head stored with the model (fitted on another model's scores) neither stops calibrate nor is used
    stale = json.loads(json.dumps(_a_head(tmp_path, tiny, rows)))
    write_model_head(model, {**stale, "model": "some-other-model@0123/nli"})
    args: list[str | Path] = [rows, "--out", tmp_path / "cfg.json", "--nli-model", model, "--cache-dir", tmp_path / "c"]
    result = calibrate(*args, "--save-to-model")
    stored = read_model_head(model)
    assert stored is not None and stored == json.loads((tmp_path / "cfg.json").read_text())["head"]
    assert read_model_profile(model) is not None  # the raw thresholds too, as before
    assert "stored the cascade thresholds and the verdict head" in flat(result.stderr)
    # the stored head is the one in force for this model with no flags
    data = write_jsonl(tmp_path / "in.jsonl", labelled_rows(2))
    score = ["score", str(data), "--nli-model", str(model), "--cache-dir", str(tmp_path / "c"), "--no-progress"]
    assert runner.invoke(app, [*score, "--out", str(tmp_path / "a.jsonl")]).exit_code in (0, 1)
    assert all(r["versions"].get("head") for r in lines(tmp_path / "a.jsonl"))

    result = calibrate(*args, "--save-to-model", "--no-head")
    assert read_model_head(model) is None  # else it would override the thresholds just stored
    file = json.loads((model / MODEL_PROFILE_FILE).read_text())
    assert "head" not in file and file["thresholds"]["cascade"]["t_support"] == stdout_json(result)["t_support"]
    assert "removed the verdict head stored there" in flat(result.stderr)
    assert runner.invoke(app, [*score, "--out", str(tmp_path / "b.jsonl")]).exit_code in (0, 1)
    assert not any("head" in r["versions"] for r in lines(tmp_path / "b.jsonl"))


def test_thresholds_stored_with_a_model_are_refused_once_other_weights_are_in_its_folder(
    tmp_path: Path, tiny: Path, rows: Path
) -> None:
    """Thresholds stored beside the weights name the model they were fitted on, as a head does: new weights saved
    over the old ones (another model's entailment, another scale) stop the next run instead of being decided with
    them; the head stored beside them was refused, the thresholds were used silently."""
    from groundjudge.testing import tiny_nli_model
    from tests.conftest import SHARED_MODEL

    model = tmp_path / "model"
    shutil.copytree(tiny, model)
    cache = tmp_path / "c"
    calibrate(rows, "--nli-model", model, "--cache-dir", cache, "--save-to-model", "--no-head", "--target", "0.6")
    stored = read_model_profile(model)
    assert stored is not None and stored["cascade"].t_contradict is not None  # they decide claims locally
    gold = labelled_rows(2)
    data = write_jsonl(tmp_path / "in.jsonl", [{k: v for k, v in r.items() if k != "label"} for r in gold])
    judge = route({"judge": Judge({r["claim"]: r["label"] for r in gold})})

    def score(out: str) -> Any:
        with ScriptedLLMServer(judge) as server:
            args = ["score", str(data), "--out", str(tmp_path / out), "--nli-model", str(model), "--mode", "cascade"]
            args += ["--llm", "openai/gpt-4o-mini", "--base-url", server.openai_base_url, "--no-qa", "--no-progress"]
            return runner.invoke(app, [*args, "--cache-dir", str(cache)])

    assert score("a.jsonl").exit_code in (0, 1)
    assert all(
        r["versions"]["thresholds"].startswith("support>=never contradict>=0.") for r in lines(tmp_path / "a.jsonl")
    )
    # other weights saved over the model's own (a newer checkpoint, a download into the same folder); in another
    # folder, as a new process would see it (this one keeps each folder's model loaded: NLIModel.shared)
    model = shutil.copytree(model, tmp_path / "replaced")
    other = tiny_nli_model(tmp_path / "other", SHARED_MODEL, seed=1)
    shutil.copy(other / "model.safetensors", model / "model.safetensors")
    refused = score("b.jsonl")
    assert refused.exit_code == 2, refused.output
    said = flat(refused.stderr)
    assert "groundjudge.json" in said and "thresholds" in said and "calibrate" in said
    assert not (tmp_path / "b.jsonl").exists()
    # fitted again on the new weights' scores, they are in force again
    calibrate(rows, "--nli-model", model, "--cache-dir", cache, "--save-to-model", "--no-head", "--target", "0.6")
    assert score("c.jsonl").exit_code in (0, 1)


def test_calibrate_refits_thresholds_stored_for_other_weights_in_both_modes(
    tmp_path: Path, tiny: Path, rows: Path
) -> None:
    """A run refuses thresholds stored for other weights and says to refit them with 'calibrate --save-to-model';
    calibrate scores in nli mode, so stored nli thresholds (tune stores both modes) fitted on other weights refused
    calibrate itself: every claim row an ERROR (or, before the evaluator kept refusing, the first row skipped and
    the rest scored under the refused cut-offs). Calibrate fits raw scores: no stored threshold is in force there."""
    from groundjudge.checker.nli import NLIModel
    from groundjudge.checker.profile import read_thresholds_model, write_model_fit
    from groundjudge.models import LocalThresholds

    model = tmp_path / "model"
    shutil.copytree(tiny, model)
    both = {
        "nli": LocalThresholds(t_support=0.5, t_contradict=None),
        "cascade": LocalThresholds(t_support=0.9, t_contradict=None),
    }
    write_model_fit(model, both, {"tool": "groundjudge tune"}, None, model="0123456789abcdef/nli")
    args = [rows, "--nli-model", model, "--cache-dir", tmp_path / "c", "--save-to-model", "--no-head"]
    result = calibrate(*args, "--target", "0.6")
    assert "skipped" not in flat(result.stderr), result.stderr
    assert stdout_json(result)["n"] == len(labelled_rows())
    assert read_thresholds_model(model) == NLIModel(str(model)).identity


def _a_head(tmp_path: Path, tiny: Path, rows: Path) -> dict[str, Any]:
    config = tmp_path / "first.json"
    calibrate(rows, "--out", config, "--nli-model", tiny, "--cache-dir", tmp_path / "c")
    head: dict[str, Any] = json.loads(config.read_text())["head"]
    return head


def test_reviews_teach_the_head(tmp_path: Path, tiny: Path) -> None:
    gold = labelled_rows()
    unlabelled = write_jsonl(tmp_path / "in.jsonl", [{k: v for k, v in r.items() if k != "label"} for r in gold])
    out = tmp_path / "out.jsonl"
    cache = tmp_path / "c"
    score = ["score", str(unlabelled), "--out", str(out), "--nli-model", str(tiny), "--cache-dir", str(cache)]
    scored = runner.invoke(app, [*score, "--no-progress"])
    assert scored.exit_code in (0, 1), scored.output
    label = {r["id"]: r["label"] for r in gold}
    reviews = tmp_path / "reviews.jsonl"
    write_jsonl(
        reviews,
        [
            {
                "id": r["id"],
                "claim_id": r["claims"][0]["claim"]["id"],
                "claim": r["claims"][0]["claim"]["text"],
                "label": label[r["id"]],
                "groundjudge_label": r["claims"][0]["label"],
            }
            for r in lines(out)
        ],
    )
    config = tmp_path / "cfg.json"
    args: list[str | Path] = [out, "--reviews", reviews, "--out", config, "--cache-dir", cache]
    result = calibrate(*args, "--nli-model", tiny)
    head = json.loads(config.read_text())["head"]
    assert head["meta"]["claims"] == 72 and head["meta"]["supported"] == 24  # the reviewers' labels
    assert head["meta"]["reviews"] == str(reviews)
    assert stdout_json(result)["head"]["out_of_fold"]["nli_balanced_accuracy"] > 90
    # the same claims with the same labels, scored here from gold rows: the same head (same sources, same features)
    rows = write_jsonl(tmp_path / "gold.jsonl", gold)
    calibrate(rows, "--out", tmp_path / "gold.json", "--nli-model", tiny, "--cache-dir", cache)
    from_gold = json.loads((tmp_path / "gold.json").read_text())["head"]
    assert head["coef"] == pytest.approx(from_gold["coef"], rel=1e-6, abs=1e-9)
    assert head["mean"] == pytest.approx(from_gold["mean"]) and head["thresholds"] == from_gold["thresholds"]

    # scores from one model, a config naming another (issue 18: it wrote model A's thresholds into a config naming
    # B, and with --save-to-model into B's folder, deleting B's head): refused, nothing written
    from groundjudge.testing import tiny_nli_model

    other = tiny_nli_model(tmp_path / "other", SHARED_MODEL, seed=1)
    before = config.read_text()
    for extra in ([], ["--no-head"], ["--save-to-model"]):
        result = runner.invoke(app, ["calibrate", *map(str, args), "--nli-model", str(other), *extra])
        assert result.exit_code == 2, result.output
        assert "were scored by NLI model" in flat(result.stderr) and "pass that model as --nli-model" in flat(
            result.stderr
        )
    assert config.read_text() == before and not (other / MODEL_PROFILE_FILE).exists()
    # the thresholds need the model that scored the claims: one that cannot be loaded is a usage error
    for extra in ([], ["--no-head"]):
        missing = runner.invoke(app, ["calibrate", *map(str, args), "--nli-model", "no/such-hub-model", *extra])
        assert missing.exit_code == 2 and "scored the claims" in flat(missing.stderr), missing.output


# -- the judge's verdicts teach calibrate (no gold label, no review) ------------------------------------------------


class Judge:
    """A scripted judge that answers each claim from its gold label, quoting the source's first statement for
    SUPPORTED / CONTRADICTED; ``fake`` claims get a SUPPORTED with a quote found nowhere (downgraded, flagged
    unverified_quote), ``skip`` claims no verdict (ERROR after the re-asks), ``bare`` claims a CONTRADICTED without a
    quote."""

    def __init__(
        self,
        gold: dict[str, str],
        fake: frozenset[str] = frozenset(),
        skip: frozenset[str] = frozenset(),
        bare: frozenset[str] = frozenset(),
    ) -> None:
        self.gold, self.fake, self.skip, self.bare = gold, fake, skip, bare

    def __call__(self, req: RecordedRequest) -> Reply:
        evidence = fenced_block(req, "SOURCE 1").split(" beside")[0]  # "The X municipal museum opened in YEAR"
        verdicts = []
        for cid, text in claims_in(req).items():
            label = self.gold[text]
            quotes = [{"source": 1, "text": evidence}] if label != "UNSUPPORTED" else []
            if text in self.skip:
                continue
            if text in self.fake:
                label, quotes = "SUPPORTED", [{"source": 1, "text": "the museum was carried across the river"}]
            if text in self.bare:
                label, quotes = "CONTRADICTED", []
            verdicts.append({"claim_id": cid, "verdict": label, "reason": "scripted", "quotes": quotes})
        return Reply.json({"verdicts": verdicts})


def answer_rows(gold: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    """One unlabelled answer a place (its three claims in a row) and the claims an extractor finds in each answer."""
    by_place: dict[str, list[dict[str, Any]]] = {}
    for r in gold:
        by_place.setdefault(r["id"].rsplit("-", 1)[0], []).append(r)
    rows, claims = [], {}
    for place, group in by_place.items():
        answer = " ".join(r["claim"] for r in group)
        rows.append({"id": place, "contexts": group[0]["contexts"], "answer": answer})
        claims[answer] = [r["claim"] for r in group]
    return rows, claims


def extractor(claims: dict[str, list[str]]) -> Any:
    def extract(req: RecordedRequest) -> Reply:
        answer = fenced_block(req, "ANSWER")
        return Reply.json({"claims": [{"text": c, "source": c} for c in claims[answer]]})

    return extract


def score_with_judge(
    rows: list[dict[str, Any]], out: Path, tiny: Path, cache: Path, script: Any, *extra: str
) -> ScriptedLLMServer:
    src = write_jsonl(out.with_suffix(".in.jsonl"), rows)
    with ScriptedLLMServer(script) as server:
        args = ["score", str(src), "--out", str(out), "--nli-model", str(tiny), "--cache-dir", str(cache)]
        args += ["--no-progress", "--llm", "openai/gpt-4o-mini", "--base-url", server.openai_base_url, "--no-qa"]
        result = runner.invoke(app, [*args, *extra])
    assert result.exit_code in (0, 1), result.output
    return server


def test_judge_verdicts_teach_calibrate_when_there_is_no_gold_label(tmp_path: Path, tiny: Path) -> None:
    gold = labelled_rows()  # 72 claims, 24 a label
    label = {r["claim"]: r["label"] for r in gold}
    texts = [r["claim"] for r in gold]
    fake = frozenset(t for t in texts[:9] if label[t] == "SUPPORTED")  # 3 SUPPORTED claims quote nothing real
    skip = frozenset(t for t in texts[9:18] if label[t] == "UNSUPPORTED")  # 3 claims the judge never decides
    bare = frozenset(t for t in texts[18:21] if label[t] == "CONTRADICTED")  # 1 CONTRADICTED with no quote
    rows, claims = answer_rows(gold)
    # and a claim too long for the model: judged, but with no NLI scores for the head to read
    rambling = "The museum " + "and its many lovely old halls " * 30 + "is open."
    rows.append({"id": "rambling", "contexts": gold[0]["contexts"], "answer": rambling})
    claims[rambling], label[rambling] = [rambling], "UNSUPPORTED"
    out, cache = tmp_path / "llm.jsonl", tmp_path / "c"
    judge = Judge(label, fake, skip, bare)
    score_with_judge(rows, out, tiny, cache, route({"claims": extractor(claims), "judge": judge}), "--mode", "llm")
    scored = lines(out)
    assert len(scored) == 25 and all(r["mode"] == "llm" and len(r["claims"]) == 3 for r in scored[:24])
    assert all(c["route"] == "judge" and c["nli"]["passages_scored"] for r in scored[:24] for c in r["claims"])
    assert sum(c["label"] == "ERROR" for r in scored for c in r["claims"]) == 3
    too_long = scored[24]["claims"][0]
    assert too_long["label"] == "UNSUPPORTED" and too_long["route"] == "judge" and too_long["nli"]["error"]

    config = tmp_path / "cfg.json"
    result = calibrate(out, "--out", config, "--nli-model", tiny, "--cache-dir", cache)
    used = [t for t in texts if t not in fake | skip | bare]  # 65 claims, 21 SUPPORTED
    head = json.loads(config.read_text())["head"]
    assert head["meta"]["claims"] == len(used) == 65 and head["meta"]["supported"] == 21
    assert head["meta"]["labels"] == {"judge": 65} and head["meta"]["source"] == str(out)
    fit = stdout_json(result)
    assert fit["n"] == 65 and fit["labels"] == {"judge": 65} and fit["head"]["claims"] == 65
    assert fit["head"]["out_of_fold"]["nli_balanced_accuracy"] > 90  # each claim read against its own answer's sources
    said = flat(result.stderr)
    assert (
        "No gold labels: 65 judge verdicts used as labels; left out: 3 judge errors, 3 with an unverified quote, 1 "
        in said
    )
    assert "SUPPORTED / CONTRADICTED without a quote, 1 without NLI scores." in said and "decided locally" not in said
    assert "cascade mode" not in said  # --mode llm: the judge saw every claim
    # the same claims with the judge's labels (here, the gold ones) and their answers' sources, from claim rows:
    # the same head, so every claim of every answer was read with its own label and sources
    same = write_jsonl(tmp_path / "gold.jsonl", [r for r in gold if r["claim"] in used])
    calibrate(same, "--out", tmp_path / "gold.json", "--nli-model", tiny, "--cache-dir", cache)
    from_gold = json.loads((tmp_path / "gold.json").read_text())["head"]
    assert head["coef"] == pytest.approx(from_gold["coef"], rel=1e-6, abs=1e-9)
    assert head["thresholds"] == from_gold["thresholds"]

    # reviews win on their claims, the judge's verdicts teach the rest: a reviewed claim the judge left undecided
    # is used, a judged one the reviewer overrules takes the reviewer's label
    by_text = {c["claim"]["text"]: (r, c) for r in scored for c in r["claims"]}
    overruled = next(t for t in used if label[t] == "SUPPORTED")
    decisions = [(sorted(skip)[0], "UNSUPPORTED"), (overruled, "UNSUPPORTED")]
    reviews = write_jsonl(
        tmp_path / "reviews.jsonl",
        [
            {"id": by_text[t][0]["id"], "claim_id": by_text[t][1]["claim"]["id"], "claim": t, "label": lab}
            for t, lab in decisions
        ],
    )
    result = calibrate(out, "--reviews", reviews, "--out", config, "--nli-model", tiny, "--cache-dir", cache)
    head = json.loads(config.read_text())["head"]
    assert head["meta"]["labels"] == {"reviews": 2, "judge": 64} and head["meta"]["claims"] == 66
    assert head["meta"]["supported"] == 20
    assert "64 judge verdicts used as labels (for the claims no reviewer decided); left out: 2 judge errors" in flat(
        result.stderr
    )


def test_cascade_verdicts_teach_with_a_note_and_nothing_judged_is_a_clear_failure(tmp_path: Path, tiny: Path) -> None:
    gold = labelled_rows()
    label = {r["claim"]: r["label"] for r in gold}
    unlabelled = [{k: v for k, v in r.items() if k != "label"} for r in gold]  # 72 claim rows
    out, cache = tmp_path / "cascade.jsonl", tmp_path / "c"
    # a cascade that escalates what the random model does not find entailed past 0.5 (and decides the rest)
    thresholds = write_jsonl(tmp_path / "t.json", [{"t_support": 0.5, "t_contradict": None, "t_unsupported": 0.01}])
    server = score_with_judge(
        unlabelled, out, tiny, cache, route({"judge": Judge(label)}), "--mode", "cascade", "--config", str(thresholds)
    )
    scored = lines(out)
    judged = [c for r in scored for c in r["claims"] if c["route"] == "judge"]
    local = sum(c["route"] == "nli" for r in scored for c in r["claims"])
    assert judged and local and len(judged) + local == 72 and len(server.requests) == len(judged)
    result = calibrate(out, "--out", tmp_path / "cfg.json", "--nli-model", tiny, "--cache-dir", cache, "--no-head")
    said = flat(result.stderr)
    assert f"No gold labels: {len(judged)} judge verdicts used as labels; left out: {local} decided locally" in said
    assert "scored in cascade mode: only the escalated claims were judged" in said and "--mode llm" in said
    assert stdout_json(result)["labels"] == {"judge": len(judged)} and stdout_json(result)["n"] == len(judged)

    # no gold label, no review, nothing the judge decided (nli mode): the clear failure, saying what was looked for
    nli_out = tmp_path / "nli.jsonl"
    src = write_jsonl(tmp_path / "nli.in.jsonl", unlabelled[:6])
    score = ["score", str(src), "--out", str(nli_out), "--nli-model", str(tiny), "--cache-dir", str(cache)]
    assert runner.invoke(app, [*score, "--no-progress"]).exit_code in (0, 1)
    failed = runner.invoke(app, ["calibrate", str(nli_out), "--nli-model", str(tiny), "--out", str(tmp_path / "x")])
    assert failed.exit_code == 2, failed.output
    said = flat(failed.stderr)
    assert "left out: 6 decided locally" in said and "no answer carries a gold label" in said
    assert "decided by the judge with verified quotes" in said and "cascade mode" not in said


FILLER = " ".join(
    f"Visitors in season {k} bought tickets at the north gate and walked the long gallery." for k in range(12)
)


def test_the_head_learns_from_claims_scored_as_it_will_see_them(tmp_path: Path, tiny: Path) -> None:
    """calibrate's own NLI pass stopped at the first passage past a stored t_support (none is in force there now);
    under a head every selected passage is scored, so the head is fitted on claims scored that way (else its features
    come from fewer passages). The passages are scored in other batches than here: the last digits may differ."""
    from groundjudge.checker.nli import NLIModel
    from groundjudge.checker.profile import write_model_profile
    from groundjudge.learn.calibrate import build_head
    from groundjudge.learn.tune import TuneExample, TuneSettings, score_claims
    from groundjudge.models import LocalThresholds

    model = tmp_path / "model"
    shutil.copytree(tiny, model)
    # an nli profile that stops early: the first passage always passes
    write_model_profile(model, {"nli": LocalThresholds(t_support=0.0001, t_contradict=None)})
    gold = [{**r, "contexts": [FILLER + " " + r["contexts"][0] + " " + FILLER]} for r in labelled_rows()]
    data = write_jsonl(tmp_path / "long.jsonl", gold)
    config = tmp_path / "cfg.json"
    calibrate(data, "--out", config, "--target", "0.9", "--nli-model", model, "--cache-dir", tmp_path / "c")
    written = json.loads(config.read_text())["head"]
    nli = NLIModel(str(model))
    examples = [TuneExample(r["id"], r["claim"], r["contexts"], r["label"], "gold") for r in gold]
    full = score_claims(nli, examples, TuneSettings())
    assert all(x.passages_scored >= 2 for x in full), {x.passages_scored for x in full}  # more than one passage each
    expected = build_head(
        [r["claim"] for r in gold], [r["contexts"] for r in gold], full, [r["label"] for r in gold], nli.identity
    )
    close = {"rel": 1e-4, "abs": 1e-6}  # torch's sums depend on the batch
    assert written["coef"] == pytest.approx(expected.coef, **close)
    assert written["mean"] == pytest.approx(expected.mean, **close)


def test_no_unsupported_and_min_decided_bind_the_head_too(tmp_path: Path, tiny: Path, rows: Path) -> None:
    config = tmp_path / "cfg.json"
    args = ["--out", config, "--target", "0.9", "--nli-model", tiny, "--cache-dir", tmp_path / "c"]
    calibrate(rows, *args, "--no-unsupported")
    head = json.loads(config.read_text())["head"]
    assert head["thresholds"]["cascade"]["t_unsupported"] is None  # the user declined local UNSUPPORTED
    calibrate(rows, *args, "--min-decided", "70")
    head = json.loads(config.read_text())["head"]
    assert head["thresholds"]["cascade"]["t_support"] is None  # 24 SUPPORTED claims cannot make 70 decisions


def test_claims_the_model_could_not_score_teach_no_threshold(tmp_path: Path, tiny: Path, rows: Path) -> None:
    """The pipeline escalates a claim it could not score; counted as a local UNSUPPORTED at entailment 0 it would
    flatter the fitted precision and loosen t_unsupported."""
    overlong = [
        {"id": f"long-{i}", "contexts": ["A short page."], "claim": " ".join(["word"] * 400), "label": "UNSUPPORTED"}
        for i in range(5)
    ]
    data = write_jsonl(tmp_path / "mixed.jsonl", labelled_rows() + overlong)
    result = calibrate(data, "--out", tmp_path / "cfg.json", "--nli-model", tiny, "--cache-dir", tmp_path / "c")
    assert stdout_json(result)["n"] == 72  # the 5 unscored claims are left out of the raw fit


def test_calibrate_reads_its_rows_as_score_does(tmp_path: Path, tiny: Path) -> None:
    """Issue 17: calibrate read its input with a bare json.loads, so a byte order mark, one damaged line or a CSV
    (all of which 'score' reads) ended in a traceback. It reads through the one reader now: the same fit from a
    CSV as from JSONL, and a damaged line is named and skipped."""
    import csv

    plain = write_jsonl(tmp_path / "plain.jsonl", labelled_rows(8))
    table = tmp_path / "rows.csv"
    with table.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=["id", "contexts", "claim", "label"])
        writer.writeheader()
        for r in labelled_rows(8):
            writer.writerow({**r, "contexts": json.dumps(r["contexts"])})
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes().replace(b"\n", b"\n{not json\n", 1))
    common = ["--nli-model", tiny, "--cache-dir", tmp_path / "c", "--no-head", "--target", "0.9"]
    fits = {}
    for name, path in (("plain", plain), ("csv", table), ("damaged", damaged)):
        result = runner.invoke(
            app, ["calibrate", str(path), "--out", str(tmp_path / f"{name}.json"), *map(str, common)]
        )
        assert result.exit_code == 0, result.output
        fits[name] = {k: v for k, v in stdout_json(result).items() if k != "config"}
        if name == "damaged":
            assert "skipped: row 2: invalid JSON" in flat(result.stderr)
    assert fits["plain"] == fits["csv"] == fits["damaged"] and fits["plain"]["n"] == 24


def test_answer_labels_teach_claims_by_a_rule_that_holds(tmp_path: Path, tiny: Path) -> None:
    """Issue 18: calibrate taught each gold-labelled answer's label to its first sentence only, silently. An answer
    labelled SUPPORTED teaches each of its claims; one labelled otherwise teaches its claim only when it has one,
    and the answers it cannot learn from are said."""
    rows = []
    for i, city in enumerate(CITIES[:8]):
        context = f"The {city} museum opened in {1850 + i}. It has {20 + i} rooms. It closes on Mondays."
        good = f"The {city} museum opened in {1850 + i}. It has {20 + i} rooms. It closes on Mondays."
        rows.append({"id": f"{city}-good", "contexts": [context], "answer": good, "label": "SUPPORTED"})
        rows.append(
            {
                "id": f"{city}-two",
                "contexts": [context],
                "answer": good.replace("rooms", "cats"),
                "label": "UNSUPPORTED",
            }
        )
        rows.append(
            {
                "id": f"{city}-one",
                "contexts": [context],
                "answer": f"The {city} museum sells cats.",
                "label": "UNSUPPORTED",
            }
        )
    data = write_jsonl(tmp_path / "answers.jsonl", rows)
    result = calibrate(
        data, "--out", tmp_path / "c.json", "--nli-model", tiny, "--cache-dir", tmp_path / "c", "--no-head"
    )
    fit = stdout_json(result)
    assert fit["labels"] == {"gold": 8 * 3 + 8}  # three claims of each SUPPORTED answer, the one-claim answers
    assert "8 answer(s) labelled UNSUPPORTED or CONTRADICTED have several claims and taught nothing" in flat(
        result.stderr
    )


@pytest.mark.parametrize(("field", "value"), [("entailment", 3.0), ("contradiction", -0.5), ("supported", 1.5)])
def test_an_nli_probability_no_run_writes_is_not_read(tmp_path: Path, tiny: Path, field: str, value: float) -> None:
    """A report whose claim carries an NLI probability outside [0, 1] (a hand edit, another tool) and names no model
    (so calibrate fits on its stored scores): calibrate stopped with a traceback (a pydantic error from the
    thresholds fitted past 1), and tune read it. Refused by the report readers' rule, naming the line."""
    from groundjudge.learn.tune import load_examples

    src = write_jsonl(tmp_path / "rows.jsonl", labelled_rows(4))
    out = tmp_path / "scored.jsonl"
    score = ["score", str(src), "--out", str(out), "--nli-model", str(tiny), "--cache-dir", str(tmp_path / "c")]
    assert runner.invoke(app, [*score, "--no-progress"]).exit_code in (0, 1)
    rows = lines(out)
    for r in rows:
        r["versions"] = {}  # no model named: calibrate keeps the stored scores
    rows[2]["claims"][0]["nli"][field] = value
    out.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    result = runner.invoke(app, ["calibrate", str(out), "--no-head", "--min-decided", "1", "--nli-model", str(tiny)])
    assert result.exit_code == 2, result.output
    said = flat(result.stderr)
    assert "line 3" in said and f"claims[0].nli.{field}" in said and "outside [0, 1]" in said
    with pytest.raises(InputError, match=rf"claims\[0\]\.nli\.{field}"):
        load_examples([out], None)
