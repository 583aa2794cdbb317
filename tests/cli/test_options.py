"""Each setting declared once: a score option named after a Config field takes its help and default from the field,
and the Config a run gets is the config file's values with the options the user gave on top, whatever they are."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from groundjudge.cli import app
from groundjudge.cli.options import NOT_SETTINGS, describe
from groundjudge.config import PRESETS, Config
from groundjudge.errors import ConfigError

# field -> (the option's words for a value, a strategy of values)
SETTINGS: dict[str, tuple[Any, Any]] = {
    "concurrency": (lambda v: ["--concurrency", str(v)], st.integers(1, 64)),
    "qa": (lambda v: ["--qa" if v else "--no-qa"], st.booleans()),
    "use_head": (lambda v: ["--head" if v else "--no-head"], st.booleans()),
    "max_calls": (lambda v: ["--max-calls", str(v)], st.integers(0, 10_000)),
    "budget_usd": (lambda v: ["--budget", repr(v)], st.floats(0, 100, allow_nan=False)),
    "preset": (lambda v: ["--preset", v], st.sampled_from(list(PRESETS))),
    "nli_kind": (lambda v: ["--nli-kind", v], st.sampled_from(["auto", "nli", "binary", "seq2seq"])),
    "cache_mode": (lambda v: ["--cache-mode", v], st.sampled_from(["use", "off", "refresh"])),
    "rpm": (lambda v: ["--rpm", repr(v)], st.floats(0.5, 1e4, allow_nan=False)),
    "price": (
        lambda v: ["--price", f"{v['input_per_mtok']!r},{v['output_per_mtok']!r}"],
        st.fixed_dictionaries({"input_per_mtok": st.floats(0, 50), "output_per_mtok": st.floats(0, 50)}),
    ),
}


def score_params() -> list[Any]:
    return list(typer.main.get_command(app).commands["score"].params)  # type: ignore[attr-defined]


def test_an_option_named_after_a_field_takes_its_help_and_default_from_it() -> None:
    named = [p for p in score_params() if p.name in Config.model_fields and p.name not in NOT_SETTINGS]
    assert len(named) >= 25  # every setting score takes (it had a table of 25 beside their options)
    for param in named:
        field = Config.model_fields[param.name]
        assert field.description and param.help.startswith(describe(param.name)[:-1]), param.name
        if field.default is not None:
            assert param.default == field.default, param.name


def run_score(tmp_path: Path, file: dict[str, Any], options: list[str]) -> Config:
    """The Config 'score' builds from a config file and options (the run stops right there)."""
    import groundjudge.pipeline as pipeline

    built: list[Config] = []

    def stop(self: Any, config: Config, **_: Any) -> None:
        built.append(config)
        raise ConfigError("stopped after the config")

    data = tmp_path / "in.jsonl"
    data.write_text(json.dumps({"id": "a", "contexts": ["c"], "answer": "a"}) + "\n")
    config = tmp_path / "cfg.json"
    config.write_text(json.dumps(file))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pipeline.Evaluator, "__init__", stop)  # not the module's name: importers would keep a stand-in
        args = ["score", str(data), "--out", str(tmp_path / "o.jsonl"), "--config", str(config), *options]
        result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and "stopped after the config" in result.output, result.output
    return built[0]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_the_config_is_the_files_values_under_the_options_given(tmp_path: Path, data: Any) -> None:
    in_file = data.draw(st.sets(st.sampled_from(list(SETTINGS))), label="in the file")
    on_line = data.draw(st.sets(st.sampled_from(list(SETTINGS))), label="given as options")
    file = {name: data.draw(SETTINGS[name][1], label=f"file {name}") for name in in_file}
    given_values = {name: data.draw(SETTINGS[name][1], label=f"option {name}") for name in on_line}
    options = [word for name, value in given_values.items() for word in SETTINGS[name][0](value)]
    cfg = run_score(tmp_path, file, options)
    for name in SETTINGS:
        want = given_values.get(name, file.get(name, Config.model_fields[name].default))
        assert getattr(cfg, name) == want, (name, file, options)


def test_a_device_the_machine_lacks_is_refused_before_any_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A config file's "device" (score) and tune's --device reached torch unchecked: "gpu" and a CUDA device on a
    machine without one were a RuntimeError or AssertionError traceback, exit 1 (rows failed), after the rows were
    read. Now a name torch does not take is a ConfigError of the field, and a device this machine lacks exit 2."""
    import torch

    from tests.conftest import SHARED_MODEL

    monkeypatch.setenv("GROUNDJUDGE_NLI_MODEL", str(SHARED_MODEL))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConfigError, match="device: must be cpu, mps, cuda or cuda:N"):
        Config.make(device="gpu")
    assert Config.make(device="cuda:1").device == "cuda:1"  # the name only: a Ray worker may have the GPU
    absent = f"cuda:{torch.cuda.device_count()}"  # one past the last GPU: no machine has it
    data = tmp_path / "in.jsonl"
    data.write_text(json.dumps({"id": "a", "contexts": ["It is red."], "answer": "It is red."}) + "\n")
    config = tmp_path / "cfg.json"
    for device, said in (("gpu", "must be cpu, mps, cuda or cuda:N"), (absent, "this machine has")):
        config.write_text(json.dumps({"device": device}))
        out = tmp_path / "o.jsonl"
        result = CliRunner().invoke(app, ["score", str(data), "-o", str(out), "--config", str(config), "--no-progress"])
        assert result.exit_code == 2 and said in result.output and "Traceback" not in result.output, result.output
        assert not out.exists()
        tuned = CliRunner().invoke(
            app, ["tune", str(data), "--base", str(SHARED_MODEL), "-o", str(tmp_path / "t"), "--device", device]
        )
        assert tuned.exit_code == 2 and f"--device {device}: " in tuned.output, tuned.output
        assert not (tmp_path / "t").exists()


@pytest.mark.parametrize(
    ("option", "value", "said"),
    [
        ("--lr", "-1", "--lr -1.0: a number above 0"),  # torch's ValueError traceback, after the base model scored
        ("--lr", "0", "--lr 0.0: a number above 0"),
        ("--lr", "nan", "--lr nan: a number above 0"),  # click's ranges let NaN through
        ("--distill", "-1", "--distill -1.0: a number 0 or more"),  # trained away from the base model, exit 0
        ("--distill", "nan", "--distill nan: a number 0 or more"),
        ("--l2sp", "-0.5", "--l2sp -0.5: a number 0 or more"),
        ("--batch-size", "0", "--batch-size"),  # taken as 'unset': the default batch, silently
        ("--max-length", "2", "--max-length"),  # trained on 2-token pairs, exit 0
    ],
)
def test_tune_refuses_a_bad_number_before_any_work(tmp_path: Path, option: str, value: str, said: str) -> None:
    data = tmp_path / "gold.jsonl"
    data.write_text(json.dumps({"id": "a", "contexts": ["It is red."], "claim": "It is red.", "label": "SUPPORTED"}))
    out = tmp_path / "tuned"
    result = CliRunner().invoke(app, ["tune", str(data), "--base", "no-such-model", "-o", str(out), option, value])
    assert result.exit_code == 2 and said in " ".join(result.output.split()), result.output
    assert "Traceback" not in result.output and not out.exists()
