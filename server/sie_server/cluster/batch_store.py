"""Where a cluster's batches live in JetStream, shared by the gateway and every worker.

- ``SIE_BATCH_FILES`` (object store): the files' bytes, input and output alike, by file id; a line too
  large for one message waits there too.
- ``SIE_BATCHES`` (key-value): ``file.<id>`` and ``batch.<id>`` records with their owner; a batch's
  record changes only by a revision-checked update, so two processes never both move it on.
- ``SIE_BATCH_LINES`` (work-queue stream): ``sie.batch.start.<batch>`` (a worker reads the input file
  and publishes its lines) and ``sie.batch.lines.<batch>`` (one message per line to run), pulled by the
  durable consumer ``batch-workers``; a message leaves the stream when a worker acks it.
- ``SIE_BATCH_RESULTS`` (key-value): ``r.<batch>.<index>``, a line's output or error line, written
  only if absent (``create``), so a line run twice (a redelivery) keeps its first result and the batch
  gets exactly one line for it; ``f.<batch>.<index>`` marks the failed ones, for the counts.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import msgpack
from pydantic import BaseModel

from sie_server.batches.lines import InputLine, LineResult
from sie_server.cluster import streams
from sie_server.cluster.batch_objects import ObjectWriter, chunk_bytes, read_lines, read_object
from sie_server.contract.batch_wire import Batch, FileObject

FILES_BUCKET = "SIE_BATCH_FILES"
RECORDS_BUCKET = "SIE_BATCHES"
RESULTS_BUCKET = "SIE_BATCH_RESULTS"
ID = re.compile(r"[A-Za-z0-9_-]{1,64}")  # the file and batch ids this store makes (file-…, batch_…)
LINES_STREAM = "SIE_BATCH_LINES"
LINES_CONSUMER = "batch-workers"
KEEP_S = 30 * 24 * 3600.0  # files and records: OpenAI keeps batch files until deleted; a month here
RESULTS_KEEP_S = 3 * 24 * 3600.0  # a line's result waits for its batch's end (the window is 24 h)
LINES_KEEP_S = 2 * 24 * 3600.0
# line message headers
BATCH = "Sie-Batch"
LINE = "Sie-Batch-Line"
LINE_REF = "Sie-Line-Ref"  # the line is this object in FILES_BUCKET (too large for a message)


def start_subject(batch_id: str) -> str:
    return f"sie.batch.start.{batch_id}"


def lines_subject(batch_id: str) -> str:
    return f"sie.batch.lines.{batch_id}"


class FileRecord(BaseModel):
    file: FileObject
    owner: str
    lines: int = 0  # non-blank lines (an input file's, counted on upload)
    order: int = 0  # when it was made, in nanoseconds (lists are newest first)
    batch_id: str | None = None  # an output or error file's batch


class BatchRecord(BaseModel):
    batch: Batch
    owner: str
    order: int = 0  # when it was made, in nanoseconds (lists are newest first)
    started: bool = False  # the start message is in the stream
    finalizer_since: float | None = None  # someone writing the output files since (wall clock)


async def _bucket(js: Any, bucket: str, ttl: float) -> Any:
    from nats.js.api import KeyValueConfig, StorageType
    from nats.js.errors import BadRequestError

    try:
        return await js.create_key_value(KeyValueConfig(bucket=bucket, ttl=ttl, storage=StorageType.FILE))
    except BadRequestError:  # made before, perhaps with other settings: use it as it is
        return await js.key_value(bucket)


async def _objects(js: Any) -> Any:
    from nats.js.api import ObjectStoreConfig, StorageType
    from nats.js.errors import BadRequestError

    try:
        return await js.create_object_store(
            FILES_BUCKET, config=ObjectStoreConfig(ttl=KEEP_S, storage=StorageType.FILE)
        )
    except BadRequestError:
        return await js.object_store(FILES_BUCKET)


async def _lines_stream(js: Any, ack_wait_s: float) -> None:
    from nats.js.api import AckPolicy, ConsumerConfig, RetentionPolicy, StorageType, StreamConfig
    from nats.js.errors import BadRequestError

    config = StreamConfig(name=LINES_STREAM, subjects=["sie.batch.start.*", "sie.batch.lines.*"],
                          retention=RetentionPolicy.WORK_QUEUE, max_age=LINES_KEEP_S, duplicate_window=120.0,
                          storage=StorageType.FILE)  # fmt: skip
    try:
        await js.add_stream(config)
    except BadRequestError:
        await js.update_stream(config)
    consumer = ConsumerConfig(durable_name=LINES_CONSUMER, ack_policy=AckPolicy.EXPLICIT, ack_wait=ack_wait_s,
                              max_deliver=-1, max_ack_pending=8192)  # fmt: skip
    with contextlib.suppress(BadRequestError):
        await js.add_consumer(LINES_STREAM, consumer)


class BatchStore:
    """The buckets and the lines stream, opened (and made when missing) by ``open``."""

    def __init__(self, nc: Any, js: Any, records: Any, results: Any, objects: Any, ack_wait_s: float) -> None:
        self.nc, self.js, self.records, self.results, self.objects = nc, js, records, results, objects
        self.ack_wait_s = ack_wait_s

    @classmethod
    async def open(cls, nc: Any, *, ack_wait_s: float) -> BatchStore:
        js = nc.jetstream()
        await _lines_stream(js, ack_wait_s)
        records = await _bucket(js, RECORDS_BUCKET, KEEP_S)
        results = await _bucket(js, RESULTS_BUCKET, RESULTS_KEEP_S)
        return cls(nc, js, records, results, await _objects(js), ack_wait_s)

    async def restore(self) -> None:
        """Make what is missing again (a NATS that restarted without its store lost it all)."""
        await _lines_stream(self.js, self.ack_wait_s)
        self.records = await _bucket(self.js, RECORDS_BUCKET, KEEP_S)
        self.results = await _bucket(self.js, RESULTS_BUCKET, RESULTS_KEEP_S)
        self.objects = await _objects(self.js)

    # files

    async def file(self, file_id: str) -> FileRecord | None:
        if not ID.fullmatch(file_id):  # not one this store made, and no valid key: asked as is, NATS refuses it
            return None
        value = await self._get(self.records, f"file.{file_id}")
        return None if value is None else FileRecord.model_validate_json(value)

    async def put_file(self, record: FileRecord) -> None:
        await self.records.put(f"file.{record.file.id}", record.model_dump_json().encode())

    async def delete_file(self, file_id: str) -> None:
        from nats.js.errors import NotFoundError

        with contextlib.suppress(NotFoundError):
            await self.objects.delete(file_id)
        await self.records.purge(f"file.{file_id}")

    async def files(self) -> list[FileRecord]:
        return [FileRecord.model_validate_json(v) for v in await self._all(self.records, "file.")]

    def writer(self, name: str) -> ObjectWriter:
        return ObjectWriter(self.js, FILES_BUCKET, name, chunk=chunk_bytes(self.nc))

    def content(self, file_id: str) -> AsyncIterator[bytes]:
        return read_object(self.js, FILES_BUCKET, file_id)

    def lines(self, file_id: str) -> AsyncIterator[bytes]:
        return read_lines(self.js, FILES_BUCKET, file_id)

    # batches

    async def batch(self, batch_id: str) -> BatchRecord | None:
        if not ID.fullmatch(batch_id):
            return None
        value = await self._get(self.records, f"batch.{batch_id}")
        return None if value is None else BatchRecord.model_validate_json(value)

    async def new_batch(self, record: BatchRecord) -> None:
        await self.records.create(f"batch.{record.batch.id}", record.model_dump_json().encode())

    async def update_batch(
        self, batch_id: str, change: Callable[[BatchRecord], BatchRecord | None]
    ) -> tuple[BatchRecord | None, bool]:
        """Apply ``change`` to the record, again on a fresh read whenever another process wrote it
        first; ``change`` returns None to leave it. The record as it stands, and whether this call
        changed it."""
        from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError

        key = f"batch.{batch_id}"
        while True:
            try:
                entry = await self.records.get(key)
            except KeyNotFoundError:
                return None, False
            record = BatchRecord.model_validate_json(entry.value)
            changed = change(record.model_copy(deep=True))
            if changed is None:
                return record, False
            try:
                await self.records.update(key, changed.model_dump_json().encode(), last=entry.revision)
            except KeyWrongLastSequenceError:
                continue
            return changed, True

    async def batches(self) -> list[BatchRecord]:
        return [BatchRecord.model_validate_json(v) for v in await self._all(self.records, "batch.")]

    # lines

    async def publish_start(self, batch_id: str) -> None:
        headers = {BATCH: batch_id, streams.MSG_ID: f"{batch_id}-start"}
        await self.js.publish(start_subject(batch_id), b"", headers=headers)

    async def publish_line(self, batch_id: str, line: InputLine) -> asyncio.Future[Any]:
        """Queue one line to run (its publish ack: the returned future); a re-published line within the
        stream's duplicate window is stored once, and one outside it finds its result already kept."""
        body: bytes = msgpack.packb({"custom_id": line.custom_id, "url": line.url, "body": line.body})
        headers = {BATCH: batch_id, LINE: str(line.index), streams.MSG_ID: f"{batch_id}-{line.index}"}
        if not streams.fits(self.nc, len(body)):
            ref = f"line-{batch_id}-{line.index}"
            writer = self.writer(ref)
            await writer.write(body)
            await writer.close()
            headers[LINE_REF], body = ref, b""
        future: asyncio.Future[Any] = await self.js.publish_async(lines_subject(batch_id), body, headers=headers)
        return future

    async def line(self, msg: Any) -> InputLine:
        """The line a message carries."""
        headers = msg.headers or {}
        data = msg.data
        if LINE_REF in headers:
            data = b"".join([chunk async for chunk in read_object(self.js, FILES_BUCKET, headers[LINE_REF])])
        fields = msgpack.unpackb(data, raw=False)
        return InputLine(int(headers[LINE]), fields["custom_id"], fields["url"], bytes(fields["body"]))

    async def unsent(self, batch_id: str) -> int:
        """Messages of the batch still in the stream: its start message while its lines are being
        queued, and every line not yet acked."""
        info = await self.js.stream_info(LINES_STREAM, subjects_filter=f"sie.batch.*.{batch_id}")
        return sum((info.state.subjects or {}).values())

    async def purge_lines(self, batch_id: str) -> None:
        """Drop the batch's messages left in the stream (taken ones too: their acks then do nothing)."""
        await self.js.purge_stream(LINES_STREAM, subject=f"sie.batch.*.{batch_id}")

    # results

    async def result(self, batch_id: str, index: int) -> LineResult | None:
        value = await self._get(self.results, f"r.{batch_id}.{index}")
        if value is None:
            return None
        kind, place, data = value[:1], value[1:2], value[2:]
        if place == b"@":
            data = b"".join([chunk async for chunk in read_object(self.js, FILES_BUCKET, data.decode())])
        return LineResult(index, kind == b"o", data)

    async def record(self, batch_id: str, result: LineResult) -> LineResult:
        """Keep ``result`` unless the line has one already; the one kept. The failure mark follows (and is
        written again by whoever finds the result already kept, should the first writer have died)."""
        from nats.js.errors import KeyWrongLastSequenceError

        kind = b"o" if result.ok else b"e"
        value, ref = kind + b"=" + result.record, ""
        if not streams.fits(self.nc, len(value)):
            ref = f"result-{batch_id}-{result.index}-{uuid.uuid4().hex[:8]}"
            writer = self.writer(ref)
            await writer.write(result.record)
            await writer.close()
            value = kind + b"@" + ref.encode()
        kept = result
        try:
            await self.results.create(f"r.{batch_id}.{result.index}", value)
        except KeyWrongLastSequenceError:  # recorded by an earlier delivery: that one stands
            if ref:
                await self.objects.delete(ref)
            found = await self.result(batch_id, result.index)
            assert found is not None  # kept results are only removed once the batch has ended
            kept = found
        if not kept.ok:
            await self.results.put(f"f.{batch_id}.{result.index}", b"")
        return kept

    async def counts(self, batch_id: str) -> tuple[int, int]:
        """Lines recorded, and of those failed."""
        return await self._count(f"r.{batch_id}.*"), await self._count(f"f.{batch_id}.*")

    async def forget_results(self, batch_id: str) -> None:
        """Drop a finished batch's results (they are in its files now) and its large lines."""
        for prefix in ("r", "f"):
            with contextlib.suppress(Exception):
                await self.js.purge_stream(
                    f"KV_{RESULTS_BUCKET}", subject=f"$KV.{RESULTS_BUCKET}.{prefix}.{batch_id}.*"
                )

    async def _count(self, key_filter: str) -> int:
        """Keys under ``key_filter`` in the results bucket, counted by the server (an ephemeral consumer's
        pending count over the last message of each key), without reading them."""
        from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

        stream = f"KV_{RESULTS_BUCKET}"
        config = ConsumerConfig(
            name=f"count-{uuid.uuid4().hex[:12]}",
            filter_subject=f"$KV.{RESULTS_BUCKET}.{key_filter}",
            deliver_policy=DeliverPolicy.LAST_PER_SUBJECT,
            ack_policy=AckPolicy.NONE,
            inactive_threshold=10.0,
            mem_storage=True,
        )
        info = await self.js.add_consumer(stream, config)
        with contextlib.suppress(Exception):
            await self.js.delete_consumer(stream, info.name)
        return int(info.num_pending)

    # key-value helpers

    @staticmethod
    async def _get(kv: Any, key: str) -> bytes | None:
        from nats.js.errors import KeyNotFoundError

        try:
            entry = await kv.get(key)
        except KeyNotFoundError:
            return None
        value: bytes | None = entry.value
        return value

    @staticmethod
    async def _all(kv: Any, prefix: str) -> list[bytes]:
        """The values of every key under ``prefix``, read by one watcher (the server filters the keys)."""
        watcher = await kv.watch(f"{prefix}>", ignore_deletes=True)
        values: list[bytes] = []
        try:
            async for entry in watcher:
                if entry is None:  # the keys there were at the start have all come
                    break
                values.append(entry.value)
                if entry.delta == 0:
                    break
        finally:
            await watcher.stop()
        return values


def now() -> int:
    return int(time.time())
