"""A sequence classifier's forward pass as one TorchScript call, on the CPU.

A Hugging Face model's forward pass is a few hundred small operations, each a return to Python between two calls
into torch. On a CPU the NLI thread shares the interpreter with the run's call threads (requests built, replies
parsed), and it takes the GIL back before each of those operations. A traced graph runs them in torch's own
interpreter, without Python in between: on 160 long answers at concurrency 32 (2 cores), the cascade's local steps
took about 9% less wall time and the run about 7% less; a run without calls (nli mode) is as fast as before
(`docs/explanation/speed.md`, "The NLI forward pass as one call"). The trace is made after :data:`TRACE_AFTER`
forward passes, so that a short run never pays for it.

The numbers are the model's own, bit for bit. A trace is used only after it gave exactly the model's own logits on
small batches of four shapes cut from the batch it is made at (with and without masked padding, one row and four),
each twice (the second run of a TorchScript graph is its optimised one). Anything else runs the model as it is: a model
type not in :data:`TRACEABLE`, a trace that fails or differs, a batch the trace fails on later (dropped then, for
good), a GPU, and the seq2seq and token kinds.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import warnings
from collections.abc import Iterator
from typing import Any

log = logging.getLogger(__name__)

# Encoder classifiers whose Hugging Face classes trace without a batch's shape baked in: each is checked by
# tests/checker/test_traced.py with a tiny random model of its architecture. Other types run eagerly.
TRACEABLE = frozenset({"bert", "roberta", "xlm-roberta", "deberta-v2", "distilbert", "electra"})

_UNSET = object()
PROBE_TOKENS = 12  # the tokens of a batch's first rows a trace is made and checked on
# Forward passes run eagerly before a trace is made: a trace costs 0.3-0.7 s once (tracing, and its check), about
# what it saves over 30 forward passes of 16 long pairs; a short run (a notebook's few answers, a test) never pays.
TRACE_AFTER = 32


def _logits_module(model: Any, keys: tuple[str, ...]) -> Any:
    """What is traced: ``model``'s logits alone, its inputs ``keys`` taken in order (a model returns an output
    object, a trace takes and gives tensors)."""
    import torch

    class Logits(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *tensors: Any) -> Any:
            return self.model(**dict(zip(keys, tensors, strict=True))).logits

    return Logits()


def traceable(model: Any, device: str, kind: str) -> bool:
    """Whether :class:`TracedLogits` may stand in for ``model``'s forward pass: a sequence classifier (the nli and
    binary kinds) of a :data:`TRACEABLE` type, on the CPU."""
    return device == "cpu" and kind in ("nli", "binary") and getattr(model.config, "model_type", "") in TRACEABLE


class TracedLogits:
    """``model(**inputs).logits`` for one batch, through a checked TorchScript trace where one holds (one per set of
    input names, made once ``after`` forward passes with them have run eagerly); else the model's own forward.
    Thread-safe: two threads wait for one trace."""

    def __init__(self, model: Any, pad_id: int, after: int = TRACE_AFTER) -> None:
        self.model, self.pad_id, self.after = model, pad_id, after
        self._traces: dict[tuple[str, ...], Any] = {}
        self._eager: dict[tuple[str, ...], int] = {}  # forward passes run eagerly before a trace, per input names
        self._lock = threading.Lock()

    def __call__(self, inputs: dict[str, Any]) -> Any:
        keys = tuple(inputs)
        traced = self._traces.get(keys, _UNSET)
        if traced is _UNSET:
            with self._lock:
                traced = self._traces.get(keys, _UNSET)
                if traced is _UNSET:
                    self._eager[keys] = self._eager.get(keys, 0) + 1
                    if self._eager[keys] > self.after:
                        traced = self._traces[keys] = self._trace(inputs)
                    else:
                        traced = None  # not yet: a short run never pays for a trace
        if traced is not None:
            try:
                return traced(*inputs.values())
            except Exception as exc:  # a shape the trace cannot take: the model's own forward, from now on
                log.info(
                    "the NLI model's trace failed on a batch of shape %s (%s); running it eagerly", _shape(inputs), exc
                )
                self._traces[keys] = None
        return self.model(**inputs).logits

    @property
    def in_force(self) -> bool:
        """Whether a trace stands in for the model for some set of input names."""
        return any(t is not None for t in self._traces.values())

    def _trace(self, inputs: dict[str, Any]) -> Any:
        """A trace of the model, made on a few tokens of ``inputs``'s first rows with a masked column of padding,
        and checked (module docstring) on small batches of four shapes, with and without padding: a batch's first
        rows, not the batch (a check on a long batch took 4 s, more than the trace saves on a run of 160 answers)."""
        import torch

        keys = tuple(inputs)
        small = {k: v[:2, :PROBE_TOKENS] for k, v in inputs.items()}
        example = self._padded(small, rows=1, columns=1)
        tiny = {k: v[:1, :2] for k, v in inputs.items()}
        probes = [example, small, self._padded(small, rows=2, columns=3), tiny]
        try:
            with warnings.catch_warnings(), _quiet_transformers():
                # torch.jit's deprecation notice, and the tracer's "might not generalize": the check below stands
                warnings.simplefilter("ignore")
                traced = torch.jit.trace(_logits_module(self.model, keys), tuple(example.values()), check_trace=False)
            for probe in probes * 2:
                if not torch.equal(traced(*probe.values()), self.model(**probe).logits):
                    log.info("the NLI model's trace differs from the model; running it eagerly")
                    return None
        except Exception as exc:
            log.info("the NLI model does not trace (%s); running it eagerly", exc)
            return None
        return traced

    def _padded(self, inputs: dict[str, Any], rows: int, columns: int) -> dict[str, Any]:
        """``inputs`` with its rows ``rows`` times over and ``columns`` more columns: padding, masked out."""
        import torch

        out = {}
        for name, t in inputs.items():
            fill = self.pad_id if name == "input_ids" else 0
            pad = torch.full((t.shape[0], columns), fill, dtype=t.dtype, device=t.device)
            out[name] = torch.cat([torch.cat([t, pad], dim=1)] * rows)
        return out


def _shape(inputs: dict[str, Any]) -> tuple[int, ...]:
    return tuple(next(iter(inputs.values())).shape)


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    """Holds back Hugging Face's "loss_type=None ... unrecognized" notice, which the tracer provokes by reading every
    attribute of the model (groundjudge never trains through this model, so no loss is chosen)."""

    def drop(record: logging.LogRecord) -> bool:
        return "loss_type=" not in record.getMessage()

    logger = logging.getLogger("transformers.modeling_utils")
    logger.addFilter(drop)
    try:
        yield
    finally:
        logger.removeFilter(drop)
