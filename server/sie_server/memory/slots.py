"""A model's place in the pool: its state and what it is charged against the memory budget."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from enum import StrEnum

from sie_server.adapters import ModelAdapter
from sie_server.catalog.schema import ModelConfig
from sie_server.memory.load_progress import LoadProgress


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

    @property
    def charge(self) -> int:
        """Bytes counted against the budget: while loading the estimate, once loaded the measurement."""
        return self.resident_bytes + self.reserve_bytes if self.state in (ModelState.LOADING, ModelState.LOADED) else 0
