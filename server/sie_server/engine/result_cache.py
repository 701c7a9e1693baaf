"""The exact result cache: per-item answers (encode outputs, cross-encoder scores) kept by a key
that covers everything that makes an answer differ, bounded in bytes, least recently used first out.

What a key covers is decided by ``engine/cache_scope.py``; this module only stores. Its bytes are
charged to the memory budget the models share (``memory/pool.py`` counts :attr:`ResultCache.bytes`
among the charges), under one rule: **the cache yields to models**. It never grows past its own
capacity (``--encode-cache``) nor past the room the budget has left (``room``), so it never pushes a
model out; a model that needs room takes it from the cache first (``shrink``), before any idle model
is evicted.

Values are stored frozen (arrays copied and read-only, ``freeze``) so an answer handed out can never
alter what a later caller gets, and a stored value is returned as it is: a cached answer is the
computed one, bit for bit.
"""

from __future__ import annotations

import dataclasses
import sys
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from sie_server.observability.metrics import Metrics

#: what one entry costs beyond its value: the key, its digest, the ordered dict's node and the tuple
ENTRY_OVERHEAD_BYTES = 256
ARRAY_OVERHEAD_BYTES = 112  # a numpy array object's header


@dataclass(frozen=True, slots=True)
class CacheKey:
    """A model's id (for per-model metrics and dropping) and a digest of everything else."""

    model: str
    digest: bytes


def freeze(value: Any) -> tuple[Any, int] | None:
    """``value`` made immutable (arrays copied, contiguous and read-only; lists made tuples) and its
    size in bytes; None for what cannot be frozen (it is then not cached)."""
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            return None
        copy = np.array(value, copy=True, order="C")
        copy.setflags(write=False)
        return copy, copy.nbytes + ARRAY_OVERHEAD_BYTES
    if isinstance(value, bool | int | float | str | bytes | np.generic) or value is None:
        return value, sys.getsizeof(value)
    if _flat_frozen(value):  # a frozen dataclass of scalars (cache_scope.Counted): immutable as it is
        return value, sys.getsizeof(value) + sum(sys.getsizeof(v) for v in vars_of(value))
    if isinstance(value, tuple | list):
        parts = [freeze(v) for v in value]
        if any(p is None for p in parts):
            return None
        frozen = tuple(p[0] for p in parts if p is not None)
        return frozen, sys.getsizeof(frozen) + sum(p[1] for p in parts if p is not None)
    if isinstance(value, dict):
        items = {k: freeze(v) for k, v in value.items() if isinstance(k, str)}
        if len(items) != len(value) or any(p is None for p in items.values()):
            return None
        out = {k: p[0] for k, p in items.items() if p is not None}
        return out, sys.getsizeof(out) + sum(p[1] + sys.getsizeof(k) for k, p in items.items() if p is not None)
    return None


def vars_of(value: Any) -> list[Any]:
    return [getattr(value, f.name) for f in dataclasses.fields(value)]


def _flat_frozen(value: Any) -> bool:
    return (
        dataclasses.is_dataclass(value)
        and not isinstance(value, type)
        and value.__dataclass_params__.frozen  # type: ignore[attr-defined]
        and all(isinstance(v, bool | int | float | str) or v is None for v in vars_of(value))
    )


class ResultCache:
    """A least-recently-used map of frozen values, bounded by ``capacity_bytes`` (0: off) and by the
    memory budget's free room (``room``, set by the pool; unbounded until then)."""

    def __init__(self, capacity_bytes: int, metrics: Metrics | None = None):
        if capacity_bytes < 0:
            raise ValueError("the cache's capacity cannot be negative")
        self.capacity = capacity_bytes
        self.metrics = metrics
        self.room: Callable[[], int] = lambda: sys.maxsize  # free bytes the budget has left
        self._entries: OrderedDict[CacheKey, tuple[Any, int]] = OrderedDict()
        self._bytes = 0
        self._generations: dict[str, bytes] = {}
        self._publish()

    @property
    def enabled(self) -> bool:
        return self.capacity > 0

    @property
    def nbytes(self) -> int:
        """Bytes held by the entries (values and per-entry overhead): what the budget is charged."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def observe(self, model: str, generation: bytes) -> None:
        """The model's current generation (its config and the precision it runs in); a change drops
        the entries of every older one, which no key could reach again anyway."""
        if self._generations.get(model, generation) != generation:
            self.drop_model(model, "generation")
        self._generations[model] = generation

    def get(self, key: CacheKey) -> Any | None:
        """The stored value, now the most recently used; None on a miss."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries.move_to_end(key)
        return entry[0]

    def put_many(self, entries: Iterable[tuple[CacheKey, Any, int]]) -> int:
        """Store frozen values with their sizes (``freeze``); returns how many were stored. The room
        is read once for the lot: within it and the capacity, older entries make way for newer ones."""
        limit = min(self.capacity, self._bytes + max(0, self.room()))
        stored = 0
        for key, value, size in entries:
            cost = size + ENTRY_OVERHEAD_BYTES
            if cost > limit:
                continue
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            while self._entries and self._bytes + cost > limit:
                self._evict_oldest("lru")
            self._entries[key] = (value, cost)
            self._bytes += cost
            stored += 1
        self._publish()
        return stored

    def shrink(self, nbytes: int, reason: str = "budget") -> int:
        """Evict least recently used entries until ``nbytes`` are freed (or the cache is empty);
        returns the bytes freed. The pool calls it when a model needs room."""
        freed = 0
        while self._entries and freed < nbytes:
            freed += self._evict_oldest(reason)
        self._publish()
        return freed

    def drop_model(self, model: str, reason: str = "reload") -> int:
        """Every entry of ``model`` out (a reload, a new revision or precision); returns the bytes freed."""
        keys = [k for k in self._entries if k.model == model]
        freed = 0
        for key in keys:
            freed += self._entries.pop(key)[1]
        self._bytes -= freed
        if keys and self.metrics is not None:
            self.metrics.cache_evictions.labels(model, reason).inc(len(keys))
        self._publish()
        return freed

    def _evict_oldest(self, reason: str) -> int:
        key, (_, cost) = self._entries.popitem(last=False)
        self._bytes -= cost
        if self.metrics is not None:
            self.metrics.cache_evictions.labels(key.model, reason).inc()
        return cost

    def _publish(self) -> None:
        if self.metrics is not None:
            self.metrics.cache_bytes.set(self._bytes)
            self.metrics.cache_entries.set(len(self._entries))
