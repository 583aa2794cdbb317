"""Every setting of an evaluation in one validated object; defaults are the measured ones (README, Accuracy)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from groundjudge.cache import CacheMode
from groundjudge.errors import ConfigError

Mode = Literal["nli", "cascade", "llm"]


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
    passage_tokens: int = Field(256, ge=16, description="passage size in NLI-model tokens")
    passage_overlap: int = Field(32, ge=0)
    evidence_k: int | None = Field(4, ge=1, description="passages scored per claim, best BM25 first; None: all")
    t_support: float = Field(0.9, gt=0, le=1, description="NLI entailment at or above this: SUPPORTED locally")
    t_contradict: float = Field(0.9, gt=0, le=1, description="NLI contradiction at or above this: CONTRADICTED")
    t_unsupported: float | None = Field(
        None, ge=0, lt=1, description="NLI entailment at or below this (and no contradiction): UNSUPPORTED locally"
    )
    weak_floor: float = Field(0.5, ge=0, le=1, description="claims whose entailment is below this are flagged weak")

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

    # cache
    cache_dir: str | None = None
    cache_mode: CacheMode = "use"

    @model_validator(mode="after")
    def _check(self) -> Config:
        if self.preset not in PRESETS:
            raise ValueError(f"preset must be one of {', '.join(PRESETS)}")
        if set(self.weights) - {"claims", "nli", "qa"} or any(w < 0 for w in self.weights.values()):
            raise ValueError("weights take the keys claims, nli, qa with values >= 0")
        if self.passage_overlap >= self.passage_tokens:
            raise ValueError("passage_overlap must be smaller than passage_tokens")
        return self

    @property
    def effective_thresholds(self) -> Thresholds:
        return self.thresholds or PRESETS[self.preset]

    @classmethod
    def load(cls, path: str | Path, **overrides: object) -> Config:
        """Read a JSON config file (as ``groundjudge calibrate`` writes), then apply overrides that are not None."""
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise ConfigError(f"config file {path}: {exc}") from exc
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
