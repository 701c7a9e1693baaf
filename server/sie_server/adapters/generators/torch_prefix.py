"""Prefix reuse on the transformers path: a prompt that shares a long prefix with an earlier one is read
from where the two part, with the earlier prompt's keys and values (torch tensors, copied) as its cache.

Prompts with a cached prefix are read one at a time on their own cache (their suffixes differ in length),
the others together as before; the rows are then merged and put back in the callers' order. Every read
prompt's own keys and values are kept (under the profile's ``prefix_cache_bytes``, least recently used
evicted first, adapters/runtime/prefix_cache.py). Float32 logits of a reused prompt match a cold read's to
rounding (the same sums over other batch shapes).
"""

from __future__ import annotations

from typing import Any, Protocol

import torch

from sie_server.adapters.runtime.prefix_cache import Entry, PrefixCache


class Reader(Protocol):
    """What the reuse needs of the adapter: its forward pass and how it reads a cache out of it."""

    def _forward(self, ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor, cache: Any) -> Any: ...

    @staticmethod
    def _cache_of(out: Any) -> Any: ...


def read_from(adapter: Reader, prompt: list[int], entry: Entry, reuse: int) -> tuple[Any, torch.Tensor, torch.Tensor]:
    """(cache, mask, next-token logits) of ``prompt`` read from ``reuse`` on, the entry's first ``reuse``
    positions copied in as its cache."""
    from transformers import DynamicCache

    layers = [(k[:, :, :reuse, :].clone(), v[:, :, :reuse, :].clone()) for k, v in entry.blob]
    ids = torch.tensor([prompt[reuse:]], dtype=torch.long)
    mask = torch.ones((1, len(prompt)), dtype=torch.long)
    positions = torch.arange(reuse, len(prompt), dtype=torch.long).unsqueeze(0)
    out = adapter._forward(ids, mask, positions, DynamicCache(layers))
    return adapter._cache_of(out), mask, out.logits[:, -1, :].float()


def keep_read(cache: PrefixCache, kv: Any, prompts: list[list[int]]) -> None:
    """Copies of each read prompt's keys and values (the last ``len(prompt)`` columns of its row: rows are
    left-padded), for prompts no entry holds yet."""
    for row, prompt in enumerate(prompts):
        if not cache.worth_storing(prompt, 0) or cache.covers(prompt):
            continue
        width = len(prompt)
        layers = [(layer.keys[row : row + 1, :, -width:, :].clone(), layer.values[row : row + 1, :, -width:, :].clone())
                  for layer in kv.layers]  # fmt: skip
        size = sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in layers)
        if cache.worth_storing(prompt, size):
            cache.store(prompt, layers, size)
