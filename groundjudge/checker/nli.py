"""The local checker: loading, device choice, batched scoring, and its disk cache.

Four kinds of Hugging Face model work (see :class:`NLIModel`): 3-way NLI cross-encoders (label order from the
config's ``id2label``), binary grounding classifiers (MiniCheck-RoBERTa/DeBERTa, FactCG-DeBERTa with its template,
HHEM-2.1-open with ``trust_remote_code``), seq2seq checkers (MiniCheck-Flan-T5) and token classifiers that mark
unsupported tokens of an answer (LettuceDetect). Pairs are tokenized once, sorted by length, batched with dynamic
padding, and returned in the caller's order as probabilities ``[entailment, neutral, contradiction]``.
Nothing is truncated: a pair longer than the model's limit is an error (the evidence stage cuts passages so that this
never happens).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal, NamedTuple

import numpy as np

from groundjudge.cache import Cache, make_key
from groundjudge.checker.folder import fingerprint_dir
from groundjudge.checker.profile import MODEL_PROFILE_FILE
from groundjudge.checker.traced import TracedLogits, traceable
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


# Pairs a cuda forward pass takes by default, as tokens: 256 pairs of 512 (the shared model's whole table). Measured
# on two cards (docs/benchmarks/gpu.md): 256 pairs a pass scored 39% (H100) and 44% (H200) more pairs/s than 64, at
# 0.5-0.6 GiB; a model of longer pairs takes fewer, so its first pass is no larger and out of memory stays rare.
CUDA_BATCH_TOKENS = 256 * 512


def default_batch_size(device: str, max_length: int) -> int:
    """Pairs a forward pass takes when none is asked: on cuda as many of ``max_length`` tokens as fit
    :data:`CUDA_BATCH_TOKENS` (halved on out of memory), 64 on another accelerator, 16 on a CPU (the fastest there:
    docs/explanation/speed.md)."""
    if device.split(":", 1)[0] == "cuda":
        return max(1, CUDA_BATCH_TOKENS // max(1, max_length))
    return 16 if device == "cpu" else 64


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


def _numerics(device: str, dtype: object) -> str:
    """Device class and weight dtype, the parts of the runtime that change the numbers (cuda:1 = cuda)."""
    return f"{device.split(':', 1)[0]}-{str(dtype).removeprefix('torch.')}"


Kind = Literal["auto", "nli", "binary", "seq2seq", "token"]
KINDS: tuple[str, ...] = ("auto", "nli", "binary", "seq2seq", "token")

# MiniCheck-Flan-T5's input (Tang et al. 2024, minicheck/inference.py): "predict: " + document + eos + claim, read
# at the first decoder step as the "1" (supported) against the "0" (unsupported) token.
SEQ2SEQ_TEMPLATE = "predict: {premise}{eos}{hypothesis}"
SEQ2SEQ_LABEL_WORDS = ("0", "1")  # unsupported, supported

# FactCG-DeBERTa's input (Lei et al., NAACL 2025, factcg/utils.py INSTRUCTION_TEMPLATE): one text, read as a binary
# classifier whose output 1 means supported. Not in the hub model's config: a model folder's groundjudge.json
# declares it (docs/how-to/local-checker.md).
FACTCG_TEMPLATE = (
    '{premise}\n\nChoose your answer: based on the paragraph above can we conclude that "{hypothesis}"?\n\n'
    "OPTIONS:\n- Yes\n- No\nI think the answer is "
)

# A token checker (LettuceDetect, Kovacs and Recski 2025) reads a tokenizer pair: the prompt an LLM answered (the
# passages, wrapped in the RAGTruth prompt it was trained on), then the answer, and gives each answer token a
# probability of being unsupported. groundjudge has a passage and a claim, no question: LettuceDetect's own prompt
# for that case (no question: its summary prompt, passages numbered "passage 1: ...") wraps the passage, and the
# claim is the answer. Only the claim's tokens are read.
TOKEN_TEMPLATE = "Summarize the following text:\npassage 1: {premise}\noutput:"

# Two-label checkers whose config names its labels (checked in this order; "unsupported" before "supported").
_UNSUPPORTED_WORDS = (
    "unsupport",
    "not_support",
    "not support",
    "not_entail",
    "not entail",
    "non_entail",
    "non-entail",
    "inconsistent",
    "hallucinat",
    "unfaithful",
    "ungrounded",
    "contradict",
    "refute",
    "false",
    "no",
)
_SUPPORTED_WORDS = ("support", "entail", "consistent", "faithful", "grounded", "factual", "true", "yes")
_SLOT = re.compile(r"\{(premise|hypothesis|text1|text2|eos)\}")


def supported_label_from_names(id2label: dict[int, str] | dict[str, str]) -> int | None:
    """The output index that a two-label checker's ``id2label`` names as supported, or None if the names do not say
    (LABEL_0 / LABEL_1)."""
    supported, unsupported = [], []
    for raw_index, raw_name in id2label.items():
        name = str(raw_name).strip().lower()
        if name.startswith(_UNSUPPORTED_WORDS):
            unsupported.append(int(raw_index))
        elif name.startswith(_SUPPORTED_WORDS):
            supported.append(int(raw_index))
    return supported[0] if len(id2label) == 2 and len(supported) == 1 else None


def _folder_stamp(name: str) -> str | None:
    """What a loaded instance of a local model folder was read from: its files' contents (:func:`_fingerprint_dir`,
    digests memoised per file's size, time and inode) and its declaration (:func:`read_checker_profile`; the
    thresholds beside it are read afresh by each run); None for a hub id."""
    path = Path(name)
    if not path.is_dir():
        return None
    try:
        declared = json.dumps(read_checker_profile(path), sort_keys=True)
    except NLIError:  # loading says what is wrong with the file
        declared = "unreadable"
    return f"{fingerprint_dir(path)}/{declared}"


def fill_template(template: str, premise: str, hypothesis: str, eos: str = "") -> str:
    """The model input for one pair: ``{premise}`` / ``{text1}``, ``{hypothesis}`` / ``{text2}`` and ``{eos}``
    replaced in one pass (braces inside the texts are never read as slots)."""
    values = {"premise": premise, "text1": premise, "hypothesis": hypothesis, "text2": hypothesis, "eos": eos}
    return _SLOT.sub(lambda m: values[m.group(1)], template)


def read_checker_profile(model_dir: str | Path) -> dict[str, Any]:
    """What a model folder's ``groundjudge.json`` says about how to run it: ``kind``, ``supported_label`` and
    ``template`` (``checker.profile.DECLARATION_KEYS``, which ``write_checker_declaration`` stores; absent keys are
    left out). The thresholds in the same file are read by ``checker.profile``.

    Raises:
        NLIError: the file cannot be read or a value is of the wrong type.
    """
    path = Path(model_dir) / MODEL_PROFILE_FILE
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise NLIError(f"{path}: {exc}") from exc
    if not isinstance(data, dict):
        raise NLIError(f"{path}: not a JSON object")
    out: dict[str, Any] = {}
    if (kind := data.get("kind")) is not None:
        if kind not in KINDS:
            raise NLIError(f"{path}: kind must be one of {', '.join(KINDS)}, not {kind!r}")
        out["kind"] = kind
    if (label := data.get("supported_label")) is not None:
        if isinstance(label, bool) or not isinstance(label, int):
            raise NLIError(f"{path}: supported_label must be an output index (0 or 1), not {label!r}")
        out["supported_label"] = label
    if (template := data.get("template")) is not None:
        if not isinstance(template, str):
            raise NLIError(f"{path}: template must be a string")
        out["template"] = template
    return out


def detect_kind(config: Any) -> str:
    """The checker kind a model config implies: encoder-decoder -> seq2seq, a token classifier -> token, two labels
    -> binary, three -> nli."""
    architectures = [str(a) for a in getattr(config, "architectures", None) or []]
    if getattr(config, "is_encoder_decoder", False) or any(
        a.endswith("ForConditionalGeneration") for a in architectures
    ):
        return "seq2seq"
    if any(a.endswith("ForTokenClassification") for a in architectures):
        return "token"
    n = len(getattr(config, "id2label", None) or {})
    if n == 2:
        return "binary"
    if n == 3:
        return "nli"
    raise NLIError(
        f"cannot tell the checker kind of a model with {n} labels: pass kind (nli, binary, seq2seq or token)"
    )


def _check_architecture(name: str, kind: str, config: Any) -> None:
    """Refuse to read a token classifier as a sequence classifier or the reverse: transformers would load it with
    a freshly initialised random head and no error."""
    architectures = [str(a) for a in getattr(config, "architectures", None) or []]
    token = any(a.endswith("ForTokenClassification") for a in architectures)
    if kind == "token" and architectures and not token:
        raise NLIError(
            f"NLI model {name!r} is not a token classifier (its config's architectures: {architectures}); kind=token "
            "reads a *ForTokenClassification model such as LettuceDetect"
        )
    if kind in ("nli", "binary") and token:
        raise NLIError(f"NLI model {name!r} is a token classifier ({architectures}): read it with kind=token")


def _remote_code_error(name: str) -> NLIError:
    return NLIError(
        f"NLI model {name!r} runs its own Python code (auto_map in its config.json); groundjudge runs it only when "
        "you opt in: pass trust_remote_code=True (Config.nli_trust_remote_code) after reading that code"
    )


_OWN_CODE_CLASSES = (
    "AutoConfig",
    "AutoModelForSequenceClassification",
    "AutoModelForSeq2SeqLM",
    "AutoModelForTokenClassification",
)


def _needs_remote_code(name: str, hub: dict[str, Any]) -> bool:
    """Whether a model's config.json maps the classes groundjudge loads to the model's own code (``auto_map``).

    Read from the raw file before transformers sees the config: on a terminal transformers would otherwise stop
    to ask whether to run the code.
    """
    path: str | Path | None = Path(name) / "config.json"
    if not Path(name).is_dir():
        try:
            from transformers.utils import cached_file

            path = cached_file(name, "config.json", revision=hub["revision"], local_files_only=hub["local_files_only"])
        except (OSError, ValueError, ImportError):
            path = None  # loading the config reports why
    if path is None:
        return False
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    auto_map = raw.get("auto_map") if isinstance(raw, dict) else None
    return isinstance(auto_map, dict) and any(k in auto_map for k in _OWN_CODE_CLASSES)


class Encoded(NamedTuple):
    """Pairs as a checker reads them (:meth:`NLIModel.encode`)."""

    ids: list[list[int]]
    types: list[list[int]] | None
    spans: list[tuple[int, int]] | None  # token kind: each pair's claim tokens, [start, end)


def claim_max(values: Any, claim: Any) -> Any:
    """Each row's largest value over its claim's tokens, NaN for a row whose claim has no token: how a token
    checker's per-token numbers become one number per claim. ``values`` is a ``(b, t)`` tensor, ``claim`` a ``(b, t)``
    mask. Scoring reads the largest P(unsupported) (:meth:`NLIModel._forward_tokens`); ``tune`` trains on the same
    reading of log-probabilities (``learn.objective``)."""
    import torch

    claim = claim.to(values.device)
    largest = torch.where(claim, values, torch.full_like(values, float("-inf"))).amax(dim=1)
    return torch.where(claim.any(dim=1), largest, torch.full_like(largest, float("nan")))


# -- loading a checker (NLIModel.__init__) ----------------------------------------------------------------------


def _load_config(name: str, hub: dict[str, Any]) -> Any:
    """The model's transformers config; a model that needs its own code is refused unless it is trusted."""
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(name, **hub)
    except (OSError, ValueError, KeyError) as exc:
        if "trust_remote_code" in str(exc):
            raise _remote_code_error(name) from exc
        raise NLIError(f"could not load NLI model {name!r}: {exc}") from exc
    auto_map = getattr(config, "auto_map", None)
    if not hub["trust_remote_code"] and isinstance(auto_map, dict) and set(auto_map) & set(_OWN_CODE_CLASSES):
        raise _remote_code_error(name)
    return config


def _load_tokenizer(name: str, config: Any, hub: dict[str, Any]) -> Any:
    """The model's tokenizer, or its config's foundation model's (HHEM-2.1-open ships none)."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(name, **hub)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        # HHEM-2.1-open ships no tokenizer: its config names the model whose tokenizer it uses ("foundation")
        foundation = getattr(config, "foundation", None)
        if not isinstance(foundation, str) or not foundation:
            raise NLIError(f"could not load the tokenizer of NLI model {name!r}: {exc}") from exc
    try:
        return AutoTokenizer.from_pretrained(
            foundation, local_files_only=hub["local_files_only"] or Path(foundation).is_dir()
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise NLIError(
            f"NLI model {name!r} has no tokenizer of its own and its config's foundation {foundation!r} "
            f"could not be loaded ({exc}); put the tokenizer files beside the weights"
        ) from exc


def _load_weights(name: str, kind: str, config: Any, hub: dict[str, Any]) -> Any:
    """The model's weights in the transformers class of its checker ``kind``."""
    from transformers import (
        AutoModelForSeq2SeqLM,
        AutoModelForSequenceClassification,
        AutoModelForTokenClassification,
    )

    auto = {"seq2seq": AutoModelForSeq2SeqLM, "token": AutoModelForTokenClassification}.get(
        kind, AutoModelForSequenceClassification
    )
    try:
        return auto.from_pretrained(name, config=config, **hub)
    except (OSError, ValueError, KeyError, TypeError, ImportError, AttributeError, RuntimeError) as exc:
        raise NLIError(f"could not load NLI model {name!r} as a {kind} checker: {exc}") from exc


def _read_template(name: str, kind: str, eos: str, declared: str | None, config: Any) -> str | None:
    """The template that turns a pair into one text (declared, the kind's own or the config's prompt), checked
    for its slots; None: pairs are encoded as tokenizer pairs."""
    template = declared
    if template is None and kind == "token":
        template = TOKEN_TEMPLATE
    if template is None:
        prompt = getattr(config, "prompt", None)  # HHEM-2.1's convention: the config carries its prompt
        if isinstance(prompt, str) and "{text1}" in prompt and "{text2}" in prompt:
            template = prompt
    if template is None and kind == "seq2seq":
        template = SEQ2SEQ_TEMPLATE
    if template is None:
        return None
    slots = set(_SLOT.findall(template))
    if kind == "token":
        # the template wraps the passage alone: the claim is the pair's second text, read token by token
        if not {"premise", "text1"} & slots or {"hypothesis", "text2"} & slots:
            raise NLIError(
                f"a token checker's template {template!r} needs a {{premise}} slot and no {{hypothesis}} slot "
                "(the claim is the answer the model reads after it)"
            )
    elif not ({"premise", "text1"} & slots and {"hypothesis", "text2"} & slots):
        raise NLIError(f"template {template!r} needs a {{premise}} and a {{hypothesis}} slot")
    if "eos" in slots and not eos:
        raise NLIError(f"template {template!r} uses {{eos}} but the tokenizer of {name!r} has none")
    return template


class NLIModel:
    """A local checker, ready for batched scoring: a 3-way NLI cross-encoder, a binary grounding classifier, a
    seq2seq checker or a token classifier, all returning ``(n, 3)`` probabilities ``[entailment, neutral,
    contradiction]``.

    Kinds (``kind``, default ``"auto"``: from the config; a model folder's ``groundjudge.json`` may declare it):

    - ``nli``: three labels named in ``id2label`` (or entailment / not-entailment).
    - ``binary``: two labels (MiniCheck-RoBERTa/DeBERTa, FactCG-DeBERTa, HHEM-2.1-open); column 0 is
      P(supported), column 1 is 1 - P(supported), column 2 is 0. Which output means supported comes from
      ``supported_label``, else ``groundjudge.json``, else the label names; placeholder names (LABEL_0 / LABEL_1)
      without it are refused.
    - ``seq2seq``: MiniCheck-Flan-T5 shape: P("1") against P("0") at the first decoder step for
      ``predict: {premise}{eos}{hypothesis}``; columns as for ``binary``.
    - ``token``: a ``*ForTokenClassification`` model with two labels (LettuceDetect): the passage wrapped in
      :data:`TOKEN_TEMPLATE` (or the folder's ``template``, with a ``{premise}`` slot only) and the claim as a
      tokenizer pair; P(supported) is 1 - the largest P(unsupported) over the claim's tokens. Label as for
      ``binary`` (LettuceDetect: LABEL_0 / LABEL_1, 0 supported).

    ``has_contradiction`` says whether the model can call a contradiction at all (only ``nli`` models with a
    contradiction label). A template (``groundjudge.json`` ``template``, or a config ``prompt`` with ``{text1}`` and
    ``{text2}``, HHEM's convention) turns each pair into one text; otherwise pairs are encoded as tokenizer pairs.

    Args:
        model: hub id or local path; default $GROUNDJUDGE_NLI_MODEL or cross-encoder/nli-deberta-v3-base.
        device: "cuda", "mps", "cpu" (default: best available).
        half: 16-bit weights (float16; bfloat16 for seq2seq); default on for cuda.
        batch_size: pairs per forward pass (default :func:`default_batch_size`: 256 of 512 tokens on cuda, 64 on
            mps, 16 on CPU); halves itself on cuda out-of-memory.
        threads: torch CPU threads (default: torch's choice).
        revision: hub revision.
        local_files_only: default true for local paths and when $HF_HUB_OFFLINE is set.
        kind: "auto", "nli", "binary", "seq2seq" or "token".
        supported_label: for binary and token checkers, the output index that means supported.
        trust_remote_code: run the model's own code (models with ``auto_map``, e.g. HHEM-2.1-open); off by default.
        max_length: tokens per pair; default the tokenizer's and position table's limit (512 if neither says).
            Relative-position models (T5, DeBERTa-v3) take more; absolute-position ones are refused past their table.
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
        kind: str | None = "auto",
        supported_label: int | None = None,
        trust_remote_code: bool = False,
        max_length: int | None = None,
    ) -> None:
        import torch

        self.name = resolve_model_name(model)
        is_local = Path(self.name).is_dir()
        if local_files_only is None:
            local_files_only = is_local or os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0")
        if threads:
            torch.set_num_threads(threads)
        profile = read_checker_profile(self.name) if is_local else {}
        kind = kind if kind not in (None, "auto") else profile.get("kind", "auto")
        if kind not in KINDS:
            raise NLIError(f"NLI model kind must be one of {', '.join(KINDS)}, not {kind!r}")
        if supported_label is None:
            supported_label = profile.get("supported_label")
        hub = {"revision": revision, "local_files_only": local_files_only, "trust_remote_code": trust_remote_code}
        if not trust_remote_code and _needs_remote_code(self.name, hub):
            raise _remote_code_error(self.name)
        config = _load_config(self.name, hub)
        self.kind: str = detect_kind(config) if kind == "auto" else str(kind)
        _check_architecture(self.name, self.kind, config)
        self.tokenizer = _load_tokenizer(self.name, config, hub)
        if not getattr(self.tokenizer, "is_fast", False):
            raise NLIError(f"{self.name}: a fast (Rust) tokenizer is needed for character offsets")
        self.model = _load_weights(self.name, self.kind, config, hub)
        self._map_labels(supported_label)
        self.template = _read_template(self.name, self.kind, self._eos, profile.get("template"), config)
        self.device = pick_device(device)
        self.half = (self.device == "cuda") if half is None else half
        self.model.to(self.device)
        if self.half:
            # T5-family weights overflow in float16; bfloat16 keeps their range
            self.model.to(torch.bfloat16 if self.kind == "seq2seq" else torch.float16)
        self.model.eval()
        # on a CPU, a classifier's forward pass as one TorchScript call, its numbers checked bit for bit against the
        # model's own (checker/traced.py): the NLI thread no longer waits for the GIL between operations
        self._traced = (
            TracedLogits(self.model, self.tokenizer.pad_token_id or 0)
            if traceable(self.model, self.device, self.kind)
            else None
        )
        self.max_length = self._max_length(max_length)
        self.batch_size = batch_size or default_batch_size(self.device, self.max_length)
        self.special_tokens = self._overhead()
        if is_local:
            digest = fingerprint_dir(Path(self.name))
            weights = f"{Path(self.name).name}@{digest}"
        else:
            digest = weights = f"{self.name}@{getattr(self.model.config, '_commit_hash', None) or revision or 'main'}"
        # what a verdict head fitted on this model's scores is tied to: the weights and how they are read, not the
        # folder's name (a copied model keeps its head), nor the device and dtype
        self.identity = f"{digest}/{self._kind_tag()}"
        # fp16 on cuda and fp32 on cpu give different numbers: they must not share cache entries; nor may one
        # model read as another kind, label or prompt
        self.fingerprint = f"{weights}/{self._kind_tag()}/{_numerics(self.device, next(self.model.parameters()).dtype)}"
        # every caller's work since the model was loaded: one shared instance serves every evaluator of the process
        # (shared()), so an evaluator's or a run's own count is its scorer's (NLIScorer.pairs_computed)
        self.forward_passes = 0
        self.pairs_scored = 0
        self._lock = threading.Lock()

    # -- reading the labels ------------------------------------------------------------------------------------------

    def _map_labels(self, supported_label: int | None) -> None:
        """Set ``columns``, ``supported_label``, ``label_token_ids`` and ``has_contradiction`` for the kind."""
        id2label = getattr(self.model.config, "id2label", None) or {}
        self.label_token_ids: tuple[int, int] | None = None
        self.supported_label: int | None = None
        if self.kind not in ("binary", "token") and supported_label is not None:
            raise NLIError(
                f"supported_label is for binary and token checkers; {self.name!r} runs as a {self.kind} model "
                f"(kind={self.kind})"
            )
        if self.kind == "nli":
            self.columns = label_columns(id2label)
        elif self.kind in ("binary", "token"):
            if len(id2label) != 2:
                raise NLIError(
                    f"a {self.kind} checker has two labels; {self.name!r} has {len(id2label)}: {dict(id2label)}"
                )
            named = supported_label_from_names(id2label)
            if supported_label is None and named is None:
                raise NLIError(
                    f"the labels of {self.name!r} ({dict(id2label)}) do not say which one means supported: pass "
                    "supported_label (Config.nli_supported_label; 1 for MiniCheck, FactCG and HHEM, 0 for "
                    'LettuceDetect) or put "supported_label" in the model folder\'s groundjudge.json'
                )
            if supported_label is not None and named is not None and supported_label != named:
                raise NLIError(
                    f"supported_label={supported_label} but the config of {self.name!r} names label {named} "
                    f"({dict(id2label).get(named)!r}) as supported"
                )
            label = named if supported_label is None else supported_label
            if label not in (0, 1):
                raise NLIError(f"supported_label must be 0 or 1 for a two-label checker, not {label}")
            self.supported_label = label
            self.columns = [label, 1 - label, None]
        else:
            ids = [self.tokenizer(w, add_special_tokens=False)["input_ids"] for w in SEQ2SEQ_LABEL_WORDS]
            if not all(ids) or ids[0][0] == ids[1][0]:
                raise NLIError(
                    f"the tokenizer of {self.name!r} does not give '0' and '1' distinct first tokens ({ids}): "
                    "it cannot be read as a seq2seq checker"
                )
            self.label_token_ids = (int(ids[0][0]), int(ids[1][0]))
            self.columns = [1, 0, None]  # P("1") and P("0") of the two label tokens
        self.has_contradiction = self.kind == "nli" and self.columns[CONTRADICTION] is not None

    @property
    def _eos(self) -> str:
        return str(getattr(self.tokenizer, "eos_token", None) or getattr(self.tokenizer, "sep_token", None) or "")

    def _kind_tag(self) -> str:
        if self.kind in ("binary", "token"):
            tag = f"{self.kind}:{self.supported_label}"
        elif self.kind == "seq2seq":
            assert self.label_token_ids is not None
            tag = f"seq2seq:{self.label_token_ids[0]},{self.label_token_ids[1]}"
        else:
            tag = "nli"
        if self.template is not None:
            tag += "+" + hashlib.sha256(self.template.encode()).hexdigest()[:8]
        return tag

    # per (model, device, batch size, checker options): the instance, and the folder's contents it was loaded from
    _loaded: ClassVar[dict[tuple[Any, ...], tuple[str | None, NLIModel]]] = {}
    _loaded_lock: ClassVar[threading.Lock] = threading.Lock()

    @classmethod
    def shared(
        cls,
        model: str | None = None,
        *,
        device: str | None = None,
        batch_size: int | None = None,
        kind: str | None = "auto",
        supported_label: int | None = None,
        trust_remote_code: bool = False,
        max_length: int | None = None,
    ) -> NLIModel:
        """One loaded instance per (model, device, batch size, checker options) in this process: notebooks and CLI
        runs that build several evaluators load the weights once; a local folder changed since (:func:`_folder_stamp`:
        ``tune`` into the same path in a notebook) is loaded again, never served by the instance of the old weights."""
        options = {
            "kind": kind,
            "supported_label": supported_label,
            "trust_remote_code": trust_remote_code,
            "max_length": max_length,
        }
        name = resolve_model_name(model)
        key, stamp = (name, device, batch_size, *options.values()), _folder_stamp(name)
        with cls._loaded_lock:
            kept = cls._loaded.get(key)
            if kept is None or kept[0] != stamp:  # the old instance goes: its weights are no longer in the folder
                cls._loaded[key] = (stamp, cls(model, device=device, batch_size=batch_size, **options))  # type: ignore[arg-type]
            return cls._loaded[key][1]

    def _position_limit(self) -> int | None:
        """The most tokens the model's position table takes; None for relative-position models (T5, DeBERTa-v3)."""
        config = self.model.config
        model_type = getattr(config, "model_type", "")
        if model_type in ("deberta", "deberta-v2") and not getattr(config, "position_biased_input", True):
            return None
        pos = getattr(config, "max_position_embeddings", None)
        if not isinstance(pos, int) or pos <= 0:
            return None
        # RoBERTa-family position ids start after the padding index
        return pos - (2 if model_type in ("roberta", "xlm-roberta", "camembert", "longformer") else 0)

    def _max_length(self, requested: int | None = None) -> int:
        hard = self._position_limit()
        if requested is not None:
            if requested < 16:
                raise NLIError(f"max_length {requested} is too small for any premise")
            if hard is not None and requested > hard:
                raise NLIError(f"max_length {requested} is over the {hard} positions of {self.name!r}")
            return requested
        limits = [hard] if hard is not None else []
        tok_max = getattr(self.tokenizer, "model_max_length", None)
        if isinstance(tok_max, int) and 0 < tok_max < 1_000_000:
            limits.append(tok_max)
        return min(limits) if limits else 512

    def _overhead(self) -> int:
        """Tokens a pair adds beyond its premise's and hypothesis's own (special tokens, the template's words)."""
        if self.template is None:
            return int(self.tokenizer.num_special_tokens_to_add(pair=True))
        # +1: where the template meets the texts a word may split into one more piece than either alone
        return len(self.encode([("", "")])[0][0]) + 1

    def encode(self, pairs: Sequence[tuple[str, str]]) -> Encoded:
        """Token ids (and token types, for tokenizer pairs) of each pair, with the model's special tokens; for a
        token checker also where the claim's tokens are in each (``[start, end)``, the pair's second text)."""
        eos = self._eos
        if self.kind == "token":
            assert self.template is not None
            texts = [fill_template(self.template, p, "", eos) for p, _ in pairs]
            enc = self.tokenizer(texts, [h for _, h in pairs], truncation=False, padding=False, verbose=False)
            spans = []
            for i in range(len(pairs)):
                claim = [k for k, seq in enumerate(enc.sequence_ids(i)) if seq == 1]
                spans.append((claim[0], claim[-1] + 1) if claim else (0, 0))
            return Encoded(enc["input_ids"], enc.get("token_type_ids"), spans)
        if self.template is None:
            enc = self.tokenizer(
                [p for p, _ in pairs], [h for _, h in pairs], truncation=False, padding=False, verbose=False
            )
            return Encoded(enc["input_ids"], enc.get("token_type_ids"), None)
        texts = [fill_template(self.template, p, h, eos) for p, h in pairs]
        return Encoded(self.tokenizer(texts, truncation=False, padding=False, verbose=False)["input_ids"], None, None)

    def _decoder_start(self) -> int:
        for source in (self.model.config, getattr(self.model, "generation_config", None)):
            value = getattr(source, "decoder_start_token_id", None) if source is not None else None
            if isinstance(value, int):
                return value
        pad = getattr(self.model.config, "pad_token_id", None)
        return pad if isinstance(pad, int) else 0

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
        encoded = self.encode(pairs)
        lengths = np.fromiter((len(x) for x in encoded.ids), dtype=np.int64, count=len(pairs))
        too_long = np.flatnonzero(lengths > self.max_length)
        if too_long.size:
            i = int(too_long[0])
            raise NLIError(
                f"pair {i} has {lengths[i]} tokens, over the model's {self.max_length}: cut the premise first "
                "(nothing is truncated silently)"
            )
        order = np.argsort(-lengths, kind="stable")  # longest first: an out-of-memory shows up at once
        start = 0
        with torch.inference_mode():
            while start < len(order):
                batch = order[start : start + self.batch_size]
                inputs, claim = self.batch_inputs(encoded, batch.tolist())
                inputs = {k: v.to(self.device) for k, v in inputs.items()}
                try:
                    probs = self._forward(inputs, claim)
                except torch.cuda.OutOfMemoryError:
                    if self.batch_size == 1:
                        raise
                    self.batch_size = max(1, self.batch_size // 2)
                    torch.cuda.empty_cache()
                    log.warning("NLI out of GPU memory; batch size now %d", self.batch_size)
                    continue
                out[batch] = probs
                with self._lock:
                    self.forward_passes += 1
                    self.pairs_scored += len(batch)
                start += len(batch)
        return out

    def batch_inputs(self, encoded: Encoded, rows: Sequence[int]) -> tuple[dict[str, Any], Any]:
        """The model's inputs for the pairs ``rows`` of ``encoded``, padded to the longest on the tokenizer's padding
        side (CPU tensors), and for a token checker the mask of each row's claim tokens (else None)."""
        import torch

        ids, types, spans = encoded
        width = max(len(ids[j]) for j in rows)
        pad_id = self.tokenizer.pad_token_id or 0
        left = getattr(self.tokenizer, "padding_side", "right") == "left"
        input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        token_types = torch.zeros((len(rows), width), dtype=torch.long) if types is not None else None
        claim = torch.zeros((len(rows), width), dtype=torch.bool) if spans is not None else None
        for row, j in enumerate(rows):
            n = len(ids[j])
            offset = width - n if left else 0
            cols = slice(offset, offset + n)
            input_ids[row, cols] = torch.tensor(ids[j])
            mask[row, cols] = 1
            if token_types is not None and types is not None:
                token_types[row, cols] = torch.tensor(types[j])
            if claim is not None and spans is not None:
                claim[row, offset + spans[j][0] : offset + spans[j][1]] = True
        inputs = {"input_ids": input_ids, "attention_mask": mask}
        if token_types is not None:
            inputs["token_type_ids"] = token_types
        return inputs, claim

    def _forward(self, inputs: dict[str, Any], claim: Any = None) -> np.ndarray:
        """One batch through the model: ``(b, 3)`` entailment / neutral / contradiction (binary, seq2seq and token
        kinds: P(supported), 1 - P(supported), 0). ``claim`` marks each row's claim tokens (token kind)."""
        import torch

        if self.kind == "token":
            return self._forward_tokens(inputs, claim)
        if self.kind == "seq2seq":
            assert self.label_token_ids is not None
            start = torch.full((inputs["input_ids"].shape[0], 1), self._decoder_start(), dtype=torch.long)
            logits = self.model(**inputs, decoder_input_ids=start.to(self.device)).logits[:, 0, :]
            logits = logits[:, list(self.label_token_ids)]  # ["0", "1"]
        else:
            logits = self.classifier_logits(inputs)
        if logits.ndim != 2 or logits.shape[1] != (2 if self.kind != "nli" else len(self.model.config.id2label)):
            raise NLIError(f"NLI model {self.name!r} returned logits of shape {tuple(logits.shape)}")
        probs = torch.softmax(logits.float(), dim=-1).cpu().numpy()
        rows = np.zeros((probs.shape[0], 3), dtype=np.float32)
        if self.kind == "nli":
            for which, col in enumerate(self.columns):
                if col is not None:
                    rows[:, which] = probs[:, col]
            return rows
        supported = probs[:, 1] if self.kind == "seq2seq" else probs[:, self.supported_label]
        rows[:, ENTAILMENT] = supported
        rows[:, NEUTRAL] = 1.0 - supported
        return rows

    def classifier_logits(self, inputs: dict[str, Any]) -> Any:
        """A sequence classifier's logits for one batch of model inputs: through the checked trace on a CPU
        (:class:`~groundjudge.checker.traced.TracedLogits`), else the model's own forward pass."""
        return self._traced(inputs) if self._traced is not None else self.model(**inputs).logits

    def _forward_tokens(self, inputs: dict[str, Any], claim: Any) -> np.ndarray:
        """A token checker's batch: P(supported) of a claim = 1 - the largest P(unsupported) of its tokens.

        The maximum, not the mean: LettuceDetect marks a span wherever one token's probability reaches 0.5, and
        calls an answer hallucinated when it marks any span (the example-level decision its published F1 measures),
        so ``1 - max`` at 0.5 is exactly "no token of the claim marked". A mean would let one wrong number in a long
        claim ("69 million" for 67) be outvoted by the words around it, which are supported. A claim with no tokens
        comes back NaN (an error for that claim, never a silent SUPPORTED).
        """
        import torch

        logits = self.model(**inputs).logits
        if logits.ndim != 3 or logits.shape[2] != 2 or logits.shape[:2] != inputs["input_ids"].shape:
            raise NLIError(f"token checker {self.name!r} returned logits of shape {tuple(logits.shape)}")
        assert self.supported_label is not None and claim is not None
        unsupported = torch.softmax(logits.float(), dim=-1)[..., 1 - self.supported_label]
        worst = claim_max(unsupported, claim).cpu().numpy()
        rows = np.zeros((worst.shape[0], 3), dtype=np.float32)
        rows[:, ENTAILMENT] = 1.0 - worst
        rows[:, NEUTRAL] = worst
        return rows


class NLIScorer:
    """An :class:`NLIModel` behind the disk cache: key = model fingerprint, premise, hypothesis.

    ``pairs_computed`` and ``cache_hits`` count this scorer's own pairs (run through the model, taken from the
    cache). Read them, not the model's ``pairs_scored`` and ``forward_passes``: one loaded model
    (:meth:`NLIModel.shared`) serves every evaluator of the process, so its counts hold every evaluator's work.
    """

    def __init__(self, model: NLIModel, cache: Cache | None = None) -> None:
        self.model = model
        self.cache = cache
        self.cache_hits = 0
        self.pairs_computed = 0
        self._counts_lock = threading.Lock()  # the QA comparison scores from several threads

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
                    with self._counts_lock:
                        self.cache_hits += 1
        if todo:
            unique = list(todo)
            # rounded as the cache stores them, so that a fresh and a cached run report the same numbers
            probs = np.round(self.model.predict(unique), 6)
            with self._counts_lock:
                self.pairs_computed += len(unique)
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
    except (TypeError, ValueError, OverflowError):  # 10**400 is no float
        return False
