"""The NLI engine: label order, batching, chunking, evidence selection, cache; tiny random models and the shared one."""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from groundjudge import errors
from groundjudge.cache import Cache
from groundjudge.checker.evidence import BM25, EvidenceSelector
from groundjudge.checker.folder import fingerprint_dir
from groundjudge.checker.nli import NLIModel, NLIScorer, default_batch_size, label_columns
from groundjudge.chunking import chunk_document, chunk_documents, claim_sentences, split_sentences
from groundjudge.models import Passage
from groundjudge.testing import tiny_nli_model
from tests.conftest import SHARED_MODEL

LABELS = {0: "entailment", 1: "neutral", 2: "contradiction"}


@pytest.fixture(scope="module")
def tiny(tiny_nli: Path) -> NLIModel:
    return NLIModel(str(tiny_nli), device="cpu", batch_size=3)  # its own instance: the tests count its passes


PAIRS = [
    ("The Eiffel Tower is in Paris. It was completed in 1889.", "The Eiffel Tower is in Paris."),
    ("Water boils at 100 degrees Celsius at sea level.", "Water boils at 90 degrees."),
    ("Short.", "A much longer hypothesis that goes on and on about many unrelated things in detail."),
    ("Cats are mammals.", "Cats are mammals."),
    ("The report was published in March 2021 by the ministry of health, with 42 pages.", "It has 42 pages."),
    ("x", "y"),
    ("Mount Everest is 8,849 metres tall and lies on the border of Nepal and China.", "Everest is in Peru."),
]


# -- labels ----------------------------------------------------------------------------------------------------


def test_label_order_comes_from_the_config(tmp_path: Path, tiny: NLIModel) -> None:
    # Same weights, outputs permuted to contradiction / entailment / neutral (the DeBERTa order), config to match.
    permuted = {0: "contradiction", 1: "entailment", 2: "neutral"}
    other = NLIModel(str(tiny_nli_model(tmp_path, SHARED_MODEL, permuted, permute=[2, 0, 1])), device="cpu")
    assert other.columns == [1, 2, 0]
    np.testing.assert_allclose(other.predict(PAIRS), tiny.predict(PAIRS), atol=1e-5)


@pytest.mark.parametrize(
    "id2label,columns",
    [
        ({0: "ENTAILMENT", 1: "NEUTRAL", 2: "CONTRADICTION"}, [0, 1, 2]),
        ({"0": "contradiction", "1": "entailment", "2": "neutral"}, [1, 2, 0]),
        ({0: "entailment", 1: "not_entailment"}, [0, 1, None]),
    ],
)
def test_label_names(id2label: dict[int, str], columns: list[int | None]) -> None:
    assert label_columns(id2label) == columns


def test_placeholder_labels_are_refused(tmp_path: Path) -> None:
    path = tiny_nli_model(tmp_path, SHARED_MODEL, {0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"})
    with pytest.raises(errors.NLIError, match="names no entailment label"):
        NLIModel(str(path), device="cpu")


def test_missing_model_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(errors.NLIError, match="could not load NLI model"):
        NLIModel(str(tmp_path / "nowhere"), local_files_only=True)


# -- batching --------------------------------------------------------------------------------------------------


def test_batched_equals_one_by_one_in_order(tiny: NLIModel) -> None:
    batched = tiny.predict(PAIRS)  # batch size 3: several batches of mixed lengths
    single = np.vstack([tiny.predict([p]) for p in PAIRS])
    np.testing.assert_allclose(batched, single, atol=1e-5)
    np.testing.assert_allclose(batched.sum(axis=1), 1.0, atol=1e-5)
    # a different order of the same pairs gives the same rows, reordered
    reversed_ = tiny.predict(PAIRS[::-1])
    np.testing.assert_allclose(reversed_[::-1], batched, atol=1e-5)
    assert len({tuple(np.round(r, 4)) for r in batched}) == len(PAIRS)  # rows really differ


def test_pairs_over_the_limit_are_never_truncated(tiny: NLIModel) -> None:
    long_premise = "word " * 400
    with pytest.raises(errors.NLIError, match="nothing is truncated"):
        tiny.predict([(long_premise, "claim")])


def test_cache_hit_skips_the_model(tiny: NLIModel, tmp_path: Path) -> None:
    scorer = NLIScorer(tiny, Cache(tmp_path / "c"))
    before = tiny.forward_passes
    first = scorer.score(PAIRS + PAIRS[:2])  # duplicates are scored once
    assert tiny.forward_passes > before and tiny.pairs_scored >= len(PAIRS)
    passes = tiny.forward_passes
    second = NLIScorer(tiny, Cache(tmp_path / "c")).score(PAIRS)
    assert tiny.forward_passes == passes
    np.testing.assert_allclose(second, first[: len(PAIRS)], atol=1e-5)
    # a new pair misses
    assert NLIScorer(tiny, Cache(tmp_path / "c")).score([("new premise", "new claim")]).shape == (1, 3)
    assert tiny.forward_passes == passes + 1
    # and so does another model on the same pairs: its fingerprint is in the key
    other = NLIModel(str(tiny_nli_model(tmp_path / "other", SHARED_MODEL, LABELS, seed=1)), device="cpu")
    assert other.fingerprint != tiny.fingerprint
    NLIScorer(other, Cache(tmp_path / "c")).score(PAIRS)
    assert other.pairs_scored == len(PAIRS)


def _save_bert(directory: Path, state: dict[str, Any] | None = None) -> dict[str, Any]:
    """A random BERT NLI model of about 8 MB (over the old fingerprint's 4 MB whole-file limit) saved to a folder;
    ``state`` overrides its weights. Returns the weights saved."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    tokenizer = AutoTokenizer.from_pretrained(str(SHARED_MODEL), local_files_only=True)
    torch.manual_seed(0)
    config = BertConfig(  # type: ignore[call-arg]
        vocab_size=tokenizer.vocab_size,
        hidden_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        initializer_range=0.5,
        num_labels=3,
        id2label=LABELS,
        label2id={v: k for k, v in LABELS.items()},
    )
    model = BertForSequenceClassification(config).eval()
    if state is not None:
        model.load_state_dict(state)
    model.save_pretrained(str(directory))
    tokenizer.save_pretrained(str(directory))
    return {k: v.clone() for k, v in model.state_dict().items()}


def test_a_model_retrained_into_the_same_folder_misses_the_cache(tmp_path: Path) -> None:
    # Issue 13: the fingerprint hashed the size and the first and last MB of the weights, so a retrained model
    # saved under the same folder read the old model's scores from the cache.
    folder = tmp_path / "model"
    state = _save_bert(folder)
    weights = folder / "model.safetensors"
    old_bytes = weights.read_bytes()
    first = NLIModel(str(folder), device="cpu")
    vocab = first.tokenizer.convert_ids_to_tokens(list(range(10_000, 10_400)))
    rare = " ".join([t for t in vocab if t.isalpha()][:12])  # words whose embedding rows sit in the middle of the file
    pairs = [(f"{rare} is what the report says.", f"The report says {rare}."), *PAIRS[:3]]
    cache = Cache(tmp_path / "c")
    old_scores = NLIScorer(first, cache).score(pairs)

    retrained = dict(state)
    emb = retrained["bert.embeddings.word_embeddings.weight"].clone()
    emb[10_000:20_000] = -emb[10_000:20_000]
    retrained["bert.embeddings.word_embeddings.weight"] = emb
    _save_bert(folder, retrained)
    new_bytes = weights.read_bytes()
    mb = 2**20
    assert len(new_bytes) == len(old_bytes) and new_bytes != old_bytes
    assert new_bytes[:mb] == old_bytes[:mb] and new_bytes[-mb:] == old_bytes[-mb:]  # only the middle changed

    second = NLIModel(str(folder), device="cpu")
    assert second.fingerprint != first.fingerprint
    fresh = second.predict(pairs)
    assert not np.allclose(fresh[0], old_scores[0], atol=1e-3)  # the change really moves the scores
    scorer = NLIScorer(second, Cache(tmp_path / "c"))
    np.testing.assert_allclose(scorer.score(pairs), fresh, atol=1e-5)
    assert scorer.cache_hits == 0
    # and the same model loaded again still hits (the digest is remembered, not recomputed into something else)
    again = NLIScorer(NLIModel(str(folder), device="cpu"), Cache(tmp_path / "c"))
    again.score(pairs)
    assert again.cache_hits == len(pairs)


def test_default_batch_size_fills_a_cuda_pass_by_tokens() -> None:
    """cuda: 256 pairs of 512 tokens a pass (measured on an H100 and an H200: 39-44% more pairs/s than 64), fewer
    for a model of longer pairs, never none; mps 64; a CPU 16 (its fastest)."""
    assert default_batch_size("cuda", 512) == 256
    assert default_batch_size("cuda:1", 512) == 256
    assert default_batch_size("cuda", 2048) == 64
    assert default_batch_size("cuda", 10**7) == 1
    assert default_batch_size("mps", 512) == 64
    assert default_batch_size("cpu", 512) == 16


def test_a_model_takes_the_default_batch_size_of_its_device_and_length(tiny: NLIModel) -> None:
    assert tiny.batch_size == 3  # asked
    assert NLIModel(tiny.name, device="cpu").batch_size == default_batch_size("cpu", tiny.max_length) == 16


def test_the_shared_instance_of_a_folder_whose_weights_changed_is_loaded_again(tiny_nli: Path, tmp_path: Path) -> None:
    """A notebook that tunes or saves weights into the folder it scores with gets the new weights from the next
    evaluator, not the instance of the old ones (whose identity would also misname the new weights to a head)."""
    folder = tmp_path / "model"
    shutil.copytree(tiny_nli, folder)
    pairs = [("The tower is in Paris.", "The tower is in France.")]
    first = NLIModel.shared(str(folder), device="cpu")
    assert NLIModel.shared(str(folder), device="cpu") is first  # unchanged: the same instance
    tiny_nli_model(folder, SHARED_MODEL, seed=7)  # other weights, saved into the same folder
    again = NLIModel.shared(str(folder), device="cpu")
    assert again is not first and again.identity != first.identity
    fresh = NLIModel(str(folder), device="cpu")
    assert again.identity == fresh.identity
    np.testing.assert_array_equal(again.predict(pairs), fresh.predict(pairs))
    assert NLIModel.shared(str(folder), device="cpu") is again


def test_a_model_folder_keeps_its_identity_on_another_system_and_after_a_desktop_opened_it(
    tiny_nli: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The identity a head and thresholds are tied to is the folder's files in code-point order of their names, as
    Linux orders them; Windows orders paths case-blind ("README.md" after "config.json"), and the folder copied
    there must not become another model. Nor may Finder's .DS_Store or Explorer's Thumbs.db make it one."""
    folder = tmp_path / "model"
    shutil.copytree(tiny_nli, folder)
    (folder / "README.md").write_text("a model card\n")
    here = fingerprint_dir(folder)
    monkeypatch.setattr(type(folder), "__lt__", lambda a, b: str(a).lower() < str(b).lower())  # Windows' order
    assert fingerprint_dir(folder) == here
    monkeypatch.undo()
    for litter in (".DS_Store", "._model.safetensors", "Thumbs.db", "desktop.ini"):
        (folder / litter).write_bytes(b"\x00\x01")
    assert fingerprint_dir(folder) == here
    (folder / "vocab.extra").write_text("x")  # any other file is the model's
    assert fingerprint_dir(folder) != here


def test_fingerprint_names_device_class_and_dtype(tiny: NLIModel, tmp_path: Path) -> None:
    assert tiny.fingerprint.endswith("/cpu-float32")
    half = NLIModel(tiny.name, device="cpu", half=True)
    assert half.fingerprint.endswith("/cpu-float16") and half.fingerprint != tiny.fingerprint


def test_non_finite_scores_are_returned_as_nan_and_never_cached(tmp_path: Path, tiny: NLIModel) -> None:
    # Issue 13: a model returning NaN yielded PASS and wrote NaN into the cache.
    import torch
    from transformers import AutoModelForSequenceClassification

    path = tiny_nli_model(tmp_path / "nan", SHARED_MODEL, LABELS)
    broken = AutoModelForSequenceClassification.from_pretrained(str(path), local_files_only=True)
    with torch.no_grad():
        broken.classifier.bias.fill_(float("nan"))
    broken.save_pretrained(str(path))
    model = NLIModel(str(path), device="cpu")
    cache = Cache(tmp_path / "c")
    scorer = NLIScorer(model, cache)
    out = scorer.score(PAIRS[:3])
    assert out.shape == (3, 3) and np.isnan(out).all()
    assert cache.stats()["entries"].get("nli", 0) == 0
    again = NLIScorer(model, Cache(tmp_path / "c"))
    assert np.isnan(again.score(PAIRS[:3])).all() and again.cache_hits == 0

    # a non-finite entry already in a cache (written before this fix) is scored again, not served
    healthy = NLIScorer(tiny, cache)
    cache.set(healthy._key(*PAIRS[0]), [float("nan"), 0.5, 0.5])
    row = healthy.score(PAIRS[:1])
    assert np.isfinite(row).all() and healthy.cache_hits == 0
    np.testing.assert_allclose(row, tiny.predict(PAIRS[:1]), atol=1e-5)
    assert np.isfinite(cache.get(healthy._key(*PAIRS[0]))).all()  # and the good row replaced it
    # so is an entry whose number no float holds (valid JSON: 10**400), which raised OverflowError into the row
    cache.set(healthy._key(*PAIRS[1]), [10**400, 0.5, 0.5])
    row = healthy.score(PAIRS[1:2])
    assert np.isfinite(row).all() and healthy.cache_hits == 0


# -- sentences and passages ------------------------------------------------------------------------------------

ANSWER = """Sure! Here is what I found:
- Dr. Smith joined Acme Inc. in Jan. 2020 and earned $3.5 million.
- J. K. Rowling wrote 7 books, e.g. the Harry Potter series.
1. The U.S. Army was founded in 1775. The U.S. has 50 states.
2) Revenue grew 4.5% to 12.3 bn
Paris is the capital of France (pop. 2.1 million). Is that right? I hope this helps."""


def test_sentences_respect_abbreviations_numbers_and_lists() -> None:
    sents = split_sentences(ANSWER)
    assert all(ANSWER[s.start : s.end] == s.text for s in sents)
    assert [s.text for s in sents] == [
        "Sure!",
        "Here is what I found:",
        "Dr. Smith joined Acme Inc. in Jan. 2020 and earned $3.5 million.",
        "J. K. Rowling wrote 7 books, e.g. the Harry Potter series.",
        "The U.S. Army was founded in 1775.",
        "The U.S. has 50 states.",
        "Revenue grew 4.5% to 12.3 bn",
        "Paris is the capital of France (pop. 2.1 million).",
        "Is that right?",
        "I hope this helps.",
    ]


def test_claim_sentences_drop_fragments_without_claims() -> None:
    assert [s.text for s in claim_sentences(ANSWER)] == [
        "Dr. Smith joined Acme Inc. in Jan. 2020 and earned $3.5 million.",
        "J. K. Rowling wrote 7 books, e.g. the Harry Potter series.",
        "The U.S. Army was founded in 1775.",
        "The U.S. has 50 states.",
        "Revenue grew 4.5% to 12.3 bn",
        "Paris is the capital of France (pop. 2.1 million).",
    ]
    assert claim_sentences("") == [] and claim_sentences("Thanks!\n\nLet me know if you need more.") == []


DOC = " ".join(
    f"Sentence {i} talks about topic {i % 7} with the number {i * 13} and a few more words to fill it."
    for i in range(60)
) + (" " + "unbroken" * 3 + "-".join(["verylongtoken"] * 200))  # one sentence far longer than a passage


@pytest.mark.parametrize("max_tokens,overlap", [(64, 0), (64, 16), (200, 40), (30, 29)])
def test_passages_round_trip_offsets_and_fit(tiny: NLIModel, max_tokens: int, overlap: int) -> None:
    passages = chunk_document(DOC, 3, tiny.tokenizer, max_tokens, overlap)
    assert len(passages) > 2
    for p in passages:
        assert p.doc == 3 and DOC[p.start : p.end] == p.text
        assert len(tiny.tokenizer(p.text, add_special_tokens=False)["input_ids"]) <= max_tokens
        assert p.n_tokens <= max_tokens
    # every token of the document is in some passage, in order
    covered = np.zeros(len(DOC), dtype=bool)
    for p in passages:
        covered[p.start : p.end] = True
    assert all(covered[i] for i, ch in enumerate(DOC) if not ch.isspace())
    assert [p.start for p in passages] == sorted(p.start for p in passages)
    if overlap:
        assert any(b.start < a.end for a, b in itertools.pairwise(passages))


def test_chunk_documents_keeps_document_indices(tiny: NLIModel) -> None:
    passages = chunk_documents(["First doc. It is short.", "", "Second doc here."], tiny.tokenizer, 64)
    assert [(p.doc, p.text) for p in passages] == [(0, "First doc. It is short."), (2, "Second doc here.")]


# -- evidence selection ----------------------------------------------------------------------------------------


def test_bm25_ranks_the_relevant_passage_first() -> None:
    docs = ["The cat sat on the mat.", "Revenue grew to 12.3 billion dollars in 2023.", "Dogs bark at night."]
    assert BM25(docs).rank("What was the revenue in 2023?")[0] == 1


def test_long_claims_get_windows_that_fit(tiny: NLIModel) -> None:
    selector = EvidenceSelector(NLIScorer(tiny), k=None, early_exit=None)
    passages = chunk_document(DOC, 0, tiny.tokenizer, 100, 10)
    claim = "The claim is long " * 12  # ~60 tokens: passages of 100 tokens no longer fit in 128
    (result,) = selector.check([([claim], passages)])[0]
    assert result.passages_scored > len(passages)  # passages were cut into windows
    assert result.entailment_passage is not None
    p = result.entailment_passage
    assert DOC[p.start : p.end] == p.text
    # a claim too long for the window at all is reported as such; the claim beside it is still scored
    too_long, fine = selector.check([(["word " * 130, claim], passages)])[0]
    assert too_long.error is not None and "no room" in too_long.error and too_long.passages_scored == 0
    assert fine.error is None and fine.passages_scored == result.passages_scored


@pytest.fixture(scope="module")
def shared() -> NLIModel:
    assert SHARED_MODEL.is_dir(), f"the shared NLI model is missing at {SHARED_MODEL}"
    return NLIModel(str(SHARED_MODEL))


FILLER = [
    "The museum's gift shop sells postcards, books and replicas of famous paintings from its collection.",
    "Parking is available on the west side of the building for a small fee on weekdays.",
    "Guided tours in several languages start every hour from the main entrance hall.",
    "The cafeteria on the ground floor serves sandwiches, soups and hot drinks until closing time.",
    "School groups must book their visit at least two weeks in advance through the website.",
    "Photography without flash is allowed in most of the permanent exhibition rooms.",
]
GOLD = "The museum was founded in 1897 by the industrialist Henrik Olsen, who donated his art collection."


def test_evidence_selection_keeps_the_gold_passage(shared: NLIModel) -> None:
    doc = " ".join([*FILLER[:3], GOLD, *FILLER[3:]])
    passages = chunk_document(doc, 0, shared.tokenizer, 24)
    gold = next(i for i, p in enumerate(passages) if "1897" in p.text)
    selector = EvidenceSelector(NLIScorer(shared), k=2, early_exit=0.9)
    (supported, contradicted) = selector.check(
        [(["Henrik Olsen founded the museum in 1897.", "The museum was founded in 1950."], passages)]
    )[0]
    assert supported.entailment_passage == passages[gold]
    assert supported.passages_scored <= 2 < len(passages)
    assert supported.entailment > 0.5 > supported.contradiction
    assert contradicted.contradiction_passage == passages[gold]
    assert contradicted.contradiction > contradicted.entailment


def test_early_exit_stops_a_claim_once_entailed(shared: NLIModel) -> None:
    passages = [Passage(doc=0, start=0, end=len(GOLD), text=GOLD, n_tokens=30)] + [
        Passage(doc=1, start=0, end=len(f), text=f, n_tokens=30) for f in FILLER
    ]
    claim = "The museum was founded in 1897."
    eager = EvidenceSelector(NLIScorer(shared), k=None, early_exit=0.5).check([([claim], passages)])[0][0]
    full = EvidenceSelector(NLIScorer(shared), k=None, early_exit=None).check([([claim], passages)])[0][0]
    assert eager.entailment_passage == full.entailment_passage == passages[0]
    assert eager.early_exit and eager.passages_scored == 1
    assert full.passages_scored == len(passages) and not full.early_exit


@pytest.fixture(scope="module")
def tiny_deberta(tmp_path_factory: pytest.TempPathFactory) -> NLIModel:
    """A DeBERTa-v2 model (the default hub model's architecture) with a SentencePiece tokenizer trained here,
    and labels in the hub model's order: the project's BERT model is not the only shape that must drop in."""
    import json

    from tests.conftest import SHARED, tiny_deberta_model

    lines = (SHARED / "benchmarks" / "factcheckgpt-stance.jsonl").read_text().splitlines()[:400]
    corpus = [json.loads(x)["contexts"][0] for x in lines]
    labels = {0: "contradiction", 1: "entailment", 2: "neutral"}
    path = tiny_deberta_model(
        tmp_path_factory.mktemp("deberta") / "model", corpus, labels, vocab_size=1500, initializer_range=0.5
    )
    return NLIModel(str(path), device="cpu", batch_size=3)


def test_sentencepiece_passages_fit_their_token_budget(tiny_deberta: NLIModel) -> None:
    for max_tokens, overlap in [(64, 16), (30, 0)]:
        for p in chunk_document(DOC, 0, tiny_deberta.tokenizer, max_tokens, overlap):
            n = len(tiny_deberta.tokenizer(p.text, add_special_tokens=False)["input_ids"])
            assert n <= max_tokens and n == p.n_tokens


def test_a_deberta_model_with_sentencepiece_drops_in(tiny_deberta: NLIModel) -> None:
    assert tiny_deberta.columns == [1, 2, 0] and tiny_deberta.max_length == 512
    unk = tiny_deberta.tokenizer.unk_token_id
    assert all(i != unk for i in tiny_deberta.tokenizer("The Eiffel Tower is in Paris.")["input_ids"])
    batched = tiny_deberta.predict(PAIRS)
    np.testing.assert_allclose(batched, np.vstack([tiny_deberta.predict([p]) for p in PAIRS]), atol=1e-5)
    assert len({tuple(np.round(r, 4)) for r in batched}) == len(PAIRS)  # rows really differ
    for max_tokens, overlap in [(64, 16), (30, 0)]:
        passages = chunk_document(DOC, 0, tiny_deberta.tokenizer, max_tokens, overlap)
        assert len(passages) > 2
        for p in passages:
            assert DOC[p.start : p.end] == p.text
    selector = EvidenceSelector(NLIScorer(tiny_deberta), k=2, early_exit=None)
    (result,) = selector.check(
        [(["Sentence 3 talks about topic 3."], chunk_document(DOC, 0, tiny_deberta.tokenizer, 64))]
    )[0]
    assert result.passages_scored == 2 and result.entailment_passage is not None


def test_a_temporary_file_a_killed_writer_left_is_not_part_of_the_model(tmp_path: Path, tiny_nli: Path) -> None:
    # groundjudge.atomic names its temporary files at random; a writer killed outright (calibrate or tune rewriting
    # groundjudge.json) leaves one beside the weights, and it changed the fingerprint: every NLI score a cache miss,
    # and a verdict head tied to the model no longer matching it (the writer's own names: tests/test_atomic.py)
    import shutil

    folder = tmp_path / "model"
    shutil.copytree(tiny_nli, folder)
    before = NLIModel(str(folder), device="cpu").fingerprint
    (folder / "groundjudge.json.0123456789ab.tmp").write_text("{")  # what a SIGKILL mid-write leaves
    assert NLIModel(str(folder), device="cpu").fingerprint == before
    (folder / "notes.tmp").write_text("a file of the model's own")  # any other file still counts
    assert NLIModel(str(folder), device="cpu").fingerprint != before
