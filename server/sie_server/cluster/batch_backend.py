"""The gateway's ``BatchBackend`` (batches/backend.py): the same files and batches routes as a server's,
over JetStream (cluster/batch_store.py) instead of SQLite. The gateway runs no line: creating a batch
records it and queues one start message; the pool's workers queue its lines, run them and finalize it
(cluster/batch_worker.py). Asked for a batch, the gateway finalizes it too if nothing of it is left in
the stream (a worker died between its last ack and the end), and queues its start message again if the
gateway that made it died before queueing it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar

from sie_server.batches.backend import Caps, Owner
from sie_server.batches.lines import NotJsonl, UploadCheck
from sie_server.cluster import nats_connection
from sie_server.cluster.batch_figures import BatchFigures
from sie_server.cluster.batch_finalize import STALE_S, finalize, progress
from sie_server.cluster.batch_store import BatchRecord, BatchStore, FileRecord, now
from sie_server.contract.batch_wire import (
    COMPLETION_WINDOWS,
    FILE_PURPOSE,
    LIVE_STATUSES,
    Batch,
    BatchList,
    BatchStatus,
    CreateBatchRequest,
    FileDeleted,
    FileList,
    FileObject,
    RequestCounts,
)
from sie_server.contract.status import BatchesStatus
from sie_server.errors import InvalidInput, NotFound, QueueFull

log = logging.getLogger(__name__)
T = TypeVar("T", FileObject, Batch)
P = ParamSpec("P")
R = TypeVar("R")
START_AGAIN_S = 30.0  # a batch whose start message was never queued this long after it was made


def _queue_errors(
    method: Callable[Concatenate[ClusterBatches, P], Coroutine[Any, Any, R]],
) -> Callable[Concatenate[ClusterBatches, P], Coroutine[Any, Any, R]]:
    """NATS not answering (away, or restarted without its store) is 503 QUEUE_FULL with Retry-After, not a
    500; the buckets and stream are made again in the background in case they were lost."""

    async def guarded(self: ClusterBatches, /, *args: P.args, **kwargs: P.kwargs) -> R:
        from nats.errors import Error as NatsError

        try:
            return await method(self, *args, **kwargs)
        except NatsError as exc:
            log.warning("batch store: %s", nats_connection.describe(exc))
            self.restore_later()
            raise QueueFull("the batch store (NATS JetStream) did not answer; retry shortly", retry_after=2) from None

    return guarded


class ClusterBatches:
    def __init__(self, caps: Caps, figures: BatchFigures) -> None:
        self.caps = caps
        self.figures = figures
        self._store: BatchStore | None = None
        self._restoring: asyncio.Task[None] | None = None
        self._reading: asyncio.Task[None] | None = None

    def start(self, store: BatchStore) -> None:
        self._store = store
        self._reading = asyncio.get_running_loop().create_task(self.figures.run(store))

    async def stop(self) -> None:
        if self._reading is not None:
            self._reading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reading

    def status(self) -> BatchesStatus:
        """Batches in progress, lines in flight, done and failed, lines/s (cluster/batch_figures.py)."""
        return self.figures.status()

    def restore_later(self) -> None:
        if self._store is not None and (self._restoring is None or self._restoring.done()):
            self._restoring = asyncio.get_running_loop().create_task(self._restore(self._store))

    @staticmethod
    async def _restore(store: BatchStore) -> None:
        try:
            await store.restore()
        except Exception as exc:
            log.warning("batch store: could not make its buckets again: %s", nats_connection.describe(exc))

    @property
    def store(self) -> BatchStore:
        if self._store is None:
            raise QueueFull("the gateway is not connected to the work queue yet; retry shortly", retry_after=2)
        return self._store

    # files

    @_queue_errors
    async def create_file(self, owner: Owner, filename: str, purpose: str, chunks: AsyncIterator[bytes]) -> FileObject:
        if purpose != FILE_PURPOSE:
            raise InvalidInput(f"purpose {purpose!r} is not served here; upload batch input with purpose=batch")
        file_id = f"file-{uuid.uuid4().hex[:24]}"
        writer = self.store.writer(file_id)
        check = UploadCheck(self.caps.max_file_bytes, self.caps.max_lines)
        try:
            async for chunk in chunks:
                check.feed(chunk)
                await writer.write(chunk)
            lines = check.finish()
            await writer.close()
        except NotJsonl as exc:
            await writer.abort()
            raise InvalidInput(str(exc)) from None
        except BaseException:
            await writer.abort()
            raise
        name = filename or "batch.jsonl"
        file = FileObject(id=file_id, bytes=check.size, created_at=now(), filename=name, purpose="batch")
        await self.store.put_file(FileRecord(file=file, owner=owner.id, lines=lines, order=time.time_ns()))
        return file

    async def _file(self, owner: Owner, file_id: str) -> FileRecord:
        found = await self.store.file(file_id)
        if found is None or not owner.may_see(found.owner):
            raise NotFound(f"no file {file_id!r}")
        return found

    @_queue_errors
    async def get_file(self, owner: Owner, file_id: str) -> FileObject:
        return (await self._file(owner, file_id)).file

    @_queue_errors
    async def file_content(self, owner: Owner, file_id: str) -> AsyncIterator[bytes]:
        await self._file(owner, file_id)
        return self.store.content(file_id)

    @_queue_errors
    async def delete_file(self, owner: Owner, file_id: str) -> FileDeleted:
        await self._file(owner, file_id)
        await self.store.delete_file(file_id)
        return FileDeleted(id=file_id)

    @_queue_errors
    async def list_files(self, owner: Owner, after: str | None, limit: int, purpose: str | None) -> FileList:
        records = [r for r in await self.store.files() if owner.may_see(r.owner)]
        records = [r for r in records if purpose is None or r.file.purpose == purpose]
        files = [r.file for r in sorted(records, key=lambda r: r.order, reverse=True)]
        data, more = _page(files, after, limit)
        return FileList(data=data, first_id=data[0].id if data else None, last_id=data[-1].id if data else None,
                        has_more=more)  # fmt: skip

    # batches

    @_queue_errors
    async def create_batch(self, owner: Owner, request: CreateBatchRequest) -> Batch:
        found = await self._file(owner, request.input_file_id)
        if found.file.purpose != FILE_PURPOSE or found.batch_id is not None:
            raise InvalidInput(f"file {request.input_file_id!r} is not a batch input file (purpose=batch)")
        if found.lines > self.caps.max_lines:
            raise InvalidInput(
                f"the file has {found.lines} lines; the limit is {self.caps.max_lines} (--batch-max-lines)"
            )
        created = now()
        batch = Batch(
            id=f"batch_{uuid.uuid4().hex[:24]}",
            endpoint=request.endpoint,
            input_file_id=request.input_file_id,
            completion_window=request.completion_window,
            status=BatchStatus.IN_PROGRESS,
            created_at=created,
            in_progress_at=created,
            expires_at=created + COMPLETION_WINDOWS[request.completion_window],
            request_counts=RequestCounts(total=found.lines),
            metadata=request.metadata,
        )
        await self.store.new_batch(BatchRecord(batch=batch, owner=owner.id, order=time.time_ns()))
        record = await self._queue_start(batch.id)
        return record.batch if record is not None else batch

    async def _queue_start(self, batch_id: str) -> BatchRecord | None:
        await self.store.publish_start(batch_id)

        def started(r: BatchRecord) -> BatchRecord | None:
            if r.started:
                return None
            r.started = True
            return r

        record, _ = await self.store.update_batch(batch_id, started)
        return record

    async def _batch(self, owner: Owner, batch_id: str) -> BatchRecord:
        found = await self.store.batch(batch_id)
        if found is None or not owner.may_see(found.owner):
            raise NotFound(f"no batch {batch_id!r}")
        return found

    @_queue_errors
    async def get_batch(self, owner: Owner, batch_id: str) -> Batch:
        record = await self._batch(owner, batch_id)
        return (await self._settled(record)).batch

    async def _settled(self, record: BatchRecord) -> BatchRecord:
        """The record, moved on where its workers could not: its start message queued again, or the batch
        finalized; and, while it runs, its counts as its kept results stand."""
        batch = record.batch
        if batch.status not in LIVE_STATUSES:
            return record
        if not record.started and time.time() - batch.created_at > START_AGAIN_S:
            record = await self._queue_start(batch.id) or record
        stale = record.finalizer_since is not None and time.time() - record.finalizer_since > STALE_S
        if record.finalizer_since is None or stale:
            record = await finalize(self.store, batch.id) or record
        if record.batch.status in (BatchStatus.IN_PROGRESS, BatchStatus.CANCELLING):
            record.batch.request_counts = await progress(self.store, record)
        return record

    @_queue_errors
    async def list_batches(self, owner: Owner, after: str | None, limit: int) -> BatchList:
        records = [r for r in await self.store.batches() if owner.may_see(r.owner)]
        ordered = [r.batch for r in sorted(records, key=lambda r: r.order, reverse=True)]
        data, more = _page(ordered, after, limit)
        return BatchList(data=data, first_id=data[0].id if data else None, last_id=data[-1].id if data else None,
                         has_more=more)  # fmt: skip

    @_queue_errors
    async def cancel_batch(self, owner: Owner, batch_id: str) -> Batch:
        batch = (await self._batch(owner, batch_id)).batch
        if batch.status in (BatchStatus.CANCELLING, BatchStatus.CANCELLED):
            return batch
        if batch.status not in LIVE_STATUSES or batch.status is BatchStatus.FINALIZING:
            raise InvalidInput(f"batch {batch_id} is {batch.status.value}; it cannot be cancelled", status=409)

        def cancelling(r: BatchRecord) -> BatchRecord | None:
            if r.batch.status not in (BatchStatus.IN_PROGRESS, BatchStatus.VALIDATING):
                return None
            r.batch.status, r.batch.cancelling_at = BatchStatus.CANCELLING, now()
            return r

        record, _ = await self.store.update_batch(batch_id, cancelling)
        if record is None:
            raise NotFound(f"no batch {batch_id!r}")
        if record.batch.status == BatchStatus.FINALIZING:
            raise InvalidInput(f"batch {batch_id} is finalizing; it cannot be cancelled", status=409)
        return (await self._settled(record)).batch


def _page(items: list[T], after: str | None, limit: int) -> tuple[list[T], bool]:
    """``limit`` items from after the one with id ``after`` (from the first if it is not there)."""
    start = 0
    if after is not None:
        start = next((i + 1 for i, item in enumerate(items) if item.id == after), 0)
    return items[start : start + limit], len(items) > start + limit
