"""A llama.cpp model's long prompts read by torch (torch_prefill.py), their KV cells handed to llama.cpp.

torch reads the prompt from where its cached prefix ends (``restart``: the prefix's cells come straight from the
prefix cache's copy), a chunk a step, and the cells it computed are written into the llama.cpp sequence through
the sequence-state API (llamacpp_state.py's layout); llama.cpp decodes from there.
"""

from __future__ import annotations

import ctypes
from collections.abc import Generator
from typing import Any

import torch

from sie_server.adapters.generators.llamacpp_state import pack, unpack
from sie_server.adapters.generators.torch_prefill import TorchPrefill, restart
from sie_server.adapters.runtime.prefix_cache import PrefixCache


def read_into(
    ctx: Any, reader: TorchPrefill, cache: PrefixCache | None, prompt: list[int], seq: int
) -> Generator[None, None, torch.Tensor]:
    """``prompt`` read by torch, its cells put in llama.cpp sequence ``seq`` of ``ctx``; the logits of its last
    position. RuntimeError when llama.cpp has no room for the cells."""
    import llama_cpp as llama

    entry, reuse = cache.lookup(prompt) if cache is not None else (None, 0)
    start = restart(reuse, len(prompt))
    prefix = unpack(entry.blob).head(start) if entry is not None and start else None
    state, logits = yield from reader.reading(prompt, prefix)
    data = pack(seq, state)
    cells = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
    if not llama.llama_state_seq_set_data(ctx, cells, len(data), seq):
        raise RuntimeError("llama.cpp could not take the KV cells torch read (no room in its KV cache)")
    return logits[0]
