"""What the command line says of its own accord: which local model an nli-mode run trusts and what to expect of it,
and how quiet third-party libraries (transformers' loading bars, Ray's INFO lines) are unless ``-v``.

Only the command line decides this: a Python user who did not ask keeps the libraries' own behaviour.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# Balanced accuracy measured in nli mode with benchmarks/accuracy.py (the table of docs/benchmarks/accuracy.md), by the
# model's name (a hub id or a folder's name, the key checker.profile.PROFILES uses): what an nli-mode run can promise.
MEASURED: dict[str, str] = {
    "gj-nli-minilm-l6": "balanced accuracy 68.3 on Factcheck-GPT claims, 64.8 on WiCE claims against web pages, "
    "60.0 on FaithBench summaries (50 is chance)",
}
SMALL_PARAMETERS = 100_000_000  # below this a cross-encoder is "small" (DeBERTa-v3-base, the default, has 184M)
STRONGER = (
    "for a stronger local checker pass --nli-model cross-encoder/nli-deberta-v3-base (or a MiniCheck model: the "
    'manual\'s "Choose and calibrate the local checker"), or let an LLM judge the claims it cannot decide: '
    "--llm openai/gpt-4o-mini"
)


def model_key(name: str) -> str:
    """A model's name as :data:`MEASURED` (and the threshold profiles) know it: a hub id, or a folder's own name."""
    return name.rstrip("/\\").replace("\\", "/").split("/")[-1]


def local_model_note(name: str, kind: str | None = None, parameters: int | None = None) -> str:
    """One sentence for an nli-mode run: which local model decides every claim, whether it is small, what accuracy
    it was measured at, and how to get a stronger check."""
    key = model_key(name)
    where = f" ({name})" if key != name else ""
    kinds = {
        "nli": "3-way NLI",
        "binary": "binary grounding classifier",
        "seq2seq": "seq2seq checker",
        "token": "token classifier",
    }
    about = [kinds.get(kind, kind)] if kind else []
    about += [f"{parameters / 1e6:.1f}M parameters"] if parameters else []
    what = "".join(f", {x}" for x in about)
    note = f"nli mode: every claim is decided by the local model {key}{where}{what}, with no LLM judge"
    measured = MEASURED.get(key)
    small = parameters is not None and parameters < SMALL_PARAMETERS
    if measured:
        note += f". It is {'a small model' if small or parameters is None else 'a model'} measured at {measured}"
        note += ": expect supported paraphrases called UNSUPPORTED"
    elif small:
        note += '. It is a small model with no accuracy measured here (README, "Accuracy")'
    else:
        return note + "."
    return f"{note}; {STRONGER}."


def model_parameters(model: Any) -> int | None:
    """The number of parameters of a loaded torch model, or None."""
    try:
        return int(sum(p.numel() for p in model.parameters()))
    except (AttributeError, TypeError):
        return None


# transformers (through huggingface_hub) reads this when it is imported: the CLI imports it later, on first use
_HF_BARS = "HF_HUB_DISABLE_PROGRESS_BARS"
# Ray reads these when it is imported and when Ray Data configures its logger; its worker processes inherit them:
# "warning" drops the INFO lines ("Started a local Ray instance", "Starting execution of Dataset ...")
_RAY_LEVEL = "RAY_LOGGER_LEVEL"
_RAY_DATA_LEVEL = "RAY_DATA_LOG_LEVEL"


@contextmanager
def third_party_output(verbose: bool) -> Iterator[None]:
    """Unless ``verbose``: no transformers or Hugging Face hub progress bars ("Loading weights: 100%|...") and no Ray
    INFO lines, for the duration of one command, unless the environment already says otherwise
    (HF_HUB_DISABLE_PROGRESS_BARS, RAY_LOGGER_LEVEL, RAY_DATA_LOG_LEVEL); the libraries' switches are put back when
    it ends (the process may be a test)."""
    if verbose:
        yield
        return
    saved = {key: os.environ.get(key) for key in (_HF_BARS, _RAY_LEVEL, _RAY_DATA_LEVEL)}
    quiet = {_HF_BARS: "1", _RAY_LEVEL: "warning", _RAY_DATA_LEVEL: "WARNING"}
    for key, level in quiet.items():  # read when the library is imported (later)
        if saved[key] is None:
            os.environ[key] = level
    # already imported (a test, a second command in one process): their switches, not the variable
    hub: Any = sys.modules.get("huggingface_hub.utils")
    hf_logging: Any = sys.modules.get("transformers.utils.logging")
    quiet_bars = saved[_HF_BARS] is None
    hub_was_on = quiet_bars and hub is not None and not hub.are_progress_bars_disabled()
    bars_were_on = quiet_bars and hf_logging is not None and hf_logging.is_progress_bar_enabled()
    if hub_was_on:
        hub.disable_progress_bars()
    if bars_were_on:
        hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        for key, before in saved.items():
            if before is None:
                os.environ.pop(key, None)
        if hub_was_on:
            hub.enable_progress_bars()
        imported_here = hf_logging is None and "transformers.utils.logging" in sys.modules
        if bars_were_on or (quiet_bars and imported_here):
            with warnings.catch_warnings():  # a hub imported under the variable refuses for good, with a warning
                warnings.filterwarnings("ignore", "Cannot enable progress bars", UserWarning)
                sys.modules["transformers.utils.logging"].enable_progress_bar()
