"""``/healthz`` (the process answers), ``/readyz`` (it serves), ``/health`` (TEI's name for the same question)
and ``/metrics`` (Prometheus)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from sie_server.api.body import json_response
from sie_server.api.context import service
from sie_server.api.openapi import text_doc
from sie_server.contract.responses import Readiness
from sie_server.contract.tei_wire import ErrorType, TeiError

router = APIRouter(tags=["health"])


@router.get("/healthz", response_class=PlainTextResponse, **text_doc("`ok` while the process answers"))
async def healthz() -> Response:
    return PlainTextResponse("ok")


@router.get("/metrics", response_class=Response, **text_doc("Prometheus exposition text", CONTENT_TYPE_LATEST))
async def metrics(request: Request) -> Response:
    return Response(service(request).metrics_text(), media_type=CONTENT_TYPE_LATEST)


@router.get(
    "/readyz",
    responses={
        200: {"model": Readiness, "description": "serving"},
        503: {
            "model": Readiness,
            "description": "starting (preload under way), draining, or disconnected (a queue worker without NATS)",
        },
    },
)
async def readyz(request: Request) -> Response:
    ready = service(request).readiness()
    return json_response(ready, 200 if ready.status == "ready" else 503)


@router.get(
    "/health",
    response_class=PlainTextResponse,
    responses={
        200: {"content": {"text/plain": {"schema": {"type": "string"}}}, "description": "serving (an empty body)"},
        503: {"model": TeiError, "description": "starting, draining or disconnected (TEI's error body)"},
    },
)
async def tei_health(request: Request) -> Response:
    """TEI's health check (``GET /health``): 200 with an empty body while the server serves, else 503 with TEI's
    error body, ``error_type: Unhealthy``."""
    ready = service(request).readiness()
    if ready.status == "ready":
        return PlainTextResponse("")
    return json_response(TeiError(error=f"the server is {ready.status}", error_type=ErrorType.UNHEALTHY), 503)
