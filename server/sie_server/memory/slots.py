"""A model's place in the pool: its state, what it is charged against the memory budget, and the
requests waiting for its load (at most ``--max-load-waiters``: a burst on a cold model holds that many
and answers the rest 503 MODEL_LOADING with Retry-After at once, so one load is all it starts)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from enum import StrEnum

from sie_server.adapters import ModelAdapter
from sie_server.catalog.schema import ModelConfig
from sie_server.errors import ModelLoading
from sie_server.memory.load_progress import LoadProgress

LOADING_RETRY_AFTER_S = 2.0


class ModelState(StrEnum):
    AVAILABLE = "available"
    LOADING = "loading"
    LOADED = "loaded"
    FAILED = "failed"


@dataclass(eq=False)
class Slot:
    config: ModelConfig
    state: ModelState = ModelState.AVAILABLE
    adapter: ModelAdapter | None = None
    error: str | None = None
    weights_source: str | None = None
    resident_bytes: int = 0
    reserve_bytes: int = 0
    load_seconds: float | None = None
    last_used: float = 0.0
    loading: asyncio.Future[ModelAdapter] | None = None
    progress: LoadProgress | None = None  # while loading: its stage
    load_started: float | None = None  # monotonic time the current or last load began
    waiters: int = 0  # requests awaiting the load under way (bounded by --max-load-waiters)

    @property
    def charge(self) -> int:
        """Bytes counted against the budget: while loading the estimate, once loaded the measurement."""
        return self.resident_bytes + self.reserve_bytes if self.state in (ModelState.LOADING, ModelState.LOADED) else 0

    async def wait_loaded(self, timeout_s: float, *, bound: int | None) -> ModelAdapter:
        """The adapter once the load under way ends (its error if it fails). ``bound``: the most requests
        that may wait at once; one more is answered MODEL_LOADING (503, Retry-After) now. None: the
        engine's own wait (a batch whose model was evicted, a decode loop, preload), never refused."""
        assert self.loading is not None
        if bound is not None and self.waiters >= bound:
            raise ModelLoading(
                f"model {self.config.id} is loading and {self.waiters} requests already wait for it "
                "(--max-load-waiters); retry shortly",
                retry_after=LOADING_RETRY_AFTER_S,
            )
        counted = bound is not None
        self.waiters += counted
        try:
            return await asyncio.wait_for(asyncio.shield(self.loading), timeout_s)
        except TimeoutError:
            raise ModelLoading(
                f"model {self.config.id} is still loading after {timeout_s:.0f}s; retry shortly",
                retry_after=LOADING_RETRY_AFTER_S,
            ) from None
        finally:
            self.waiters -= counted
