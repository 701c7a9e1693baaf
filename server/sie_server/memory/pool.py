"""The model pool: loads a model on first use (once, however many callers ask), keeps what the
process holds within the budget by evicting least-recently-used idle models, and records each
model's state.

Used memory is the resident models' charges plus what the process holds beyond them
(memory/held.py: code, caches and buffers no charge covers), so the budget bounds the process's
real holding, not only the models' estimates."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from sie_server.adapters import ModelAdapter, create_adapter
from sie_server.adapters.runtime import first_load
from sie_server.adapters.runtime.locations import WeightsLocation
from sie_server.adapters.runtime.weights import resolve
from sie_server.catalog.schema import CpuPrecision, GgufFormat, ModelConfig, Profile
from sie_server.compute_thread import in_own_thread
from sie_server.errors import InvalidInput, ModelLoadFailed, ModelLoading, ResourceExhausted, SIEError
from sie_server.memory.budget import Resident, available_bytes, eviction_plan, exceeds_free_memory, mib
from sie_server.memory.heap import freeze_long_lived, thawed
from sie_server.memory.held import Holding, MemoryProbe, ProcessMemory, Reclaimable
from sie_server.memory.load_cost import load_cost
from sie_server.memory.load_progress import LoadProgress, LoadStage
from sie_server.memory.refusals import beyond_budget, no_room, short_of_memory
from sie_server.memory.slots import LOADING_RETRY_AFTER_S, ModelState, Slot
from sie_server.observability.metrics import Metrics

log = logging.getLogger(__name__)

AdapterFactory = Callable[[ModelConfig, Profile, str], ModelAdapter]
OVER_BUDGET_WARN_EVERY_S = 60.0


class ModelPool:
    def __init__(
        self,
        device: str,
        device_kind: str,
        *,
        offline: bool,
        budget_bytes: int,
        metrics: Metrics,
        pinned: frozenset[str] = frozenset(),
        factory: AdapterFactory = create_adapter,
        cpu_precision: list[CpuPrecision] | None = None,
        probe: MemoryProbe | None = None,
        gguf_formats: list[GgufFormat] | None = None,
        torch_prefill_tokens: int | None = None,
        max_load_waiters: int = 128,
    ):
        self.device = device
        self.device_kind = device_kind
        self.offline = offline
        self.budget_bytes = budget_bytes
        self.metrics = metrics
        self.pinned = pinned
        self.factory = factory
        self.cpu_precision = cpu_precision  # --cpu-precision: replaces every cpu profile's list
        self.gguf_formats = gguf_formats  # --gguf-formats: replaces every profile's list
        self.torch_prefill_tokens = torch_prefill_tokens  # --torch-prefill-tokens: every profile's (0: off)
        self.max_load_waiters = max_load_waiters  # --max-load-waiters: requests one loading model holds
        self.is_busy: Callable[[str], bool] = lambda model_id: False
        self._slots: dict[str, Slot] = {}
        self.reclaimable: Reclaimable | None = None  # the result cache: charged here, gives way to models
        self._tasks: set[asyncio.Task[None]] = set()
        self.holding = Holding(probe or ProcessMemory(device))
        self._warned_over_budget = -OVER_BUDGET_WARN_EVERY_S
        metrics.memory_budget.set(budget_bytes)

    # ----- state -------------------------------------------------------------------------
    def slot(self, config: ModelConfig) -> Slot:
        slot = self._slots.get(config.id)
        if slot is None or (slot.config != config and slot.state is not ModelState.LOADING):
            if slot is not None and slot.adapter is not None:
                self.evict(config.id, "config_changed")
            slot = Slot(config)
            self._slots[config.id] = slot
        return slot

    def profile(self, config: ModelConfig) -> Profile:
        """The profile a model loads with on this device (``--cpu-precision``, ``--gguf-formats`` and
        ``--torch-prefill-tokens`` applied)."""
        profile = config.profile(self.device_kind)
        if self.cpu_precision is not None and self.device_kind == "cpu":
            profile = profile.model_copy(update={"cpu_precision": list(self.cpu_precision)})
        if self.gguf_formats is not None:
            profile = profile.model_copy(update={"gguf_formats": list(self.gguf_formats)})
        if self.torch_prefill_tokens is not None:
            profile = profile.model_copy(update={"torch_prefill_tokens": self.torch_prefill_tokens or None})
        return profile

    def peek(self, model_id: str) -> Slot | None:
        return self._slots.get(model_id)

    def slots(self) -> list[Slot]:
        return list(self._slots.values())

    @property
    def charged_bytes(self) -> int:
        """The resident (and loading) models' charges, and the result cache's bytes."""
        return sum(s.charge for s in self._slots.values()) + self.cache_bytes

    @property
    def cache_bytes(self) -> int:
        return self.reclaimable.nbytes if self.reclaimable is not None else 0

    def free_bytes(self) -> int:
        """What the budget has left (what the result cache may still grow by)."""
        return self.budget_bytes - self.used_bytes

    def _reclaim(self, need: int) -> None:
        """Room for ``need`` more bytes taken from the result cache first: it yields to models."""
        if self.reclaimable is not None and self.reclaimable.nbytes and (short := need - self.free_bytes()) > 0:
            self.reclaimable.shrink(short)

    @property
    def untracked_bytes(self) -> int:
        """What the process holds beyond its start and the charges: counted as used, freed by no eviction."""
        return self.holding.untracked(self.charged_bytes)

    @property
    def used_bytes(self) -> int:
        charged = self.charged_bytes
        return charged + self.holding.untracked(charged)

    def reset(self, config: ModelConfig) -> None:
        """Forget a failed load so the next request tries again (an operator's call)."""
        slot = self.slot(config)
        if slot.state is ModelState.FAILED:
            slot.state, slot.error, slot.loading = ModelState.AVAILABLE, None, None

    # ----- acquiring ---------------------------------------------------------------------
    def resident(self, config: ModelConfig) -> ModelAdapter | None:
        """The loaded adapter, without waiting; None when the model (with this config) is not loaded."""
        slot = self._slots.get(config.id)
        if slot is None or slot.config != config or slot.state is not ModelState.LOADED or slot.adapter is None:
            return None
        slot.last_used = time.monotonic()
        return slot.adapter

    async def acquire(self, config: ModelConfig, *, wait: bool, timeout_s: float, request: bool = True) -> ModelAdapter:
        """The loaded adapter; starts the load if needed and waits for it when ``wait``. ``request``: a
        request's wait, one of at most ``max_load_waiters`` (``Slot.wait_loaded``); False for the engine's own."""
        slot = self.slot(config)
        if slot.state is ModelState.LOADED and slot.adapter is not None:
            slot.last_used = time.monotonic()
            return slot.adapter
        if slot.state is ModelState.FAILED:
            raise ModelLoadFailed(slot.error or f"model {config.id} failed to load")
        if slot.loading is None:
            loop = asyncio.get_running_loop()
            slot.loading = loop.create_future()
            slot.loading.add_done_callback(lambda f: f.cancelled() or f.exception())
            slot.state, slot.load_started = ModelState.LOADING, time.monotonic()
            self._tasks.add(task := loop.create_task(self._load(slot, slot.loading)))
            task.add_done_callback(self._tasks.discard)
        if not wait:
            raise ModelLoading(f"model {config.id} is loading; retry shortly", retry_after=LOADING_RETRY_AFTER_S)
        adapter = await slot.wait_loaded(timeout_s, bound=self.max_load_waiters if request else None)
        slot.last_used = time.monotonic()
        return adapter

    async def _load(self, slot: Slot, done: asyncio.Future[ModelAdapter]) -> None:
        config = slot.config
        profile = self.profile(config)
        self.metrics.model_loads.labels(config.id).inc()
        started = time.perf_counter()
        slot.progress = progress = LoadProgress(config.id)
        try:
            location = await asyncio.to_thread(resolve, config, self.offline, profile)
            slot.weights_source = location.source
            progress.enter(LoadStage.PLANNING, f"weights from {location.source}")
            estimate, reserve = await asyncio.to_thread(load_cost, location, config, profile)
            slot.resident_bytes, slot.reserve_bytes = 0, 0  # not counted while planning its own room
            need = estimate + reserve
            if need <= self.budget_bytes:  # (beyond the whole budget, _make_room says that)
                reclaimable = sum(s.charge for s in self._slots.values() if self._evictable(s))
                self._check_free_memory(config, need, reclaimable)  # hopeless: evict nothing for it
            self._make_room(config, need)
            self._check_free_memory(config, need)
            slot.resident_bytes, slot.reserve_bytes = estimate, reserve  # reserved while loading
            progress.enter(LoadStage.READING, f"about {mib(estimate)} of weights in {profile.dtype}")
            # a thread of its own, ended with the load: the OpenMP team it starts goes with it (compute_thread.py)
            adapter = await in_own_thread("sie-load", self._load_blocking, location, config, profile, progress)
        except ResourceExhausted as exc:  # not a broken model: try again when memory frees up
            self._settle(slot, done, exc, state=ModelState.AVAILABLE)
            return
        except SIEError as exc:
            self._settle(slot, done, exc, state=ModelState.FAILED)
            return
        except Exception as exc:
            log.exception("loading %s failed", config.id)
            message = f"model {config.id} failed to load: {type(exc).__name__}: {exc}"
            self._settle(slot, done, ModelLoadFailed(message), state=ModelState.FAILED)
            return
        progress.finish()
        slot.load_seconds = time.perf_counter() - started
        slot.adapter, slot.state, slot.progress = adapter, ModelState.LOADED, None
        freeze_long_lived()  # the model's objects live as long as it does: out of the collector's way
        slot.resident_bytes = adapter.resident_bytes()
        slot.last_used = time.monotonic()
        self.metrics.model_load_seconds.labels(config.id).observe(slot.load_seconds)
        self.metrics.model_loaded.labels(config.id).set(1)
        self._publish()
        log.info(
            "loaded %s from %s in %.2fs (%s weights + %s activation reserve; %s of %s budget used)",
            config.id,
            slot.weights_source,
            slot.load_seconds,
            mib(slot.resident_bytes),
            mib(slot.reserve_bytes),
            mib(self.used_bytes),
            mib(self.budget_bytes),
        )
        if self.used_bytes > self.budget_bytes:  # the estimate was low: make up for it now
            try:
                self._make_room(config, slot.charge)
            except ResourceExhausted:
                log.warning("over budget after loading %s and nothing idle to evict", config.id)
        done.set_result(adapter)

    def _load_blocking(
        self, location: WeightsLocation, config: ModelConfig, profile: Profile, progress: LoadProgress
    ) -> ModelAdapter:
        adapter = self.factory(config, profile, self.device)
        first_load.load(adapter, location.path)
        progress.enter(LoadStage.WARMING)
        adapter.warmup()
        return adapter

    def _settle(self, slot: Slot, done: asyncio.Future[ModelAdapter], exc: SIEError, *, state: ModelState) -> None:
        log.error("%s", exc.message)
        slot.state, slot.loading, slot.progress = state, None, None
        slot.resident_bytes = slot.reserve_bytes = 0
        slot.error = exc.message if state is ModelState.FAILED else None
        self._publish()
        done.set_exception(exc)

    # ----- memory ------------------------------------------------------------------------
    def _make_room(self, config: ModelConfig, need: int) -> None:
        """Evict least-recently-used idle models until ``need`` more bytes fit, or raise."""
        if need > self.budget_bytes:
            raise beyond_budget(config.id, need, self.budget_bytes)
        self._reclaim(need)
        residents = [
            Resident(s.config.id, s.charge, s.last_used, self._evictable(s))
            for s in self._slots.values()
            if s.charge and s.config.id != config.id
        ]
        untracked = self.untracked_bytes
        plan = eviction_plan(self.budget_bytes - untracked - self.cache_bytes, need, residents)
        if plan is None:
            raise no_room(config.id, need, max(0, self.budget_bytes - self.used_bytes), untracked)
        for model_id in plan:
            self.evict(model_id, "lru")

    def _check_free_memory(self, config: ModelConfig, need: int, reclaimable: int = 0) -> None:
        """Refuse a load that the budget allows but the machine's free RAM (plus ``reclaimable``: what
        evicting would give back) does not (CPU only: on a GPU the budget is taken from free device
        memory at start, and the load's own OOM is caught)."""
        if self.device_kind != "cpu":
            return
        free = available_bytes(self.device) + reclaimable
        if exceeds_free_memory(need, free):
            raise short_of_memory(config.id, need, free, self.budget_bytes)

    def _evictable(self, slot: Slot) -> bool:
        return (
            slot.state is ModelState.LOADED and slot.config.id not in self.pinned and not self.is_busy(slot.config.id)
        )

    def evict(self, model_id: str, reason: str) -> bool:
        slot = self._slots.get(model_id)
        if slot is None or slot.state is not ModelState.LOADED or slot.adapter is None:
            return False
        log.info("evicting %s (%s, %s)", model_id, reason, mib(slot.charge))
        with thawed():  # its objects were frozen after the load: its reference cycles must be collectable
            adapter, slot.adapter = slot.adapter, None
            slot.loading, slot.state = None, ModelState.AVAILABLE
            adapter.unload()
            del adapter
        slot.resident_bytes = slot.reserve_bytes = 0
        self.metrics.model_evictions.labels(model_id, reason).inc()
        self.metrics.model_loaded.labels(model_id).set(0)
        self._publish()
        return True

    def unload(self, config: ModelConfig) -> bool:
        """An operator's eviction: False when the model is not loaded; refused (409) while it has
        work queued or running, or is pinned."""
        slot = self._slots.get(config.id)
        if slot is None or slot.state is not ModelState.LOADED:
            return False
        if config.id in self.pinned:
            raise InvalidInput(f"model {config.id} is pinned (--pin): it stays resident", status=409)
        if self.is_busy(config.id):
            raise InvalidInput(f"model {config.id} has work queued or running; retry when it is idle", status=409)
        return self.evict(config.id, "operator")

    def keep_within_budget(self) -> list[str]:
        """Evict least-recently-used idle models while what the process holds is over the budget (its
        holding beyond the charges grew after the loads); nothing when evicting could not bring it
        back under the budget (then a warning, at most once a minute)."""
        self._reclaim(0)
        untracked = self.untracked_bytes
        self._publish_usage(untracked)
        if self.charged_bytes + untracked <= self.budget_bytes:
            return []
        residents = [Resident(s.config.id, s.charge, s.last_used, self._evictable(s)) for s in self._slots.values()]
        plan = eviction_plan(self.budget_bytes - untracked - self.cache_bytes, 0, [r for r in residents if r.charge])
        if plan is None:
            now = time.monotonic()
            if now - self._warned_over_budget >= OVER_BUDGET_WARN_EVERY_S:
                self._warned_over_budget = now
                log.warning(
                    "the process holds %s against a memory budget of %s (%s charged to models, %s beyond them) "
                    "and evicting idle models would not bring it under; raise --memory-budget",
                    mib(self.charged_bytes + untracked),
                    mib(self.budget_bytes),
                    mib(self.charged_bytes),
                    mib(untracked),
                )
            return []
        return [m for m in plan if self.evict(m, "over_budget")]

    async def keep_within_budget_forever(self, period_s: float = 5.0) -> None:
        """Background task: keep_within_budget every ``period_s`` seconds (and the memory gauges current)."""
        while True:
            await asyncio.sleep(period_s)
            self.keep_within_budget()

    def evict_idle(self, idle_for_s: float) -> list[str]:
        now = time.monotonic()
        stale = [s.config.id for s in self._slots.values() if self._evictable(s) and now - s.last_used >= idle_for_s]
        return [m for m in stale if self.evict(m, "idle")]

    async def evict_idle_forever(self, idle_for_s: float) -> None:
        """Background task: free models nobody has used for ``idle_for_s`` seconds."""
        period = max(0.2, min(idle_for_s / 4, 5.0))
        while True:
            await asyncio.sleep(period)
            self.evict_idle(idle_for_s)

    def evict_others(self, keep: str) -> list[str]:
        """Free what can be freed for a model that ran out of memory."""
        others = [s.config.id for s in self._slots.values() if s.config.id != keep and self._evictable(s)]
        return [m for m in others if self.evict(m, "oom")]

    def _publish(self) -> None:
        for slot in self._slots.values():
            self.metrics.model_memory.labels(slot.config.id).set(slot.charge)
        self._publish_usage(self.untracked_bytes)

    def _publish_usage(self, untracked: int) -> None:
        self.metrics.memory_used.set(self.charged_bytes + untracked)
        self.metrics.memory_untracked.set(untracked)
