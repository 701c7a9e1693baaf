"""``/healthz`` (the process answers), ``/readyz`` (it serves), ``/health`` (TEI's name for the same question)
and ``/metrics`` (Prometheus).

A server's ``/readyz`` also judges its models (``app.state.judge_readiness``, set by the composition
root; ``engine/model_health.py`` says what makes a pod unready and why): a required model whose load
failed, or a batch stalled past ``--stall-after-s``, makes it 503 ``"failing"``, and every model that
cannot serve is named in ``models`` with its reason. A gateway's (``cluster/gateway_readiness.py``) is 503
while it has no NATS and names the models no live worker serves. ``/healthz`` never looks at a model.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from sie_server.api.body import json_response
from sie_server.api.context import service
from sie_server.api.openapi import text_doc
from sie_server.contract.state_wire import Readiness
from sie_server.contract.tei_wire import ErrorType, TeiError

router = APIRouter(tags=["health"])


def _readiness(request: Request) -> Readiness:
    """The service's readiness, judged on its models where the app can (a server; a gateway runs none)."""
    ready = service(request).readiness()
    judge: Callable[[Readiness], Readiness] | None = getattr(request.app.state, "judge_readiness", None)
    return ready if judge is None else judge(ready)


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
            "description": "starting (preload under way), draining, disconnected (a queue worker or a gateway "
            "without NATS), or failing (a server or worker whose pinned or preloaded model failed to load, or "
            "whose batch stalled; `models` says which)",
        },
    },
)
async def readyz(request: Request) -> Response:
    """Whether this process serves (Kubernetes' readiness probe; `/healthz` is the liveness probe and never looks
    at a model). A server or queue worker names in `models` each model that cannot serve now (`load_failed`,
    `stalled`, `stopped`) and is 503 `failing` when one is required (pinned or preloaded) or a batch is stalled.
    A gateway is 503 only while it has no NATS connection or drains; its `models` names each model that no
    live worker of its pool serves (every one names it in its own `/readyz`), while it stays 200."""
    ready = _readiness(request)
    return json_response(ready, 200 if ready.status == "ready" else 503)


@router.get(
    "/health",
    response_class=PlainTextResponse,
    responses={
        200: {"content": {"text/plain": {"schema": {"type": "string"}}}, "description": "serving (an empty body)"},
        503: {"model": TeiError, "description": "starting, draining, disconnected or failing (TEI's error body)"},
    },
)
async def tei_health(request: Request) -> Response:
    """TEI's health check (``GET /health``): 200 with an empty body while the server serves, else 503 with TEI's
    error body, ``error_type: Unhealthy``."""
    ready = _readiness(request)
    if ready.status == "ready":
        return PlainTextResponse("")
    return json_response(TeiError(error=f"the server is {ready.status}", error_type=ErrorType.UNHEALTHY), 503)
