"""The second judge on the Ray engine, in a module of its own: the modules that start Ray run one after another in one
worker (``RAY_MODULES`` in tests/conftest.py), and the rest of the second judge's attack tests need not wait there."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from groundjudge.config import Config
from groundjudge.models import AnswerReport
from groundjudge.pipeline.evaluator import Evaluator
from groundjudge.testing import ScriptedLLMServer, route
from tests.conftest import SHARED_MODEL
from tests.pipeline.test_second_judge import ROWS, settings_for


@pytest.mark.ray
def test_ray_carries_the_second_judge_into_its_actors_and_writes_the_local_file(tmp_path: Path) -> None:
    # The Ray engine refused every run with a second judge (its driver-side check of the verdict head built an
    # NLI-only evaluator that kept the second judge, which needs a first): one small case, local and Ray alike.
    ray = pytest.importorskip("ray")
    gj_ray = pytest.importorskip("groundjudge.runs.ray")
    from groundjudge.io.reports import dumps, finite_report
    from groundjudge.io.tables import input_rows
    from tests.pipeline.test_second_judge import FIRST, SECOND, verdicts
    from tests.runs.test_ray import OPENAI_KEY

    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    with (
        ScriptedLLMServer(route({"judge": verdicts(FIRST)})) as first,
        ScriptedLLMServer(route({"judge": verdicts(SECOND)})) as second,
    ):

        def config(cache: str) -> Config:
            judge = {"second_judge": "openai/gpt-4.1-mini", "second_judge_base_url": second.openai_base_url}
            base = settings_for(None, **judge, second_judge_sample=0.5).model_dump(exclude_unset=True)
            extra = {"llm": "openai/gpt-4o-mini", "base_url": first.openai_base_url, "nli_model": str(SHARED_MODEL)}
            return Config(**{**base, **extra, "cache_dir": str(tmp_path / cache)})

        local = [
            dumps(finite_report(r))
            for r in Evaluator(config("local")).evaluate_numbered(input_rows(src, set()), batch_size=2)
        ]
        s0 = len(second.requests)
        env = {"OPENAI_API_KEY": OPENAI_KEY, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        ray.init(
            address="local",  # a cluster of its own, never one another module or test run started
            namespace=f"groundjudge-second-{uuid.uuid4().hex}",
            num_cpus=2,
            include_dashboard=False,
            log_to_driver=False,
            runtime_env={"env_vars": env},
        )
        try:
            out = tmp_path / "out.jsonl"
            gj_ray.score_file(str(src), out, config("ray"), actors=1, batch_size=2)
        finally:
            ray.shutdown()
        assert len(second.requests) - s0 == len(second.requests[:s0])  # the same second-judge calls
    skip: Any = {"usage": True, "second_judge": {"usage"}}
    got = [AnswerReport.model_validate_json(x).model_dump(exclude=skip) for x in out.read_text().splitlines()]
    assert got == [AnswerReport.model_validate_json(x).model_dump(exclude=skip) for x in local]
    assert any(r.get("second_judge") for r in got)
