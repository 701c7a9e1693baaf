"""The single server's ``BatchBackend``: files and batches in ``SqliteStore``, lines run by ``BatchRunner``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from sie_server.batches.backend import Caps, Owner
from sie_server.batches.lines import NotJsonl, UploadCheck
from sie_server.batches.runner import BatchRunner
from sie_server.batches.sqlite_store import SqliteStore, StoredFile, now
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
from sie_server.errors import InvalidInput, NotFound
from sie_server.observability.metrics import Metrics
from sie_server.settings import Settings

READ_CHUNK = 256 * 1024


class LocalBatches:
    def __init__(
        self,
        data_dir: Path,
        app: Callable[[], Any],
        *,
        caps: Caps,
        inflight: int,
        metrics: Metrics | None = None,
        token: Callable[[], str | None] = lambda: None,
    ):
        self.caps = caps
        self.store = SqliteStore(data_dir)
        self.runner = BatchRunner(
            self.store, app, inflight=inflight, max_line_bytes=caps.max_line_bytes, metrics=metrics, token=token
        )

    def start(self) -> None:
        self.runner.start()

    async def stop(self) -> None:
        await self.runner.stop()
        self.store.close()

    def status(self) -> BatchesStatus:
        r = self.runner
        return BatchesStatus(
            in_progress=len(r.tasks),
            lines_in_flight=r.running_lines,
            peak_lines_in_flight=r.peak_lines,
            inflight_limit=r.inflight_limit,
            lines_done=r.lines_done,
            lines_failed=r.lines_failed,
            lines_per_s=round(r.lines_per_second(), 3),
        )

    # files

    async def create_file(self, owner: Owner, filename: str, purpose: str, chunks: AsyncIterator[bytes]) -> FileObject:
        if purpose != FILE_PURPOSE:
            raise InvalidInput(f"purpose {purpose!r} is not served here; upload batch input with purpose=batch")
        file_id = self.store.new_file_id()
        final = self.store.upload_path(file_id)
        part = final.with_suffix(".part")
        check = UploadCheck(self.caps.max_file_bytes, self.caps.max_lines)
        try:
            with part.open("wb") as out:
                async for chunk in chunks:
                    await asyncio.to_thread(check.feed, chunk)
                    out.write(chunk)
            lines = check.finish()
            part.rename(final)
        except NotJsonl as exc:
            self.store.remove_upload_part(part)
            raise InvalidInput(str(exc)) from None
        except BaseException:
            self.store.remove_upload_part(part)
            raise
        name = filename or "batch.jsonl"
        file = FileObject(id=file_id, bytes=check.size, created_at=now(), filename=name, purpose="batch")
        self.store.add_file(file, owner.id, lines)
        return file

    def _file(self, owner: Owner, file_id: str) -> StoredFile:
        found = self.store.get_file(file_id)
        if found is None or not owner.may_see(found.owner):
            raise NotFound(f"no file {file_id!r}")
        return found

    async def get_file(self, owner: Owner, file_id: str) -> FileObject:
        return self._file(owner, file_id).file

    async def file_content(self, owner: Owner, file_id: str) -> AsyncIterator[bytes]:
        found = self._file(owner, file_id)
        if found.batch_id is not None:
            return _pages(self.store.content_pages(found.batch_id, found.kind == "output"))
        path = self.store.upload_path(file_id)
        return _read(path)

    async def delete_file(self, owner: Owner, file_id: str) -> FileDeleted:
        self._file(owner, file_id)
        self.store.delete_file(file_id)
        return FileDeleted(id=file_id)

    async def list_files(self, owner: Owner, after: str | None, limit: int, purpose: str | None) -> FileList:
        found = self.store.list_files(None if owner.admin else owner.id, after, limit + 1, purpose)
        data = [f.file for f in found[:limit]]
        return FileList(
            data=data,
            first_id=data[0].id if data else None,
            last_id=data[-1].id if data else None,
            has_more=len(found) > limit,
        )

    # batches

    async def create_batch(self, owner: Owner, request: CreateBatchRequest) -> Batch:
        found = self._file(owner, request.input_file_id)
        if found.file.purpose != FILE_PURPOSE or found.batch_id is not None:
            raise InvalidInput(f"file {request.input_file_id!r} is not a batch input file (purpose=batch)")
        lines = self.store.file_lines(request.input_file_id)
        if lines > self.caps.max_lines:
            raise InvalidInput(f"the file has {lines} lines; the limit is {self.caps.max_lines} (--batch-max-lines)")
        created = now()
        batch = Batch(
            id=self.store.new_batch_id(),
            endpoint=request.endpoint,
            input_file_id=request.input_file_id,
            completion_window=request.completion_window,
            status=BatchStatus.VALIDATING,
            created_at=created,
            expires_at=created + COMPLETION_WINDOWS[request.completion_window],
            request_counts=RequestCounts(total=lines),
            metadata=request.metadata,
        )
        self.store.add_batch(batch, owner.id)
        self.runner.submit(batch.id)
        return batch

    def _batch(self, owner: Owner, batch_id: str) -> Batch:
        found = self.store.get_batch(batch_id)
        if found is None or not owner.may_see(found[1]):
            raise NotFound(f"no batch {batch_id!r}")
        return found[0]

    async def get_batch(self, owner: Owner, batch_id: str) -> Batch:
        return self._batch(owner, batch_id)

    async def list_batches(self, owner: Owner, after: str | None, limit: int) -> BatchList:
        found = self.store.list_batches(None if owner.admin else owner.id, after, limit + 1)
        data = found[:limit]
        return BatchList(
            data=data,
            first_id=data[0].id if data else None,
            last_id=data[-1].id if data else None,
            has_more=len(found) > limit,
        )

    async def cancel_batch(self, owner: Owner, batch_id: str) -> Batch:
        batch = self._batch(owner, batch_id)
        if batch.status in (BatchStatus.CANCELLING, BatchStatus.CANCELLED):
            return batch
        if batch.status not in LIVE_STATUSES or batch.status is BatchStatus.FINALIZING:
            raise InvalidInput(f"batch {batch_id} is {batch.status.value}; it cannot be cancelled", status=409)
        updated = self.store.update_batch(batch_id, status=BatchStatus.CANCELLING.value, cancelling_at=now())
        self.runner.cancel(batch_id)
        return updated


async def _pages(pages: Any) -> AsyncIterator[bytes]:
    for page in pages:
        yield page
        await asyncio.sleep(0)


async def _read(path: Path) -> AsyncIterator[bytes]:
    with path.open("rb") as handle:
        while chunk := handle.read(READ_CHUNK):
            yield chunk
            await asyncio.sleep(0)


def from_settings(
    settings: Settings, app: Callable[[], Any], metrics: Metrics, token: Callable[[], str | None]
) -> LocalBatches:
    """The single server's Batch API backend: under ``--data-dir``, ``--batch-inflight`` lines at once."""
    caps = Caps(settings.batch_max_file_bytes, settings.batch_max_lines, settings.max_body_bytes)
    return LocalBatches(
        settings.data_dir, app, caps=caps, inflight=settings.batch_inflight, metrics=metrics, token=token
    )
