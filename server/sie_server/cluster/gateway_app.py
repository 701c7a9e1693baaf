"""The gateway's composition root: the server's API (the same routers) over ``GatewayService``.

With no worker alive for a pool a request waits up to ``hold_s`` for one, or gets 202 +
Retry-After when the caller asks not to wait (``X-SIE-Wait-For-Worker: false``). The Batch API's
routes are the server's too, over JetStream (``cluster/batch_backend.py``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import Response

from sie_server.api.app import create_api
from sie_server.api.body import json_response
from sie_server.api.keys import Access
from sie_server.api.middleware import ApiKeys, RequestMetrics
from sie_server.api.quota import with_quota
from sie_server.batches.backend import Caps
from sie_server.cluster.batch_backend import ClusterBatches
from sie_server.cluster.batch_figures import BatchFigures
from sie_server.cluster.batch_store import BatchStore
from sie_server.cluster.gateway import Gateway, GatewaySettings
from sie_server.cluster.gateway_service import GatewayService, NoWorkerYet
from sie_server.contract import envelope
from sie_server.contract.state_wire import NoWorkerYet as NoWorkerYetAnswer


async def _no_worker_yet(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, NoWorkerYet)
    return json_response(NoWorkerYetAnswer(pool=exc.pool), 202, envelope.retry_headers(exc.retry_after))


def create_gateway_app(settings: GatewaySettings) -> FastAPI:
    gateway = Gateway(settings)
    service = GatewayService(gateway)
    caps = Caps(settings.batch_max_file_bytes, settings.batch_max_lines, settings.max_body_bytes)
    batches = ClusterBatches(caps, BatchFigures(gateway.metrics.batches_in_progress, gateway.batch_inflight))

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await gateway.start()
        batches.start(await BatchStore.open(gateway.nc, ack_wait_s=settings.ack_wait_s))
        yield
        await batches.stop()
        await gateway.stop()

    guarded, quota = with_quota(service, settings.max_queued_per_key)
    app = create_api(
        guarded,
        title="SIE gateway",
        lifespan=lifespan,
        default_model=settings.default_model,
        mcp_allowed_hosts=settings.mcp_allowed_hosts,
    )
    app.state.gateway = gateway
    app.state.drain = service  # what serving.DrainingServer drains
    app.add_exception_handler(NoWorkerYet, _no_worker_yet)
    app.add_middleware(RequestMetrics, recorder=service)
    access = Access.from_settings(settings)
    app.state.access = access  # the Batch API derives each object's owner from the caller's key
    app.state.batches = batches
    app.state.batch_max_file_bytes = settings.batch_max_file_bytes
    app.add_middleware(ApiKeys, access=access, quota=quota)
    return app
