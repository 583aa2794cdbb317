"""What the command line says of its own accord: which local model an nli-mode run trusts and what to expect of it,
and how quiet third-party libraries (transformers' loading bars, Ray's INFO lines) are unless ``-v``.

Only the command line decides this: a Python user who did not ask keeps the libraries' own behaviour.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# Balanced accuracy measured in nli mode with benchmarks/accuracy.py (README, "Accuracy"), by the model's name (a hub
# id or a folder's name, the key checker.profile.PROFILES uses): what an nli-mode run can promise with it.
MEASURED: dict[str, str] = {
    "gj-nli-minilm-l6": "balanced accuracy 67.6 on Factcheck-GPT claims, 64.8 on WiCE claims against web pages, "
    "61.0 on FaithBench summaries (50 is chance)",
}
SMALL_PARAMETERS = 100_000_000  # below this a cross-encoder is "small" (DeBERTa-v3-base, the default, has 184M)
STRONGER = (
    "for a stronger local checker pass --nli-model cross-encoder/nli-deberta-v3-base (or a MiniCheck model: README, "
    '"Models and modes"), or let an LLM judge the claims it cannot decide: --llm openai/gpt-4o-mini'
)


def model_key(name: str) -> str:
    """A model's name as :data:`MEASURED` (and the threshold profiles) know it: a hub id, or a folder's own name."""
    return name.rstrip("/\\").replace("\\", "/").split("/")[-1]


def local_model_note(name: str, kind: str | None = None, parameters: int | None = None) -> str:
    """One sentence for an nli-mode run: which local model decides every claim, whether it is small, what accuracy
    it was measured at, and how to get a stronger check."""
    key = model_key(name)
    where = f" ({name})" if key != name else ""
    size = f"{parameters / 1e6:.1f}M parameters" if parameters else "size unknown"
    kinds = {"nli": "3-way NLI", "binary": "binary grounding classifier", "seq2seq": "seq2seq checker"}
    what = f"{kinds.get(kind, kind)}, {size}" if kind else size
    note = f"nli mode: every claim is decided by the local model {key}{where}, {what}, with no LLM judge"
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
# Ray reads this when it is imported, and its worker processes inherit it: "warning" drops the INFO lines
_RAY_LEVEL = "RAY_LOGGER_LEVEL"


@contextmanager
def third_party_output(verbose: bool) -> Iterator[None]:
    """Unless ``verbose``: no transformers progress bars ("Loading weights: 100%|...") and no Ray INFO lines, for the
    duration of one command; transformers' switch is put back when it ends (the process may be a test)."""
    if verbose:
        yield
        return
    saved = {key: os.environ.get(key) for key in (_HF_BARS, _RAY_LEVEL)}
    os.environ[_HF_BARS] = "1"
    if saved[_RAY_LEVEL] is None:  # a level the user chose stays
        os.environ[_RAY_LEVEL] = "warning"
    hf_logging = sys.modules.get("transformers.utils.logging")  # already imported: its switch, not the variable
    bars_were_on = hf_logging is not None and hf_logging.is_progress_bar_enabled()
    if hf_logging is not None:
        hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        imported_here = hf_logging is None and "transformers.utils.logging" in sys.modules
        if bars_were_on or (imported_here and saved[_HF_BARS] in (None, "", "0")):
            sys.modules["transformers.utils.logging"].enable_progress_bar()
