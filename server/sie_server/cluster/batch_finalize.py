"""A cluster batch's end: once none of its messages is left in the lines stream (every line acked after
its result was kept), whoever notices first (the worker that acked the last line, or a gateway asked for
the batch) takes the batch by a revision-checked update and writes its output and error files from the
kept results, in input order, a chunk at a time, then marks it completed (or cancelled). A batch past
its completion window ends ``expired`` at once, with the lines finished by then.

A finalizer that dies leaves the batch ``finalizing``; after ``STALE_S`` anyone may take it over and
write the files again under the same ids.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time

from sie_server.batches.lines import LineResult
from sie_server.cluster.batch_objects import ObjectWriter
from sie_server.cluster.batch_store import BatchRecord, BatchStore, FileRecord, now
from sie_server.contract.batch_wire import BatchStatus, FileObject, RequestCounts

log = logging.getLogger(__name__)
STALE_S = 60.0  # a finalizer silent this long is taken over
PREFETCH = 64  # results fetched ahead while the files are written


def output_ids(batch_id: str) -> tuple[str, str]:
    """The output and error file ids of a batch: the same whoever writes them, however often."""
    digest = hashlib.sha256(batch_id.encode()).hexdigest()
    return f"file-{digest[:24]}", f"file-{digest[24:48]}"


async def progress(store: BatchStore, record: BatchRecord) -> RequestCounts:
    """The batch's counts as its kept results stand."""
    recorded, failed = await store.counts(record.batch.id)
    return RequestCounts(total=record.batch.request_counts.total, completed=recorded - failed, failed=failed)


def expired(record: BatchRecord) -> bool:
    """Still running past its completion window."""
    batch = record.batch
    return batch.status == BatchStatus.IN_PROGRESS and batch.expires_at is not None and now() >= batch.expires_at


async def finalize(store: BatchStore, batch_id: str) -> BatchRecord | None:
    """End the batch if every line is done (or it is being cancelled and none is left, or it is past its
    window: its lines left are dropped from the stream); the record after."""
    record = await store.batch(batch_id)
    if record is None or record.batch.status not in (
        BatchStatus.IN_PROGRESS, BatchStatus.CANCELLING, BatchStatus.FINALIZING
    ):  # fmt: skip
        return record
    waits = record.batch.status != BatchStatus.FINALIZING and not expired(record)
    if waits and (not record.started or await store.unsent(batch_id) > 0):
        return record
    taken_at = time.time()
    late = False

    def take(r: BatchRecord) -> BatchRecord | None:
        nonlocal late
        if r.batch.status not in (BatchStatus.IN_PROGRESS, BatchStatus.CANCELLING, BatchStatus.FINALIZING):
            return None
        if r.finalizer_since is not None and taken_at - r.finalizer_since < STALE_S:
            return None
        late = expired(r)
        if r.batch.status == BatchStatus.IN_PROGRESS and not late:
            r.batch.status, r.batch.finalizing_at = BatchStatus.FINALIZING, now()
        r.finalizer_since = taken_at
        return r

    record, taken = await store.update_batch(batch_id, take)
    if record is None or not taken:
        return record
    cancelled = record.batch.status == BatchStatus.CANCELLING
    if late:
        await store.purge_lines(batch_id)
    counts, out_id, err_id = await _write_files(store, record, keep_missing=not (cancelled or late))

    def end(r: BatchRecord) -> BatchRecord | None:
        if r.finalizer_since != taken_at:  # taken over meanwhile: the other finalizer ends it
            return None
        r.batch.request_counts = counts
        r.batch.output_file_id, r.batch.error_file_id = out_id, err_id
        if cancelled:
            r.batch.status, r.batch.cancelled_at = BatchStatus.CANCELLED, now()
        elif late:
            r.batch.status, r.batch.expired_at = BatchStatus.EXPIRED, now()
        else:
            r.batch.status, r.batch.completed_at = BatchStatus.COMPLETED, now()
        r.finalizer_since = None
        return r

    record, ended = await store.update_batch(batch_id, end)
    if ended:
        await store.forget_results(batch_id)
        log.info("batch %s %s: %d of %d lines done, %d failed", batch_id, record.batch.status if record else "?",
                 counts.completed, counts.total, counts.failed)  # fmt: skip
    return record


async def _write_files(
    store: BatchStore, record: BatchRecord, *, keep_missing: bool
) -> tuple[RequestCounts, str | None, str | None]:
    """The output and error files from the kept results in input order; their ids (None: no such line).
    A line without a result in a batch that ran to its end gets an error line saying so (none is lost
    silently); in a cancelled batch it is simply not run."""
    batch = record.batch
    total = batch.request_counts.total
    out_id, err_id = output_ids(batch.id)
    out, err = store.writer(out_id), store.writer(err_id)
    completed = failed = 0
    try:
        for start in range(0, total, PREFETCH):
            window = range(start, min(total, start + PREFETCH))
            found = await asyncio.gather(*(store.result(batch.id, i) for i in window))
            for index, result in zip(window, found, strict=True):
                if result is None:
                    if not keep_missing:
                        continue
                    log.error("batch %s: line %d has no result at the batch's end", batch.id, index)
                    result = _lost(batch.id, index)
                target = out if result.ok else err
                await target.write(result.record + b"\n")
                completed, failed = (completed + 1, failed) if result.ok else (completed, failed + 1)
        files = []
        for writer, count in ((out, completed), (err, failed)):
            if count:
                size = await writer.close()
                files.append(_file_record(record, writer, size))
            else:
                await writer.abort()
    except BaseException:
        await out.abort()
        await err.abort()
        raise
    for file in files:
        await store.put_file(file)
    counts = RequestCounts(total=total, completed=completed, failed=failed)
    return counts, out_id if completed else None, err_id if failed else None


def _file_record(record: BatchRecord, writer: ObjectWriter, size: int) -> FileRecord:
    name = "batch_output.jsonl" if writer.name == output_ids(record.batch.id)[0] else "batch_error.jsonl"
    file = FileObject(id=writer.name, bytes=size, created_at=now(), filename=f"{record.batch.id}_{name}",
                      purpose="batch_output")  # fmt: skip
    return FileRecord(file=file, owner=record.owner, batch_id=record.batch.id)


def _lost(batch_id: str, index: int) -> LineResult:
    from sie_server.batches.lines import LineProblem, problem_result

    return problem_result(batch_id, LineProblem(index, None, "line_lost", "this line has no result"))
