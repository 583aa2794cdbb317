"""Thresholds travel with the model: a profile file beside the weights decides, and a broken one is an error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from groundjudge.checker.profile import (
    GENERIC_PROFILE,
    MODEL_PROFILE_FILE,
    profile_for,
    read_model_profile,
    write_model_profile,
)
from groundjudge.config import Config
from groundjudge.errors import ConfigError
from groundjudge.models import LocalThresholds


def test_profile_beside_the_weights_decides(tmp_path: Path) -> None:
    tuned = LocalThresholds(t_support=0.81, t_contradict=0.93, t_unsupported=0.12)
    write_model_profile(tmp_path, {"cascade": tuned}, {"target": 0.9})
    assert read_model_profile(tmp_path) == {"cascade": tuned}
    profile = profile_for(str(tmp_path))
    assert profile["cascade"] == tuned
    assert profile["nli"] == GENERIC_PROFILE["nli"]  # a mode the file lacks comes from the next source
    assert Config().local_thresholds("cascade", str(tmp_path)) == tuned
    # explicit values still win over the stored ones
    assert Config(t_support=0.7).local_thresholds("cascade", str(tmp_path)).t_support == 0.7


def test_a_model_without_a_profile_keeps_the_known_thresholds(tmp_path: Path) -> None:
    assert read_model_profile(tmp_path) is None
    assert profile_for(str(tmp_path)) == GENERIC_PROFILE


@pytest.mark.parametrize(
    "content",
    [
        "not json",
        json.dumps({"format": 99, "thresholds": {}}),
        json.dumps({"format": 1, "thresholds": {"nli": 3}}),
        # a threshold no probability can be on the far side of: t_support -0.5 called every claim SUPPORTED
        json.dumps({"format": 1, "thresholds": {"nli": {"t_support": -0.5, "t_contradict": None}}}),
        '{"format": 1, "thresholds": {"cascade": {"t_support": 0.9, "t_contradict": null, "t_unsupported": 2}}}',
        '{"format": 1, "thresholds": {"nli": {"t_support": NaN, "t_contradict": null}}}',
    ],
)
def test_a_broken_profile_is_an_error_not_silently_generic(tmp_path: Path, content: str) -> None:
    (tmp_path / MODEL_PROFILE_FILE).write_text(content)
    with pytest.raises(ConfigError, match=MODEL_PROFILE_FILE):
        profile_for(str(tmp_path))


def test_profile_modes_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        write_model_profile(tmp_path, {"judge": LocalThresholds(t_support=0.5, t_contradict=0.5)})


def test_writing_thresholds_keeps_how_the_model_is_run(tmp_path: Path) -> None:
    (tmp_path / MODEL_PROFILE_FILE).write_text(json.dumps({"format": 1, "kind": "binary", "supported_label": 1}))
    assert read_model_profile(tmp_path) is None  # a file that only says how to run the model has no thresholds
    write_model_profile(tmp_path, {"nli": LocalThresholds(t_support=0.6, t_contradict=None)})
    data = json.loads((tmp_path / MODEL_PROFILE_FILE).read_text())
    assert data["kind"] == "binary" and data["supported_label"] == 1
    assert read_model_profile(tmp_path) == {"nli": LocalThresholds(t_support=0.6, t_contradict=None)}


def test_calibrate_can_store_its_thresholds_beside_the_model(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from groundjudge.cli import app
    from groundjudge.testing import tiny_nli_model
    from tests.conftest import FIXTURES, SHARED_MODEL

    model = tiny_nli_model(tmp_path / "model", SHARED_MODEL)
    rows = [json.loads(x) for x in (FIXTURES / "samples.jsonl").read_text().splitlines() if x.strip()]
    claims = [r for r in rows if "claim" in r] * 5
    data = tmp_path / "labelled.jsonl"
    data.write_text("".join(json.dumps({**r, "id": f"{r['id']}-{i}"}) + "\n" for i, r in enumerate(claims)))
    args = ["calibrate", str(data), "--out", str(tmp_path / "cfg.json"), "--target", "0.6", "--min-decided", "2"]
    args += ["--nli-model", str(model), "--cache-dir", str(tmp_path / "c"), "--save-to-model"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    fit = json.loads(next(x for x in result.output.splitlines() if x.startswith("{")))
    stored = profile_for(str(model))["cascade"]  # what every later run with this model uses, with no flags
    assert (stored.t_support, stored.t_contradict, stored.t_unsupported) == (
        fit["t_support"],
        fit["t_contradict"],
        fit["t_unsupported"],
    )
    meta = json.loads((model / MODEL_PROFILE_FILE).read_text())["meta"]
    assert meta["n"] == 15 and meta["target"] == 0.6
    # beside the in-sample numbers, what to expect of the stored thresholds on new rows (cross-fitted)
    assert meta["measured"] == "in-sample" and meta["expected"]["measured"] == "cross-fitted"
    # three claim texts (each five times) can be halved three ways: three distinct cuts, not ten with copies
    assert meta["expected"]["n"] == 15 and meta["expected"]["cuts"] == 3
    missing = CliRunner().invoke(app, [*args[:-4], "--nli-model", "no/such-hub-model", "--save-to-model"])
    assert missing.exit_code == 2


def test_storing_thresholds_keeps_the_nli_cache(tmp_path: Path) -> None:
    from groundjudge.checker.nli import NLIModel
    from groundjudge.testing import tiny_nli_model
    from tests.conftest import SHARED_MODEL

    model = tiny_nli_model(tmp_path / "model", SHARED_MODEL)
    before = NLIModel(str(model)).fingerprint
    write_model_profile(model, {"cascade": LocalThresholds(t_support=0.9, t_contradict=None)})
    assert NLIModel(str(model)).fingerprint == before  # thresholds change no probability: the cache stays valid


def test_configs_that_could_score_nothing_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="weights"):
        Config.make(weights={"claims": 0, "nli": 0, "qa": 0})  # every answer would be ERROR, silently
    listed = tmp_path / "cfg.json"
    listed.write_text("[1, 2]")
    with pytest.raises(ConfigError, match="JSON object"):
        Config.load(listed)


def test_a_checker_declaration_reads_back_as_written(tmp_path: Path) -> None:
    """``write_checker_declaration`` stores and ``read_checker_profile`` reads the same keys
    (``DECLARATION_KEYS``), keeping the rest of the file: a tuned model runs as its base declared."""
    from groundjudge.checker.nli import read_checker_profile
    from groundjudge.checker.profile import DECLARATION_KEYS, write_checker_declaration, write_model_profile

    declared = {"kind": "binary", "supported_label": 0, "template": "premise: {premise} claim: {claim}"}
    assert set(declared) == set(DECLARATION_KEYS)
    write_model_profile(tmp_path, {"nli": LocalThresholds(t_support=0.7, t_contradict=None, t_unsupported=None)})
    write_checker_declaration(tmp_path, declared)
    assert read_checker_profile(tmp_path) == declared
    write_checker_declaration(tmp_path, {"kind": "nli"})  # the others removed
    assert read_checker_profile(tmp_path) == {"kind": "nli"}
    assert read_model_profile(tmp_path)["nli"].t_support == 0.7  # the thresholds kept


def test_a_calibration_is_stored_whole_or_not_at_all(tmp_path: Path) -> None:
    """calibrate --save-to-model stored the thresholds, then the head: a head JSON cannot hold (NaN) raised after the
    first write, and the folder kept the new thresholds beside the old head (which overrides them)."""
    from groundjudge.checker.profile import write_model_fit

    def stored() -> dict:
        return json.loads((tmp_path / MODEL_PROFILE_FILE).read_text())

    old_head = {"coef": [1.0], "intercept": 0.0}
    old = LocalThresholds(t_support=0.8, t_contradict=None)
    write_model_fit(tmp_path, {"cascade": old}, {"n": 10}, old_head, model="m@1/nli")
    before = (tmp_path / MODEL_PROFILE_FILE).read_text()
    new = LocalThresholds(t_support=0.6, t_contradict=0.9)
    with pytest.raises(ValueError):
        write_model_fit(tmp_path, {"cascade": new}, {"n": 20}, {"coef": [float("nan")], "intercept": 0.0}, model=None)
    assert (tmp_path / MODEL_PROFILE_FILE).read_text() == before
    assert read_model_profile(tmp_path) == {"cascade": old} and stored()["head"] == old_head
    write_model_fit(tmp_path, {"cascade": new}, {"n": 20}, None, model=None)  # no head: the one stored before goes
    assert read_model_profile(tmp_path) == {"cascade": new} and "head" not in stored()
    assert stored()["meta"] == {"n": 20}


def test_calibrate_without_a_head_replaces_a_broken_head_stored_beside_the_model(tmp_path: Path) -> None:
    """calibrate --no-head --save-to-model removes the head stored beside the weights (it would override the new
    thresholds); it read that head first, to say it was removed, and a head that did not parse stopped the command
    (exit 2, nothing stored): the one command that replaces it could not."""
    from typer.testing import CliRunner

    from groundjudge.checker.profile import read_model_head
    from groundjudge.cli import app
    from groundjudge.testing import tiny_nli_model
    from tests.conftest import FIXTURES, SHARED_MODEL

    model = tiny_nli_model(tmp_path / "model", SHARED_MODEL)
    (model / MODEL_PROFILE_FILE).write_text(json.dumps({"format": 1, "kind": "nli", "head": {"coef": "broken"}}))
    rows = [json.loads(x) for x in (FIXTURES / "samples.jsonl").read_text().splitlines() if x.strip()]
    claims = [r for r in rows if "claim" in r] * 5
    data = tmp_path / "labelled.jsonl"
    data.write_text("".join(json.dumps({**r, "id": f"{r['id']}-{i}"}) + "\n" for i, r in enumerate(claims)))
    args = ["calibrate", str(data), "--target", "0.6", "--min-decided", "2", "--no-head"]
    args += ["--nli-model", str(model), "--cache-dir", str(tmp_path / "c"), "--save-to-model"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "removed the verdict head stored there" in " ".join(result.stderr.split())
    assert read_model_head(model) is None and read_model_profile(model) is not None
    assert json.loads((model / MODEL_PROFILE_FILE).read_text())["kind"] == "nli"  # how to run it: kept
