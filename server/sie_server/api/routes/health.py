"""``/healthz`` (the process answers) and ``/readyz`` (it serves: preload done, not draining)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from sie_server.api.codec import json_response
from sie_server.api.state import server

router = APIRouter()


@router.get("/healthz")
async def healthz() -> Response:
    return PlainTextResponse("ok")


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    return Response(server(request).metrics.render(), media_type=CONTENT_TYPE_LATEST)


@router.get("/readyz")
async def readyz(request: Request) -> Response:
    state = server(request)
    if state.draining:
        return json_response({"status": "draining"}, 503)
    if not state.ready:
        return json_response({"status": "starting"}, 503)
    return json_response(
        {
            "status": "ready",
            "queued_items": state.scheduler.queued,
            "inflight_requests": state.inflight,
            "preload_errors": state.preload_errors,
        }
    )
