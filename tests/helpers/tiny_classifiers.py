"""Tiny random-weight classifiers for tests: NLI heads (contradiction / neutral / entailment),
fixed-label sequence heads (single- or multi-label), and a GLiClass uni-encoder, each saved with
``save_pretrained`` and a WordPiece tokenizer over the test vocabulary."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.helpers.tiny_architectures import model_config, save_tokenizer, tokens

NLI_LABELS = ("contradiction", "neutral", "entailment")
HEADS = 4


def _config(model_type: str, hidden: int, vocab: int, positions: int, layers: int, tokenizer: Any) -> Any:
    import transformers as tf

    if model_type == "bart":
        sep, cls = tokenizer.sep_token_id, tokenizer.cls_token_id
        return tf.BartConfig(
            vocab_size=vocab, d_model=hidden, encoder_layers=layers, decoder_layers=layers,
            encoder_attention_heads=HEADS, decoder_attention_heads=HEADS, encoder_ffn_dim=hidden * 2,
            decoder_ffn_dim=hidden * 2, max_position_embeddings=positions, pad_token_id=0, bos_token_id=cls,
            eos_token_id=sep, decoder_start_token_id=sep, forced_eos_token_id=sep,
        )  # fmt: skip
    config = model_config(model_type, hidden, vocab, positions)
    if layers != 1:
        config.num_hidden_layers = layers
        config.intermediate_size = hidden * 4
    return config


def build_sequence(
    folder: Path,
    labels: tuple[str, ...],
    *,
    model_type: str = "bert",
    hidden: int = 32,
    layers: int = 1,
    positions: int = 128,
    multi_label: bool = False,
    seed: int = 0,
) -> Path:
    """A sequence-classification model with ``labels`` (id order); ``multi_label``: problem_type
    multi_label_classification (scored with a sigmoid per label)."""
    import torch
    from transformers import AutoModelForSequenceClassification

    folder.mkdir(parents=True, exist_ok=True)
    vocab = tokens(model_type)
    tokenizer = save_tokenizer(folder, vocab, model_type)
    config = _config(model_type, hidden, len(vocab), positions, layers, tokenizer)
    config.num_labels = len(labels)
    config.id2label = dict(enumerate(labels))
    config.label2id = {label: k for k, label in enumerate(labels)}
    config.problem_type = "multi_label_classification" if multi_label else "single_label_classification"
    torch.manual_seed(seed)
    model = AutoModelForSequenceClassification.from_config(config).eval()  # type: ignore[no-untyped-call]
    with torch.no_grad():  # larger head weights: scores that differ clearly between labels and inputs
        for name, parameter in model.named_parameters():
            if "classifier" in name or "classification_head" in name or "pre_classifier" in name:
                parameter.normal_(0, 0.5)
    model.save_pretrained(folder)
    return folder


def build_nli(folder: Path, **kwargs: Any) -> Path:
    return build_sequence(folder, NLI_LABELS, **kwargs)


def build_gliclass(folder: Path, *, model_type: str = "deberta-v2", hidden: int = 32, positions: int = 256) -> Path:
    """A GLiClass uni-encoder over a tiny encoder, with its <<LABEL>> / <<SEP>> / <<EXAMPLE>> tokens."""
    import torch
    from gliclass import GLiClassModel, GLiClassModelConfig

    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = save_tokenizer(folder, tokens(model_type), model_type)
    tokenizer.add_tokens(["<<LABEL>>", "<<SEP>>", "<<EXAMPLE>>"], special_tokens=True)
    tokenizer.save_pretrained(folder)
    encoder = model_config(model_type, hidden, len(tokenizer), positions)
    config = GLiClassModelConfig(
        encoder_config=encoder.to_dict(), encoder_model="tiny-encoder", vocab_size=len(tokenizer), hidden_size=hidden,
        class_token_index=tokenizer.convert_tokens_to_ids("<<LABEL>>"),
        text_token_index=tokenizer.convert_tokens_to_ids("<<SEP>>"),
        example_token_index=tokenizer.convert_tokens_to_ids("<<EXAMPLE>>"),
        scorer_mlp_hidden_size=hidden, scorer_num_heads=HEADS,
    )  # fmt: skip
    torch.manual_seed(0)
    GLiClassModel(config).save_pretrained(folder)
    return folder
