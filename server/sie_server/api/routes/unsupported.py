"""``/v1/extract``: the route exists; no catalog model offers this task yet."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from sie_server.api.codec import read_body
from sie_server.api.state import resolve
from sie_server.errors import InvalidInput

router = APIRouter()


@router.post("/v1/extract/{model:path}")
async def extract(model: str, request: Request) -> Response:
    state, config = resolve(request, model, "extract")
    await read_body(request, state.settings.max_body_bytes)
    raise InvalidInput(f"model {config.id} does not support extract (its tasks: {config.tasks.names()})")
