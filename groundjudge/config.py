"""Every setting of an evaluation in one validated object; defaults are the measured ones (README, Accuracy)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from groundjudge.cache import CacheMode
from groundjudge.errors import ConfigError

Mode = Literal["nli", "cascade", "llm"]
Probability = Annotated[float, Field(gt=0, le=1)]


class Thresholds(BaseModel):
    """When an answer passes: grounded share and hallucination ratio limits."""

    model_config = ConfigDict(extra="forbid")

    min_grounded: float = Field(0.7, ge=0, le=1, description="combined score below this fails")
    warn: float = Field(0.85, ge=0, le=1, description="combined score below this (and above min) warns")
    max_hallucinated: float = Field(0.1, ge=0, le=1, description="hallucination ratio above this fails")


# The seeds' presets by use case: the minimum grounded score each kind of product tolerates.
PRESETS: dict[str, Thresholds] = {
    "default": Thresholds(),
    "support-bot": Thresholds(min_grounded=0.6, warn=0.75, max_hallucinated=0.15),
    "knowledge-base": Thresholds(min_grounded=0.7, warn=0.85, max_hallucinated=0.1),
    "medical-legal": Thresholds(min_grounded=0.9, warn=0.95, max_hallucinated=0.0),
    "research": Thresholds(min_grounded=0.5, warn=0.7, max_hallucinated=0.2),
}


class LocalThresholds(BaseModel):
    """When the NLI stage decides a claim alone (see :func:`groundjudge.stages.route.decide_locally`)."""

    model_config = ConfigDict(frozen=True)

    t_support: float | None  # None: never SUPPORTED locally (no level is precise enough)
    t_contradict: float | None  # None: never CONTRADICTED locally (the model's contradiction head is not trusted)
    t_unsupported: float | None = None  # None: never UNSUPPORTED locally in the cascade


# Thresholds measured per NLI model and mode on ../shared/benchmarks (README, Accuracy, has the tables):
# - "nli" mode has no judge, so its thresholds are the ones with the best balanced accuracy;
# - "cascade" thresholds are where local verdicts reach 90% precision on factcheckgpt-stance (`groundjudge
#   calibrate --target 0.9`); everything between them goes to the judge.
PROFILES: dict[str, dict[str, LocalThresholds]] = {
    # The project's small model: best balanced accuracy at entailment 0.55 on all three dev sets; its
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
            raise ValueError(f"format {data.get('format')!r} is not {MODEL_PROFILE_FORMAT}")
        # a file may only declare how to run the model (kind, supported_label: see checker.nli), no thresholds
        return {mode: LocalThresholds(**values) for mode, values in data.get("thresholds", {}).items()} or None
    except (OSError, ValueError, KeyError, TypeError, AttributeError, ValidationError) as exc:
        raise ConfigError(f"model thresholds {path}: {exc}") from exc


def write_model_profile(
    model_dir: str | Path, profile: dict[str, LocalThresholds], meta: dict[str, object] | None = None
) -> Path:
    """Store thresholds per mode (``nli``, ``cascade``) beside a model's weights, with how they were measured."""
    unknown = set(profile) - {"nli", "cascade"}
    if unknown:
        raise ConfigError(f"model profile modes must be nli or cascade, not {sorted(unknown)}")
    return _update_model_file(
        model_dir, {"thresholds": {mode: t.model_dump() for mode, t in profile.items()}, "meta": meta or {}}
    )


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
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


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


class Config(BaseModel):
    """Settings of an :class:`~groundjudge.pipeline.Evaluator`."""

    model_config = ConfigDict(extra="forbid")

    # what runs
    mode: Mode | None = Field(None, description="nli, cascade or llm; default cascade with an LLM, else nli")
    llm: str | None = Field(None, description="provider/model, e.g. openai/gpt-4o-mini")
    base_url: str | None = None
    qa: bool = Field(True, description="run the QA-consistency check (needs an LLM)")
    qa_questions: int = Field(4, ge=1, le=8)

    # NLI
    nli_model: str | None = Field(None, description="hub id or path; default $GROUNDJUDGE_NLI_MODEL or hub default")
    device: str | None = None
    batch_size: int | None = Field(None, ge=1)
    passage_tokens: int = Field(128, ge=16, description="passage size in NLI-model tokens")
    passage_overlap: int = Field(32, ge=0)
    evidence_k: int | None = Field(2, ge=1, description="passages scored per claim, best BM25 first; None: all")
    nli_kind: Literal["auto", "nli", "binary", "seq2seq"] = Field(
        "auto", description="local checker kind; auto: from the model's config or its groundjudge.json"
    )
    nli_supported_label: int | None = Field(
        None, ge=0, le=1, description="binary checkers: the output index meaning supported (1 for MiniCheck, HHEM)"
    )
    nli_trust_remote_code: bool = Field(False, description="run a checker's own code (HHEM-2.1-open); opt-in")
    nli_max_length: int | None = Field(
        None, ge=16, description="tokens per NLI pair; default the model's own limit (long-context checkers: more)"
    )
    # None: the model's stored or measured profile for the mode, else GENERIC_PROFILE; "never": not decided locally
    t_support: Probability | Literal["never"] | None = Field(
        None, description="NLI entailment at or above this: SUPPORTED ('never': always escalate)"
    )
    t_contradict: Probability | Literal["never"] | None = Field(
        None, description="NLI contradiction at or above: CONTRADICTED ('never': not called locally)"
    )
    t_unsupported: float | None = Field(
        None,
        ge=0,
        lt=1,
        description="NLI entailment at or below this: UNSUPPORTED locally (contradiction is not looked at: such "
        "claims say contradiction_checked false, and the conflict check escalates number/month mismatches)",
    )
    head: dict[str, Any] | None = Field(
        None,
        description="a verdict head (checker.head, as 'calibrate' writes it) with its thresholds; default: the "
        "one stored beside the model's weights, if any",
    )
    use_head: bool = Field(True, description="apply the verdict head (given or stored with the model); false: raw NLI")
    weak_floor: float = Field(
        0.5, ge=0, le=1, description="claims whose support score (the head's, else entailment) is below this are weak"
    )
    conflict_check: bool = Field(
        True, description="flag locally decided claims whose best passage shares their terms but not their numbers"
    )
    escalate_conflicts: bool = Field(
        True, description="cascade: send such claims to the judge (the local model may miss the contradiction)"
    )

    # scores and verdict
    weights: dict[str, float] = Field(default_factory=lambda: {"claims": 0.4, "nli": 0.3, "qa": 0.3})
    preset: str = "default"
    thresholds: Thresholds | None = None

    # LLM calls
    timeout: float = Field(60.0, gt=0)
    max_attempts: int = Field(6, ge=1)
    max_reasks: int = Field(2, ge=0)
    concurrency: int = Field(4, ge=1)
    budget_usd: float | None = Field(None, ge=0)
    max_calls: int | None = Field(None, ge=0)

    # provider batch APIs (offline runs at half price; see groundjudge.llm.batch)
    batch_api: bool = Field(False, description="send each stage's LLM calls through the provider's batch API")
    batch_state: str | None = Field(
        None, description="file that records submitted batches, so that a rerun resumes them [default: in the cache]"
    )
    batch_poll_seconds: float = Field(30.0, ge=0, description="seconds between batch status reads")
    batch_max_wait_hours: float = Field(24.0, gt=0, description="stop waiting (the batch goes on; a rerun collects)")

    # cache
    cache_dir: str | None = None
    cache_mode: CacheMode = "use"

    @model_validator(mode="after")
    def _check(self) -> Config:
        if self.preset not in PRESETS:
            raise ValueError(f"preset must be one of {', '.join(PRESETS)}")
        if set(self.weights) - {"claims", "nli", "qa"} or any(w < 0 for w in self.weights.values()):
            raise ValueError("weights take the keys claims, nli, qa with values >= 0")
        if not any(w > 0 for w in self.weights.values()):
            raise ValueError("weights: at least one of claims, nli, qa must be above 0 (else no answer has a score)")
        if self.passage_overlap >= self.passage_tokens:
            raise ValueError("passage_overlap must be smaller than passage_tokens")
        if self.head is not None:
            from groundjudge.checker.head import VerdictHead

            VerdictHead(**self.head)  # a malformed head is a config error now, not a crash mid-run
        if self.batch_api and self.cache_mode != "use":
            raise ValueError("batch_api answers calls into the cache and reads them back: it needs cache_mode 'use'")
        return self

    def local_thresholds(
        self, mode: str, model_name: str, head: dict[str, LocalThresholds] | None = None
    ) -> LocalThresholds:
        """The NLI decision thresholds in force: explicit values, else the verdict head's (``head``: its thresholds,
        fitted on its own probabilities), else the model's profile for the mode."""
        base = (head or profile_for(model_name)).get("nli" if mode == "nli" else "cascade")
        assert base is not None

        def pick(value: float | str | None, fallback: float | None) -> float | None:
            return fallback if value is None else None if value == "never" else float(value)

        return LocalThresholds(
            t_support=pick(self.t_support, base.t_support),
            t_contradict=pick(self.t_contradict, base.t_contradict),
            t_unsupported=self.t_unsupported if "t_unsupported" in self.model_fields_set else base.t_unsupported,
        )

    @property
    def effective_thresholds(self) -> Thresholds:
        return self.thresholds or PRESETS[self.preset]

    @classmethod
    def load(cls, path: str | Path, **overrides: object) -> Config:
        """Read a JSON config file (as ``groundjudge calibrate`` writes), then apply overrides that are not None."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"config file {path}: {exc}") from exc
        if not isinstance(data, dict):
            raise ConfigError(f"config file {path}: a JSON object of settings, not {type(data).__name__}")
        data.update({k: v for k, v in overrides.items() if v is not None})
        return cls.make(**data)

    @classmethod
    def make(cls, **values: object) -> Config:
        """Build a config; a bad value is a :class:`ConfigError` naming the field."""
        try:
            return cls(**values)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'config'}: {e['msg']}" for e in exc.errors())
            raise ConfigError(problems) from exc
