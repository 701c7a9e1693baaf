"""Identical items computed once: a cache lookup per item, then one computation per distinct key
however many requests (or positions of one request) ask for it at the same time.

Each distinct missing key has one leader, the request that found it neither stored nor in flight;
it computes the key and stores the answer. Every other asker awaits the leader's future. When the
leader fails for a reason of its own (its caller left, its deadline passed, the queue was full, the
batch ran out of memory) its followers do not inherit that: they look the key up again and one of
them leads. A failure the input itself causes (``SHARED_ERRORS``) is every asker's answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sie_server.engine.result_cache import CacheKey, ResultCache, freeze
from sie_server.errors import ErrorCode, SIEError

#: leader failures that any computation of the same input would meet again: shared with the followers
SHARED_ERRORS = frozenset(
    {ErrorCode.INVALID_INPUT, ErrorCode.INFERENCE_ERROR, ErrorCode.INVALID_OUTPUT, ErrorCode.NON_FINITE_OUTPUT}
)

Compute = Callable[[list[int]], Awaitable[list[Any]]]


class LeaderGone(Exception):
    """The leader of a key stopped for a reason of its own; its followers try again."""


def _shared(exc: BaseException) -> bool:
    return isinstance(exc, SIEError) and exc.code in SHARED_ERRORS and exc.status != 499  # 499: caller gone


def _retrieve(future: asyncio.Future[Any]) -> None:
    """Mark a failed future's error as seen (nobody may be waiting on it)."""
    if not future.cancelled():
        future.exception()


@dataclass
class Resolved:
    """Each position's value, and how many came from the cache or from an identical item in flight."""

    values: list[Any]
    hits: int = 0
    coalesced: int = 0
    computed: int = 0


class Coalescer:
    """The keys being computed now, each with the future its askers await."""

    def __init__(self, cache: ResultCache):
        self.cache = cache
        self._flight: dict[CacheKey, asyncio.Future[Any]] = {}
        self.waiting = 0  # askers awaiting another's computation now

    @property
    def in_flight(self) -> int:
        return len(self._flight)

    async def resolve(self, keys: Sequence[CacheKey], compute: Compute, store: Callable[[], bool]) -> Resolved:
        """Each key's value: stored, awaited from its leader, or computed by ``compute(positions)``
        (values for those positions, in order; called at most once per round with one position per
        distinct key). ``store()`` says whether computed values may still be stored (False once the
        model that computed them was replaced)."""
        done = Resolved([None] * len(keys))
        pending = list(range(len(keys)))
        while pending:
            pending = await self._round(keys, pending, compute, store, done)
        self._count(keys, done)
        return done

    async def _round(
        self, keys: Sequence[CacheKey], pending: list[int], compute: Compute, store: Callable[[], bool], done: Resolved
    ) -> list[int]:
        lead: dict[CacheKey, list[int]] = {}
        follow: list[tuple[int, asyncio.Future[Any]]] = []
        for k in pending:
            key = keys[k]
            if key in lead:  # the same item twice in this request: computed once
                lead[key].append(k)
                continue
            value = self.cache.get(key)
            if value is not None:
                done.values[k] = value
                done.hits += 1
                continue
            flying = self._flight.get(key)
            if flying is not None:
                follow.append((k, flying))
                continue
            lead[key] = [k]
        if lead:
            await self._lead(keys, lead, compute, store, done)
        retry: list[int] = []
        for k, future in follow:
            self.waiting += 1
            try:
                done.values[k] = await asyncio.shield(future)
                done.coalesced += 1
            except LeaderGone:
                retry.append(k)
            finally:
                self.waiting -= 1
        return retry

    async def _lead(
        self,
        keys: Sequence[CacheKey],
        lead: dict[CacheKey, list[int]],
        compute: Compute,
        store: Callable[[], bool],
        done: Resolved,
    ) -> None:
        loop = asyncio.get_running_loop()
        futures: dict[CacheKey, asyncio.Future[Any]] = {}
        for key in lead:
            futures[key] = future = loop.create_future()
            future.add_done_callback(_retrieve)
            self._flight[key] = future
        try:
            computed = await compute([positions[0] for positions in lead.values()])
        except BaseException as exc:
            error = exc if _shared(exc) else LeaderGone()
            for key, future in futures.items():
                self._flight.pop(key, None)
                future.set_exception(error)
            raise
        frozen = [freeze(value) for value in computed]
        entries = []
        for (key, positions), value, ice in zip(lead.items(), computed, frozen, strict=True):
            answer = value if ice is None else ice[0]  # the frozen copy, so this caller gets what later ones will
            for k in positions:
                done.values[k] = answer
            done.computed += 1
            done.coalesced += len(positions) - 1
            if ice is not None:
                entries.append((key, ice[0], ice[1]))
            self._flight.pop(key, None)
            futures[key].set_result(answer)
        if entries and store():
            self.cache.put_many(entries)

    def _count(self, keys: Sequence[CacheKey], done: Resolved) -> None:
        metrics = self.cache.metrics
        if metrics is None or not keys:
            return
        model = keys[0].model
        if done.hits:
            metrics.cache_hits.labels(model).inc(done.hits)
        if done.computed:
            metrics.cache_misses.labels(model).inc(done.computed)
        if done.coalesced:
            metrics.cache_coalesced.labels(model).inc(done.coalesced)
