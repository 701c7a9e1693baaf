"""Read prompts kept for the prompts that share their start, for both generator backends: the longest
shared prefix found, its entry refreshed, least recently used evicted first under a byte cap (the
profile's ``prefix_cache_bytes``, charged to the model in the memory budget). What an entry holds is the
backend's own copy of the prompt's KV cells (llama.cpp's sequence state, or torch tensors), and where the
backend keeps them, the next-token logits of the prompt's last position: a prompt equal to a stored one is then
served whole (``whole``), nothing read, with exactly the logits its first read gave, however short it is.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

MIN_REUSE = 128  # a shorter shared prefix is not worth the copy


@dataclass
class Entry:
    tokens: np.ndarray  # the prompt whose cells the blob holds (int32)
    blob: Any  # the backend's copy of those cells
    size: int  # its bytes, with the logits'
    logits: np.ndarray | None = None  # the next-token logits of the prompt's last position, when kept


@dataclass
class PrefixStats:
    hits: int = 0
    misses: int = 0
    reused_tokens: int = 0
    stored: int = 0
    evicted: int = 0


def common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    n = min(len(a), len(b))
    differ = np.flatnonzero(a[:n] != b[:n])
    return int(differ[0]) if len(differ) else n


class PrefixCache:
    """Saved sequences by prompt, least recently used first; ``lookup`` finds the longest shared prefix."""

    def __init__(self, cap_bytes: int, *, tail: int = 1):
        """``tail``: tokens a reused prompt always reads itself (at least one, for its next-token logits)."""
        self.cap_bytes = cap_bytes
        self.tail = max(tail, 1)
        self.entries: OrderedDict[int, Entry] = OrderedDict()
        self.bytes = 0
        self.stats = PrefixStats()
        self._next = 0

    def lookup(self, prompt: list[int]) -> tuple[Entry | None, int]:
        """The entry sharing the longest prefix with ``prompt`` and how many of its tokens to reuse (0: none):
        at most ``len(prompt) - tail``."""
        if not self.entries or len(prompt) < MIN_REUSE + self.tail:
            self.stats.misses += 1 if self.cap_bytes else 0
            return None, 0
        tokens = np.asarray(prompt, dtype=np.int32)
        best, best_key, shared = None, -1, 0
        for key, entry in self.entries.items():
            n = common_prefix(entry.tokens, tokens)
            if n > shared:
                best, best_key, shared = entry, key, n
        reuse = min(shared, len(prompt) - self.tail)
        if best is None or reuse < MIN_REUSE:
            self.stats.misses += 1
            return None, 0
        self.entries.move_to_end(best_key)
        self.stats.hits += 1
        self.stats.reused_tokens += reuse
        return best, reuse

    def whole(self, prompt: list[int]) -> Entry | None:
        """An entry holding exactly ``prompt`` with its last position's logits (refreshed), else None."""
        if not self.entries or not prompt:
            return None
        tokens = np.asarray(prompt, dtype=np.int32)
        for key, entry in self.entries.items():
            if entry.logits is not None and len(entry.tokens) == len(tokens) and np.array_equal(entry.tokens, tokens):
                self.entries.move_to_end(key)
                self.stats.hits += 1
                self.stats.reused_tokens += len(prompt)
                return entry
        return None

    def covers(self, prompt: list[int]) -> bool:
        """An entry already holds all of ``prompt`` (storing it again would add nothing)."""
        tokens = np.asarray(prompt, dtype=np.int32)
        return any(len(e.tokens) >= len(tokens) and common_prefix(e.tokens, tokens) == len(tokens)
                   for e in self.entries.values())  # fmt: skip

    def worth_storing(self, prompt: list[int], size: int, *, whole: bool = False) -> bool:
        """Whether to keep a copy of ``prompt``'s cells: long enough to share a prefix worth reusing, or any
        length when its logits are kept too (``whole``: the same prompt again is then served as it is)."""
        long_enough = whole or len(prompt) >= MIN_REUSE + self.tail
        return bool(self.cap_bytes) and bool(prompt) and long_enough and size <= self.cap_bytes

    def store(self, prompt: list[int], blob: Any, size: int, logits: np.ndarray | None = None) -> None:
        while self.entries and self.bytes + size > self.cap_bytes:
            _, old = self.entries.popitem(last=False)
            self.bytes -= old.size
            self.stats.evicted += 1
        self.entries[self._next] = Entry(np.asarray(prompt, dtype=np.int32), blob, size, logits)
        self._next += 1
        self.bytes += size
        self.stats.stored += 1

    def clear(self) -> None:
        self.entries.clear()
        self.bytes = 0
