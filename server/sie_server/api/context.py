"""What a route reads from its request besides the body: the service, the model, the call options."""

from __future__ import annotations

from fastapi import Path, Request

from sie_server.api.openapi import MODEL_ID
from sie_server.api.service import Service
from sie_server.catalog.schema import ModelConfig
from sie_server.contract import models
from sie_server.contract.headers import CallOptions, call_options
from sie_server.observability.logging import REQUEST_MODEL

MODEL = Path(description=MODEL_ID, examples=["sentence-transformers/all-MiniLM-L6-v2"])


def service(request: Request) -> Service:
    found: Service = request.app.state.service
    return found


def model_for(request: Request, model_id: str, task: str) -> ModelConfig:
    """The served model for a work route, checked to do ``task``; tags the request for metrics."""
    config = service(request).resolve(model_id)
    models.require_task(config, task)
    request.state.sie_model = config.id
    request.state.sie_task = task
    REQUEST_MODEL.set(config.id)  # the request's later log lines name the model
    return config


def call(request: Request) -> CallOptions:
    """Per-request options from the headers (priority, waiting), and the caller leaving."""

    async def disconnected() -> None:
        # the body has been read, so the next ASGI message is the client going away
        while (await request.receive())["type"] != "http.disconnect":
            pass

    return call_options(request.headers, disconnected)
