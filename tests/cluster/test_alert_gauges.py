"""The gateway figures the alert rules read (deploy/prometheus/sie-alerts.yaml): the wait for a work
message's first answer by pool and priority, the messages parked in a pool's dead-letter stream, and
the live workers reporting a model as failed; against a real nats-server, with a gateway in this process."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import nats

from sie_server.cluster import streams
from sie_server.cluster.gateway import Call, Gateway, GatewaySettings
from sie_server.cluster.streams import Reply
from tests.helpers.cluster import Nats
from tests.helpers.metrics import sample

POOL = "cpu"


def test_first_answer_wait_is_recorded_once_by_pool_and_priority() -> None:
    async def scenario() -> Gateway:
        gateway = Gateway(GatewaySettings())
        call = Call(reply_to="_INBOX.test.1", pool=POOL, priority="interactive", sent_at=time.monotonic() - 0.3)
        gateway.calls[call.reply_to] = call
        for part, more in ((1, True), (2, False)):
            reply = Reply(200, {}, b"x", more=more, worker="w1", attempt="a", part=part)
            await gateway._on_reply(SimpleNamespace(subject=call.reply_to, data=reply.pack()))
            await gateway.receive(call)
        return gateway

    registry = asyncio.run(scenario()).metrics.registry
    assert sample(registry, "sie_gateway_work_seconds_count", pool=POOL, priority="interactive") == 1
    assert sample(registry, "sie_gateway_work_seconds_bucket", le="0.25", pool=POOL, priority="interactive") == 0
    assert sample(registry, "sie_gateway_work_seconds_bucket", le="0.5", pool=POOL, priority="interactive") == 1


def _gauge(gateway: Gateway, name: str, **labels: str) -> float:
    return sample(gateway.metrics.registry, name, absent_as_zero=True, **labels)


async def _until(check: Callable[[], bool], gateway: Gateway, timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            shown = [s for f in gateway.metrics.registry.collect() for s in f.samples if "pool" in s.labels]
            raise AssertionError(f"the gateway's gauges did not reach the expected values: {shown}")
        await asyncio.sleep(0.05)


def test_dead_letters_and_failed_models_are_exported(tmp_path: Path) -> None:
    server = Nats(tmp_path / "jetstream")

    async def scenario() -> None:
        gateway = Gateway(GatewaySettings(nats_url=server.url, default_pool=POOL))
        await gateway.start()
        nc = await nats.connect(server.url)
        try:
            js = nc.jetstream()
            await js.add_stream(name=streams.DEAD_LETTER_STREAM, subjects=["sie.dead.>"])
            for _ in range(2):
                await js.publish(streams.DEAD_LETTER_SUBJECT.format(pool=POOL), b"work")
            await js.publish(streams.DEAD_LETTER_SUBJECT.format(pool="other"), b"work")  # another pool's

            state = {"m/broken": "failed"}

            async def beat() -> None:  # as a worker does, every second
                while True:
                    models = {"m/broken": {"state": state["m/broken"]}, "m/fine": {"state": "loaded"},
                              "m/idle": {"state": "available"}}  # fmt: skip
                    beat = {"worker": "w1", "pool": POOL, "models": models, "inflight": 0}
                    await nc.publish(streams.HEARTBEAT_SUBJECT.format(pool=POOL), json.dumps(beat).encode())
                    await asyncio.sleep(1.0)

            def failed() -> float:
                return _gauge(gateway, "sie_gateway_model_workers", pool=POOL, model="m/broken", state="failed")

            beating = asyncio.create_task(beat())
            await _until(lambda: _gauge(gateway, "sie_gateway_dead_letters", pool=POOL) == 2 and failed() == 1, gateway)
            assert _gauge(gateway, "sie_gateway_model_workers", pool=POOL, model="m/fine", state="loaded") == 1
            idle = [
                s for f in gateway.metrics.registry.collect() for s in f.samples if s.labels.get("model") == "m/idle"
            ]
            assert idle == []  # a model merely in the catalog gets no series
            state["m/broken"] = "loaded"  # a reload succeeded: the failed series goes back to 0
            await _until(lambda: failed() == 0, gateway)
            assert _gauge(gateway, "sie_gateway_model_workers", pool=POOL, model="m/broken", state="loaded") == 1
            beating.cancel()
        finally:
            await nc.close()
            await gateway.stop()

    try:
        asyncio.run(scenario())
    finally:
        server.stop()
