"""The NLI forward pass as one TorchScript call (groundjudge/checker/traced.py): used only where it gives the model's
own numbers bit for bit, on every architecture it is allowed for; anything else runs the model eagerly."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch
import transformers
from hypothesis import given, settings
from hypothesis import strategies as st

from groundjudge.checker import traced as traced_module
from groundjudge.checker.nli import NLIModel
from groundjudge.checker.traced import TRACEABLE, TracedLogits, traceable
from tests.conftest import SHARED_MODEL

SMALL = {
    "vocab_size": 100,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "max_position_embeddings": 130,
    "num_labels": 3,
    "initializer_range": 0.5,
}


def _tiny(model_type: str) -> tuple[Any, bool]:
    """A tiny random sequence classifier of the real architecture (seed 0, in eval mode), and whether it takes token
    types."""
    model, types = _built(model_type)
    return model.eval(), types


def _built(model_type: str) -> tuple[Any, bool]:
    torch.manual_seed(0)
    t = transformers
    if model_type == "bert":
        return t.BertForSequenceClassification(t.BertConfig(**SMALL)), True
    if model_type == "roberta":
        return t.RobertaForSequenceClassification(t.RobertaConfig(**SMALL, pad_token_id=1)), False
    if model_type == "xlm-roberta":
        return t.XLMRobertaForSequenceClassification(t.XLMRobertaConfig(**SMALL, pad_token_id=1)), False
    if model_type == "deberta-v2":  # the default hub model's shape: relative attention, no absolute positions
        config = t.DebertaV2Config(
            **SMALL,
            relative_attention=True,
            position_biased_input=False,
            pos_att_type=["p2c", "c2p"],
            max_relative_positions=-1,
            position_buckets=16,
            norm_rel_ebd="layer_norm",
            share_att_key=True,
        )
        return t.DebertaV2ForSequenceClassification(config), True
    if model_type == "distilbert":
        config = t.DistilBertConfig(
            vocab_size=100, dim=32, n_layers=2, n_heads=2, hidden_dim=64, max_position_embeddings=130, num_labels=3
        )
        return t.DistilBertForSequenceClassification(config), False
    if model_type == "electra":
        return t.ElectraForSequenceClassification(t.ElectraConfig(**SMALL, embedding_size=16)), True
    raise AssertionError(model_type)


def _batch(rows: int, width: int, types: bool, seed: int) -> dict[str, Any]:
    """Random token ids, the first row padded after its middle (masked out), as NLIModel.batch_inputs gives."""
    g = torch.Generator().manual_seed(seed)
    mask = torch.ones(rows, width, dtype=torch.long)
    mask[0, width // 2 + 1 :] = 0
    out = {"input_ids": torch.randint(3, 100, (rows, width), generator=g), "attention_mask": mask}
    if types:
        out["token_type_ids"] = (torch.arange(width) >= width // 2).long().expand(rows, width).contiguous()
    return out


def traces_made(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that grows by one each time a trace is made (:meth:`TracedLogits._trace` counted)."""
    made: list[int] = []
    real = TracedLogits._trace

    def counted(self: TracedLogits, inputs: dict[str, Any]) -> Any:
        made.append(1)
        return real(self, inputs)

    monkeypatch.setattr(TracedLogits, "_trace", counted)
    return made


SHAPES = [(3, 7), (1, 2), (5, 40), (16, 128), (2, 7), (1, 1)]


@pytest.mark.parametrize("model_type", sorted(TRACEABLE))
def test_every_traceable_architecture_gives_its_own_logits_bit_for_bit(model_type: str) -> None:
    model, types = _tiny(model_type)
    assert model.config.model_type == model_type and traceable(model, "cpu", "nli")
    logits = TracedLogits(model, pad_id=1 if "roberta" in model_type else 0, after=0)
    with torch.inference_mode():
        for i, (rows, width) in enumerate(SHAPES):
            batch = _batch(rows, width, types, seed=i)
            assert torch.equal(logits(batch), model(**batch).logits), (model_type, rows, width)
    assert logits.in_force  # made on the first shape, it held on every other


_TRACED: dict[str, tuple[Any, bool, TracedLogits]] = {}


@settings(deadline=None, max_examples=60, database=None)
@given(
    model_type=st.sampled_from(sorted(TRACEABLE)),
    lengths=st.lists(st.integers(1, 70), min_size=1, max_size=8),
    pad=st.integers(0, 5),
    seed=st.integers(0, 2**16),
)
def test_a_trace_never_changes_a_score(model_type: str, lengths: list[int], pad: int, seed: int) -> None:
    # any batch a trace takes (rows of any length, padded to the longest and past it): the model's own logits, bit
    # for bit, from one trace per architecture made on the first example's batch
    if model_type not in _TRACED:
        model, types = _tiny(model_type)
        _TRACED[model_type] = model, types, TracedLogits(model, pad_id=1 if "roberta" in model_type else 0, after=0)
    model, types, logits = _TRACED[model_type]
    width = max(lengths) + pad
    batch = _batch(len(lengths), width, types, seed)
    batch["attention_mask"] = (torch.arange(width) < torch.tensor(lengths)[:, None]).long()
    with torch.inference_mode():
        assert torch.equal(logits(batch), model(**batch).logits)
    assert logits.in_force


def test_the_shared_model_scores_as_without_the_trace() -> None:
    traced = NLIModel(str(SHARED_MODEL), device="cpu", batch_size=5)
    eager = NLIModel(str(SHARED_MODEL), device="cpu", batch_size=5)
    eager._traced = None
    assert traced._traced is not None
    traced._traced.after = 0  # at once: the default waits for TRACE_AFTER forward passes
    pairs = [
        ("The museum opened in 1897 on the river bank. " * k, f"The museum opened in {1890 + k}.") for k in range(1, 13)
    ]
    assert np.array_equal(traced.predict(pairs), eager.predict(pairs))
    assert np.array_equal(traced.predict(pairs[3:4]), eager.predict(pairs[3:4]))
    assert traced._traced is not None and traced._traced.in_force


def test_a_short_run_never_pays_for_a_trace(monkeypatch: pytest.MonkeyPatch) -> None:
    model, types = _tiny("bert")
    logits = TracedLogits(model, pad_id=0, after=3)
    made = traces_made(monkeypatch)
    with torch.inference_mode():
        for i in range(5):
            batch = _batch(2, 5 + i, types, seed=i)
            assert torch.equal(logits(batch), model(**batch).logits)
            assert logits.in_force == (i >= 3) and len(made) == (i >= 3)


def test_a_few_answers_scored_make_no_trace(tiny_nli: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    made = traces_made(monkeypatch)
    nli = NLIModel(str(tiny_nli), device="cpu", batch_size=2)
    nli.predict([(f"The museum opened in {1890 + k}.", "The museum opened in 1897.") for k in range(12)])
    assert nli._traced is not None and nli.forward_passes == 6
    assert made == [] and not nli._traced.in_force  # TRACE_AFTER forward passes come first


class ShapeBaked(torch.nn.Module):
    """A classifier whose forward branches on the batch's width in Python: a trace keeps the branch it was made
    on, and the wider batch of the check takes the other one."""

    config = SimpleNamespace(model_type="bert")

    def __init__(self) -> None:
        super().__init__()
        self.head = torch.nn.Linear(4, 3)

    def forward(self, input_ids: Any, attention_mask: Any) -> Any:
        x = torch.nn.functional.one_hot(input_ids % 4, 4).float().mean(1)
        if input_ids.shape[1] > 5:
            x = x * 2
        return SimpleNamespace(logits=self.head(x))


@pytest.mark.parametrize("first", [(2, 3), (16, 40)])
def test_a_trace_that_differs_from_the_model_is_not_used(first: tuple[int, int]) -> None:
    model = ShapeBaked().eval()
    logits = TracedLogits(model, pad_id=0, after=0)
    with torch.inference_mode():
        for rows, width in [first, (4, 9), (1, 4)]:
            batch = _batch(rows, width, types=False, seed=rows)
            assert torch.equal(logits(batch), model(**batch).logits)
    assert not logits.in_force


def test_a_trace_that_fails_on_a_later_batch_gives_way_to_the_model_for_good(caplog: pytest.LogCaptureFixture) -> None:
    model, types = _tiny("bert")
    logits = TracedLogits(model, pad_id=0, after=0)
    with torch.inference_mode():
        logits(_batch(2, 5, types, seed=0))
        assert logits.in_force
        keys = tuple(_batch(1, 1, types, seed=0))
        calls = []

        def broken(*tensors: Any) -> Any:
            calls.append(1)
            raise RuntimeError("The size of tensor a (9) must match the size of tensor b (5)")

        logits._traces[keys] = broken
        batch = _batch(3, 9, types, seed=1)
        with caplog.at_level(logging.INFO, logger=traced_module.__name__):
            assert torch.equal(logits(batch), model(**batch).logits)
            assert torch.equal(logits(batch), model(**batch).logits)
    assert calls == [1] and not logits.in_force
    assert "running it eagerly" in caplog.text


def test_two_threads_first_batches_wait_for_one_trace(monkeypatch: pytest.MonkeyPatch) -> None:
    model, types = _tiny("bert")
    logits = TracedLogits(model, pad_id=0, after=0)
    made = traces_made(monkeypatch)
    start, out = threading.Barrier(2), {}

    def run(i: int) -> None:
        batch = _batch(2 + i, 6 + i, types, seed=i)
        start.wait()
        with torch.inference_mode():
            out[i] = torch.equal(logits(batch), model(**batch).logits)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert out == {0: True, 1: True} and made == [1] and logits.in_force


def test_only_cpu_sequence_classifiers_of_a_listed_type_are_traced() -> None:
    model, _ = _tiny("bert")
    assert traceable(model, "cpu", "nli") and traceable(model, "cpu", "binary")
    assert not traceable(model, "cuda", "nli") and not traceable(model, "mps", "nli")
    assert not traceable(model, "cpu", "seq2seq") and not traceable(model, "cpu", "token")
    other = SimpleNamespace(config=SimpleNamespace(model_type="modernbert"))
    assert not traceable(other, "cpu", "nli")


def test_the_tracers_loss_notice_is_held_back_and_nothing_else() -> None:
    logger = logging.getLogger("transformers.modeling_utils")
    seen: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    logger.addHandler(handler)
    try:
        with traced_module._quiet_transformers():
            logger.warning("`loss_type=None` was set in the config but it is unrecognized.")
            logger.warning("something else")
        logger.warning("`loss_type=None` after")
    finally:
        logger.removeHandler(handler)
    assert seen == ["something else", "`loss_type=None` after"]
