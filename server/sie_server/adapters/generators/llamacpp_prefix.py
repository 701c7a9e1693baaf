"""Prompt prefixes llama.cpp has already read, kept as copies of their sequences' KV cells (host memory).

A RAG request carries the same system prompt and retrieved context as an earlier one and another
question: its prompt is read from where the two part, with the earlier sequence's KV cells copied back
(``llama_state_seq_get_data`` / ``llama_state_seq_set_data``), so a 2,000-token prompt that shares
1,900 tokens costs the prefill of the rest. The copies are exact: the cells come back byte for byte,
and the rows after them are read in the same kernel as a cold prefill reads them (below).

Why not share cells between sequences (``llama_memory_seq_cp``): measured on this build, a sequence's
logits change by up to ~0.8 when another sequence's cells lie among the ones it attends to (masked,
but the attention sums run in another order and the int8 activation quantization of every matmul
amplifies the last bits through the layers). Shared cells put exactly such cells there; copies do not.

Exactness also needs the suffix read by the same flash-attention kernel as the cold prompt: ggml's CPU
flash attention takes a tiled float32 path for a ubatch of at least ``FA_TILE_ROWS`` rows and an
F16-accumulating one below it, and the two differ by ~0.9 in the logits. So a reused prefix always
leaves at least ``FA_TILE_ROWS`` tokens to read, and prefill chunks are never cut below that size
(``chunks``). Measured: a 1,964-token prompt sharing 1,950 tokens, reused up to 1,900, gave logits
equal to a cold run's at every one of 17 steps (max abs difference 0.0), and its prompt took 0.41 s
against 8.68 s cold.

A prompt equal to a cached one (the same system prompt and question again, a retry) is not read at all: the
entry keeps the logits of the prompt's last position beside its cells, so both come back as its first read
gave them, whatever its length (``whole``); a shorter prompt than ``MIN_REUSE`` is kept for that alone.

The copies are charged to the model in the memory budget: at most ``cap_bytes`` (the profile's
``prefix_cache_bytes``), least recently used evicted first (adapters/runtime/prefix_cache.py).
"""

from __future__ import annotations

import ctypes
import logging
from typing import Any

import torch

from sie_server.adapters.runtime.prefix_cache import PrefixCache

log = logging.getLogger(__name__)

FA_TILE_ROWS = 64  # ggml-cpu's GGML_FA_TILE_Q: the ubatch rows from which flash attention runs tiled in float32


def chunks(count: int, size: int) -> list[tuple[int, int]]:
    """``[start, end)`` ranges covering ``count`` entries, at most ``size`` each, none shorter than
    ``FA_TILE_ROWS`` unless the whole is (the short tail borrows from the chunk before it)."""
    bounds = [(at, min(at + size, count)) for at in range(0, count, size)]
    if len(bounds) > 1 and bounds[-1][1] - bounds[-1][0] < FA_TILE_ROWS:
        start, end = bounds[-1]
        moved = FA_TILE_ROWS - (end - start)
        bounds[-2] = (bounds[-2][0], bounds[-2][1] - moved)
        bounds[-1] = (start - moved, end)
    return bounds


def whole(ctx: Any, cache: PrefixCache | None, prompt: list[int], seq: int) -> torch.Tensor | None:
    """A prompt the cache holds whole: its cells copied into ``seq`` and the logits its read gave (else None)."""
    import llama_cpp as llama

    entry = cache.whole(prompt) if cache is not None else None
    if entry is None or entry.logits is None:
        return None
    if not llama.llama_state_seq_set_data(ctx, entry.blob, ctypes.sizeof(entry.blob), seq):
        llama.llama_memory_seq_rm(llama.llama_get_memory(ctx), seq, -1, -1)
        return None
    return torch.from_numpy(entry.logits.copy())


def restore(ctx: Any, cache: PrefixCache | None, prompt: list[int], seq: int) -> int:
    """Copy the cells of the longest cached prefix of ``prompt`` into ``seq``; the position to read from."""
    import llama_cpp as llama

    entry, reuse = cache.lookup(prompt) if cache is not None else (None, 0)
    if entry is None:
        return 0
    if not llama.llama_state_seq_set_data(ctx, entry.blob, ctypes.sizeof(entry.blob), seq):
        log.warning("llama.cpp could not take back a cached prefix (no room in its KV cache); reading it again")
        llama.llama_memory_seq_rm(llama.llama_get_memory(ctx), seq, -1, -1)
        return 0
    llama.llama_memory_seq_rm(llama.llama_get_memory(ctx), seq, reuse, -1)
    return reuse


def seq_state(ctx: Any, seq: int) -> Any:
    """A copy of ``seq``'s cells (llama.cpp's sequence state), or None when llama.cpp copied less."""
    import llama_cpp as llama

    size = int(llama.llama_state_seq_get_size(ctx, seq))
    blob = (ctypes.c_uint8 * size)()
    written = int(llama.llama_state_seq_get_data(ctx, blob, size, seq))
    if written != size:
        log.warning("llama.cpp copied %d of %d bytes of a sequence's cells", written, size)
        return None
    return blob


def save(ctx: Any, cache: PrefixCache | None, prompt: list[int], seq: int, logits: torch.Tensor) -> None:
    """Keep a copy of ``seq``'s cells and of ``logits`` (its last position's) for the prompts that share it."""
    import llama_cpp as llama

    if cache is None or not cache.worth_storing(prompt, 0, whole=True) or cache.covers(prompt):
        return
    kept = logits.numpy().copy()
    size = int(llama.llama_state_seq_get_size(ctx, seq)) + kept.nbytes
    if not cache.worth_storing(prompt, size, whole=True):
        return
    blob = seq_state(ctx, seq)
    if blob is not None:
        cache.store(prompt, blob, len(blob) + kept.nbytes, kept)
