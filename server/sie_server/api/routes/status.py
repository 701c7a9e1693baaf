"""``GET /v1/status`` (what an operator watches, as JSON) and the status page that shows it live
(``GET /`` and ``/status``: one HTML file and one script, served from ``api/static/``, no CDN).

The page itself holds no data and stays open like ``/docs``; it reads ``/v1/status`` once a
second, which needs an API key when keys are on (the page sends the key its user types)."""

from __future__ import annotations

from importlib.resources import files
from typing import Protocol, runtime_checkable

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from sie_server.api.body import json_response
from sie_server.api.context import service
from sie_server.api.openapi import doc
from sie_server.contract.status import BatchesStatus, StatusReport

router = APIRouter(tags=["status"])
STATIC = files("sie_server.api") / "static"
PAGE = (STATIC / "status.html").read_text(encoding="utf-8")
SCRIPT = (STATIC / "status.js").read_text(encoding="utf-8")
NO_STORE = {"Cache-Control": "no-store"}


@router.get("/v1/status", **doc(StatusReport, errors=(), msgpack=False))
async def status(request: Request) -> Response:
    """Every model's state, charge and last minute (rps, p50/p99, queue, batches, tokens/s), the
    last errors and the memory; on a gateway, its pools, live workers, pending work and dead letters."""
    report = await service(request).status()
    batches = getattr(request.app.state, "batches", None)
    if isinstance(batches, BatchesReporter):
        report.batches = batches.status()
    return json_response(report, headers=NO_STORE)


@runtime_checkable
class BatchesReporter(Protocol):
    """A Batch API backend that reports its figures (``batches/local.py``)."""

    def status(self) -> BatchesStatus: ...


@router.get("/", include_in_schema=False)
@router.get("/status", include_in_schema=False)
async def page() -> HTMLResponse:
    return HTMLResponse(PAGE, headers=NO_STORE)


@router.get("/status-assets/status.js", include_in_schema=False)
async def script() -> Response:
    return Response(SCRIPT, media_type="text/javascript", headers=NO_STORE)
