"""Fixtures for offline tests: :func:`tiny_nli_model`, a small random NLI model saved with a real tokenizer."""

from __future__ import annotations

from pathlib import Path


def tiny_nli_model(
    directory: str | Path,
    tokenizer_from: str | Path,
    id2label: dict[int, str] | None = None,
    seed: int = 0,
    permute: list[int] | None = None,
) -> Path:
    """Save a randomly initialised 2-layer BERT NLI model (with a real tokenizer) for fast offline tests.

    ``permute`` reorders the classifier's output rows (to test that label order is read from the config).
    Its outputs are meaningless but deterministic and far from uniform.
    """
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    labels = id2label or {0: "entailment", 1: "neutral", 2: "contradiction"}
    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_from), local_files_only=True)
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        initializer_range=0.5,  # far from uniform outputs, so that a padding or ordering bug shows
        num_labels=len(labels),
        id2label=labels,
        label2id={v: k for k, v in labels.items()},
    )
    model = BertForSequenceClassification(config).eval()
    if permute is not None:  # output row i of the new head = row permute[i] of the seed's head
        with torch.no_grad():
            model.classifier.weight.copy_(model.classifier.weight[permute].clone())
            model.classifier.bias.copy_(model.classifier.bias[permute].clone())
    model.save_pretrained(str(directory))
    tokenizer.save_pretrained(str(directory))
    return Path(directory)
