"""groundjudge.json beside the weights: thresholds and head per model; imports errors, models, checker/head."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from groundjudge.atomic import atomic_write_text
from groundjudge.errors import ArgumentError, ConfigError
from groundjudge.models import LocalThresholds

# Thresholds measured per NLI model and mode on ../shared/benchmarks (README, Accuracy, has the tables):
# - "nli" mode has no judge, so its thresholds are the ones with the best balanced accuracy;
# - "cascade" thresholds are where local verdicts reach 90% precision on factcheckgpt-stance (`groundjudge
#   calibrate --target 0.9`); everything between them goes to the judge.
PROFILES: dict[str, dict[str, LocalThresholds]] = {
    # The project's small model: best balanced accuracy at entailment 0.55 on all three dev sets (passages alone),
    # confirmed with the sentence windows and the fewer-pairs rule on by 5-fold claim-disjoint cross-validation over
    # WiCE-dev and Factcheck-GPT (`benchmarks/accuracy.py --threshold-cv`: the folds' picks, 0.48-0.61, do no better
    # out of fold, and FaithBench loses at 0.48; docs/explanation/checker-reading.md has the numbers); its
    # contradiction head is no better than chance on factcheckgpt-stance (8% precise, base rate 5%), so it
    # never calls CONTRADICTED on its own (reports say contradiction was not checked locally); no entailment level
    # is 90% precise for SUPPORTED (0.59 at 0.9), so in the cascade only UNSUPPORTED is decided locally.
    "gj-nli-minilm-l6": {
        "nli": LocalThresholds(t_support=0.55, t_contradict=None),
        "cascade": LocalThresholds(t_support=None, t_contradict=None, t_unsupported=0.21),
    },
}
# Any other model until it is calibrated: argmax-like in nli mode, the usual confident cut-offs in the cascade.
GENERIC_PROFILE: dict[str, LocalThresholds] = {
    "nli": LocalThresholds(t_support=0.5, t_contradict=0.5),
    "cascade": LocalThresholds(t_support=0.9, t_contradict=0.9),
}


# A calibrated or tuned model carries its own thresholds in this file beside its weights ("thresholds travel with
# the model"): `groundjudge calibrate` and `groundjudge tune` write it, the evaluator reads it.
MODEL_PROFILE_FILE = "groundjudge.json"
# the keys of that file that say how to run the model (``checker.nli.read_checker_profile`` reads and checks each;
# ``write_checker_declaration`` stores them): one list, so a key added to one side is not lost by the other
DECLARATION_KEYS = ("kind", "supported_label", "template")
MODEL_PROFILE_FORMAT = 1


def read_model_profile(model_dir: str | Path) -> dict[str, LocalThresholds] | None:
    """The thresholds stored beside a local model's weights (``groundjudge.json``), or None if it has none.

    Raises:
        ConfigError: the file exists but cannot be read or is not a groundjudge model profile.
    """
    path = Path(model_dir) / MODEL_PROFILE_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("format") != MODEL_PROFILE_FORMAT:
            raise ArgumentError(f"format {data.get('format')!r} is not {MODEL_PROFILE_FORMAT}")
        # a file may only declare how to run the model (DECLARATION_KEYS: see checker.nli), no thresholds
        return {mode: LocalThresholds(**values) for mode, values in data.get("thresholds", {}).items()} or None
    except (OSError, ValueError, KeyError, TypeError, AttributeError, ValidationError) as exc:
        raise ConfigError(f"model thresholds {path}: {exc}") from exc


def read_thresholds_model(model_dir: str | Path) -> str | None:
    """The identity (``NLIModel.identity``) of the model whose scores the thresholds stored beside ``model_dir``'s
    weights were fitted on (``thresholds_model``, which ``calibrate --save-to-model`` and ``tune`` write), or None:
    no such file, or one written before it was recorded (or by hand without it). The evaluator refuses thresholds
    whose model is not the one in the folder now (new weights saved over the old ones), as it refuses such a head.

    Raises:
        ConfigError: the file cannot be read, or its ``thresholds_model`` is not a string.
    """
    path = Path(model_dir) / MODEL_PROFILE_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"model thresholds {path}: {exc}") from exc
    model = data.get("thresholds_model") if isinstance(data, dict) else None
    if model is not None and not isinstance(model, str):
        raise ConfigError(f"model thresholds {path}: thresholds_model {model!r} is not a model identity")
    return model or None


def check_stored_thresholds(model_name: str, mode: str, identity: Callable[[], str]) -> None:
    """Refuse the thresholds stored beside ``model_name``'s weights for ``mode`` (the cascade's for any mode but nli;
    none in llm mode) when they were fitted on the scores of another model (:func:`read_thresholds_model`) than the
    one with ``identity`` (asked only then: it loads the model): other weights were saved in the folder since, and
    another model's entailment is another scale. Thresholds with no model recorded are taken as they are.

    Raises:
        ConfigError: naming the file, both models and how to refit them.
    """
    if mode == "llm" or not Path(model_name).is_dir():
        return
    stored = read_model_profile(model_name)
    fitted_on = (
        read_thresholds_model(model_name) if stored and ("nli" if mode == "nli" else "cascade") in stored else None
    )
    if fitted_on is not None and fitted_on != (now := identity()):
        raise ConfigError(
            f"{Path(model_name) / MODEL_PROFILE_FILE}: its {mode} thresholds were fitted on the scores of NLI model "
            f"{fitted_on}, not {now} (other weights were saved in the folder since): refit them for these weights "
            "(groundjudge calibrate --save-to-model), or give each threshold yourself"
        )


def write_model_profile(
    model_dir: str | Path,
    profile: dict[str, LocalThresholds],
    meta: dict[str, object] | None = None,
    model: str | None = None,
) -> Path:
    """Store thresholds per mode (``nli``, ``cascade``) beside a model's weights, with how they were measured and the
    identity of the model they were fitted on (``model``: ``NLIModel.identity``; None records none)."""
    return _update_model_file(
        model_dir, {"thresholds": _per_mode(profile), "meta": meta or {}, "thresholds_model": model}
    )


def _per_mode(profile: dict[str, LocalThresholds]) -> dict[str, Any]:
    """A profile as the file holds it; a mode other than nli or cascade is a ConfigError."""
    unknown = set(profile) - {"nli", "cascade"}
    if unknown:
        raise ConfigError(f"model profile modes must be nli or cascade, not {sorted(unknown)}")
    return {mode: t.model_dump() for mode, t in profile.items()}


def _update_model_file(model_dir: str | Path, changes: dict[str, Any]) -> Path:
    """Set keys of ``groundjudge.json`` beside a model's weights (a value None removes the key), keeping the rest
    (kind, supported_label, template, thresholds, head), written atomically."""
    path = Path(model_dir) / MODEL_PROFILE_FILE
    try:
        kept = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except (OSError, ValueError):
        kept = {}
    data = {**(kept if isinstance(kept, dict) else {}), "format": MODEL_PROFILE_FORMAT, **changes}
    data = {k: v for k, v in data.items() if v is not None}
    atomic_write_text(path, json.dumps(data, indent=2, allow_nan=False) + "\n")
    return path


def write_checker_declaration(model_dir: str | Path, declared: dict[str, Any]) -> Path:
    """Store how to run the model beside its weights (``kind``, ``supported_label``, ``template``: what
    ``checker.nli.read_checker_profile`` reads), keeping the rest of the file; a key absent from ``declared`` is
    removed."""
    return _update_model_file(model_dir, {k: declared.get(k) for k in DECLARATION_KEYS})


def read_model_head(model_dir: str | Path) -> dict[str, Any] | None:
    """The verdict head stored beside a local model's weights (``groundjudge.json``, key ``head``), or None.

    Raises:
        ConfigError: the file cannot be read, or its head is not a valid one.
    """
    path = Path(model_dir) / MODEL_PROFILE_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        head = data.get("head") if isinstance(data, dict) else None
        if head is None:
            return None
        from groundjudge.checker.head import VerdictHead

        VerdictHead(**head)
        return dict(head)
    except (OSError, ValueError, TypeError, ValidationError) as exc:
        raise ConfigError(f"verdict head in {path}: {exc}") from exc


def write_model_fit(
    model_dir: str | Path,
    profile: dict[str, LocalThresholds],
    meta: dict[str, object],
    head: BaseModel | dict[str, Any] | None,
    *,
    model: str | None,
) -> Path:
    """Store a calibration beside a model's weights in one write: the thresholds per mode, how they were measured,
    the verdict head fitted with them (a ``VerdictHead`` or its fields; None: none, and one stored before is
    removed, or it would override these thresholds) and the identity of the model whose scores they were fitted on
    (``model``, ``NLIModel.identity``: a run refuses them once other weights are in the folder,
    :func:`read_thresholds_model`). One write, so a failure (a value JSON cannot hold, a full disk) leaves the file
    as it was, never new thresholds beside an old head.

    Raises:
        ConfigError: a mode other than nli or cascade.
        ValueError: a value JSON cannot hold (NaN, infinity); nothing is written.
    """
    stored = head.model_dump() if isinstance(head, BaseModel) else head  # a VerdictHead, or its fields
    changes = {"thresholds": _per_mode(profile), "meta": meta, "head": stored, "thresholds_model": model}
    return _update_model_file(model_dir, changes)


def write_model_head(model_dir: str | Path, head: dict[str, Any] | None) -> Path:
    """Store (or, with None, remove) the verdict head beside a model's weights, keeping the rest of the file."""
    return _update_model_file(model_dir, {"head": head})


def profile_for(model_name: str) -> dict[str, LocalThresholds]:
    """The thresholds of a model: those stored beside its weights, else the measured ones matched by hub id or folder
    name, else the generic ones. A stored profile that lacks a mode takes that mode from the next source."""
    key = model_name.rstrip("/").split("/")[-1]
    known = PROFILES.get(model_name) or PROFILES.get(key) or GENERIC_PROFILE
    stored = read_model_profile(model_name) if Path(model_name).is_dir() else None
    return {**known, **stored} if stored else known
