"""The folder ``groundjudge tune`` writes (OUT): its state folder, and whether a run may write, resume or empty it."""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from groundjudge.atomic import atomic_write_text
from groundjudge.errors import ConfigError

STATE_DIR = ".tune"


class TuneInterrupted(KeyboardInterrupt):
    """Ctrl-C once this run's state is in ``state`` (OUT/.tune, with this run's key): a rerun of the same command
    resumes from it. A plain KeyboardInterrupt from ``tune`` came before: OUT holds nothing of this run (a ``.tune``
    there may be another run's, which the rerun refuses as it would have)."""

    def __init__(self, state: Path) -> None:
        super().__init__(str(state))
        self.state = state


@contextlib.contextmanager
def interrupts_keep(state: Path) -> Iterator[None]:
    """Ctrl-C inside: :class:`TuneInterrupted` naming ``state``, the folder this run keeps its state in."""
    try:
        yield
    except TuneInterrupted:
        raise
    except KeyboardInterrupt as stop:
        raise TuneInterrupted(state) from stop


def run_key_in(state: Path) -> str | None:
    """The run key ``OUT/.tune/run.json`` holds; None when it cannot be read (a file torn before its writes were
    atomic): that OUT is no run's to resume, and ``--overwrite`` may empty it."""
    try:
        data = json.loads(state.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data.get("run_key") if isinstance(data, dict) else None


def inside_folder(path: Path, folder: str | Path) -> bool:
    """Whether ``path`` is ``folder`` or lies in it (by the paths resolved)."""
    return path.resolve().is_relative_to(Path(folder).resolve())


def prepare_out(out: Path, key: str, overwrite: bool) -> None:
    """An empty or resumable OUT; a folder holding something else is refused unless ``overwrite``."""
    state = out / STATE_DIR / "run.json"
    if out.exists() and any(out.iterdir()):
        same = state.is_file() and run_key_in(state) == key
        if not same:
            # a tune output keeps OUT/.tune when it finishes; a config.json alone is any model's, or a project's
            ours = (out / STATE_DIR).is_dir()
            if not overwrite:
                raise ConfigError(
                    f"{out} is not empty and holds no checkpoint of this run (same data, base and settings): "
                    "rerun with the same arguments to resume, choose another --out, or pass --overwrite"
                )
            if not ours:
                raise ConfigError(f"{out} does not look like a groundjudge tune output; refusing to empty it")
            shutil.rmtree(out)
    (out / STATE_DIR).mkdir(parents=True, exist_ok=True)
    if not state.is_file():
        atomic_write_text(state, json.dumps({"run_key": key}) + "\n")


def save_tokenizer(tokenizer: Any, out: Path) -> None:
    """Save a fast tokenizer into OUT as the same files whatever it encoded before: its ``tokenizer.json`` held the
    truncation and padding its last call left, so writing the base model's tokenizer again on a rerun (a run that
    kept the base) made other bytes, another model identity (``NLIModel.identity``), and a head or thresholds fitted
    on OUT in between were refused. Each call sets them again, so none is kept."""
    backend = tokenizer.backend_tokenizer
    backend.no_truncation()
    backend.no_padding()
    tokenizer.save_pretrained(str(out))
