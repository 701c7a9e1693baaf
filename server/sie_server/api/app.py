"""The HTTP API as a FastAPI app over a ``Service``: the same routers, error handling and
reference docs for the single server and the gateway. (Building a service is the composition
roots' job: ``sie_server/compose.py`` for the server, ``cluster/gateway_app.py`` for the gateway.)"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from fastapi import FastAPI
from starlette.routing import Route

from sie_server import __version__
from sie_server.api import errors, openapi
from sie_server.api.docs import install_docs
from sie_server.api.keys import MCP_PATH
from sie_server.api.middleware import HeadAsGet
from sie_server.api.routes import (
    audio,
    batches,
    classify,
    compat,
    encode,
    extract,
    generate,
    health,
    models,
    ollama,
    responses,
    score,
    status,
    tasks,
    tei,
    tei_tokens,
    tokenize,
)
from sie_server.api.service import Service
from sie_server.mcp.mount import McpMount

DESCRIPTION = (
    "Encode, score, extract and generate with small models, in one process. Errors answer "
    '`{"detail": {"code", "message"}}` (OpenAI\'s `{"error": {...}}` on its routes, Ollama\'s `{"error": "..."}` '
    'on `/api/...`, TEI\'s `{"error", "error_type"}` on its paths) with the code '
    "also in `X-SIE-Error-Code`. Work routes take JSON or msgpack and answer msgpack to "
    "`Accept: application/msgpack`."
)


def create_api(
    service: Service,
    *,
    title: str,
    lifespan: Callable[[FastAPI], AbstractAsyncContextManager[Any]] | None = None,
    default_model: str | None = None,
    mcp_allowed_hosts: Sequence[str] = (),
) -> FastAPI:
    # the MCP tools at /mcp (sie_server/mcp); its session manager ends with the app
    mcp = McpMount(service, allowed_hosts=mcp_allowed_hosts)
    lifespan = mcp.around(lifespan)
    app = FastAPI(
        title=title, version=__version__, description=DESCRIPTION, lifespan=lifespan, docs_url=None, redoc_url=None
    )
    app.state.service = service
    app.state.default_model = default_model  # the model of TEI's routes when a request names none
    for module in (
        health,
        status,
        models,
        encode,
        score,
        extract,
        compat,
        classify,
        audio,
        generate,
        responses,
        ollama,
        tei,
        tei_tokens,
        tokenize,
        batches,
        tasks,
    ):
        app.include_router(module.router)
    app.router.routes.append(Route(MCP_PATH, mcp, include_in_schema=False))  # JSON-RPC: not in the OpenAPI spec
    errors.install(app)
    openapi.install(app)
    install_docs(app)
    app.add_middleware(HeadAsGet)
    return app
