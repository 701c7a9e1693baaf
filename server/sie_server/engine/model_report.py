"""What the server says of its models: the catalog's facts overlaid with their live state in this
process (``/v1/models``, worker heartbeats), and the memory they hold (``/v1/memory``)."""

from __future__ import annotations

from sie_server.adapters.runtime.backends import effective_backend
from sie_server.adapters.runtime.precision import fixed_report
from sie_server.catalog.info import catalog_info
from sie_server.catalog.schema import ModelConfig
from sie_server.contract.state_wire import LoadProgress, MemoryReport, ModelInfo, ModelMemory, Precision
from sie_server.memory.load_progress import LoadProgress as Progress
from sie_server.memory.pool import ModelPool
from sie_server.memory.slots import ModelState


def model_info(config: ModelConfig, pool: ModelPool, *, catalog_error: str | None = None) -> ModelInfo:
    """``catalog_error``: why the model's config file is not the config that serves (it broke after
    being read); shown as ``last_error`` unless a load error is more recent news."""
    slot = pool.peek(config.id)
    live = slot if slot is not None and slot.config == config else None
    info = catalog_info(config)
    info.last_error = catalog_error
    profile = pool.profile(config)
    info.profile = {"device": pool.device_kind, **profile.model_dump()}
    allowed = profile.cpu_precision if pool.device_kind == "cpu" else [fixed_report(profile, "cuda").running]
    info.precision.allowed = list(allowed)
    info.pinned = config.id in pool.pinned
    info.backend = effective_backend(config, profile)
    if live is None:
        return info
    loaded = live.state is ModelState.LOADED
    info.state = live.state.value
    info.loaded = loaded
    info.resident_bytes = live.resident_bytes if loaded else 0
    info.charge_bytes = live.charge
    info.weights_source = live.weights_source or info.weights_source
    info.last_error = live.error or catalog_error
    info.load_seconds = live.load_seconds
    if live.adapter is not None:
        info.backend = live.adapter.backend
    if live.state is ModelState.LOADING and live.progress is not None:
        info.load_progress = load_progress(live.progress)
    if loaded and live.adapter is not None:
        report = live.adapter.precision_report or fixed_report(profile, pool.device, allowed, config.adapter)
        info.precision = Precision.model_validate(report.as_dict())
    return info


def load_progress(progress: Progress) -> LoadProgress:
    elapsed, in_stage = progress.elapsed()
    return LoadProgress(
        stage=progress.stage.value,
        detail=progress.detail,
        elapsed_s=round(elapsed, 3),
        stage_elapsed_s=round(in_stage, 3),
        fraction=progress.fraction,
    )


def memory_report(pool: ModelPool) -> MemoryReport:
    held, charged = pool.holding.now(), pool.charged_bytes
    untracked = pool.holding.untracked(charged, held)
    return MemoryReport(
        device=pool.device,
        budget_bytes=pool.budget_bytes,
        used_bytes=charged + untracked,
        free_bytes=pool.budget_bytes - charged - untracked,
        charged_bytes=charged,
        untracked_bytes=untracked,
        process_bytes=held,
        runtime_bytes=pool.holding.runtime,
        cache_bytes=pool.cache_bytes,
        models=[
            ModelMemory(
                id=s.config.id,
                state=s.state.value,
                charge_bytes=s.charge,
                resident_bytes=s.resident_bytes if s.state is ModelState.LOADED else 0,
                reserve_bytes=s.reserve_bytes,
                pinned=s.config.id in pool.pinned,
            )
            for s in pool.slots()
            if s.charge
        ],
    )
