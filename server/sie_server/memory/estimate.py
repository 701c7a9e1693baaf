"""Sizing a model before and after loading: weights bytes and an activation reserve for one full batch."""

from __future__ import annotations

import json
import struct
from functools import lru_cache
from pathlib import Path
from typing import Any

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}
_SAFETENSORS_BYTES = {
    "F64": 8,
    "F32": 4,
    "F16": 2,
    "BF16": 2,
    "I64": 8,
    "I32": 4,
    "I16": 2,
    "I8": 1,
    "U8": 1,
    "BOOL": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
}


def _safetensors_params(path: Path) -> tuple[int, int]:
    """(floating-point parameter count, bytes of other tensors) from a safetensors header."""
    with path.open("rb") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
        header = json.loads(handle.read(length))
    floats, other = 0, 0
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        count = 1
        for dim in meta["shape"]:
            count *= int(dim)
        if meta["dtype"] in ("F64", "F32", "F16", "BF16"):
            floats += count
        else:
            other += count * _SAFETENSORS_BYTES.get(meta["dtype"], 4)
    return floats, other


def weights_bytes(folder: Path, dtype: str) -> int:
    """Bytes the weights will take in ``dtype``; from safetensors headers, else file sizes."""
    files = sorted(folder.glob("*.safetensors"))
    if files:
        total = 0
        for path in files:
            floats, other = _safetensors_params(path)
            total += floats * DTYPE_BYTES[dtype] + other
        return total
    return sum(p.stat().st_size for p in folder.glob("*.bin"))


def _model_config(folder: Path) -> dict[str, Any] | None:
    """The architecture's config: config.json, else the backbone's config that GLiNER keeps in its own."""
    try:
        return dict(json.loads((folder / "config.json").read_text()))
    except (OSError, ValueError):
        pass
    try:
        encoder = json.loads((folder / "gliner_config.json").read_text()).get("encoder_config")
    except (OSError, ValueError, AttributeError):
        return None
    return dict(encoder) if isinstance(encoder, dict) else None


def activation_reserve(folder: Path, max_batch_tokens: int, max_sequence_length: int, dtype: str) -> int:
    """Peak activation bytes of one full batch of an encoder, estimated from its config.

    Per token: the hidden state and its attention/FFN intermediates (~6 hidden + 2 FFN
    widths), plus one row of attention scores per head for a sequence of the model's length.
    """
    config = _model_config(folder)
    if config is None:
        return 0
    hidden = int(config.get("hidden_size") or config.get("d_model") or 768)
    if any(str(a).endswith("ForCausalLM") for a in config.get("architectures") or []):
        # a decoder holds its KV cache for every token in the batch, plus transient activations
        layers = int(config.get("num_hidden_layers") or 12)
        heads = int(config.get("num_attention_heads") or 12)
        kv_heads = int(config.get("num_key_value_heads") or heads)
        head_dim = int(config.get("head_dim") or hidden // heads)
        per_token = 2 * layers * kv_heads * head_dim + 8 * hidden
        return int(max_batch_tokens * per_token * DTYPE_BYTES[dtype])
    ffn = int(config.get("intermediate_size") or 4 * hidden)
    heads = int(config.get("num_attention_heads") or 12)
    per_token = 6 * hidden + 2 * ffn + heads * min(max_sequence_length, max_batch_tokens)
    return int(max_batch_tokens * per_token * DTYPE_BYTES[dtype])


def compute_threads() -> int:
    """The threads llama.cpp computes with: torch's count, which the server sets from --threads and the llama.cpp
    adapter follows; all usable cores where torch is not loaded (a gateway sizing a model never loads it)."""
    import sys

    from sie_server.settings import default_threads

    torch = sys.modules.get("torch")
    return int(torch.get_num_threads()) if torch is not None else default_threads()


def gguf_estimate(path: Path, kv_tokens: int, *, torch_prefill: bool = False) -> tuple[int, int]:
    """(weights bytes, KV cache bytes for ``kv_tokens``) of a GGUF model that llama.cpp will run,
    from the file size and the header's shape fields; the KV reserve includes what the patched flash attention
    keeps per compute thread (``attention_cache_bytes``). ``torch_prefill`` (generators/torch_prefill.py):
    plus a float32 copy of every weight, and a reserve for one prompt of ``kv_tokens`` read by it (its
    float16 keys and values, twice more as they go to llama.cpp, and a chunk's attention scores)."""
    from sie_server.adapters.generators.llamacpp_sizing import attention_cache_bytes, kv_cache_bytes

    if not path.is_file():  # the adapter's load names the missing file
        return 0, 0
    stat = path.stat()
    weights = stat.st_size
    shape = _gguf_shape(path, stat.st_size, stat.st_mtime_ns)
    if shape is None:  # unreadable header: llama.cpp's own load will say why
        return weights, 0
    layers, embd, heads, kv_heads, floats = shape
    kv = kv_cache_bytes(kv_tokens, layers, embd, heads, kv_heads)
    attention = attention_cache_bytes(kv_tokens, embd, heads, compute_threads())
    if not torch_prefill:
        return weights, kv + attention
    from sie_server.adapters.generators.torch_prefill import CHUNK

    # its keys and values as read, as arrays for llama.cpp and as the state it takes: three times the cache
    return weights + 4 * floats, 3 * kv + attention + 4 * CHUNK * kv_tokens * heads


@lru_cache(maxsize=64)
def _gguf_shape(path: Path, size: int, mtime_ns: int) -> tuple[int, int, int, int, int] | None:
    """(layers, embedding width, heads, KV heads, weights' element count) from a GGUF header; None when
    unreadable. Kept per file version (``size``, ``mtime_ns``): ``GGUFReader`` builds about 150 MiB of small
    Python objects for a 49k-token vocabulary, and parsing it at every load left a few of them scattered over
    pymalloc's 1 MiB arenas, which then cannot be given back (+3.5 MiB of RSS a SmolLM2 load, RESULTS.md)."""
    from gguf import GGUFReader

    try:
        reader = GGUFReader(path)
        fields = reader.fields
        arch = str(fields["general.architecture"].contents())

        def number(key: str, default: int) -> int:
            field = fields.get(f"{arch}.{key}")
            return int(field.contents()) if field is not None else default

        heads = number("attention.head_count", 1)
        return (
            number("block_count", 0),
            number("embedding_length", 0),
            heads,
            number("attention.head_count_kv", heads),
            sum(int(t.n_elements) for t in reader.tensors),
        )
    except (KeyError, ValueError, OSError):
        return None
