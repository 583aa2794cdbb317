"""A command that loads the model, run as a user runs it (a fresh process): no third-party noise on its way out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import SHARED_MODEL


def test_a_command_that_loads_the_model_ends_without_a_hub_warning(tmp_path: Path) -> None:
    """Issue 29 §5: the command hid the hub's bars with HF_HUB_DISABLE_PROGRESS_BARS, which huggingface_hub reads
    once, when a command imports it; putting transformers' bars back at the end then asked the hub to enable its
    own, which it refuses for the rest of the process with ``UserWarning: Cannot enable progress bars``."""
    data = tmp_path / "in.jsonl"
    data.write_text(json.dumps({"id": "a", "contexts": ["Paris is in France."], "answer": "Paris is in France."}))
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_DISABLE_PROGRESS_BARS"} | {"HF_HUB_OFFLINE": "1"}
    args = ["score", str(data), "--out", str(tmp_path / "out.jsonl"), "--nli-model", str(SHARED_MODEL)]
    done = subprocess.run(
        [sys.executable, "-m", "groundjudge", *args, "--no-progress", "--cache-dir", str(tmp_path / "c")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Warning" not in done.stderr and "Loading weights" not in done.stderr, done.stderr
