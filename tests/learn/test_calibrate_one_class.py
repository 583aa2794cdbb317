"""Issue 29: ``calibrate`` on labels of one class. On a file whose labels were all SUPPORTED it saved t_support 0.224
and reported "precision 1.000", measured on no negative example: with that config 79 of 120 truly unsupported claims
of the same file became SUPPORTED locally. A threshold's precision cannot be measured without both kinds of claim:
calibrate refuses (as tune does) and stores nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from groundjudge.cli import app
from groundjudge.errors import InputError
from groundjudge.learn.calibrate import fit_thresholds


@pytest.mark.parametrize("label", [True, False])
def test_fit_thresholds_refuses_labels_of_one_class(label: bool) -> None:
    ent = [i / 40 for i in range(40)]
    with pytest.raises(InputError, match="cannot be measured"):
        fit_thresholds(ent, [0.0] * 40, [label] * 40, target=0.9, min_decided=3)
    fit = fit_thresholds(ent, [0.0] * 40, [e > 0.5 for e in ent], target=0.9, min_decided=3)  # both kinds: fitted
    assert fit.t_support is not None and fit.local_precision == 1.0


def test_calibrate_on_all_supported_labels_stores_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shared_nli: Any
) -> None:
    from tests.conftest import SHARED_MODEL

    monkeypatch.setenv("GROUNDJUDGE_NLI_MODEL", str(SHARED_MODEL))
    context = "The Eiffel Tower is in Paris. It was completed in 1889. It is 330 metres tall."
    claims = ["The Eiffel Tower is in Paris.", "It was completed in 1889.", "It is 330 metres tall."]
    data = tmp_path / "labelled.jsonl"
    data.write_text(
        "".join(
            json.dumps({"id": f"r{i}", "contexts": [context], "claim": claims[i % 3], "label": "SUPPORTED"}) + "\n"
            for i in range(15)
        )
    )
    config = tmp_path / "cfg.json"
    args = ["calibrate", str(data), "--out", str(config), "--min-decided", "3", "--cache-dir", str(tmp_path / "c")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code != 0 and "cannot be measured" in result.output, result.output
    assert not config.exists()  # nothing unmeasured is stored
