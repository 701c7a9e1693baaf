"""How big llama.cpp's KV cache is for a profile: cells and bytes. No torch and no llama_cpp here, so the
memory pool can size a GGUF model before loading it (and a gateway that imports the pool stays light)."""

from __future__ import annotations

from sie_server.catalog.schema import Profile

PREFILL_CHUNK = 512  # tokens per llama_decode call while prompts are read
KV_BYTES_PER_VALUE = 2  # the KV cache is float16
# patches/llama.cpp/flash-attn-tiles.patch: each compute thread keeps one KV head's keys and values in float32,
# converted once per attention op of a prompt read, in tiles of 64 cells; none when that would pass 32 MiB
ATTENTION_TILE_CELLS = 64
ATTENTION_CACHE_MAX_BYTES = 32 << 20


def kv_cache_tokens(profile: Profile) -> int:
    """Cells of the one KV cache: the token budget of the running sequences plus one prefill chunk."""
    return profile.max_batch_tokens + PREFILL_CHUNK


def kv_cache_bytes(n_ctx: int, n_layer: int, n_embd: int, n_head: int, n_head_kv: int) -> int:
    head_dim = n_embd // max(n_head, 1)
    return int(n_ctx * n_layer * 2 * n_head_kv * head_dim * KV_BYTES_PER_VALUE)


def attention_cache_bytes(n_ctx: int, n_embd: int, n_head: int, threads: int) -> int:
    """What the patched flash attention holds while a prompt is read: one KV head's keys and values in float32 for
    up to ``n_ctx`` cells in each compute thread (thread-local buffers in llama.cpp, outside its KV cache; the
    calling thread keeps its own between reads)."""
    head_dim = n_embd // max(n_head, 1)
    cells = -(-n_ctx // ATTENTION_TILE_CELLS) * ATTENTION_TILE_CELLS
    per_thread = cells * 2 * head_dim * 4
    return threads * per_thread if per_thread <= ATTENTION_CACHE_MAX_BYTES else 0
