"""``GET /v1/models`` and ``GET /v1/models/{model}``: the catalog with each model's live state."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from sie_server.adapters.weights import describe
from sie_server.api.codec import json_response
from sie_server.api.state import ServerState, server
from sie_server.catalog.schema import ModelConfig
from sie_server.memory.pool import ModelState

router = APIRouter()


def model_info(config: ModelConfig, state: ServerState) -> dict[str, Any]:
    slot = state.pool.peek(config.id)
    live = slot if slot is not None and slot.config == config else None
    status = live.state if live else ModelState.AVAILABLE
    source, offline_ok = describe(config)
    encode = config.tasks.encode
    dims: dict[str, int] = {}
    if encode is not None:
        for kind in encode.output_types():
            dims[kind] = getattr(encode, kind).dim
    profile = config.profile(state.pool.device_kind)
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
        "state": status.value,
        "loaded": status is ModelState.LOADED,
        "resident_bytes": live.resident_bytes if live and status is ModelState.LOADED else 0,
        "charge_bytes": live.charge if live else 0,
        "pinned": config.id in state.pool.pinned,
        "weights_source": (live.weights_source if live and live.weights_source else source),
        "available_offline": offline_ok,
        "last_error": live.error if live else None,
        "load_seconds": live.load_seconds if live else None,
        "profile": {"device": state.pool.device_kind, **profile.model_dump()},
    }


@router.get("/v1/models")
async def list_models(request: Request) -> Response:
    state = server(request)
    return json_response({"models": [model_info(c, state) for c in state.catalog.list()]})


@router.get("/v1/memory")
async def memory(request: Request) -> Response:
    state = server(request)
    pool = state.pool
    return json_response(
        {
            "device": pool.device,
            "budget_bytes": pool.budget_bytes,
            "used_bytes": pool.used_bytes,
            "free_bytes": pool.budget_bytes - pool.used_bytes,
            "models": [
                {
                    "id": s.config.id,
                    "state": s.state.value,
                    "charge_bytes": s.charge,
                    "resident_bytes": s.resident_bytes if s.state is ModelState.LOADED else 0,
                    "reserve_bytes": s.reserve_bytes,
                    "pinned": s.config.id in pool.pinned,
                }
                for s in pool.slots()
                if s.charge
            ],
        }
    )


@router.post("/v1/models/{model:path}/reload")
async def reload(model: str, request: Request) -> Response:
    """Clear a failed load and load again (after fixing the weights, say)."""
    state = server(request)
    config = state.service.resolve(model)
    state.pool.reset(config)
    await state.pool.acquire(config, wait=True, timeout_s=state.settings.load_timeout_s)
    return json_response(model_info(config, state))


@router.get("/v1/models/{model:path}")
async def get_model(model: str, request: Request) -> Response:
    state = server(request)
    return json_response(model_info(state.service.resolve(model), state))
