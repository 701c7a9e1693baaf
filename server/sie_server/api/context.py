"""What a route reads from its request besides the body: the service, the model, the call options."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from fastapi import Path, Request

from sie_server.api.openapi import MODEL_ID
from sie_server.api.service import Service
from sie_server.catalog.schema import ModelConfig
from sie_server.contract import models
from sie_server.contract.headers import CallOptions, call_options
from sie_server.errors import SIEError
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


def unfit_chat(
    request: Request,
    model_id: str | None = None,
    *,
    tokens: tuple[str, ...],
    default: int,
    turns: str = "messages",
    within: str | None = None,
    naming: Callable[[str], str] | None = None,
) -> Callable[[Mapping[str, Any]], None]:
    """A ``read_body`` precheck for a chat route: a chat that cannot fit its (resident) model's context is
    refused from the decoded body, before the walk over all of it and its validation, which cost time in
    proportion to the turns (a 50,000-turn chat spent ~1 s there). ``model_id``: the model when the path
    names it, else the body's ``model`` (through ``naming``, as the route resolves it); ``turns``: the body's
    field holding the turns; ``tokens``: the fields for the new tokens (in ``within``'s object when given), first
    set wins. Anything it cannot read is left to the validation after it; tools are assumed (their formats may
    merge turns, so fewer count), and a turn it cannot read as a role and a text is not counted, so it never
    refuses a chat that the engine's own check would let through."""

    def check(body: Mapping[str, Any]) -> None:
        name, messages = model_id if model_id is not None else body.get("model"), body.get(turns)
        if not isinstance(name, str) or not isinstance(messages, Sequence) or isinstance(messages, str):
            return
        try:
            config = service(request).resolve(naming(name) if naming is not None else name)
        except SIEError:
            return  # the route's own lookup says why
        holder = body.get(within) if within is not None else body
        asked = [holder.get(k) for k in tokens] if isinstance(holder, Mapping) else []
        new = next((n for n in asked if isinstance(n, int) and not isinstance(n, bool) and n >= 1), default)
        read = (m for m in messages if isinstance(m, Mapping))  # read only until the bound is crossed
        service(request).refuse_unfit(config, read, new, tools=True)

    return check
