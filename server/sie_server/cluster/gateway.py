"""The gateway: the single server's HTTP API in front of NATS JetStream.

Each request becomes work messages on its model's pool stream for its priority class
(encode and extract requests are split into slices of items, merged back in order);
replies come back on the gateway's inbox. The gateway holds no model. With no worker
alive for a pool it waits up to ``hold_s`` for one (or answers 202 + Retry-After when the
caller asks not to wait), and exports the pending work as a metric to scale on.
"""

from __future__ import annotations

import asyncio
import fnmatch
import hmac
import json
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import msgpack
from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from sie_server.api.codec import MSGPACK, read_body, wants_msgpack
from sie_server.api.errors import error_response
from sie_server.catalog.loader import Catalog
from sie_server.cluster.streams import CONSUMER, HEARTBEAT_SUBJECT, ensure_streams, parse_reply, stream_name, subject
from sie_server.engine.policy import PRIORITIES
from sie_server.errors import InvalidInput, SIEError

log = logging.getLogger(__name__)
SPLIT_TASKS = ("encode", "extract")
WORKER_TTL_S = 6.0


@dataclass
class GatewaySettings:
    nats_url: str
    catalog: Catalog
    routes: list[tuple[str, str]] = field(default_factory=list)  # (fnmatch pattern, pool)
    default_pool: str = "default"
    hold_s: float = 30.0
    timeout_s: float = 600.0
    split_items: int = 32
    ack_wait_s: float = 30.0
    auth_tokens: tuple[str, ...] = ()
    max_body_bytes: int = 64 * 2**20

    def pool_for(self, model_id: str) -> str:
        return next((pool for pattern, pool in self.routes if fnmatch.fnmatch(model_id, pattern)), self.default_pool)

    @property
    def pools(self) -> list[str]:
        return sorted({self.default_pool, *(pool for _, pool in self.routes)})


class GatewayMetrics:
    def __init__(self) -> None:
        self.registry = r = CollectorRegistry()
        self.requests = Counter("sie_gateway_requests", "Gateway requests", ["task", "status"], registry=r)
        self.duration = Histogram("sie_gateway_request_duration_seconds", "Gateway latency", ["task"], registry=r)
        self.pending = Gauge("sie_gateway_pending_items", "Work messages waiting", ["pool", "priority"], registry=r)
        self.workers = Gauge("sie_gateway_workers", "Live workers seen", ["pool"], registry=r)


class Gateway:
    def __init__(self, settings: GatewaySettings):
        self.settings = settings
        self.metrics = GatewayMetrics()
        self.nc: Any = None
        self.js: Any = None
        self.inbox = ""
        self.waiting: dict[str, asyncio.Future[tuple[int, dict[str, str], bytes]]] = {}
        self.workers: dict[str, dict[str, float]] = {}  # pool -> worker -> last heartbeat
        self.resident: dict[str, set[str]] = {}  # worker -> models it has loaded
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        import nats

        self.nc = await nats.connect(self.settings.nats_url, name="sie-gateway", max_reconnect_attempts=-1)
        self.js = self.nc.jetstream()
        for pool in self.settings.pools:
            await ensure_streams(self.js, pool, ack_wait_s=self.settings.ack_wait_s)
        self.inbox = self.nc.new_inbox()
        await self.nc.subscribe(f"{self.inbox}.*", cb=self._on_reply)
        await self.nc.subscribe(HEARTBEAT_SUBJECT.format(pool="*"), cb=self._on_heartbeat)
        self._tasks.append(asyncio.get_running_loop().create_task(self._watch_pending()))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        if self.nc is not None:
            await self.nc.drain()

    async def _on_reply(self, msg: Any) -> None:
        future = self.waiting.pop(msg.subject, None)
        if future is not None and not future.done():
            future.set_result(parse_reply(msg.data))

    async def _on_heartbeat(self, msg: Any) -> None:
        beat = json.loads(msg.data)
        self.workers.setdefault(beat["pool"], {})[beat["worker"]] = time.monotonic()
        self.resident[beat["worker"]] = set(beat.get("models", []))

    def live_workers(self, pool: str) -> int:
        now = time.monotonic()
        return sum(1 for seen in self.workers.get(pool, {}).values() if now - seen < WORKER_TTL_S)

    async def _watch_pending(self) -> None:
        while True:
            for pool in self.settings.pools:
                self.metrics.workers.labels(pool).set(self.live_workers(pool))
                for priority in PRIORITIES:
                    try:
                        info = await self.js.consumer_info(stream_name(pool, priority), CONSUMER)
                        pending = info.num_pending + info.num_ack_pending
                    except Exception:  # the stream may be momentarily unavailable
                        continue
                    self.metrics.pending.labels(pool, priority).set(pending)
            await asyncio.sleep(1.0)

    async def call(
        self, pool: str, priority: str, path: str, body: bytes, content_type: str
    ) -> tuple[int, dict[str, str], bytes]:
        """Publish one work message and wait for its reply."""
        token = uuid.uuid4().hex
        reply_to = f"{self.inbox}.{token}"
        future: asyncio.Future[tuple[int, dict[str, str], bytes]] = asyncio.get_running_loop().create_future()
        self.waiting[reply_to] = future
        headers = {
            "Sie-Reply-To": reply_to,
            "Sie-Path": path,
            "Sie-Content-Type": content_type,
            "Sie-Accept": MSGPACK,
            "Sie-Priority": priority,
        }
        try:
            await self.js.publish(subject(pool, priority), body, headers=headers)
            return await asyncio.wait_for(future, self.settings.timeout_s)
        except TimeoutError:
            return (
                504,
                {"x-sie-error-code": "INFERENCE_ERROR", "content-type": "application/json"},
                json.dumps(
                    {"detail": {"code": "INFERENCE_ERROR", "message": "no worker answered in time; retry later"}}
                ).encode(),
            )
        finally:
            self.waiting.pop(reply_to, None)


def _decode(content_type: str, body: bytes) -> Any:
    if MSGPACK in content_type:
        return msgpack.unpackb(body, raw=False, strict_map_key=False)
    return json.loads(body)


def create_gateway_app(settings: GatewaySettings) -> FastAPI:
    gateway = Gateway(settings)
    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> Any:
        await gateway.start()
        yield
        await gateway.stop()

    app = FastAPI(title="SIE gateway", lifespan=lifespan)
    app.state.gateway = gateway

    @app.middleware("http")
    async def authenticate(request: Request, call_next: Any) -> Response:
        if settings.auth_tokens and request.url.path.startswith("/v1/"):
            header = request.headers.get("authorization", "")
            if not header.lower().startswith("bearer "):
                return error_response("UNAUTHENTICATED", "send Authorization: Bearer <token>", 401)
            token = header[7:].strip().encode()
            if not any(hmac.compare_digest(token, t.encode()) for t in settings.auth_tokens):
                return error_response("FORBIDDEN", "this token is not allowed", 403)
        response: Response = await call_next(request)
        return response

    @app.get("/healthz")
    async def healthz() -> Response:
        return PlainTextResponse("ok")

    @app.get("/readyz")
    async def readyz() -> Response:
        ok = gateway.nc is not None and gateway.nc.is_connected
        return Response(
            json.dumps({"status": "ready" if ok else "starting"}), 200 if ok else 503, media_type="application/json"
        )

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(generate_latest(gateway.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/v1/models")
    async def list_models() -> Response:
        return Response(
            json.dumps({"models": [_info(c) for c in settings.catalog.list()]}), media_type="application/json"
        )

    @app.get("/v1/models/{model:path}")
    async def get_model(model: str) -> Response:
        config = settings.catalog.get(model)
        if config is None:
            return error_response("MODEL_NOT_FOUND", f"model {model} is not in this gateway's catalog", 404)
        return Response(json.dumps(_info(config)), media_type="application/json")

    def _info(config: Any) -> dict[str, Any]:
        pool = settings.pool_for(config.id)
        resident = any(config.id in models for models in gateway.resident.values())
        return {
            "id": config.id,
            "name": config.id,
            "adapter": config.adapter,
            "tasks": config.tasks.names(),
            "outputs": config.tasks.encode.output_types() if config.tasks.encode else [],
            "dims": {k: getattr(config.tasks.encode, k).dim for k in config.tasks.encode.output_types()}
            if config.tasks.encode
            else {},
            "pool": pool,
            "state": "loaded" if resident else "available",
            "loaded": resident,
            "workers": gateway.live_workers(pool),
        }

    @app.post("/v1/{task}/{model:path}")
    async def work(task: str, model: str, request: Request) -> Response:
        return await _forward(request, task, model, f"/v1/{task}/{model}")

    @app.post("/v1/{compat}")
    async def compat(compat: str, request: Request) -> Response:
        return await _forward(request, compat, None, f"/v1/{compat}")

    async def _forward(request: Request, task: str, model: str | None, path: str) -> Response:
        started = time.perf_counter()
        status = "error"
        try:
            response = await _dispatch(request, task, model, path)
            status = response.headers.get("x-sie-error-code", "ok")
            return response
        except SIEError as exc:
            status = exc.code.value
            return error_response(exc.code.value, exc.message, exc.status, exc.retry_after)
        finally:
            gateway.metrics.requests.labels(task, status).inc()
            gateway.metrics.duration.labels(task).observe(time.perf_counter() - started)

    async def _dispatch(request: Request, task: str, model: str | None, path: str) -> Response:
        raw = await read_body(request, settings.max_body_bytes)
        content_type = request.headers.get("content-type", "application/json")
        body_bytes = msgpack.packb(raw, use_bin_type=True)
        model_id = model or (raw.get("model") if isinstance(raw, dict) else None)
        if not isinstance(model_id, str):
            raise InvalidInput("the body names no model")
        config = settings.catalog.get(model_id)
        if config is None:
            hint = settings.catalog.suggest(model_id)
            return error_response(
                "MODEL_NOT_FOUND",
                f"model {model_id} is not in the catalog" + (f"; did you mean {hint}?" if hint else ""),
                404,
            )
        priority = request.headers.get("x-sie-priority", "interactive").lower()
        if priority not in PRIORITIES:
            raise InvalidInput(f"X-SIE-Priority must be one of {', '.join(PRIORITIES)}")
        pool = settings.pool_for(config.id)
        if gateway.live_workers(pool) == 0:
            if request.headers.get("x-sie-wait-for-worker", "true").lower() in ("0", "false", "no"):
                return Response(
                    json.dumps({"status": "no worker yet", "pool": pool}),
                    202,
                    headers={"Retry-After": "5"},
                    media_type="application/json",
                )
            deadline = time.monotonic() + settings.hold_s
            while gateway.live_workers(pool) == 0 and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
        del content_type
        items = raw.get("items") if isinstance(raw, dict) else None
        if task in SPLIT_TASKS and isinstance(items, list) and len(items) > settings.split_items:
            return await _split(request, raw, items, pool, priority, path)
        status, headers, body = await gateway.call(pool, priority, path, body_bytes, MSGPACK)
        return _relay(request, status, headers, body)

    async def _split(
        request: Request, raw: dict[str, Any], items: list[Any], pool: str, priority: str, path: str
    ) -> Response:
        size = settings.split_items
        slices = [items[i : i + size] for i in range(0, len(items), size)]
        for offset, chunk in zip(range(0, len(items), size), slices, strict=True):
            for k, item in enumerate(chunk):
                if isinstance(item, dict) and "id" not in item:
                    item["id"] = f"item-{offset + k}"
        calls = [
            gateway.call(pool, priority, path, msgpack.packb({**raw, "items": chunk}, use_bin_type=True), MSGPACK)
            for chunk in slices
        ]
        replies = await asyncio.gather(*calls)
        for status, headers, body in replies:
            if status >= 400:
                return _relay(request, status, headers, body)
        parts = [_decode(h.get("content-type", MSGPACK), b) for _, h, b in replies]
        merged = {**parts[0], "items": [item for part in parts for item in part["items"]]}
        if "truncated_items" in parts[0]:
            merged["truncated_items"] = [i for part in parts for i in part.get("truncated_items", [])]
        if "usage" in parts[0]:
            merged["usage"] = {"prompt_tokens": sum(p.get("usage", {}).get("prompt_tokens", 0) for p in parts)}
        if "timing" in parts[0]:
            merged["timing"] = {k: max(p["timing"][k] for p in parts) for k in parts[0]["timing"]}
        return _render(request, merged, 200, {})

    def _relay(request: Request, status: int, headers: dict[str, str], body: bytes) -> Response:
        content_type = headers.get("content-type", "application/json")
        extra = {k: v for k, v in headers.items() if k in ("x-sie-error-code", "retry-after")}
        if MSGPACK in content_type and not wants_msgpack(request):
            return _render(request, _decode(content_type, body), status, extra)
        return Response(body, status, headers=extra, media_type=content_type)

    def _render(request: Request, payload: Any, status: int, headers: dict[str, str]) -> Response:
        from sie_server.api.codec import render

        return render(request, _unnumpy(payload), status, headers)

    return app


def _unnumpy(value: Any) -> Any:
    """msgpack-numpy maps (from workers) back into arrays, so JSON callers get lists."""
    import numpy as np

    if isinstance(value, dict):
        if b"nd" in value:
            return np.frombuffer(value[b"data"], dtype=np.dtype(value[b"type"])).reshape(value[b"shape"])
        return {k: _unnumpy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unnumpy(v) for v in value]
    return value


__all__ = ["Gateway", "GatewaySettings", "create_gateway_app"]
