"""``/healthz`` (the process answers), ``/readyz`` (it serves) and ``/metrics`` (Prometheus)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from sie_server.api.body import json_response
from sie_server.api.context import service
from sie_server.api.openapi import text_doc
from sie_server.contract.responses import Readiness

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
