"""The local checker's kinds (issues 9 and 33): 3-way NLI, binary grounding classifiers (MiniCheck-RoBERTa/DeBERTa
shape, FactCG-DeBERTa with its template), seq2seq checkers (MiniCheck-Flan-T5 shape), models that run their own code
(HHEM-2.1-open shape) and token classifiers (LettuceDetect's ModernBERT shape). Each is a tiny random model of the
real one's architecture and config shape, built here, run through the same batched, length-sorted, cached path as
the NLI cross-encoder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groundjudge import errors
from groundjudge.cache import Cache
from groundjudge.checker.evidence import EvidenceSelector
from groundjudge.checker.nli import (
    FACTCG_TEMPLATE,
    SEQ2SEQ_TEMPLATE,
    TOKEN_TEMPLATE,
    NLIModel,
    NLIScorer,
    detect_kind,
    fill_template,
    supported_label_from_names,
)
from groundjudge.chunking import chunk_document
from groundjudge.config import Config
from groundjudge.testing import tiny_nli_model
from tests.conftest import SHARED, SHARED_MODEL, tiny_deberta_model, tiny_modernbert_model

PLACEHOLDERS = {0: "LABEL_0", 1: "LABEL_1"}
PAIRS = [
    ("The Eiffel Tower is in Paris. It was completed in 1889.", "The Eiffel Tower is in Paris."),
    ("Water boils at 100 degrees Celsius at sea level.", "Water boils at 90 degrees."),
    ("Short.", "A much longer hypothesis that goes on and on about many unrelated things in detail."),
    ("Cats are mammals.", "Cats are mammals."),
    ("The report was published in March 2021 by the ministry of health, with 42 pages.", "It has 42 pages."),
    ("x", "y"),
    ("Mount Everest is 8,849 metres tall and lies on the border of Nepal and China.", "Everest is in Peru."),
]
DOC = " ".join(f"Sentence {i} talks about topic {i % 7} with the number {i * 13} and more words." for i in range(40))
# HHEM-2.1-open's prompt (its config's "prompt"), read from the model's config as the real one is
HHEM_PROMPT = "<pad> Determine if the hypothesis is true given the premise?\n\nPremise: {text1}\n\nHypothesis: {text2}"


@pytest.fixture(scope="module")
def corpus() -> list[str]:
    rows = (SHARED / "benchmarks" / "factcheckgpt-stance.jsonl").read_text().splitlines()[:300]
    texts = [json.loads(r)["contexts"][0] for r in rows]
    return [*texts, *(p for pair in PAIRS for p in pair), DOC, HHEM_PROMPT, "predict: 0 1", FACTCG_TEMPLATE]


def _wordlevel_tokenizer(directory: Path, corpus: list[str]) -> Any:
    """A T5-style fast tokenizer (pad 0, </s> 1, <unk> 2, </s> after each text) whose vocabulary has "0" and "1"."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(corpus, trainer=trainers.WordLevelTrainer(special_tokens=["<pad>", "</s>", "<unk>"]))
    tok.post_processor = processors.TemplateProcessing(
        single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", 1)]
    )
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>")
    fast.save_pretrained(str(directory))
    return fast


def _same_in_batches_and_alone(model: NLIModel) -> np.ndarray:
    batched = model.predict(PAIRS)  # batch size 3: several batches of mixed lengths
    np.testing.assert_allclose(batched, np.vstack([model.predict([p]) for p in PAIRS]), atol=1e-5)
    np.testing.assert_allclose(model.predict(PAIRS[::-1])[::-1], batched, atol=1e-5)
    assert len({tuple(np.round(r, 4)) for r in batched}) == len(PAIRS)  # rows really differ
    return batched


def _binary_columns(out: np.ndarray) -> None:
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out[:, 1], 1 - out[:, 0], atol=1e-6)
    assert (out[:, 2] == 0).all()


def _cache_round_trip(model: NLIModel, tmp_path: Path) -> None:
    first = NLIScorer(model, Cache(tmp_path / "cache")).score(PAIRS)
    np.testing.assert_allclose(first, model.predict(PAIRS), atol=1e-5)
    passes = model.forward_passes
    again = NLIScorer(model, Cache(tmp_path / "cache"))
    np.testing.assert_allclose(again.score(PAIRS), first, atol=1e-6)
    assert again.cache_hits == len(PAIRS) and model.forward_passes == passes


def _through_evidence(model: NLIModel) -> None:
    passages = chunk_document(DOC, 0, model.tokenizer, 32)
    assert len(passages) > 2
    selector = EvidenceSelector(NLIScorer(model), k=2, early_exit=None)
    (result,) = selector.check([(["Sentence 3 talks about topic 3."], passages)])[0]
    # the two best passages and every window centred on the best sentence (no early exit): the windows count in
    # passages_total beside the passages
    windows = result.passages_total - len(passages)
    assert result.error is None and result.passages_scored == 2 + windows and result.entailment_passage is not None


def _softmax(x: Any) -> np.ndarray:
    import torch

    return np.asarray(torch.softmax(x.float(), dim=-1).detach().numpy())


# -- seq2seq: MiniCheck-Flan-T5 shape ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def t5_dir(tmp_path_factory: pytest.TempPathFactory, corpus: list[str]) -> Path:
    import torch
    from transformers import T5Config, T5ForConditionalGeneration

    path = tmp_path_factory.mktemp("t5")
    tokenizer = _wordlevel_tokenizer(path, corpus)
    torch.manual_seed(0)
    config = T5Config(  # type: ignore[call-arg]
        vocab_size=len(tokenizer),
        d_model=32,
        d_kv=16,
        d_ff=64,
        num_layers=2,
        num_decoder_layers=1,
        num_heads=2,
        initializer_factor=2.0,  # far from uniform outputs, so that a padding or ordering bug shows
        pad_token_id=0,
        eos_token_id=1,
        decoder_start_token_id=0,
        architectures=["T5ForConditionalGeneration"],
    )
    T5ForConditionalGeneration(config).eval().save_pretrained(str(path))
    return path


def test_seq2seq_checker_reads_the_one_token_against_the_zero_token(t5_dir: Path, tmp_path: Path) -> None:
    import torch

    model = NLIModel(str(t5_dir), device="cpu", batch_size=3)
    assert model.kind == "seq2seq" and not model.has_contradiction and model.template == SEQ2SEQ_TEMPLATE
    tok = model.tokenizer
    zero, one = tok.convert_tokens_to_ids("0"), tok.convert_tokens_to_ids("1")
    assert model.label_token_ids == (zero, one)
    out = _same_in_batches_and_alone(model)
    _binary_columns(out)
    # MiniCheck's own reading, by hand: "predict: " + premise + eos + claim, decoder starts at token 0,
    # P(supported) = softmax over the logits of "0" and "1" at the first step
    for (premise, claim), row in zip(PAIRS, out, strict=True):
        ids = tok(f"predict: {premise}</s>{claim}", return_tensors="pt")
        with torch.no_grad():
            logits = model.model(**ids, decoder_input_ids=torch.zeros((1, 1), dtype=torch.long)).logits[0, 0]
        assert row[0] == pytest.approx(_softmax(logits[[zero, one]])[1], abs=1e-5)
    assert "/seq2seq:" in model.fingerprint
    _cache_round_trip(model, tmp_path)
    _through_evidence(model)


def test_long_context_checkers_take_max_length_from_config(t5_dir: Path, tmp_path: Path) -> None:
    long_premise = " ".join(["Water boils at 100 degrees Celsius at sea level."] * 70)  # about 700 tokens
    default = NLIModel(str(t5_dir), device="cpu")
    assert default.max_length == 512  # the tokenizer and the position table say nothing: 512
    with pytest.raises(errors.NLIError, match="nothing is truncated"):
        default.predict([(long_premise, "Water boils.")])
    wide = NLIModel(str(t5_dir), device="cpu", max_length=2048)  # T5's positions are relative: no cap
    assert wide.max_length == 2048
    assert np.isfinite(wide.predict([(long_premise, "Water boils.")])).all()
    assert wide.fingerprint == default.fingerprint  # the limit changes which pairs fit, never a pair's numbers
    # the evidence stage's window follows: passages of 1000 tokens fit beside a claim
    assert wide.max_length - wide.special_tokens > 1000
    # an absolute-position model cannot go past its table
    bert = tiny_nli_model(tmp_path / "bert", SHARED_MODEL)  # 128 positions
    with pytest.raises(errors.NLIError, match="over the 128 positions"):
        NLIModel(str(bert), device="cpu", max_length=1024)
    assert NLIModel(str(bert), device="cpu", max_length=100).max_length == 100


def test_template_slots_are_filled_once() -> None:
    assert fill_template(SEQ2SEQ_TEMPLATE, "doc {hypothesis}", "claim {eos}", "</s>") == (
        "predict: doc {hypothesis}</s>claim {eos}"
    )
    assert fill_template(HHEM_PROMPT, "P", "H").endswith("Premise: P\n\nHypothesis: H")


# -- binary: MiniCheck-RoBERTa / MiniCheck-DeBERTa shape ---------------------------------------------------------


def _tiny_roberta(path: Path, corpus: list[str], id2label: dict[int, str]) -> Path:
    import torch
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaConfig, RobertaForSequenceClassification, RobertaTokenizer

    path.parent.mkdir(parents=True, exist_ok=True)
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(corpus, vocab_size=1000, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    bpe.save_model(str(path.parent))
    merges = (path.parent / "merges.txt").read_text().splitlines()[1:]
    tokenizer = RobertaTokenizer(
        vocab=json.loads((path.parent / "vocab.json").read_text()),
        merges=[tuple(m.split()) for m in merges if m],
    )
    torch.manual_seed(0)
    config = RobertaConfig(  # type: ignore[call-arg]  # MiniCheck-RoBERTa-Large's shape, tiny
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=130,
        pad_token_id=tokenizer.pad_token_id,
        type_vocab_size=1,
        initializer_range=0.5,
        num_labels=2,
        id2label=id2label,
        label2id={v: k for k, v in id2label.items()},
    )
    RobertaForSequenceClassification(config).eval().save_pretrained(str(path))
    tokenizer.save_pretrained(str(path))
    return path


BUILDERS = {"deberta": tiny_deberta_model, "roberta": _tiny_roberta}


@pytest.fixture(scope="module", params=sorted(BUILDERS))
def binary_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, corpus: list[str]) -> Path:
    base = tmp_path_factory.mktemp(request.param)
    return BUILDERS[request.param](base / "model", corpus, PLACEHOLDERS)


def test_binary_checker_with_placeholder_labels_needs_the_supported_label(binary_dir: Path) -> None:
    with pytest.raises(errors.NLIError, match="supported_label"):
        NLIModel(str(binary_dir), device="cpu")
    with pytest.raises(errors.NLIError, match="0 or 1"):
        NLIModel(str(binary_dir), device="cpu", supported_label=2)


def test_binary_checker_maps_the_declared_label(binary_dir: Path, tmp_path: Path) -> None:
    import torch

    model = NLIModel(str(binary_dir), device="cpu", batch_size=3, supported_label=1)
    assert model.kind == "binary" and not model.has_contradiction and model.template is None
    out = _same_in_batches_and_alone(model)
    _binary_columns(out)
    tok = model.tokenizer
    for (premise, claim), row in zip(PAIRS, out, strict=True):
        with torch.no_grad():
            logits = model.model(**tok(premise, claim, return_tensors="pt")).logits[0]
        assert row[0] == pytest.approx(_softmax(logits)[1], abs=1e-5)
    flipped = NLIModel(str(binary_dir), device="cpu", supported_label=0)
    np.testing.assert_allclose(flipped.predict(PAIRS)[:, 0], out[:, 1], atol=1e-5)
    assert model.fingerprint.split("/")[1] == "binary:1" and flipped.fingerprint.split("/")[1] == "binary:0"
    _cache_round_trip(model, tmp_path)
    # the other label reading never reads this one's cache entries
    other = NLIScorer(flipped, Cache(tmp_path / "cache"))
    np.testing.assert_allclose(other.score(PAIRS)[:, 0], out[:, 1], atol=1e-5)
    assert other.cache_hits == 0
    _through_evidence(model)


def test_a_model_folder_declares_its_kind_and_label(binary_dir: Path, tmp_path: Path) -> None:
    import shutil

    folder = tmp_path / "declared"
    shutil.copytree(binary_dir, folder)
    profile = {"format": 1, "thresholds": {}, "kind": "binary", "supported_label": 1}
    (folder / "groundjudge.json").write_text(json.dumps(profile))
    declared = NLIModel(str(folder), device="cpu")
    assert declared.supported_label == 1
    np.testing.assert_allclose(
        declared.predict(PAIRS), NLIModel(str(binary_dir), device="cpu", supported_label=1).predict(PAIRS), atol=1e-6
    )
    # an explicit option wins over the file
    assert NLIModel(str(folder), device="cpu", supported_label=0).supported_label == 0
    # a bad declaration is a clear error
    (folder / "groundjudge.json").write_text(json.dumps({**profile, "supported_label": "yes"}))
    with pytest.raises(errors.NLIError, match="supported_label must be"):
        NLIModel(str(folder), device="cpu")
    (folder / "groundjudge.json").write_text(json.dumps({**profile, "kind": "regression"}))
    with pytest.raises(errors.NLIError, match="kind must be one of"):
        NLIModel(str(folder), device="cpu")


def test_binary_label_names_are_read_and_a_contrary_declaration_refused(tmp_path: Path, corpus: list[str]) -> None:
    named = _tiny_roberta(tmp_path / "named" / "model", corpus, {0: "supported", 1: "unsupported"})
    model = NLIModel(str(named), device="cpu")
    assert model.kind == "binary" and model.supported_label == 0
    assert NLIModel(str(named), device="cpu", supported_label=0).fingerprint == model.fingerprint
    with pytest.raises(errors.NLIError, match="names label 0"):
        NLIModel(str(named), device="cpu", supported_label=1)


@pytest.mark.parametrize(
    "id2label,supported",
    [
        ({0: "LABEL_0", 1: "LABEL_1"}, None),
        ({0: "not_entailment", 1: "entailment"}, 1),
        ({0: "consistent", 1: "hallucinated"}, 0),
        ({0: "Unsupported", 1: "Supported"}, 1),
        ({"0": "supported", "1": "supported"}, None),
    ],
)
def test_binary_label_names(id2label: dict[int, str], supported: int | None) -> None:
    assert supported_label_from_names(id2label) == supported


# -- 3-way NLI, unchanged, and options that do not fit the kind --------------------------------------------------


def test_nli_kind_and_its_contradiction_head(tmp_path: Path) -> None:
    three = tiny_nli_model(tmp_path / "nli", SHARED_MODEL)
    model = NLIModel(str(three), device="cpu")
    assert model.kind == "nli" and model.has_contradiction and model.fingerprint.split("/")[1] == "nli"
    with pytest.raises(errors.NLIError, match="supported_label is for binary and token checkers"):
        NLIModel(str(three), device="cpu", supported_label=1)
    # a 2-way NLI model (entailment / not_entailment) reads as binary, with no contradiction
    two = NLIModel(str(tiny_nli_model(tmp_path / "two", SHARED_MODEL, {0: "entailment", 1: "not_entailment"})))
    assert two.kind == "binary" and two.supported_label == 0 and not two.has_contradiction
    _binary_columns(two.predict(PAIRS))
    with pytest.raises(errors.NLIError, match="kind must be one of"):
        NLIModel(str(three), device="cpu", kind="regression")


# -- models that run their own code: HHEM-2.1-open shape -----------------------------------------------------------

CONFIGURATION_PY = """from transformers import PretrainedConfig


class GJTinyCheckerConfig(PretrainedConfig):
    model_type = "gj-tiny-checker"

    def __init__(self, vocab_size=64, d_model=16, foundation="", prompt="", **kwargs):
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.foundation = foundation
        self.prompt = prompt
        super().__init__(**kwargs)
"""

MODELING_PY = '''import os

from transformers import PreTrainedModel, T5Config, T5ForTokenClassification
from transformers.modeling_outputs import SequenceClassifierOutput

from .configuration_gjtiny import GJTinyCheckerConfig

if os.environ.get("GJ_TINY_MARKER"):  # proves whether this file was ever executed
    open(os.environ["GJ_TINY_MARKER"], "w").close()


class GJTinyCheckerForSequenceClassification(PreTrainedModel):
    """HHEM-2.1-open's shape: a T5 token classifier read at the first token, two labels."""

    config_class = GJTinyCheckerConfig

    def __init__(self, config):
        super().__init__(config)
        inner = T5Config(vocab_size=config.vocab_size, d_model=config.d_model, d_kv=8, d_ff=32, num_layers=2,
                         num_heads=2, num_labels=2, initializer_factor=0.5, pad_token_id=0, eos_token_id=1)
        self.t5 = T5ForTokenClassification(inner)
        self.post_init()

    def _init_weights(self, module):
        self.t5._init_weights(module)

    def forward(self, input_ids=None, attention_mask=None, **kwargs):
        out = self.t5(input_ids=input_ids, attention_mask=attention_mask)
        return SequenceClassifierOutput(logits=out.logits[:, 0, :])
'''


def _write_remote(folder: Path, tokenizer_dir: Path, vocab_size: int) -> None:
    folder.mkdir(parents=True)
    (folder / "configuration_gjtiny.py").write_text(CONFIGURATION_PY)
    (folder / "modeling_gjtiny.py").write_text(MODELING_PY)
    config = {
        "model_type": "gj-tiny-checker",
        "architectures": ["GJTinyCheckerForSequenceClassification"],
        "auto_map": {
            "AutoConfig": "configuration_gjtiny.GJTinyCheckerConfig",
            "AutoModelForSequenceClassification": "modeling_gjtiny.GJTinyCheckerForSequenceClassification",
        },
        "vocab_size": vocab_size,
        "d_model": 16,
        "foundation": str(tokenizer_dir),  # as HHEM: no tokenizer beside the weights, the config names whose to use
        "prompt": HHEM_PROMPT,
    }
    (folder / "config.json").write_text(json.dumps(config))


@pytest.fixture(scope="module")
def remote_dir(tmp_path_factory: pytest.TempPathFactory, corpus: list[str]) -> Path:
    import torch
    from transformers import AutoConfig, AutoModelForSequenceClassification

    base = tmp_path_factory.mktemp("remote")
    tokenizer = _wordlevel_tokenizer(base / "tokenizer", corpus)
    folder = base / "gj_tiny_hhem"
    _write_remote(folder, base / "tokenizer", len(tokenizer))
    torch.manual_seed(0)
    config = AutoConfig.from_pretrained(str(folder), trust_remote_code=True, local_files_only=True)
    AutoModelForSequenceClassification.from_config(config, trust_remote_code=True).eval().save_pretrained(str(folder))
    return folder


def test_remote_code_is_refused_without_the_opt_in(
    remote_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    fresh = tmp_path / "gj_tiny_hhem_unopened"  # a new folder name: its code was never imported in this process
    shutil.copytree(remote_dir, fresh)
    marker = tmp_path / "executed"
    monkeypatch.setenv("GJ_TINY_MARKER", str(marker))
    with pytest.raises(errors.NLIError, match=r"Config\.nli_trust_remote_code"):
        NLIModel(str(fresh), device="cpu", supported_label=1)
    assert not marker.exists()  # refused before any of the model's code ran
    with pytest.raises(errors.NLIError, match=r"Config\.nli_trust_remote_code"):
        NLIModel(str(fresh), device="cpu", kind="binary", supported_label=1)


def test_remote_code_checker_with_the_opt_in(remote_dir: Path, tmp_path: Path) -> None:
    import torch

    with pytest.raises(errors.NLIError, match="supported_label"):  # HHEM's labels are LABEL_0 / LABEL_1
        NLIModel(str(remote_dir), device="cpu", trust_remote_code=True)
    model = NLIModel(str(remote_dir), device="cpu", batch_size=3, trust_remote_code=True, supported_label=1)
    assert model.kind == "binary" and model.template == HHEM_PROMPT and not model.has_contradiction
    out = _same_in_batches_and_alone(model)
    _binary_columns(out)
    tok = model.tokenizer
    for (premise, claim), row in zip(PAIRS, out, strict=True):
        ids = tok(HHEM_PROMPT.format(text1=premise, text2=claim), return_tensors="pt")
        with torch.no_grad():
            logits = model.model(input_ids=ids["input_ids"], attention_mask=ids["attention_mask"]).logits[0]
        assert row[0] == pytest.approx(_softmax(logits)[1], abs=1e-5)
    assert model.fingerprint.split("/")[1].startswith("binary:1+")  # the prompt is part of the key
    _cache_round_trip(model, tmp_path)
    _through_evidence(model)


# -- the evaluator passes the options through ----------------------------------------------------------------------


def test_config_options_reach_the_model(binary_dir: Path, tmp_path: Path) -> None:
    from groundjudge.pipeline.evaluator import Evaluator

    cfg = Config.make(
        nli_model=str(binary_dir), device="cpu", nli_kind="binary", nli_supported_label=1, nli_max_length=100
    )
    evaluator = Evaluator(cfg)
    assert evaluator.nli.kind == "binary" and evaluator.nli.supported_label == 1 and evaluator.nli.max_length == 100
    with pytest.raises(errors.NLIError, match="supported_label"):
        _ = Evaluator(Config.make(nli_model=str(binary_dir), device="cpu")).nli
    with pytest.raises(errors.ConfigError):
        Config.make(nli_kind="regression")


# -- token: LettuceDetect shape (ModernBertForTokenClassification, two labels, 1 = hallucinated) -------------------


@pytest.fixture(scope="module")
def token_dir(tmp_path_factory: pytest.TempPathFactory, corpus: list[str]) -> Path:
    return tiny_modernbert_model(tmp_path_factory.mktemp("modernbert") / "model", corpus, PLACEHOLDERS)


def _lettuce_reading(model: NLIModel, premise: str, claim: str, hallucinated: int = 1) -> tuple[float, float]:
    """LettuceDetect's own reading, by hand: the passage in its prompt and the claim as a tokenizer pair, softmax per
    token, output 1 = hallucinated. Returns 1 - the largest over the claim's tokens, and over every token."""
    import torch

    enc = model.tokenizer(TOKEN_TEMPLATE.replace("{premise}", premise), claim, return_tensors="pt")
    with torch.no_grad():
        logits = model.model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).logits[0]
    unsupported = _softmax(logits)[:, hallucinated]
    claim_tokens = [k for k, seq in enumerate(enc.sequence_ids(0)) if seq == 1]
    assert claim_tokens and enc.sequence_ids(0)[claim_tokens[0] - 1] is None  # the claim follows a [SEP]
    # the claim is read as itself, whatever passage stands before it
    alone = model.tokenizer(claim, add_special_tokens=False)["input_ids"]
    assert enc["input_ids"][0][claim_tokens].tolist() == alone
    return 1.0 - float(unsupported[claim_tokens].max()), 1.0 - float(unsupported.max())


def test_token_checker_reads_the_claims_tokens_only(token_dir: Path, tmp_path: Path) -> None:
    model = NLIModel(str(token_dir), device="cpu", batch_size=3, supported_label=0)
    assert model.kind == "token" and not model.has_contradiction and model.template == TOKEN_TEMPLATE
    assert model.max_length == 1024  # the position table's limit (the tokenizer says nothing)
    out = _same_in_batches_and_alone(model)
    _binary_columns(out)
    whole_differs = False
    for (premise, claim), row in zip(PAIRS, out, strict=True):
        claim_only, every_token = _lettuce_reading(model, premise, claim)
        assert row[0] == pytest.approx(claim_only, abs=1e-5)
        whole_differs |= abs(every_token - claim_only) > 1e-3
    assert whole_differs  # reading the passage's tokens too would have shown
    assert model.fingerprint.split("/")[1].startswith("token:0+")  # label and prompt are part of the key
    _cache_round_trip(model, tmp_path)
    _through_evidence(model)
    # an empty claim has no token to read: NaN (an error for that claim), never a silent SUPPORTED
    assert np.isnan(NLIScorer(model).score([("Cats are mammals.", "")])).all()


@pytest.fixture(scope="module")
def token_model(token_dir: Path) -> NLIModel:
    return NLIModel(str(token_dir), device="cpu", batch_size=3, supported_label=0)


@settings(max_examples=40, deadline=None)
@given(premise=st.text(max_size=60), claim=st.text(max_size=30))
def test_token_checker_reads_the_claim_alone_whatever_the_texts(
    token_model: NLIModel, premise: str, claim: str
) -> None:
    """Any passage and claim (braces, slots, separators, odd unicode): P(supported) is 1 - the largest P(unsupported)
    over exactly the claim's own tokens; a claim with no token is NaN, never a score."""
    (row,) = token_model.predict([(premise, claim)])
    if not token_model.tokenizer(claim, add_special_tokens=False)["input_ids"]:
        assert np.isnan(row[:2]).all()
        return
    assert 0 <= row[0] <= 1 and row[0] + row[1] == pytest.approx(1, abs=1e-6) and row[2] == 0
    assert row[0] == pytest.approx(_lettuce_reading(token_model, premise, claim)[0], abs=1e-5)


def test_token_checker_is_detected_and_needs_its_label(token_dir: Path) -> None:
    from transformers import AutoConfig

    assert detect_kind(AutoConfig.from_pretrained(str(token_dir))) == "token"
    with pytest.raises(errors.NLIError, match=r"supported_label .*0 for LettuceDetect"):
        NLIModel(str(token_dir), device="cpu")  # LABEL_0 / LABEL_1 say nothing: never guessed
    with pytest.raises(errors.NLIError, match="0 or 1"):
        NLIModel(str(token_dir), device="cpu", supported_label=2)
    explicit = NLIModel(str(token_dir), device="cpu", kind="token", supported_label=0)
    flipped = NLIModel(str(token_dir), device="cpu", supported_label=1)
    np.testing.assert_allclose(
        explicit.predict(PAIRS), NLIModel(str(token_dir), device="cpu", supported_label=0).predict(PAIRS), atol=1e-6
    )
    assert flipped.fingerprint != explicit.fingerprint
    # the other label reading: output 0 is the unsupported one
    for (premise, claim), row in zip(PAIRS, flipped.predict(PAIRS), strict=True):
        assert row[0] == pytest.approx(_lettuce_reading(flipped, premise, claim, hallucinated=0)[0], abs=1e-5)


def test_token_checker_configs_that_do_not_fit_are_refused(
    token_dir: Path, binary_dir: Path, tmp_path: Path, corpus: list[str]
) -> None:
    import shutil

    # a named-entity tagger is a token classifier, but not a two-label one
    ner = tiny_modernbert_model(tmp_path / "ner" / "model", corpus, {0: "O", 1: "B-PER", 2: "I-PER"})
    with pytest.raises(errors.NLIError, match="a token checker has two labels"):
        NLIModel(str(ner), device="cpu")
    # a sequence classifier read as a token checker (or the reverse) would get a random head: refused
    with pytest.raises(errors.NLIError, match="not a token classifier"):
        NLIModel(str(binary_dir), device="cpu", kind="token", supported_label=1)
    with pytest.raises(errors.NLIError, match="is a token classifier"):
        NLIModel(str(token_dir), device="cpu", kind="binary", supported_label=0)
    # the passage's template is the folder's to declare, with the passage's slot alone
    folder = tmp_path / "declared"
    shutil.copytree(token_dir, folder)
    profile = {"format": 1, "kind": "token", "supported_label": 0, "template": "{premise}"}
    (folder / "groundjudge.json").write_text(json.dumps(profile))
    plain = NLIModel(str(folder), device="cpu")
    assert (
        plain.template == "{premise}"
        and plain.fingerprint != NLIModel(str(token_dir), device="cpu", supported_label=0).fingerprint
    )
    (folder / "groundjudge.json").write_text(json.dumps({**profile, "template": "{premise} {hypothesis}"}))
    with pytest.raises(errors.NLIError, match=r"no \{hypothesis\} slot"):
        NLIModel(str(folder), device="cpu")


# no number the sources lack: the cascade's conflict check would send such a claim to the judge whatever the score
TOKEN_CLAIMS = ["Sentence 3 talks about topic 3.", "Some sentences talk about the moon landing."]


def _claims_and_judge() -> Any:
    from groundjudge.testing import Reply, claims_in, route

    def claims(req: Any) -> Reply:
        return Reply.json({"claims": [{"text": t, "source": t} for t in TOKEN_CLAIMS]})

    def judge(req: Any) -> Reply:
        verdicts = [
            {"claim_id": cid, "verdict": "UNSUPPORTED", "reason": "Not in the sources.", "quotes": []}
            for cid in claims_in(req)
        ]
        return Reply.json({"verdicts": verdicts})

    return route({"claims": claims, "judge": judge})


def test_token_checker_scores_claims_in_nli_and_cascade_mode(token_dir: Path, tmp_path: Path) -> None:
    from groundjudge.pipeline.evaluator import Evaluator
    from groundjudge.testing import ScriptedLLMServer
    from tests.conftest import make_test_client

    options: dict[str, Any] = {"nli_model": str(token_dir), "device": "cpu", "nli_supported_label": 0}
    # said (--nli-kind token) here, read from the config (auto) in the cascade below
    nli = Evaluator(Config.make(mode="nli", nli_kind="token", **options), cache=Cache(tmp_path / "nli"))
    reports = [nli.evaluate_claim(claim, DOC, id=f"c{i}") for i, claim in enumerate(TOKEN_CLAIMS)]
    assert nli.nli.kind == "token"
    entail = []
    for report in reports:
        (verdict,) = report.claims
        assert verdict.route == "nli" and verdict.label in ("SUPPORTED", "UNSUPPORTED")
        assert not verdict.contradiction_checked  # a token checker cannot call CONTRADICTED
        assert verdict.nli is not None and verdict.nli.entailment_passage is not None
        # the reported entailment is the token reading of the passage it names
        passage = verdict.nli.entailment_passage.text
        assert verdict.nli.entailment == pytest.approx(
            _lettuce_reading(nli.nli, passage, verdict.claim.text)[0], abs=1e-5
        )
        entail.append(verdict.nli.entailment)
    assert entail[0] != entail[1]
    # the cascade: first everything to the judge, then the claim the checker is surer of decided locally
    entail_in: dict[str, float] = {}
    for run in ("all-judged", "surer-local"):
        with ScriptedLLMServer(_claims_and_judge()) as server:
            cache = Cache(tmp_path / run)
            t_support: float | str = max(entail_in.values()) if entail_in else "never"
            cfg = Config.make(mode="cascade", qa=False, t_support=t_support, t_unsupported=0.0, **options)
            cascade = Evaluator(cfg, client=make_test_client(server, cache=cache), cache=cache)
            report = cascade.evaluate(" ".join(TOKEN_CLAIMS), DOC, id="a")
        assert cascade.nli.kind == "token" and len(report.claims) == 2
        if not entail_in:
            for v in report.claims:
                assert (v.route, v.label, v.contradiction_checked) == ("judge", "UNSUPPORTED", True)
                assert v.nli is not None and 0 < v.nli.entailment < 1
                entail_in[v.claim.text] = v.nli.entailment
            continue
        surer = max(entail_in, key=lambda text: entail_in[text])
        for v in report.claims:
            if v.claim.text == surer:
                assert (v.route, v.label, v.contradiction_checked) == ("nli", "SUPPORTED", False)
            else:
                assert (v.route, v.label, v.contradiction_checked) == ("judge", "UNSUPPORTED", True)


# -- binary with a template: FactCG-DeBERTa shape (DeBERTa-v2, LABEL_0 / LABEL_1, 1 = supported) -------------------


def test_factcg_recipe_reads_its_template_from_the_folder(tmp_path: Path, corpus: list[str]) -> None:
    """The recipe of docs/how-to/local-checker.md: the hub model in a folder with a groundjudge.json that names the
    kind, the label and FactCG's prompt; read as FactCG's own inference does (one text, softmax, output 1)."""
    import torch

    from groundjudge.pipeline.evaluator import Evaluator

    folder = tiny_deberta_model(tmp_path / "factcg" / "model", corpus, PLACEHOLDERS)
    recipe = {"format": 1, "kind": "binary", "supported_label": 1, "template": FACTCG_TEMPLATE}
    (folder / "groundjudge.json").write_text(json.dumps(recipe))
    model = NLIModel(str(folder), device="cpu", batch_size=3, max_length=2048)  # DeBERTa-v3: relative positions
    assert model.kind == "binary" and model.supported_label == 1 and model.template == FACTCG_TEMPLATE
    out = _same_in_batches_and_alone(model)
    _binary_columns(out)
    tok = model.tokenizer
    for (premise, claim), row in zip(PAIRS, out, strict=True):
        text = f'{premise}\n\nChoose your answer: based on the paragraph above can we conclude that "{claim}"?\n\n'
        ids = tok(text + "OPTIONS:\n- Yes\n- No\nI think the answer is ", return_tensors="pt")
        with torch.no_grad():
            logits = model.model(**ids).logits[0]
        assert row[0] == pytest.approx(_softmax(logits)[1], abs=1e-5)
    assert model.fingerprint.split("/")[1].startswith("binary:1+")
    _through_evidence(model)
    evaluator = Evaluator(Config.make(mode="nli", nli_model=str(folder), device="cpu", nli_max_length=2048))
    (verdict,) = evaluator.evaluate_claim("Sentence 3 talks about topic 3.", DOC).claims
    assert verdict.route == "nli" and not verdict.contradiction_checked and verdict.nli is not None
    assert evaluator.nli.template == FACTCG_TEMPLATE
