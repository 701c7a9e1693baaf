"""The gateway's NATS side: publishing work messages, collecting replies, tracking workers.

The HTTP side (the single server's API) is in ``cluster/gateway_routes.py``.

Each request becomes work messages on its model's pool stream for its priority class;
replies come back on the gateway's inbox. The gateway holds no model, and exports the
pending work per stream as a metric to scale on.
"""

from __future__ import annotations

import asyncio
import fnmatch
import json
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from sie_server.api.codec import MSGPACK
from sie_server.catalog.loader import Catalog
from sie_server.cluster.streams import CONSUMER, HEARTBEAT_SUBJECT, ensure_streams, parse_reply, stream_name, subject
from sie_server.engine.policy import PRIORITIES

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

    async def call(self, pool: str, priority: str, path: str, body: bytes) -> tuple[int, dict[str, str], bytes]:
        """Publish one work message (a msgpack request body) and wait for its reply."""
        token = uuid.uuid4().hex
        reply_to = f"{self.inbox}.{token}"
        future: asyncio.Future[tuple[int, dict[str, str], bytes]] = asyncio.get_running_loop().create_future()
        self.waiting[reply_to] = future
        headers = {
            "Sie-Reply-To": reply_to,
            "Sie-Path": path,
            "Sie-Content-Type": MSGPACK,
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
