"""What an item's cache key covers, and the per-item cached flow the inference service calls.

A key is the model's id and a digest of:

- the model's *generation*: its whole catalog config (source and revision, runtime: pooling,
  normalisation, prefixes, ``max_sequence_length`` and so truncation), the backend and the precision
  the loaded adapter actually runs in (``precision_report.running``, what the CPU precision gate
  chose at load, else the profile's dtype). A reload with a new revision or a precision change is a
  new generation: its keys differ, and the old generation's entries are dropped when it is first seen;
- the batch options (outputs computed, query or document role, modality, task LoRA adapter), the
  instruction, and for cross-encoders the query;
- the content: the text's UTF-8 bytes, or an image's bytes (images are cached by their bytes' hash).

What the service does after the cache (matryoshka ``dims``, ``output_dtype`` quantization, MUVERA,
similarity) is a pure function of the cached value, so those need not be in the key. Work that is
not a pure function of these (truncation other than ``end``, late-chunking spans, extraction,
generation) never reaches this module.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sie_server.adapters.runtime.base import ModelAdapter
from sie_server.catalog.schema import ModelConfig
from sie_server.contract.headers import CallOptions
from sie_server.engine.coalescing import Coalescer, Resolved
from sie_server.engine.result_cache import CacheKey, ResultCache
from sie_server.memory.pool import ModelPool

DIGEST_BYTES = 16


@dataclass(frozen=True, slots=True)
class Counted:
    """What a caller needs of an item's tokens once it has its result: their count and whether the
    input was cut to the model's length."""

    length: int
    truncated: bool


@dataclass(frozen=True)
class Scope:
    """One model generation and one set of parameters: keys for contents, and whether a result
    computed now may still be stored (the same adapter is still the resident one)."""

    model: str
    params: Any  # a hashlib object holding the generation and parameters, copied per key
    current: Callable[[], bool]

    def key(self, content: bytes) -> CacheKey:
        digest = self.params.copy()
        digest.update(content)
        return CacheKey(self.model, digest.digest())


class ItemCache:
    """The result cache and the in-flight coalescing, over the pool's resident adapters."""

    def __init__(self, cache: ResultCache, pool: ModelPool):
        self.cache = cache
        self.pool = pool
        self.flight = Coalescer(cache)
        self._configs: dict[str, tuple[ModelConfig, bytes]] = {}

    def generation(self, model: ModelConfig, adapter: ModelAdapter) -> bytes:
        """A digest of the model's config, its backend and the precision it runs in."""
        known = self._configs.get(model.id)
        if known is None or known[0] is not model:
            known = (model, hashlib.blake2b(model.model_dump_json().encode(), digest_size=DIGEST_BYTES).digest())
            self._configs[model.id] = known
        report = adapter.precision_report
        precision = report.running if report is not None else adapter.profile.dtype
        return known[1] + f"|{adapter.backend}|{precision}".encode()

    def scope(self, model: ModelConfig, adapter: ModelAdapter, call: CallOptions, *params: object) -> Scope | None:
        """The scope for items of ``model`` with these parameters; None when the cache is off or the
        caller bypasses it (``X-SIE-Cache: bypass``)."""
        if not self.cache.enabled or not call.cache:
            return None
        generation = self.generation(model, adapter)
        self.cache.observe(model.id, generation)
        digest = hashlib.blake2b(generation, digest_size=DIGEST_BYTES)
        digest.update(repr(params).encode())
        digest.update(b"\x00")

        def current() -> bool:
            slot = self.pool.peek(model.id)
            return slot is not None and slot.adapter is adapter

        return Scope(model.id, digest, current)

    def drop(self, model_id: str) -> None:
        """Forget a model's entries (an operator's reload)."""
        self.cache.drop_model(model_id, "reload")
        self._configs.pop(model_id, None)

    async def each(
        self,
        scope: Scope | None,
        contents: Sequence[bytes],
        compute: Callable[[list[int]], Awaitable[list[Any]]],
    ) -> Resolved:
        """Each content's value: from the cache, from an identical item in flight, or from
        ``compute(positions)``; with no scope, everything is computed."""
        if scope is None:
            values = await compute(list(range(len(contents))))
            return Resolved(values, computed=len(values))
        keys = [scope.key(content) for content in contents]
        return await self.flight.resolve(keys, compute, scope.current)


def text_bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def pair_bytes(query: str, document: str) -> bytes:
    """A (query, document) pair as one content, the query's length first so no two pairs collide."""
    q = text_bytes(query)
    return len(q).to_bytes(8, "little") + q + text_bytes(document)
