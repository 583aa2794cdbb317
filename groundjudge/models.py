"""Pydantic types that cross module boundaries."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["system", "user", "assistant"]


class Message(BaseModel):
    """One chat message."""

    model_config = ConfigDict(frozen=True)

    role: Role
    content: str


class Usage(BaseModel):
    """What calls cost: billed calls, tokens and USD, plus the calls answered from the cache."""

    calls: int = 0
    cached_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            calls=self.calls + other.calls,
            cached_calls=self.cached_calls + other.cached_calls,
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
        )


class PromptRef(BaseModel):
    """Which prompt produced a request; part of every cache key."""

    model_config = ConfigDict(frozen=True)

    name: str
    version: str


class Prompt(BaseModel):
    """A versioned prompt loaded from prompts/*.md."""

    model_config = ConfigDict(frozen=True)

    name: str
    version: str
    description: str = ""
    variables: tuple[str, ...] = Field(default_factory=tuple)
    system: str
    user: str

    @property
    def ref(self) -> PromptRef:
        return PromptRef(name=self.name, version=self.version)


class Span(BaseModel):
    """A piece of text with its character offsets in the text it was cut from."""

    model_config = ConfigDict(frozen=True)

    start: int
    end: int
    text: str


class Passage(BaseModel):
    """A window of one source document, with its offsets there and its length in NLI-model tokens."""

    model_config = ConfigDict(frozen=True)

    doc: int
    start: int
    end: int
    text: str
    n_tokens: int = 0


class ClaimNLI(BaseModel):
    """What the NLI stage found for one claim: its best entailment and best contradiction, and where."""

    entailment: float = 0.0
    contradiction: float = 0.0
    neutral: float = 0.0  # of the best-entailment passage
    entailment_passage: Passage | None = None
    contradiction_passage: Passage | None = None
    passages_scored: int = 0
    passages_total: int = 0
    early_exit: bool = False
