"""A tiny random GLiNER2 (span architecture) in GLiNER2's own save format, built offline.

The encoder is a one-layer model of the declared type and width with the test WordPiece vocabulary;
GLiNER2 adds its prompt tokens to the tokenizer and resizes the embeddings itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


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


MODEL = "test/tiny-gliner2"
TEXT = "Invoice INV-2024-0117 from Acme Corp: total due 4,250.00 EUR by 31 March 2024."
# every part of a GLiNER2 schema, for the server's and the SDK's tests
SCHEMA: dict[str, Any] = {
    "entities": ["company", "date"],
    "classifications": {
        "kind": {"labels": ["invoice", "receipt", "letter"]},
        "topics": {"labels": ["money", "time", "food"], "multi_label": True},
    },
    "structures": {
        "bill": {
            "total": {"dtype": "str", "description": "the amount due"},
            "parties": {"dtype": "list"},
            "currency": {"dtype": "str", "choices": ["EUR", "USD"]},
        }
    },
    "relations": ["billed_by"],
}


def gliner2_catalog(root: Path) -> Path:
    """A catalog folder under ``root`` with the tiny GLiNER2 as MODEL (64 tokens, at most 5 labels)."""
    from tests.helpers.catalog import CPU_PROFILE, write_config

    folder = build_gliner2(root / "weights", max_len=64)
    catalog = root / "catalog"
    catalog.mkdir()
    write_config(
        catalog,
        {
            "id": MODEL,
            "source": {"path": str(folder)},
            "adapter": "gliner2",
            "tasks": {"extract": {"max_labels": 5, "threshold": 0.5}},
            "max_sequence_length": 64,
            "profiles": CPU_PROFILE,
        },
    )
    return catalog
