"""Every setting of an evaluation in one validated object; defaults are the measured ones (README, Accuracy)."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from groundjudge.cache import CacheMode
from groundjudge.checker.profile import profile_for
from groundjudge.errors import ArgumentError, ConfigError
from groundjudge.models import LocalThresholds

Mode = Literal["nli", "cascade", "llm"]
DEVICE = re.compile(r"cpu|mps|cuda(:\d+)?")  # where the NLI model may run (torch's names)
Probability = Annotated[float, Field(gt=0, le=1)]
Share = Annotated[float, Field(ge=0, le=1)]  # a share or a score in [0, 1]
PriceKey = Literal["input_per_mtok", "output_per_mtok"]
UsdPerMTok = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class Thresholds(BaseModel):
    """When an answer passes: the combined score's limits and the contradicted share's limit.

    ``max_contradicted`` was called ``max_hallucinated``: the old key still works (a DeprecationWarning says so).
    """

    model_config = ConfigDict(extra="forbid")

    min_grounded: Share = Field(0.7, description="combined score below this fails")
    warn: Share = Field(0.85, description="combined score below this (and above min) warns")
    max_contradicted: Share = Field(
        0.1, description="contradicted_share (CONTRADICTED claims over all claims) above this fails"
    )

    @model_validator(mode="before")
    @classmethod
    def _old_names(cls, data: Any) -> Any:
        if isinstance(data, dict) and "max_hallucinated" in data:
            if "max_contradicted" in data:
                raise ArgumentError("give max_contradicted only (max_hallucinated is its old, deprecated name)")
            warnings.warn(
                "thresholds: 'max_hallucinated' is deprecated, call it 'max_contradicted' (the limit on the share "
                "of claims CONTRADICTED)",
                DeprecationWarning,
                stacklevel=2,
            )
            data = {("max_contradicted" if k == "max_hallucinated" else k): v for k, v in data.items()}
        return data

    @property
    def max_hallucinated(self) -> float:
        """Deprecated: :attr:`max_contradicted`."""
        warnings.warn("Thresholds.max_hallucinated is deprecated: max_contradicted", DeprecationWarning, stacklevel=2)
        return self.max_contradicted


# The seeds' presets by use case: the minimum grounded score each kind of product tolerates.
PRESETS: dict[str, Thresholds] = {
    "default": Thresholds(),
    "support-bot": Thresholds(min_grounded=0.6, warn=0.75, max_contradicted=0.15),
    "knowledge-base": Thresholds(min_grounded=0.7, warn=0.85, max_contradicted=0.1),
    "medical-legal": Thresholds(min_grounded=0.9, warn=0.95, max_contradicted=0.0),
    "research": Thresholds(min_grounded=0.5, warn=0.7, max_contradicted=0.2),
}


THRESHOLDS = ("t_support", "t_contradict", "t_unsupported")
"""The local decision thresholds a config may set (``thresholds_model`` names the model they were fitted on)."""
Threshold = Literal["t_support", "t_contradict", "t_unsupported"]


ReasoningEffort = Literal["none", "minimal", "low", "medium", "high", "xhigh"]
"""How long a reasoning model reasons before it answers (OpenAI's ``reasoning_effort``)."""


class Config(BaseModel):
    """Settings of an :class:`~groundjudge.pipeline.Evaluator`."""

    model_config = ConfigDict(extra="forbid")

    # what runs
    mode: Mode | None = Field(
        None,
        description="what decides the claims: nli (the local checker alone), cascade (the local checker, then the "
        "LLM judge on what it cannot decide) or llm (the judge on every claim) [default: cascade with an llm, else "
        "nli]",
    )
    llm: str | None = Field(None, description="the judge: provider/model, e.g. openai/gpt-4o-mini")
    base_url: str | None = Field(None, description="server of an OpenAI-compatible judge")
    reasoning_effort: ReasoningEffort | None = Field(
        None,
        description="how much the judge (--llm) reasons before it answers: an OpenAI reasoning model (o1, o3, "
        "o4-mini, the gpt-5 family) or an OpenAI-compatible server; which values a model takes is the model's "
        "[default: not sent, the model's own]",
    )
    qa: bool = Field(True, description="run the QA-consistency check (needs an LLM)")
    qa_questions: int = Field(4, ge=1, le=8, description="questions the QA check asks about an answer, at most")

    # NLI
    nli_model: str | None = Field(
        None, description="local checker: a hub id or a path [default: $GROUNDJUDGE_NLI_MODEL or the hub default]"
    )
    device: str | None = Field(
        None, description="where the NLI model runs: cpu, mps, cuda or cuda:N [default: best available]"
    )
    batch_size: int | None = Field(
        None,
        ge=1,
        description="(passage, claim) pairs per NLI forward pass [default: 16 on CPU; on cuda 256 of 512 tokens]",
    )
    passage_tokens: int = Field(128, ge=16, description="passage size in NLI-model tokens")
    passage_overlap: int = Field(32, ge=0, description="tokens two neighbouring passages share")
    evidence_k: int | None = Field(2, ge=1, description="passages scored per claim, best BM25 first; None: all")
    nli_kind: Literal["auto", "nli", "binary", "seq2seq", "token"] = Field(
        "auto",
        description="local checker kind: auto (from the model's config or its groundjudge.json), nli, "
        "binary, seq2seq or token (a token classifier such as LettuceDetect)",
    )
    nli_supported_label: int | None = Field(
        None,
        ge=0,
        le=1,
        description="binary and token checkers (labels LABEL_0/LABEL_1): the output index meaning supported (1 for "
        "MiniCheck, FactCG, HHEM; 0 for LettuceDetect)",
    )
    nli_trust_remote_code: bool = Field(
        False, description="allow a local checker that runs its own code (e.g. HHEM-2.1-open); opt-in"
    )
    nli_max_length: int | None = Field(
        None,
        ge=16,
        description="tokens per (passage, claim) pair; long-context checkers take more [default: the model's own "
        "limit]",
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
    thresholds_model: str | None = Field(
        None,
        description="the NLI model t_support, t_contradict and t_unsupported were fitted on (its identity, as "
        "'calibrate' writes it): a run with another model refuses them",
    )
    thresholds_fitted: list[Threshold] | None = Field(
        None,
        description="which of the thresholds thresholds_model names the model of [default: all three]; a threshold "
        "given again in Python (Config.load(path, t_support=0.6), an Evaluator keyword setting) is the user's, and "
        "leaves this list",
    )
    head: dict[str, Any] | None = Field(
        None,
        description="a verdict head (checker.head, as 'calibrate' writes it) with its thresholds; default: the "
        "one stored beside the model's weights, if any",
    )
    use_head: bool = Field(
        True,
        description="apply the verdict head (the config's, or the one stored beside the model's weights, if any); "
        "off: raw NLI scores",
    )
    weak_floor: Share = Field(
        0.5, description="claims whose support score (the head's, else entailment) is below this are weak"
    )
    conflict_check: bool = Field(
        True, description="flag locally decided claims whose best passage shares their terms but not their numbers"
    )
    escalate_conflicts: bool = Field(
        True, description="cascade: send such claims to the judge (the local model may miss the contradiction)"
    )
    citation_style: Literal["auto", "numeric", "id", "footnote", "none"] = Field(
        "auto",
        description="how citation markers in answers are read: auto ([1], [2, 3], 【1】, ^1, [context-id]), numeric "
        "(positions only), id (context ids only), footnote (^1, [^1] only), none (markers are not read)",
    )

    # scores and verdict
    weights: dict[str, float] = Field(
        default_factory=lambda: {"claims": 0.4, "nli": 0.3, "qa": 0.3},
        description="weights of the combined score's parts (claims, nli, qa), renormalised over the parts that ran",
    )
    preset: str = Field(
        "default", description="thresholds by use case: " + ", ".join(PRESETS) + " (unless the config sets thresholds)"
    )
    thresholds: Thresholds | None = Field(
        None, description="when an answer passes (min_grounded, warn, max_contradicted); wins over preset"
    )
    min_citation_precision: Share | None = Field(
        None,
        description="citation precision (citations that support the claim they are attached to) below this FAILs "
        "an answer that cites; unjudged claims' citations that could put it below make the answer ERROR; None: off",
    )

    # LLM calls
    timeout: float = Field(60.0, gt=0, description="seconds an LLM call may take")
    max_attempts: int = Field(
        6, ge=1, description="tries of an LLM call on a 429, a 5xx, a timeout or a lost connection"
    )
    max_reasks: int = Field(
        2, ge=0, description="re-asks of a reply that is not valid JSON of the schema or fails its stage's check"
    )
    concurrency: int = Field(
        4,
        ge=1,
        description="LLM calls in flight at once, at most, shared by every stage; a provider's 429 cuts it, calls "
        "that succeed grow it back",
    )
    window: int | None = Field(
        None,
        ge=1,
        description="answers in flight at once, finished ones waiting for their turn in the output included "
        "(default: the larger of 8 x concurrency and 4 x batch size)",
    )
    rpm: float | None = Field(
        None,
        gt=0,
        allow_inf_nan=False,
        description="LLM requests per minute, at most, sent evenly (the provider's limit for the model); none: no "
        "cap. Ray: each actor takes its share",
    )
    tpm: float | None = Field(
        None,
        gt=0,
        allow_inf_nan=False,
        description="LLM tokens (input + output) per minute, at most (the provider's limit), counted as estimated "
        "when sent and trued up; none: no cap. Ray: each actor takes its share",
    )
    adaptive_concurrency: bool = Field(
        True,
        description="on a 429 halve the LLM calls in flight (once per round trip), then grow back by one a round "
        "trip while calls succeed, never above concurrency; false: always up to concurrency",
    )
    budget_usd: float | None = Field(
        None,
        ge=0,
        description="stop before spending more than this many USD (the judge needs a price: the price table's, or "
        "one given)",
    )
    max_calls: int | None = Field(
        None,
        ge=0,
        description="stop before more than this many LLM calls (a call sent with no reply, a timeout, counts: it may "
        "be billed)",
    )
    price: dict[PriceKey, UsdPerMTok] | None = Field(
        None,
        description="the LLM's price in USD per million tokens, {input_per_mtok, output_per_mtok}, winning over the "
        "price table; needed for a USD budget on a model the table does not know (every openai-compatible one)",
    )

    # a second judge for what matters (README "Second judge"): never changes a score or a verdict
    second_judge: str | None = Field(
        None,
        description="provider/model of a second judge: it judges the claims the first judge judged, with the same "
        "prompt and sources, for flagged answers (FAIL, a CONTRADICTED claim, a judge verdict the local model "
        "disagrees with) and the sampled ones; disagreements are flagged (judges_disagree), never scored",
    )
    second_judge_base_url: str | None = Field(
        None, description="server of an OpenAI-compatible second judge (base_url serves the first judge only)"
    )
    second_judge_reasoning_effort: ReasoningEffort | None = Field(
        None,
        description="how much the second judge reasons before it answers (an OpenAI reasoning model or an "
        "OpenAI-compatible server; reasoning_effort serves the first judge only) [default: not sent, the model's own]",
    )
    second_judge_sample: Share | None = Field(
        None,
        description="share of answers the second judge also sees when not flagged, picked by a hash of the row id "
        "(the same answers on every rerun and engine)",
    )
    second_judge_price: dict[PriceKey, UsdPerMTok] | None = Field(
        None, description="the second judge's price in USD per million input and output tokens"
    )

    # provider batch APIs (offline runs at half price; see groundjudge.llm.batch)
    batch_api: bool = Field(
        False,
        description="send each stage's LLM calls through the provider's batch API (half price, results within a day; "
        "a rerun resumes the batches)",
    )
    batch_state: str | None = Field(
        None, description="file that records submitted batches, so that a rerun resumes them (default: in the cache)"
    )
    batch_poll_seconds: float = Field(30.0, ge=0, description="seconds between batch status reads")
    batch_max_wait_hours: float = Field(24.0, gt=0, description="stop waiting (the batch goes on; a rerun collects)")

    pack_answers: int = Field(
        1,
        ge=1,
        le=16,
        description="answers whose claims calls, and whose sources-side calls, go together in one request (1: one "
        "answer a call); the prompt's fixed part is paid once per request, each answer's reply is still checked and "
        "cached alone (docs: Tokens and cost per answer)",
    )

    # cache
    cache_dir: str | None = Field(
        None, description="cache directory [default: $GROUNDJUDGE_CACHE_DIR or ~/.cache/groundjudge]"
    )
    cache_mode: CacheMode = Field(
        "use", description="how the cache is used: use, off, only (replay; a miss is an error) or refresh"
    )

    @field_validator("device")
    @classmethod
    def _known_device(cls, value: str | None) -> str | None:
        if value is not None and not DEVICE.fullmatch(value):
            raise ArgumentError("must be cpu, mps, cuda or cuda:N (a GPU's index)")
        return value

    @field_validator("preset")
    @classmethod
    def _known_preset(cls, value: str) -> str:
        if value not in PRESETS:
            raise ArgumentError(f"must be one of {', '.join(PRESETS)}")
        return value

    @field_validator("weights")
    @classmethod
    def _known_weights(cls, value: dict[str, float]) -> dict[str, float]:
        # a rule of this field alone, said as the field's: its keys are no other setting (qa is also one's name)
        if set(value) - {"claims", "nli", "qa"} or any(w < 0 for w in value.values()):
            raise ArgumentError("must take the keys claims, nli, qa with values >= 0")
        if not any(w > 0 for w in value.values()):
            raise ArgumentError("at least one of claims, nli, qa must be above 0 (else no answer has a score)")
        return value

    @model_validator(mode="after")
    def _check(self) -> Config:
        if self.passage_overlap >= self.passage_tokens:
            raise ArgumentError("passage_overlap must be smaller than passage_tokens")
        if self.head is not None:
            from groundjudge.checker.head import VerdictHead

            try:
                VerdictHead(**self.head)  # a malformed head is a config error now, not a crash mid-run
            except ValidationError as exc:  # a field of the head's: named as the head's
                raise ArgumentError("head: " + "; ".join(f"{f}: {m}" if f else m for f, m in problems(exc))) from exc
        if self.price is not None and len(self.price) != 2:
            raise ArgumentError("price takes both input_per_mtok and output_per_mtok (USD per million tokens)")
        if self.second_judge_price is not None and len(self.second_judge_price) != 2:
            raise ArgumentError(
                "second_judge_price takes both input_per_mtok and output_per_mtok (USD per million tokens)"
            )
        if self.second_judge is None and (
            self.second_judge_sample is not None or self.second_judge_base_url or self.second_judge_reasoning_effort
        ):
            raise ArgumentError(
                "second_judge_sample, second_judge_base_url and second_judge_reasoning_effort go with second_judge "
                "(provider/model)"
            )
        repeated = sorted({k for k in self.thresholds_fitted or () if (self.thresholds_fitted or []).count(k) > 1})
        if repeated:
            raise ArgumentError(f"thresholds_fitted names {', '.join(repeated)} more than once: name each one once")
        if self.thresholds_fitted is not None and not self.thresholds_model:
            raise ArgumentError(
                "thresholds_fitted names the thresholds thresholds_model covers: give thresholds_model (the NLI model "
                "they were fitted on) too, or drop thresholds_fitted"
            )
        if self.pack_answers > 1 and self.cache_mode != "use":
            raise ArgumentError(
                "pack_answers above 1 reads each answer's reply back from the cache: it needs cache_mode 'use'"
            )
        if self.batch_api and self.cache_mode != "use":
            raise ArgumentError("batch_api answers calls into the cache and reads them back: it needs cache_mode 'use'")
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
            line=base.line,  # a head's line goes with its thresholds (explicit ones are refused beside a head)
        )

    @property
    def effective_thresholds(self) -> Thresholds:
        return self.thresholds or PRESETS[self.preset]

    def thresholds_given(self, names: tuple[str, ...] = THRESHOLDS) -> list[str]:
        """Which of the decision thresholds ``names`` this config sets to a level ("never" and None set none)."""
        return [k for k in names if getattr(self, k) not in (None, "never")]

    def local_thresholds_given(self) -> bool:
        """Whether every local threshold is set here (``t_unsupported``, to None too): then none stored beside the
        model's weights is in force (the evaluator's check of those, ``Evaluator.check_stored_thresholds``)."""
        return None not in (self.t_support, self.t_contradict) and "t_unsupported" in self.model_fields_set

    def fitted_thresholds(self) -> list[str]:
        """The thresholds set here that ``thresholds_model`` names the model of (those of ``thresholds_fitted``,
        default all): a run with another model refuses them (the evaluator's and the Ray driver's check)."""
        if not self.thresholds_model:
            return []
        return self.thresholds_given(THRESHOLDS if self.thresholds_fitted is None else tuple(self.thresholds_fitted))

    @property
    def resolved_mode(self) -> Mode:
        """The mode in force: ``mode`` if set, else ``cascade`` with an LLM judge and ``nli`` without one."""
        return self.mode or ("cascade" if self.llm else "nli")

    @classmethod
    def load(cls, path: str | Path, **overrides: object) -> Config:
        """Read a JSON config file (as ``groundjudge calibrate`` writes), then apply overrides that are not None."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"config file {path}: {exc}") from exc
        if not isinstance(data, dict):
            raise ConfigError(f"config file {path}: a JSON object of settings, not {type(data).__name__}")
        return cls.overridden(data, {k: v for k, v in overrides.items() if v is not None})

    @classmethod
    def overridden(cls, values: dict[str, Any], overrides: dict[str, Any]) -> Config:
        """``values`` (a config file's, a ``Config``'s set fields) with ``overrides`` laid over them (``load``, the
        ``Evaluator``'s keyword settings). A threshold among the overrides is the user's, not the fitted one the
        ``thresholds_model`` of ``values`` names: it leaves ``thresholds_fitted``, so the thresholds still taken from
        ``values`` stay tied to their model; ``thresholds_model`` goes once none of them is left."""
        given = {k for k, v in overrides.items() if v is not None} & set(THRESHOLDS)
        pinned = "thresholds_model" in overrides or "thresholds_fitted" in overrides
        if not given or pinned or not values.get("thresholds_model"):
            return cls.make(**{**values, **overrides})
        scope = values.get("thresholds_fitted")
        scope = THRESHOLDS if scope is None else scope
        kept = [k for k in THRESHOLDS if k in scope and k not in given] if isinstance(scope, (list, tuple)) else scope
        config = cls.make(**{**values, **overrides, "thresholds_fitted": kept})
        if config.fitted_thresholds():
            return config
        # no fitted threshold left: nothing for thresholds_model to name
        values = {k: v for k, v in values.items() if k not in ("thresholds_model", "thresholds_fitted")}
        return cls.make(**{**values, **overrides})

    @classmethod
    def make(cls, **values: object) -> Config:
        """Build a config; a bad value is a :class:`ConfigError` naming the field."""
        try:
            return cls(**values)
        except ValidationError as exc:
            raise ConfigError("; ".join(f"{f}: {m}" if f else m for f, m in problems(exc))) from exc


def problems(exc: ValidationError) -> list[tuple[str, str]]:
    """A config's validation errors in plain words: (field, message) pairs, the field "" for a rule across fields
    (whose message names them); "Input should be ..." reads "must be ...", with the value given."""
    found = []
    for e in exc.errors():
        message = str(e["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
        message = message.replace("Input should be", "must be", 1)
        given = e.get("input")
        if e["type"] == "extra_forbidden":
            message, given = "not a setting of groundjudge's Config", None
        if e["loc"] and isinstance(given, (str, int, float)) and not isinstance(given, bool):
            message += f" (not {given!r})"
        found.append((".".join(map(str, e["loc"])), message))
    return found
