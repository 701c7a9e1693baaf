"""The single server's ``/v1/status``: every model's state and charge from the pool, its last
minute from the live windows (``observability/live.py``), its queue per priority and batch
figures from the metrics registry, the last errors, and the memory against the budget."""

from __future__ import annotations

import time

from sie_server import __version__
from sie_server.catalog.loader import Catalog
from sie_server.catalog.schema import ModelConfig
from sie_server.contract.headers import PRIORITIES
from sie_server.contract.status import ErrorEntry, MemoryStatus, ModelStatus, StatusReport
from sie_server.memory.pool import ModelPool
from sie_server.memory.slots import ModelState
from sie_server.observability.live import CounterWindow, LiveStats
from sie_server.observability.metrics import Metrics

ORDER = {"loaded": 0, "loading": 1, "failed": 2, "available": 3}


def _sample(metrics: Metrics, name: str, labels: dict[str, str]) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


def _batch_counters(metrics: Metrics, model_ids: list[str]) -> dict[str, float]:
    """Cumulative batch counters per model, for the last minute's change."""
    values: dict[str, float] = {}
    for m in model_ids:
        labels = {"model": m}
        values[f"{m}\0batches"] = _sample(metrics, "sie_batch_tokens_count", labels)
        values[f"{m}\0real"] = _sample(metrics, "sie_real_tokens_total", labels)
        values[f"{m}\0padded"] = _sample(metrics, "sie_padded_tokens_total", labels)
    return values


def _wall(monotonic: float | None) -> float:
    """A monotonic time as Unix time (0 when unknown)."""
    return time.time() - (time.monotonic() - monotonic) if monotonic is not None else 0.0


class ServerStatus:
    def __init__(self, catalog: Catalog, pool: ModelPool, metrics: Metrics, live: LiveStats):
        self.catalog, self.pool, self.metrics, self.live = catalog, pool, metrics, live
        self.batches = CounterWindow(live.clock, live.window_s)

    def _model(self, config: ModelConfig, batch_change: dict[str, float]) -> ModelStatus:
        slot = self.pool.peek(config.id)
        live = slot if slot is not None and slot.config == config else None
        state = live.state if live is not None else ModelState.AVAILABLE
        figures = self.live.figures(config.id)
        queued = {
            p: int(_sample(self.metrics, "sie_queue_items", {"model": config.id, "priority": p})) for p in PRIORITIES
        }
        batches = batch_change.get(f"{config.id}\0batches", 0.0)
        real = batch_change.get(f"{config.id}\0real", 0.0)
        padded = batch_change.get(f"{config.id}\0padded", 0.0)
        max_tokens = self.pool.profile(config).max_batch_tokens
        generator = config.tasks.generate is not None
        return ModelStatus(
            id=config.id,
            state=state.value,
            loading_s=time.monotonic() - live.load_started
            if live is not None and state is ModelState.LOADING and live.load_started is not None
            else None,
            load_seconds=live.load_seconds if live is not None else None,
            error=live.error if live is not None and state is ModelState.FAILED else None,
            generator=generator,
            pinned=config.id in self.pool.pinned,
            charge_bytes=live.charge if live is not None else 0,
            requests=figures.requests,
            requests_per_s=figures.requests_per_s,
            p50_ms=figures.p50_ms,
            p99_ms=figures.p99_ms,
            queued=queued,
            batch_fill=(real / batches) / max_tokens if batches and max_tokens else None,
            padding_ratio=padded / real if real else None,
            decode_tokens_per_s=(figures.decode_tokens_per_s or 0.0) if generator else None,
        )

    def _errors(self) -> list[ErrorEntry]:
        seen = [ErrorEntry(at=e.at, model=e.model, code=e.code, message=e.message) for e in self.live.last_errors()]
        failed = [
            ErrorEntry(at=_wall(s.load_started), model=s.config.id, code="MODEL_LOAD_FAILED", message=s.error)
            for s in self.pool.slots()
            if s.state is ModelState.FAILED and s.error
        ]
        return failed + seen

    def report(self) -> StatusReport:
        configs = self.catalog.list()
        change = self.batches.change(_batch_counters(self.metrics, [c.id for c in configs]))
        models = sorted((self._model(c, change) for c in configs), key=lambda m: (ORDER[m.state], m.id))
        pool = self.pool
        charged = pool.charged_bytes
        untracked = pool.holding.untracked(charged)
        return StatusReport(
            role="server",
            version=__version__,
            uptime_s=self.live.clock() - self.live.started,
            window_s=self.live.span_s(),
            models=models,
            errors=self._errors(),
            memory=MemoryStatus(
                budget_bytes=pool.budget_bytes,
                used_bytes=charged + untracked,
                charged_bytes=charged,
                untracked_bytes=untracked,
                free_bytes=pool.budget_bytes - charged - untracked,
            ),
        )
