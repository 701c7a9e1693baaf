"""The wire between gateway and workers: stream layout, reply messages, payloads by reference.

One work-queue stream per pool and priority class. Work any worker may take goes on
``sie.work.<pool>.<priority>.any`` (the shared durable pull consumer ``workers``); work for
one worker that holds its model goes on ``sie.work.<pool>.<priority>.w.<worker>`` (that
worker's own consumer). Replies travel on the gateway's inbox as msgpack maps. A body too
large for one NATS message is put in the ``SIE_PAYLOADS`` object store and the message
carries its name instead.
"""

from __future__ import annotations

import contextlib
import logging
import re
from dataclasses import dataclass, field
from typing import Any

import msgpack

from sie_server.contract.headers import PRIORITIES

log = logging.getLogger(__name__)
CONSUMER = "workers"
HEARTBEAT_SUBJECT = "sie.workers.{pool}"
CONTROL_SUBJECT = "sie.control.{pool}"  # requests to every worker of a pool (reload a model)
DEAD_LETTER_STREAM = "SIE_DEAD_LETTER"
DEAD_LETTER_SUBJECT = "sie.dead.{pool}"
PAYLOAD_BUCKET = "SIE_PAYLOADS"
PAYLOAD_TTL_S = 3600.0  # objects nobody deleted (a gateway died mid-call) expire
HEADER_ROOM = 8 * 1024  # kept free in a message for headers and the reply envelope
WORK_MAX_AGE_S = 3600.0  # work nobody took in an hour (its caller gave up long ago) is dropped
OWN_CONSUMER_IDLE_S = 300.0  # a dead worker's own consumer goes away after this long

# work message headers
REPLY_TO = "Sie-Reply-To"
PATH = "Sie-Path"
PRIORITY = "Sie-Priority"
BODY_REF = "Sie-Body-Ref"  # the request body is this object in PAYLOAD_BUCKET
WAIT_FOR_MODEL = "Sie-Wait-For-Model"  # "false": answer MODEL_LOADING instead of retrying later
DEADLINE = "Sie-Deadline"  # the caller's deadline, wall-clock seconds: work taken after it is not run
MSG_ID = "Nats-Msg-Id"  # JetStream drops a re-published duplicate with the same id


@dataclass
class Reply:
    """One reply message: a whole answer, or one part of a streamed one (``more`` until the last)."""

    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    more: bool = False
    worker: str = ""
    ref: str = ""  # the body is this object in PAYLOAD_BUCKET
    attempt: str = ""  # one delivery's handling: a redelivered message answers under another
    part: int = 0  # a streamed answer's parts count from 1 (0: not numbered), so a lost one shows

    def pack(self) -> bytes:
        fields = {"status": self.status, "headers": self.headers, "body": self.body, "more": self.more,
                  "worker": self.worker, "ref": self.ref, "attempt": self.attempt, "part": self.part}  # fmt: skip
        packed: bytes = msgpack.packb(fields, use_bin_type=True)
        return packed

    @classmethod
    def unpack(cls, data: bytes) -> Reply:
        m = msgpack.unpackb(data, raw=False)
        return cls(int(m["status"]), dict(m["headers"]), bytes(m["body"]), bool(m.get("more", False)),
                   str(m.get("worker", "")), str(m.get("ref", "")), str(m.get("attempt", "")),
                   int(m.get("part", 0)))  # fmt: skip

    @property
    def source(self) -> tuple[str, str]:
        """Who produced it: the worker and its attempt (parts of one streamed answer share it)."""
        return self.worker, self.attempt


def cancel_subject(reply_to: str) -> str:
    """Where a gateway says its caller left a streamed answer (outside the inbox's ``*`` wildcard)."""
    return f"{reply_to}.cancel"


def stream_name(pool: str, priority: str) -> str:
    return f"SIE_{pool}_{priority}".upper().replace("-", "_")


def subject(pool: str, priority: str, worker: str | None = None) -> str:
    """Where work goes: for any worker of the pool, or for one worker."""
    return f"sie.work.{pool}.{priority}." + (f"w.{worker}" if worker else "any")


def worker_id(name: str) -> str:
    """A name usable as one subject token and a consumer name."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)


def fits(nc: Any, size: int) -> bool:
    """Whether ``size`` bytes fit in one message on this connection (the server's max_payload)."""
    return size + HEADER_ROOM <= int(nc.max_payload)


async def payload_store(js: Any) -> Any:
    """The object store that holds bodies too large for a message (created on first use)."""
    from nats.js.api import ObjectStoreConfig
    from nats.js.errors import BadRequestError

    try:
        return await js.create_object_store(PAYLOAD_BUCKET, config=ObjectStoreConfig(ttl=PAYLOAD_TTL_S))
    except BadRequestError:
        return await js.object_store(PAYLOAD_BUCKET)


async def put_payload(nc: Any, store: Any, name: str, data: bytes) -> None:
    """Store a body in chunks that each fit in one message on this connection."""
    from nats.js.api import ObjectMeta, ObjectMetaOptions

    chunk = max(1024, min(128 * 1024, int(nc.max_payload) - HEADER_ROOM))
    await store.put(name, data, meta=ObjectMeta(name=name, options=ObjectMetaOptions(max_chunk_size=chunk)))


async def ensure_streams(js: Any, pool: str, *, ack_wait_s: float) -> None:
    """Create (or keep) the pool's streams and shared consumers; safe to call from every process,
    and again after a reconnect (a NATS that restarted without its store has lost them). The
    streams keep their work on file, so work JetStream acknowledged survives a NATS restart."""
    from nats.js.api import RetentionPolicy, StorageType, StreamConfig
    from nats.js.errors import BadRequestError

    for priority in PRIORITIES:
        name = stream_name(pool, priority)
        config = StreamConfig(name=name, subjects=[f"sie.work.{pool}.{priority}.>"],
                              retention=RetentionPolicy.WORK_QUEUE, max_age=WORK_MAX_AGE_S,
                              duplicate_window=120.0, storage=StorageType.FILE)  # fmt: skip
        try:
            await js.add_stream(config)
        except BadRequestError:
            storage = (await js.stream_info(name)).config.storage
            if storage != StorageType.FILE:  # the storage of a stream cannot change: keep it, and say so
                log.warning("stream %s keeps its work in memory: work queued there is lost if NATS restarts; "
                            "delete the stream to have it made again on file", name)  # fmt: skip
                config.storage = storage
            await js.update_stream(config)
        with contextlib.suppress(BadRequestError):
            await js.add_consumer(name, _consumer(CONSUMER, subject(pool, priority), ack_wait_s))


async def ensure_own_consumers(js: Any, pool: str, worker: str, *, ack_wait_s: float) -> str:
    """A worker's own consumer on each of the pool's streams (removed by the server once idle)."""
    from nats.js.errors import BadRequestError

    durable = f"w-{worker}"
    for priority in PRIORITIES:
        config = _consumer(durable, subject(pool, priority, worker), ack_wait_s)
        config.inactive_threshold = OWN_CONSUMER_IDLE_S
        with contextlib.suppress(BadRequestError):
            await js.add_consumer(stream_name(pool, priority), config)
    return durable


def _consumer(durable: str, filter_subject: str, ack_wait_s: float) -> Any:
    from nats.js.api import AckPolicy, ConsumerConfig

    # deliveries are unlimited here: the worker answers the caller itself after too many
    return ConsumerConfig(durable_name=durable, filter_subject=filter_subject, ack_policy=AckPolicy.EXPLICIT,
                          ack_wait=ack_wait_s, max_deliver=-1, max_ack_pending=4096)  # fmt: skip
