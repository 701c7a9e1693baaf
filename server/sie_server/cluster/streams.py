"""JetStream layout: one work-queue stream per pool and priority class, one durable pull consumer each."""

from __future__ import annotations

import contextlib
from typing import Any

from sie_server.engine.policy import PRIORITIES

CONSUMER = "workers"
HEARTBEAT_SUBJECT = "sie.workers.{pool}"
DEAD_LETTER_STREAM = "SIE_DEAD_LETTER"
DEAD_LETTER_SUBJECT = "sie.dead.{pool}"


def reply_payload(status: int, headers: dict[str, str], body: bytes) -> bytes:
    import msgpack

    packed: bytes = msgpack.packb({"status": status, "headers": headers, "body": body}, use_bin_type=True)
    return packed


def parse_reply(data: bytes) -> tuple[int, dict[str, str], bytes]:
    import msgpack

    reply = msgpack.unpackb(data, raw=False)
    return int(reply["status"]), dict(reply["headers"]), bytes(reply["body"])


def stream_name(pool: str, priority: str) -> str:
    return f"SIE_{pool}_{priority}".upper().replace("-", "_")


def subject(pool: str, priority: str) -> str:
    return f"sie.work.{pool}.{priority}"


async def ensure_streams(js: Any, pool: str, *, ack_wait_s: float) -> None:
    """Create (or keep) the pool's streams and consumers; safe to call from every process."""
    from nats.js.api import AckPolicy, ConsumerConfig, RetentionPolicy, StreamConfig
    from nats.js.errors import BadRequestError

    for priority in PRIORITIES:
        name = stream_name(pool, priority)
        config = StreamConfig(name=name, subjects=[subject(pool, priority)], retention=RetentionPolicy.WORK_QUEUE)
        try:
            await js.add_stream(config)
        except BadRequestError:
            await js.update_stream(config)
        consumer = ConsumerConfig(
            durable_name=CONSUMER,
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=ack_wait_s,
            max_deliver=-1,
            max_ack_pending=4096,
        )
        # deliveries are unlimited here: the worker answers the caller itself after too many
        with contextlib.suppress(BadRequestError):
            await js.add_consumer(name, consumer)
