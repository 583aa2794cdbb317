"""What ``tune`` trains a checker towards, by its kind: the training pairs as the checker reads them, one batch's
log-probabilities of the labels' outputs, and the base model's answers on the pairs (the distillation targets). The
training loop (:func:`groundjudge.learn.tune.train`: batches, loss, checkpoints, progress) is one for every kind.

- ``nli`` and ``binary`` (:class:`PairObjective`, a sequence classifier read as tokenizer pairs): the softmax of the
  model's outputs; a pair longer than ``max_length`` loses the end of its premise, and one whose claim alone leaves
  no room for a premise token (scoring refuses such a claim too) is left out of training.
- ``token`` (:class:`TokenObjective`, LettuceDetect): the pairs encoded by the checker itself
  (:meth:`~groundjudge.checker.nli.NLIModel.encode`: the passage in its template as text A, the claim as text B,
  with the claim's token span) and read as scoring reads them: P(supported) is 1 - the largest P(unsupported) over
  the claim's tokens (:func:`~groundjudge.checker.nli.claim_max`). Two outputs, [supported, not supported], in log
  space: log P(not supported) is the largest log P(unsupported) of a claim token, log P(supported) the smallest log
  P(supported) of one (the same number as 1 - the largest P(unsupported), without the rounding of ``1 - p`` near 1).
  Scoring never truncates, so a pair longer than ``max_length`` is left out of training, as is a claim with no
  token.

The loss on these log-probabilities is the same for every kind: class-weighted cross-entropy against the label's
output (for the token kind, the class-balanced binary cross-entropy of the claim's P(supported)), plus KL towards the
base model's answers read the same way (``settings.distill``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from groundjudge.checker.nli import CONTRADICTION, ENTAILMENT, NEUTRAL, Encoded, NLIModel, claim_max
from groundjudge.errors import ConfigError, NLIError

LABEL_OUTPUT = {"SUPPORTED": ENTAILMENT, "UNSUPPORTED": NEUTRAL, "CONTRADICTED": CONTRADICTION}


class Objective(Protocol):
    """One kind's training reading of the pairs (see the module's docstring)."""

    max_length: int
    outputs: int  # how many log-probabilities log_probs gives per pair
    targets: dict[str, int]  # label -> the output it trains

    def load(self, base: str) -> Any:
        """The trainable model (transformers) of ``base``."""
        ...

    def encode(self, pairs: Sequence[tuple[str, str]]) -> Any:
        """(premise, claim) pairs as the model reads them."""
        ...

    def lengths(self, encoded: Any) -> list[int]:
        """Tokens of each encoded pair."""
        ...

    def usable(self, encoded: Any) -> list[int]:
        """The pairs trained on (indices)."""
        ...

    def batch(self, encoded: Any, rows: Sequence[int], device: str) -> dict[str, Any]:
        """The pairs ``rows`` as one padded batch on ``device``."""
        ...

    def log_probs(self, model: Any, batch: dict[str, Any]) -> Any:
        """``(b, outputs)`` log-probabilities of a batch."""
        ...


def autocast(device: str) -> tuple[Callable[[], Any], Any]:
    """(autocast context factory, grad scaler or None): bf16 (or fp16 with a scaler) on CUDA, plain fp32 elsewhere."""
    import torch

    if device.startswith("cuda"):
        if torch.cuda.is_bf16_supported():
            return (lambda: torch.autocast("cuda", dtype=torch.bfloat16)), None
        return (lambda: torch.autocast("cuda", dtype=torch.float16)), torch.amp.GradScaler("cuda")
    return contextlib.nullcontext, None


class PairObjective:
    """``nli`` and ``binary``: a sequence classifier on tokenizer pairs, the premise truncated to ``max_length``."""

    def __init__(self, reader: NLIModel, max_length: int) -> None:
        columns = reader.columns
        targets = {
            label: columns[which] if columns[which] is not None else columns[NEUTRAL]
            for label, which in LABEL_OUTPUT.items()
        }
        if any(c is None for c in targets.values()):
            raise NLIError(f"{reader.name}: no output for one of the labels {columns}")
        self.targets = {label: int(c or 0) for label, c in targets.items()}
        self.reader = reader
        self.tokenizer = reader.tokenizer
        self.max_length = max_length
        self.outputs = int(reader.model.config.num_labels)

    def load(self, base: str) -> Any:
        from transformers import AutoModelForSequenceClassification

        return AutoModelForSequenceClassification.from_pretrained(base, local_files_only=Path(base).is_dir())

    def encode(self, pairs: Sequence[tuple[str, str]]) -> list[dict[str, list[int]]]:
        # a claim that leaves no room for a premise token cannot be cut to fit (the tokenizer raises for the whole
        # batch): such a pair is encoded whole, longer than max_length, and left out by usable()
        room = self.max_length - self.reader.special_tokens  # a pair's special tokens (no template: make_objective)
        fits = [n < room for n in self.reader.count_tokens([c for _, c in pairs])]
        out: list[dict[str, list[int]]] = [{} for _ in pairs]
        for cut in (True, False):
            idx = [i for i, f in enumerate(fits) if f == cut]
            if not idx:
                continue
            enc = self.tokenizer(
                [pairs[i][0] for i in idx],
                [pairs[i][1] for i in idx],
                truncation="only_first" if cut else False,
                max_length=self.max_length if cut else None,
                padding=False,
                verbose=False,
            )
            keys = [k for k in ("input_ids", "token_type_ids", "attention_mask") if k in enc]
            for j, i in enumerate(idx):
                out[i] = {k: enc[k][j] for k in keys}
        return out

    def lengths(self, encoded: list[dict[str, list[int]]]) -> list[int]:
        return [len(e["input_ids"]) for e in encoded]

    def usable(self, encoded: list[dict[str, list[int]]]) -> list[int]:
        return [i for i, e in enumerate(encoded) if len(e["input_ids"]) <= self.max_length]

    def batch(self, encoded: list[dict[str, list[int]]], rows: Sequence[int], device: str) -> dict[str, Any]:
        # padded as scoring pads (NLIModel.batch_inputs: the tokenizer's padding side, token types)
        types = [e["token_type_ids"] for e in encoded] if "token_type_ids" in encoded[0] else None
        inputs, _ = self.reader.batch_inputs(Encoded([e["input_ids"] for e in encoded], types, None), rows)
        return {k: v.to(device) for k, v in inputs.items()}

    def log_probs(self, model: Any, batch: dict[str, Any]) -> Any:
        import torch.nn.functional as F

        return F.log_softmax(model(**batch).logits.float(), -1)


class TokenObjective:
    """``token``: the checker's own encoding, read as scoring reads it (1 - the largest P(unsupported) over the
    claim's tokens); outputs [supported, not supported]."""

    def __init__(self, reader: NLIModel, max_length: int) -> None:
        if reader.supported_label is None:  # NLIModel sets it for every token checker
            raise NLIError(f"{reader.name}: a token checker without a supported label")
        self.outputs = 2
        self.targets = {"SUPPORTED": 0, "UNSUPPORTED": 1, "CONTRADICTED": 1}
        self.reader = reader
        self.supported = reader.supported_label
        self.max_length = max_length

    def load(self, base: str) -> Any:
        from transformers import AutoModelForTokenClassification

        return AutoModelForTokenClassification.from_pretrained(base, local_files_only=Path(base).is_dir())

    def encode(self, pairs: Sequence[tuple[str, str]]) -> Encoded:
        return self.reader.encode(pairs)

    def lengths(self, encoded: Encoded) -> list[int]:
        return [len(ids) for ids in encoded.ids]

    def usable(self, encoded: Encoded) -> list[int]:
        assert encoded.spans is not None
        return [
            i
            for i, (ids, (start, end)) in enumerate(zip(encoded.ids, encoded.spans, strict=True))
            if len(ids) <= self.max_length and end > start
        ]

    def batch(self, encoded: Encoded, rows: Sequence[int], device: str) -> dict[str, Any]:
        inputs, claim = self.reader.batch_inputs(encoded, rows)
        return {**{k: v.to(device) for k, v in inputs.items()}, "claim": claim.to(device)}

    def log_probs(self, model: Any, batch: dict[str, Any]) -> Any:
        import torch
        import torch.nn.functional as F

        inputs = {k: v for k, v in batch.items() if k != "claim"}
        logp = F.log_softmax(model(**inputs).logits.float(), -1)
        not_supported = claim_max(logp[..., 1 - self.supported], batch["claim"])
        supported = -claim_max(-logp[..., self.supported], batch["claim"])
        return torch.stack([supported, not_supported], dim=1)


def make_objective(reader: NLIModel, max_length: int) -> Objective:
    """The objective of ``reader``'s kind, on pairs of at most ``max_length`` tokens (and the model's own limit): a
    sequence classifier read as tokenizer pairs (an NLI cross-encoder, a two-label checker such as MiniCheck-DeBERTa)
    or a token checker (LettuceDetect, its passage in its template). Cheap: ``tune`` asks it before any work.

    Raises:
        ConfigError: a seq2seq checker, or a sequence classifier that reads its pairs through a template (FactCG,
            HHEM): another training objective.
    """
    length = min(max_length, reader.max_length)
    if reader.kind == "token":
        return TokenObjective(reader, length)
    if reader.kind in ("nli", "binary") and reader.template is None:
        return PairObjective(reader, length)
    what = f"a {reader.kind} checker"
    if reader.kind in ("nli", "binary"):
        what = f"{'an NLI' if reader.kind == 'nli' else 'a two-label'} model that reads its pairs through a template"
    raise ConfigError(
        "tune fine-tunes NLI cross-encoders and two-label checkers read as text pairs, and token checkers "
        f"(LettuceDetect); {reader.name} is {what}. Use it as it is, and fit its thresholds and verdict head to your "
        "labels with `groundjudge calibrate` (any kind of checker)"
    )


def base_answers(objective: Objective, model: Any, encoded: Any, device: str, batch: int) -> list[list[float]]:
    """The base model's probabilities of the objective's outputs on each pair (rounded to 6 digits), for
    distillation; ``[]`` for a pair the objective leaves out."""
    import torch

    lengths = objective.lengths(encoded)
    order = sorted(objective.usable(encoded), key=lambda i: lengths[i])
    out: list[list[float]] = [[] for _ in lengths]
    cast, _ = autocast(device)
    model.eval()
    with torch.inference_mode():
        for s in range(0, len(order), batch):
            idx = order[s : s + batch]
            with cast():
                log_probs = objective.log_probs(model, objective.batch(encoded, idx, device))
            for i, p in zip(idx, log_probs.float().exp().cpu().tolist(), strict=True):
                out[i] = [round(x, 6) for x in p]
    return out
