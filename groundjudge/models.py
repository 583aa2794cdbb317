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
