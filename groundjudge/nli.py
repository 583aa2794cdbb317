"""The local NLI cross-encoder: loading, device choice, batched scoring, and its disk cache.

Any Hugging Face sequence-classification NLI model works: the label order comes from its config's ``id2label``.
Pairs are tokenized once, sorted by length, batched with dynamic padding, and returned in the caller's order as
probabilities ``[entailment, neutral, contradiction]``. Nothing is truncated: a pair longer than the model's limit
is an error (the evidence stage cuts passages so that this never happens).
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import numpy as np

from groundjudge.cache import Cache, make_key
from groundjudge.errors import NLIError

log = logging.getLogger(__name__)

DEFAULT_NLI_MODEL = "cross-encoder/nli-deberta-v3-base"
ENTAILMENT, NEUTRAL, CONTRADICTION = 0, 1, 2

_LABEL_WORDS = {
    ENTAILMENT: ("entail", "support", "true"),
    NEUTRAL: ("neutral", "not_entail", "not entail", "non_entail", "non-entail", "not enough", "nei", "unsupport"),
    CONTRADICTION: ("contradict", "refute", "false"),
}


def resolve_model_name(model: str | None = None) -> str:
    """The NLI model to use: the argument, else $GROUNDJUDGE_NLI_MODEL, else the default hub model."""
    return model or os.environ.get("GROUNDJUDGE_NLI_MODEL") or DEFAULT_NLI_MODEL


def label_columns(id2label: dict[int, str] | dict[str, str]) -> list[int | None]:
    """For each of entailment, neutral, contradiction, the model output index that holds it (None if absent).

    Two-way models (entailment / not_entailment) get neutral = not_entailment and no contradiction column.
    A config with placeholder names (LABEL_0 ...) is refused: guessing the order would silently invert results.
    """
    columns: list[int | None] = [None, None, None]
    for raw_index, raw_name in id2label.items():
        name = str(raw_name).strip().lower()
        # check neutral first: "not_entailment" contains "entail"
        for which in (NEUTRAL, CONTRADICTION, ENTAILMENT):
            if any(name.startswith(w) or name == w for w in _LABEL_WORDS[which]):
                if columns[which] is not None:
                    raise NLIError(f"id2label names {which!r} twice: {id2label}")
                columns[which] = int(raw_index)
                break
    if columns[ENTAILMENT] is None:
        raise NLIError(
            f"the model's config.id2label {dict(id2label)} names no entailment label; an NLI model's config must "
            "name its labels (entailment / neutral / contradiction)"
        )
    return columns


def pick_device(device: str | None = None) -> str:
    """``device`` if given, else cuda, then mps, then cpu."""
    import torch

    if device:
        return device
    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    return "cpu"


# Whole-file digests of model files, remembered by (absolute path, size, mtime_ns, inode) for this process only:
# hashing the shared 91 MB model takes about 0.2 s, so a memo on disk is not worth its staleness risks.
_DIGESTS: dict[tuple[str, int, int, int], str] = {}
_DIGESTS_LOCK = threading.Lock()
_RACY_NS = 2 * 10**9  # a file modified this recently may change again within the same mtime tick: never memoised


def file_digest(path: Path) -> str:
    """SHA-256 of a whole file, computed once per (path, size, mtime, inode) in this process."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ino)
    with _DIGESTS_LOCK:
        hit = _DIGESTS.get(key)
    if hit is not None:
        return hit
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(2**20):
            h.update(block)
    digest = h.hexdigest()
    if time.time_ns() - st.st_mtime_ns > _RACY_NS:
        with _DIGESTS_LOCK:
            _DIGESTS[key] = digest
    return digest


def _fingerprint_dir(path: Path) -> str:
    """A content hash of a local model folder: the name and whole-content digest of every file in it."""
    h = hashlib.sha256()
    for f in sorted(path.iterdir()):
        if not f.is_file():
            continue
        h.update(f.name.encode() + b"\0" + file_digest(f).encode() + b"\0")
    return h.hexdigest()[:16]


def _numerics(device: str, dtype: object) -> str:
    """Device class and weight dtype, the parts of the runtime that change the numbers (cuda:1 = cuda)."""
    return f"{device.split(':', 1)[0]}-{str(dtype).removeprefix('torch.')}"


class NLIModel:
    """A Hugging Face NLI cross-encoder, ready for batched scoring.

    Args:
        model: hub id or local path; default $GROUNDJUDGE_NLI_MODEL or cross-encoder/nli-deberta-v3-base.
        device: "cuda", "mps", "cpu" (default: best available).
        half: float16 weights; default on for cuda.
        batch_size: pairs per forward pass (default 64 on GPU, 16 on CPU); halves itself on GPU out-of-memory.
        threads: torch CPU threads (default: torch's choice).
        revision: hub revision.
        local_files_only: default true for local paths and when $HF_HUB_OFFLINE is set.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        device: str | None = None,
        half: bool | None = None,
        batch_size: int | None = None,
        threads: int | None = None,
        revision: str | None = None,
        local_files_only: bool | None = None,
    ) -> None:
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        self.name = resolve_model_name(model)
        is_local = Path(self.name).is_dir()
        if local_files_only is None:
            local_files_only = is_local or os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0")
        if threads:
            torch.set_num_threads(threads)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(
                self.name, revision=revision, local_files_only=local_files_only
            )
            self.model = AutoModelForSequenceClassification.from_pretrained(
                self.name, revision=revision, local_files_only=local_files_only
            )
        except (OSError, ValueError) as exc:
            raise NLIError(f"could not load NLI model {self.name!r}: {exc}") from exc
        if not getattr(self.tokenizer, "is_fast", False):
            raise NLIError(f"{self.name}: a fast (Rust) tokenizer is needed for character offsets")
        self.columns = label_columns(self.model.config.id2label)
        self.device = pick_device(device)
        self.half = (self.device == "cuda") if half is None else half
        self.model.to(self.device)
        if self.half:
            self.model.half()
        self.model.eval()
        self.batch_size = batch_size or (64 if self.device != "cpu" else 16)
        self.max_length = self._max_length()
        self.special_tokens = int(self.tokenizer.num_special_tokens_to_add(pair=True))
        if is_local:
            weights = f"{Path(self.name).name}@{_fingerprint_dir(Path(self.name))}"
        else:
            weights = f"{self.name}@{getattr(self.model.config, '_commit_hash', None) or revision or 'main'}"
        # fp16 on cuda and fp32 on cpu give different numbers: they must not share cache entries
        self.fingerprint = f"{weights}/{_numerics(self.device, next(self.model.parameters()).dtype)}"
        self.forward_passes = 0
        self.pairs_scored = 0
        self._lock = threading.Lock()

    _loaded: ClassVar[dict[tuple[str, str | None, int | None], NLIModel]] = {}
    _loaded_lock: ClassVar[threading.Lock] = threading.Lock()

    @classmethod
    def shared(cls, model: str | None = None, *, device: str | None = None, batch_size: int | None = None) -> NLIModel:
        """One loaded instance per (model, device, batch size) in this process: notebooks and CLI runs that build
        several evaluators load the weights once."""
        key = (resolve_model_name(model), device, batch_size)
        with cls._loaded_lock:
            if key not in cls._loaded:
                cls._loaded[key] = cls(model, device=device, batch_size=batch_size)
            return cls._loaded[key]

    def _max_length(self) -> int:
        limits = []
        tok_max = getattr(self.tokenizer, "model_max_length", None)
        if isinstance(tok_max, int) and 0 < tok_max < 100_000:
            limits.append(tok_max)
        pos = getattr(self.model.config, "max_position_embeddings", None)
        if isinstance(pos, int) and pos > 0:
            # RoBERTa-family position ids start after the padding index
            offset = 2 if self.model.config.model_type in ("roberta", "xlm-roberta", "camembert", "longformer") else 0
            limits.append(pos - offset)
        return min(limits) if limits else 512

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text without special tokens."""
        if not texts:
            return []
        enc = self.tokenizer(list(texts), add_special_tokens=False, truncation=False, verbose=False)
        return [len(ids) for ids in enc["input_ids"]]

    def predict(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """Probabilities ``(n, 3)`` in entailment / neutral / contradiction order for (premise, hypothesis) pairs."""
        import torch

        out = np.zeros((len(pairs), 3), dtype=np.float32)
        if not pairs:
            return out
        enc = self.tokenizer(
            [p for p, _ in pairs], [h for _, h in pairs], truncation=False, padding=False, verbose=False
        )
        ids: list[list[int]] = enc["input_ids"]
        types: list[list[int]] | None = enc.get("token_type_ids")
        lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
        too_long = np.flatnonzero(lengths > self.max_length)
        if too_long.size:
            i = int(too_long[0])
            raise NLIError(
                f"pair {i} has {lengths[i]} tokens, over the model's {self.max_length}: cut the premise first "
                "(nothing is truncated silently)"
            )
        order = np.argsort(-lengths, kind="stable")  # longest first: an out-of-memory shows up at once
        pad_id = self.tokenizer.pad_token_id or 0
        left = getattr(self.tokenizer, "padding_side", "right") == "left"
        start = 0
        with torch.inference_mode():
            while start < len(order):
                batch = order[start : start + self.batch_size]
                width = int(lengths[batch[0]])
                input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
                mask = torch.zeros((len(batch), width), dtype=torch.long)
                token_types = torch.zeros((len(batch), width), dtype=torch.long) if types is not None else None
                for row, j in enumerate(batch):
                    n = int(lengths[j])
                    cols = slice(width - n, width) if left else slice(0, n)
                    input_ids[row, cols] = torch.tensor(ids[j])
                    mask[row, cols] = 1
                    if token_types is not None and types is not None:
                        token_types[row, cols] = torch.tensor(types[j])
                inputs = {"input_ids": input_ids.to(self.device), "attention_mask": mask.to(self.device)}
                if token_types is not None:
                    inputs["token_type_ids"] = token_types.to(self.device)
                try:
                    logits = self.model(**inputs).logits
                except torch.cuda.OutOfMemoryError:
                    if self.batch_size == 1:
                        raise
                    self.batch_size = max(1, self.batch_size // 2)
                    torch.cuda.empty_cache()
                    log.warning("NLI out of GPU memory; batch size now %d", self.batch_size)
                    continue
                probs = torch.softmax(logits.float(), dim=-1).cpu().numpy()
                for which, col in enumerate(self.columns):
                    if col is not None:
                        out[batch, which] = probs[:, col]
                with self._lock:
                    self.forward_passes += 1
                    self.pairs_scored += len(batch)
                start += len(batch)
        return out


class NLIScorer:
    """An :class:`NLIModel` behind the disk cache: key = model fingerprint, premise, hypothesis."""

    def __init__(self, model: NLIModel, cache: Cache | None = None) -> None:
        self.model = model
        self.cache = cache
        self.cache_hits = 0

    def _key(self, premise: str, hypothesis: str) -> str:
        return make_key("nli", [self.model.fingerprint, premise, hypothesis])

    def score(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """Probabilities ``(n, 3)`` for the pairs, from the cache where it has them.

        A row the model returned with any non-finite value (NaN, infinity) comes back as all NaN and is never
        cached: the caller marks that claim as an error. A non-finite row found in the cache is scored again.
        """
        out = np.zeros((len(pairs), 3), dtype=np.float32)
        todo: dict[tuple[str, str], list[int]] = {}
        for i, pair in enumerate(pairs):
            todo.setdefault(pair, []).append(i)  # identical pairs are scored once
        if self.cache is not None and self.cache.reads:
            for pair in list(todo):
                hit = self.cache.get(self._key(*pair), miss_ok=True)  # local and free: never a replay error
                if hit is not None and _finite_row(hit):
                    out[todo.pop(pair)] = hit
                    self.cache_hits += 1
        if todo:
            unique = list(todo)
            # rounded as the cache stores them, so that a fresh and a cached run report the same numbers
            probs = np.round(self.model.predict(unique), 6)
            finite = np.asarray(np.isfinite(probs).all(axis=1), dtype=bool)
            probs[~finite] = np.nan
            if not finite.all():
                log.warning("NLI model %s returned non-finite scores for %d pair(s)", self.model.name, (~finite).sum())
            for pair, p in zip(unique, probs, strict=True):
                out[todo[pair]] = p
            if self.cache is not None and self.cache.writes and finite.any():
                with self.cache.store.transact():
                    for pair, p, ok in zip(unique, probs, finite, strict=True):
                        if ok:
                            self.cache.set(self._key(*pair), [round(float(x), 6) for x in p])
        return out


def _finite_row(value: object) -> bool:
    """Whether a cached value is three finite numbers (entries from before non-finite rows were refused are not)."""
    if not isinstance(value, list) or len(value) != 3:
        return False
    try:
        return all(math.isfinite(float(x)) for x in value)
    except (TypeError, ValueError):
        return False
