"""The LLM registry's errors speak to both of its readers: the command line and Python."""

from __future__ import annotations

import pytest

from groundjudge.errors import ConfigError
from groundjudge.llm.registry import get_provider


def test_an_openai_compatible_model_without_a_server_names_the_cli_option_and_the_python_argument() -> None:
    """Issue 29 §9: the message said only "or pass base_url", Python's word, to a command-line user."""
    with pytest.raises(ConfigError) as exc:
        get_provider("openai-compatible/qwen2.5:7b")
    said = str(exc.value)
    assert "openai-compatible/qwen2.5:7b@http://127.0.0.1:11434/v1" in said
    assert "--base-url URL" in said and "--second-judge-base-url" in said, said
    assert "base_url=" in said and "second_judge_base_url=" in said, said
