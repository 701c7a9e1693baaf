"""The model pool: loads a model on first use (once, however many callers ask) and tracks state."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from sie_server.adapters import Adapter, create_adapter
from sie_server.adapters.weights import resolve
from sie_server.catalog.schema import ModelConfig, Profile
from sie_server.errors import ModelLoadFailed, ModelLoading, SIEError

log = logging.getLogger(__name__)

AdapterFactory = Callable[[ModelConfig, Profile, str], Adapter]
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
    adapter: Adapter | None = None
    error: str | None = None
    weights_source: str | None = None
    resident_bytes: int = 0
    load_seconds: float | None = None
    last_used: float = 0.0
    loading: asyncio.Future[Adapter] | None = None


class ModelPool:
    def __init__(
        self,
        device: str,
        device_kind: str,
        offline: bool,
        factory: AdapterFactory = create_adapter,
    ):
        self.device = device
        self.device_kind = device_kind
        self.offline = offline
        self.factory = factory
        self._slots: dict[str, Slot] = {}

    def slot(self, config: ModelConfig) -> Slot:
        slot = self._slots.get(config.id)
        if slot is None or (slot.config != config and slot.state is not ModelState.LOADING):
            if slot is not None and slot.adapter is not None:
                log.info("config of %s changed; unloading the old instance", config.id)
                slot.adapter.unload()
            slot = Slot(config)
            self._slots[config.id] = slot
        return slot

    def peek(self, model_id: str) -> Slot | None:
        return self._slots.get(model_id)

    async def acquire(self, config: ModelConfig, *, wait: bool, timeout_s: float) -> Adapter:
        """The loaded adapter; starts the load if needed and waits for it when ``wait``."""
        slot = self.slot(config)
        if slot.state is ModelState.LOADED and slot.adapter is not None:
            slot.last_used = time.monotonic()
            return slot.adapter
        if slot.state is ModelState.FAILED:
            raise ModelLoadFailed(slot.error or f"model {config.id} failed to load")
        if slot.loading is None:
            slot.loading = asyncio.get_running_loop().create_future()
            slot.loading.add_done_callback(lambda f: f.cancelled() or f.exception())
            slot.state = ModelState.LOADING
            asyncio.get_running_loop().create_task(self._load(slot))
        if not wait:
            raise ModelLoading(
                f"model {config.id} is loading; retry shortly", retry_after=LOADING_RETRY_AFTER_S
            )
        try:
            adapter = await asyncio.wait_for(asyncio.shield(slot.loading), timeout_s)
        except TimeoutError:
            raise ModelLoading(
                f"model {config.id} is still loading after {timeout_s:.0f}s; retry shortly",
                retry_after=LOADING_RETRY_AFTER_S,
            ) from None
        slot.last_used = time.monotonic()
        return adapter

    async def _load(self, slot: Slot) -> None:
        assert slot.loading is not None
        config = slot.config
        started = time.perf_counter()
        try:
            adapter = await asyncio.to_thread(self._load_blocking, slot)
        except SIEError as exc:
            self._fail(slot, exc.message, exc)
            return
        except Exception as exc:
            log.exception("loading %s failed", config.id)
            message = f"model {config.id} failed to load: {type(exc).__name__}: {exc}"
            self._fail(slot, message, ModelLoadFailed(message))
            return
        slot.load_seconds = time.perf_counter() - started
        slot.adapter = adapter
        slot.resident_bytes = adapter.resident_bytes()
        slot.state = ModelState.LOADED
        slot.last_used = time.monotonic()
        log.info(
            "loaded %s from %s in %.2fs (%.1f MiB)",
            config.id,
            slot.weights_source,
            slot.load_seconds,
            slot.resident_bytes / 2**20,
        )
        slot.loading.set_result(adapter)

    def _load_blocking(self, slot: Slot) -> Adapter:
        location = resolve(slot.config, offline=self.offline)
        slot.weights_source = location.source
        adapter = self.factory(slot.config, slot.config.profile(self.device_kind), self.device)
        adapter.load(location.path)
        adapter.warmup()
        return adapter

    def _fail(self, slot: Slot, message: str, exc: SIEError) -> None:
        log.error("%s", message)
        slot.state = ModelState.FAILED
        slot.error = message
        assert slot.loading is not None
        slot.loading.set_exception(ModelLoadFailed(message) if not isinstance(exc, ModelLoadFailed) else exc)
