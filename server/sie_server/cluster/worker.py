"""A queue worker: an ordinary server that also pulls work for its pool from JetStream.

Each message is one HTTP request (a whole request, or a slice of an encode/extract
request's items). The worker runs it through its own app in-process — same validation,
same engine, same answers — so items from every message it holds are batched together by
its scheduler. It acks after the reply is published, asks for redelivery later while a
model loads, and after ``max_deliver`` attempts answers the caller with an error and
parks the message in the dead-letter stream instead of retrying for ever.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
from typing import Any

import httpx

from sie_server.cluster.streams import (
    CONSUMER,
    DEAD_LETTER_STREAM,
    DEAD_LETTER_SUBJECT,
    HEARTBEAT_SUBJECT,
    ensure_streams,
    reply_payload,
    stream_name,
    subject,
)
from sie_server.engine.policy import PRIORITIES

log = logging.getLogger(__name__)
FORWARDED = ("x-sie-error-code", "retry-after", "content-type")


class QueueWorker:
    def __init__(
        self,
        app: Any,
        *,
        nats_url: str,
        pool: str,
        max_inflight: int = 256,
        ack_wait_s: float = 30.0,
        max_deliver: int = 5,
    ) -> None:
        self.app = app
        self.nats_url = nats_url
        self.pool = pool
        self.max_inflight = max_inflight
        self.ack_wait_s = ack_wait_s
        self.max_deliver = max_deliver
        self.id = f"{socket.gethostname()}-{os.getpid()}"
        self._inflight: set[asyncio.Task[None]] = set()
        self._stopping = asyncio.Event()

    async def run(self) -> None:
        import nats

        nc = await nats.connect(self.nats_url, name=f"sie-worker-{self.id}", max_reconnect_attempts=-1)
        js = nc.jetstream()
        await ensure_streams(js, self.pool, ack_wait_s=self.ack_wait_s)
        with contextlib.suppress(Exception):
            await js.add_stream(name=DEAD_LETTER_STREAM, subjects=["sie.dead.>"])
        subs = {p: await js.pull_subscribe(subject(self.pool, p), CONSUMER, stream=stream_name(self.pool, p))
                for p in PRIORITIES}  # fmt: skip
        transport = httpx.ASGITransport(app=self.app)
        heartbeat = asyncio.get_running_loop().create_task(self._heartbeat(nc))
        log.info("worker %s pulling pool %s from %s", self.id, self.pool, self.nats_url)
        async with httpx.AsyncClient(transport=transport, base_url="http://worker", timeout=None) as client:
            try:
                while not self._stopping.is_set() and not self.app.state.sie.draining:
                    room = self.max_inflight - len(self._inflight)
                    if room <= 0:
                        await asyncio.wait(self._inflight, return_when=asyncio.FIRST_COMPLETED)
                        continue
                    got = await self._fetch(subs, room)
                    for msg in got:
                        task = asyncio.get_running_loop().create_task(self._handle(nc, js, client, msg))
                        self._inflight.add(task)
                        task.add_done_callback(self._inflight.discard)
            except Exception:
                log.exception("worker %s stopped pulling", self.id)
                raise
            finally:
                heartbeat.cancel()
                if self._inflight:
                    await asyncio.gather(*self._inflight, return_exceptions=True)
                await nc.drain()

    def stop(self) -> None:
        self._stopping.set()

    async def _fetch(self, subs: dict[str, Any], room: int) -> list[Any]:
        """Interactive work first; batch work only when no interactive work is waiting."""
        from nats.errors import TimeoutError as NatsTimeout

        for priority in PRIORITIES:
            try:
                return list(await subs[priority].fetch(batch=room, timeout=0.05 if priority == PRIORITIES[0] else 0.5))
            except NatsTimeout:
                continue
        return []

    async def _handle(self, nc: Any, js: Any, client: httpx.AsyncClient, msg: Any) -> None:
        headers = msg.headers or {}
        reply_to = headers.get("Sie-Reply-To", "")
        delivered = msg.metadata.num_delivered
        if delivered > self.max_deliver:
            body = json.dumps(
                {
                    "detail": {
                        "code": "INFERENCE_ERROR",
                        "message": (
                            f"this work was attempted {delivered - 1} times without an answer "
                            "(workers died or timed out); "
                            "it was moved to the dead-letter stream"
                        ),
                    }
                }
            ).encode()
            await js.publish(DEAD_LETTER_SUBJECT.format(pool=self.pool), msg.data, headers=headers)
            await nc.publish(
                reply_to,
                reply_payload(500, {"x-sie-error-code": "INFERENCE_ERROR", "content-type": "application/json"}, body),
            )
            await msg.term()
            return
        keepalive = asyncio.get_running_loop().create_task(self._keep_alive(msg))
        try:
            response = await client.post(
                headers.get("Sie-Path", "/"),
                content=msg.data,
                headers={
                    "content-type": headers.get("Sie-Content-Type", "application/json"),
                    "accept": headers.get("Sie-Accept", "application/json"),
                    "x-sie-priority": headers.get("Sie-Priority", "interactive"),
                    "x-sie-wait-for-model": "false",
                    "x-sie-queue-token": self.app.state.sie.queue_token,
                },
            )
        finally:
            keepalive.cancel()
        if response.headers.get("x-sie-error-code") == "MODEL_LOADING":
            await msg.nak(delay=float(response.headers.get("retry-after", "2")))
            return
        kept = {k: v for k, v in response.headers.items() if k in FORWARDED}
        await nc.publish(reply_to, reply_payload(response.status_code, kept, response.content))
        await msg.ack()

    async def _keep_alive(self, msg: Any) -> None:
        while True:
            await asyncio.sleep(self.ack_wait_s / 3)
            await msg.in_progress()

    async def _heartbeat(self, nc: Any) -> None:
        state = self.app.state.sie
        while True:
            loaded = [s.config.id for s in state.pool.slots() if s.state.value == "loaded"]
            beat = {"worker": self.id, "pool": self.pool, "models": loaded, "inflight": len(self._inflight)}
            with contextlib.suppress(Exception):
                await nc.publish(HEARTBEAT_SUBJECT.format(pool=self.pool), json.dumps(beat).encode())
            await asyncio.sleep(2.0)
