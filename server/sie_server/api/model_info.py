"""What ``/v1/models`` says about a model: its catalog facts, and its live state in this process.

The gateway answers the same shape from the catalog plus what its workers report.
"""

from __future__ import annotations

from typing import Any

from sie_server.adapters.backends import effective_backend
from sie_server.adapters.precision import fixed_report
from sie_server.adapters.weights import describe
from sie_server.api.state import ServerState
from sie_server.catalog.schema import ModelConfig
from sie_server.memory.pool import ModelState


def catalog_info(config: ModelConfig) -> dict[str, Any]:
    """The facts that come from the catalog alone (state: available, nothing loaded)."""
    source, offline_ok = describe(config)
    encode = config.tasks.encode
    dims: dict[str, int] = {}
    if encode is not None:
        for kind in encode.output_types():
            dims[kind] = getattr(encode, kind).dim
    return {
        "id": config.id,
        "name": config.id,
        "adapter": config.adapter,
        "tasks": config.tasks.names(),
        "inputs": ["text"],
        "outputs": encode.output_types() if encode else [],
        "dims": dims,
        "score_mode": config.tasks.score.mode if config.tasks.score else None,
        "max_sequence_length": config.max_sequence_length,
        "revision": config.source.revision,
        "state": ModelState.AVAILABLE.value,
        "loaded": False,
        "resident_bytes": 0,
        "charge_bytes": 0,
        "pinned": False,
        "weights_source": source,
        "available_offline": offline_ok,
        "last_error": None,
        "load_seconds": None,
        # what the cpu profile allows; once loaded, what it runs in and why (see adapters/precision.py)
        "precision": {
            "running": None,
            "allowed": list(config.profiles["cpu"].cpu_precision),
            "reason": None,
            "gate": [],
        },
    }


def model_info(config: ModelConfig, state: ServerState) -> dict[str, Any]:
    slot = state.pool.peek(config.id)
    live = slot if slot is not None and slot.config == config else None
    info = catalog_info(config)
    profile = state.pool.profile(config)
    info["profile"] = {"device": state.pool.device_kind, **profile.model_dump()}
    allowed = profile.cpu_precision if state.pool.device_kind == "cpu" else [fixed_report(profile, "cuda").running]
    info["precision"] = {**info["precision"], "allowed": list(allowed)}
    info["pinned"] = config.id in state.pool.pinned
    info["backend"] = effective_backend(config, profile)
    if live is None:
        return info
    loaded = live.state is ModelState.LOADED
    info.update(
        state=live.state.value,
        loaded=loaded,
        resident_bytes=live.resident_bytes if loaded else 0,
        charge_bytes=live.charge,
        weights_source=live.weights_source or info["weights_source"],
        last_error=live.error,
        load_seconds=live.load_seconds,
    )
    if live.adapter is not None:
        info["backend"] = live.adapter.backend
    if loaded and live.adapter is not None:
        report = live.adapter.precision_report or fixed_report(profile, state.pool.device, allowed, config.adapter)
        info["precision"] = report.as_dict()
    return info
