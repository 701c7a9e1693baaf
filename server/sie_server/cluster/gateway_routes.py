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
from fastapi.responses import PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from sie_server.api.codec import MSGPACK, read_body, render, wants_msgpack
from sie_server.api.errors import error_response
from sie_server.catalog.schema import ModelConfig
from sie_server.cluster.gateway import SPLIT_TASKS, Gateway, GatewaySettings
from sie_server.engine.policy import PRIORITIES
from sie_server.errors import InvalidInput, SIEError

router = APIRouter()
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


@router.get("/v1/models/{model:path}")
async def get_model(model: str, request: Request) -> Response:
    gateway = gateway_of(request)
    config = gateway.settings.catalog.get(model)
    if config is None:
        return error_response("MODEL_NOT_FOUND", f"model {model} is not in this gateway's catalog", 404)
    return Response(json.dumps(model_info(gateway, config)), media_type="application/json")


def model_info(gateway: Gateway, config: ModelConfig) -> dict[str, Any]:
    pool = gateway.settings.pool_for(config.id)
    resident = any(config.id in models for models in gateway.resident.values())
    encode = config.tasks.encode
    return {
        "id": config.id, "name": config.id, "adapter": config.adapter, "tasks": config.tasks.names(),
        "outputs": encode.output_types() if encode else [],
        "dims": {k: getattr(encode, k).dim for k in encode.output_types()} if encode else {},
        "pool": pool, "state": "loaded" if resident else "available", "loaded": resident,
        "workers": gateway.live_workers(pool),
    }  # fmt: skip


@router.post("/v1/{task}/{model:path}")
async def work(task: str, model: str, request: Request) -> Response:
    return await forward(request, task, model, f"/v1/{task}/{model}")


@router.post("/v1/{compat}")
async def compat(compat: str, request: Request) -> Response:
    return await forward(request, compat, None, f"/v1/{compat}")


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
    raw = await read_body(request, settings.max_body_bytes)
    model_id = model or (raw.get("model") if isinstance(raw, dict) else None)
    if not isinstance(model_id, str):
        raise InvalidInput("the body names no model")
    config = settings.catalog.get(model_id)
    if config is None:
        hint = settings.catalog.suggest(model_id)
        tip = f"; did you mean {hint}?" if hint else ""
        return error_response("MODEL_NOT_FOUND", f"model {model_id} is not in the catalog{tip}", 404)
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
    if task in SPLIT_TASKS and isinstance(items, list) and len(items) > settings.split_items:
        return await split(request, gateway, raw, items, pool, priority, path)
    status, headers, body = await gateway.call(pool, priority, path, msgpack.packb(raw, use_bin_type=True))
    return relay(request, status, headers, body)


async def split(request: Request, gateway: Gateway, raw: dict[str, Any], items: list[Any], pool: str,
                priority: str, path: str) -> Response:  # fmt: skip
    size = gateway.settings.split_items
    slices = [items[i : i + size] for i in range(0, len(items), size)]
    for offset, chunk in zip(range(0, len(items), size), slices, strict=True):
        for k, item in enumerate(chunk):
            if isinstance(item, dict) and "id" not in item:
                item["id"] = f"item-{offset + k}"
    replies = await asyncio.gather(
        *(gateway.call(pool, priority, path, msgpack.packb({**raw, "items": c}, use_bin_type=True)) for c in slices)
    )
    for status, headers, body in replies:
        if status >= 400:
            return relay(request, status, headers, body)
    parts = [decode(h.get("content-type", MSGPACK), b) for _, h, b in replies]
    merged = {**parts[0], "items": [item for part in parts for item in part["items"]]}
    if "truncated_items" in parts[0]:
        merged["truncated_items"] = [i for part in parts for i in part.get("truncated_items", [])]
    if "usage" in parts[0]:
        merged["usage"] = {"prompt_tokens": sum(p.get("usage", {}).get("prompt_tokens", 0) for p in parts)}
    if "timing" in parts[0]:
        merged["timing"] = {k: max(p["timing"][k] for p in parts) for k in parts[0]["timing"]}
    return render(request, _unnumpy(merged))


def relay(request: Request, status: int, headers: dict[str, str], body: bytes) -> Response:
    """A worker's answer as the caller asked for it (workers answer in msgpack)."""
    content_type = headers.get("content-type", "application/json")
    extra = {k: v for k, v in headers.items() if k in RELAYED}
    if MSGPACK in content_type and not wants_msgpack(request):
        return render(request, _unnumpy(decode(content_type, body)), status, extra)
    return Response(body, status, headers=extra, media_type=content_type)


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
