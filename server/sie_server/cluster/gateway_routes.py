"""The gateway's HTTP side: the single server's API, answered by workers over JetStream.

Encode and extract requests are split into slices of items (merged back in order); the
rest travel whole. With no worker alive for a pool a request waits up to ``hold_s`` for
one, or gets 202 + Retry-After when the caller asks not to wait.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import msgpack
import numpy as np
from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import PlainTextResponse, Response, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.exceptions import HTTPException as StarletteHTTPException

from sie_server.api import errors
from sie_server.api.codec import MSGPACK, read_body, render, wants_msgpack
from sie_server.api.errors import error_response
from sie_server.api.model_info import catalog_info
from sie_server.api.state import WAIT_HEADER
from sie_server.catalog.schema import ModelConfig
from sie_server.cluster.gateway import SPLIT_TASKS, Gateway, GatewaySettings
from sie_server.cluster.streams import Reply
from sie_server.engine.policy import PRIORITIES
from sie_server.errors import InvalidInput, ModelNotFound, SIEError

router = APIRouter()
TASKS = ("encode", "score", "extract", "generate")
RELAYED = ("x-sie-error-code", "retry-after")


def gateway_of(request: Request) -> Gateway:
    gateway: Gateway = request.app.state.gateway
    return gateway


def create_gateway_app(settings: GatewaySettings) -> FastAPI:
    gateway = Gateway(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await gateway.start()
        yield
        await gateway.stop()

    app = FastAPI(title="SIE gateway", lifespan=lifespan)
    app.state.gateway = gateway
    app.middleware("http")(authenticate)
    app.include_router(router)
    errors.install(app)
    return app


async def authenticate(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
    """Bearer tokens from SIE_AUTH_TOKENS on /v1/ routes, compared in constant time."""
    tokens = gateway_of(request).settings.auth_tokens
    if tokens and request.url.path.startswith("/v1/"):
        header = request.headers.get("authorization", "")
        if not header.lower().startswith("bearer "):
            return error_response("UNAUTHENTICATED", "send Authorization: Bearer <token>", 401)
        token = header[7:].strip().encode()
        if not any(hmac.compare_digest(token, t.encode()) for t in tokens):
            return error_response("FORBIDDEN", "this token is not allowed", 403)
    return await call_next(request)


@router.get("/healthz")
async def healthz() -> Response:
    return PlainTextResponse("ok")


@router.get("/readyz")
async def readyz(request: Request) -> Response:
    nc = gateway_of(request).nc
    ok = nc is not None and nc.is_connected
    body = json.dumps({"status": "ready" if ok else "starting"})
    return Response(body, 200 if ok else 503, media_type="application/json")


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    return Response(generate_latest(gateway_of(request).metrics.registry), media_type=CONTENT_TYPE_LATEST)


@router.get("/v1/models")
async def list_models(request: Request) -> Response:
    gateway = gateway_of(request)
    models = [model_info(gateway, c) for c in gateway.settings.catalog.list()]
    return Response(json.dumps({"models": models}), media_type="application/json")


@router.post("/v1/models/{model:path}/reload")
async def reload(model: str, request: Request) -> Response:
    gateway = gateway_of(request)
    config = known(gateway, model)
    reply = await gateway.reload(gateway.settings.pool_for(config.id), config.id, gateway.settings.timeout_s)
    if reply.status >= 400:
        return relay(request, reply)
    return Response(json.dumps(model_info(gateway, config)), media_type="application/json")


@router.get("/v1/models/{model:path}")
async def get_model(model: str, request: Request) -> Response:
    gateway = gateway_of(request)
    return Response(json.dumps(model_info(gateway, known(gateway, model))), media_type="application/json")


def known(gateway: Gateway, model_id: str) -> ModelConfig:
    config = gateway.settings.catalog.get(model_id)
    if config is None:
        hint = gateway.settings.catalog.suggest(model_id)
        raise ModelNotFound(f"model {model_id} is not in the catalog" + (f"; did you mean {hint}?" if hint else ""))
    return config


def model_info(gateway: Gateway, config: ModelConfig) -> dict[str, Any]:
    """The catalog's facts, overlaid with what the most useful worker report says (loaded first)."""
    pool = gateway.settings.pool_for(config.id)
    reports = gateway.reports(config.id)
    info = {**catalog_info(config), **(reports[0] if reports else {})}
    return {**info, "pool": pool, "workers": gateway.live_workers(pool),
            "loaded_on": sum(1 for r in reports if r.get("state") == "loaded")}  # fmt: skip


@router.post("/v1/embeddings")
@router.post("/v1/rerank")
@router.post("/v1/completions")
@router.post("/v1/chat/completions")
async def compat(request: Request) -> Response:
    return await forward(request, request.url.path.removeprefix("/v1/"), None, request.url.path)


@router.post("/v1/{task}/{model:path}")
async def work(task: str, model: str, request: Request) -> Response:
    if task not in TASKS:
        raise StarletteHTTPException(404)
    return await forward(request, task, model, f"/v1/{task}/{model}")


async def forward(request: Request, task: str, model: str | None, path: str) -> Response:
    gateway = gateway_of(request)
    started = time.perf_counter()
    status = "error"
    try:
        response = await dispatch(request, gateway, task, model, path)
        status = response.headers.get("x-sie-error-code", "ok")
        return response
    except SIEError as exc:
        status = exc.code.value
        return error_response(exc.code.value, exc.message, exc.status, exc.retry_after)
    finally:
        gateway.metrics.requests.labels(task, status).inc()
        gateway.metrics.duration.labels(task).observe(time.perf_counter() - started)


async def dispatch(request: Request, gateway: Gateway, task: str, model: str | None, path: str) -> Response:
    settings = gateway.settings
    if model is not None:
        known(gateway, model)  # before the body is read, as a single server does
    raw = await read_body(request, settings.max_body_bytes)
    model_id = model or (raw.get("model") if isinstance(raw, dict) else None)
    if not isinstance(model_id, str):
        raise InvalidInput("the body names no model")
    config = known(gateway, model_id)
    priority = request.headers.get("x-sie-priority", "interactive").lower()
    if priority not in PRIORITIES:
        raise InvalidInput(f"X-SIE-Priority must be one of {', '.join(PRIORITIES)}")
    pool = settings.pool_for(config.id)
    if gateway.live_workers(pool) == 0:
        if request.headers.get("x-sie-wait-for-worker", "true").lower() in ("0", "false", "no"):
            waiting = json.dumps({"status": "no worker yet", "pool": pool})
            return Response(waiting, 202, headers={"Retry-After": "5"}, media_type="application/json")
        deadline = time.monotonic() + settings.hold_s
        while gateway.live_workers(pool) == 0 and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
    items = raw.get("items") if isinstance(raw, dict) else None
    if isinstance(items, list) and len(items) > settings.max_items_per_request:
        limit = settings.max_items_per_request
        raise InvalidInput(f"{len(items)} items in one request; the limit is {limit}. Split the request.")
    if task in SPLIT_TASKS and isinstance(items, list) and len(items) > settings.split_items:
        return await split(request, gateway, raw, items, pool, priority, path, config.id)
    wait_for_model = request.headers.get(WAIT_HEADER, "true").lower() not in ("0", "false", "no")
    body = msgpack.packb(raw, use_bin_type=True)
    call = await gateway.send(pool, priority, path, body, config.id, wait_for_model=wait_for_model)
    try:
        first = await gateway.receive(call)
    except BaseException:
        await gateway.close(call)
        raise
    if not first.more:
        await gateway.close(call)
        return relay(request, first)

    async def parts() -> AsyncIterator[bytes]:
        yield first.body
        async for part in gateway.rest_of_stream(call, first):
            yield part

    kept = {k: v for k, v in first.headers.items() if k in RELAYED} | {"Cache-Control": "no-cache"}
    media = first.headers.get("content-type", "text/event-stream")
    return StreamingResponse(parts(), first.status, headers=kept, media_type=media)


async def split(request: Request, gateway: Gateway, raw: dict[str, Any], items: list[Any], pool: str,
                priority: str, path: str, model_id: str) -> Response:  # fmt: skip
    size = gateway.settings.split_items
    slices = [items[i : i + size] for i in range(0, len(items), size)]
    for offset, chunk in zip(range(0, len(items), size), slices, strict=True):
        for k, item in enumerate(chunk):
            if isinstance(item, dict) and "id" not in item:
                item["id"] = f"item-{offset + k}"
    replies = await asyncio.gather(
        *(gateway.call(pool, priority, path, msgpack.packb({**raw, "items": c}, use_bin_type=True), model_id)
          for c in slices)
    )  # fmt: skip
    for reply in replies:
        if reply.status >= 400:
            return relay(request, reply)
    parts = [decode(r.headers.get("content-type", MSGPACK), r.body) for r in replies]
    merged = {**parts[0], "items": [item for part in parts for item in part["items"]]}
    if "truncated_items" in parts[0]:
        merged["truncated_items"] = [i for part in parts for i in part.get("truncated_items", [])]
    if "usage" in parts[0]:
        merged["usage"] = {"prompt_tokens": sum(p.get("usage", {}).get("prompt_tokens", 0) for p in parts)}
    if "timing" in parts[0]:
        merged["timing"] = {k: max(p["timing"][k] for p in parts) for k in parts[0]["timing"]}
    return render(request, _unnumpy(merged))


def relay(request: Request, reply: Reply) -> Response:
    """A worker's answer as the caller asked for it (workers answer in msgpack)."""
    content_type = reply.headers.get("content-type", "application/json")
    extra = {k: v for k, v in reply.headers.items() if k in RELAYED}
    if MSGPACK in content_type and not wants_msgpack(request):
        return render(request, _unnumpy(decode(content_type, reply.body)), reply.status, extra)
    return Response(reply.body, reply.status, headers=extra, media_type=content_type)


def decode(content_type: str, body: bytes) -> Any:
    if MSGPACK in content_type:
        return msgpack.unpackb(body, raw=False, strict_map_key=False)
    return json.loads(body)


def _unnumpy(value: Any) -> Any:
    """msgpack-numpy maps (from workers) back into arrays, so JSON callers get lists."""
    if isinstance(value, dict):
        if b"nd" in value:
            return np.frombuffer(value[b"data"], dtype=np.dtype(value[b"type"])).reshape(value[b"shape"])
        return {k: _unnumpy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unnumpy(v) for v in value]
    return value
