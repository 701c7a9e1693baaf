"""``/healthz`` (the process answers) and ``/readyz`` (it serves: preload done, not draining)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse, Response

from sie_server.api.codec import json_response
from sie_server.api.state import server

router = APIRouter()


@router.get("/healthz")
async def healthz() -> Response:
    return PlainTextResponse("ok")


@router.get("/readyz")
async def readyz(request: Request) -> Response:
    state = server(request)
    if state.draining:
        return json_response({"status": "draining"}, 503)
    if not state.ready:
        return json_response({"status": "starting"}, 503)
    return json_response({"status": "ready", "queued_items": state.scheduler.queued})
