"""``/v1/extract`` and ``/v1/generate``: the routes exist; no catalog model offers these tasks yet."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from sie_server.api.codec import read_body
from sie_server.api.state import resolve
from sie_server.errors import InvalidInput

router = APIRouter()


async def _refuse(task: str, model: str, request: Request) -> Response:
    state, config = resolve(request, model, task)
    await read_body(request, state.settings.max_body_bytes)
    raise InvalidInput(f"model {config.id} does not support {task} (its tasks: {config.tasks.names()})")


@router.post("/v1/extract/{model:path}")
async def extract(model: str, request: Request) -> Response:
    return await _refuse("extract", model, request)


@router.post("/v1/generate/{model:path}")
async def generate(model: str, request: Request) -> Response:
    return await _refuse("generate", model, request)
