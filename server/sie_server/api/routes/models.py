"""``GET /v1/models`` and ``GET /v1/models/{model}``: the catalog with each model's live state."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from sie_server.api.codec import json_response
from sie_server.api.model_info import model_info
from sie_server.api.state import server
from sie_server.cpu_features import detect
from sie_server.memory.pool import ModelState

router = APIRouter()


@router.get("/v1/models")
async def list_models(request: Request) -> Response:
    state = server(request)
    models = [model_info(c, state) for c in state.catalog.list()]
    return json_response({"models": models, "cpu": detect().as_dict()})


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
