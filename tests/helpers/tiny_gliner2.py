"""A tiny random GLiNER2 (span architecture) in GLiNER2's own save format, built offline.

The encoder is a one-layer model of the declared type and width with the test WordPiece vocabulary;
GLiNER2 adds its prompt tokens to the tokenizer and resizes the embeddings itself.
"""

from __future__ import annotations

from pathlib import Path


def build_gliner2(folder: Path, model_type: str = "deberta-v2", hidden: int = 32, max_len: int = 64) -> Path:
    """Write a loadable random GLiNER2 into ``folder`` (returned); an already built one is reused."""
    import torch
    from gliner2 import ExtractorConfig, GLiNER2

    from tests.helpers.tiny_architectures import model_config, save_tokenizer, tokens

    if (folder / "model.safetensors").exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    vocab = tokens(model_type)
    tokenizer = save_tokenizer(folder, vocab, model_type)
    encoder = model_config(model_type, hidden, len(vocab), 512)
    torch.manual_seed(0)
    config = ExtractorConfig(model_name=str(folder), max_width=8, max_len=max_len)
    GLiNER2(config, encoder_config=encoder, tokenizer=tokenizer).save_pretrained(str(folder))
    return folder
