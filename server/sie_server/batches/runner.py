"""The single server's batch runner: takes each batch's unrecorded lines, at most ``inflight`` lines of
all batches at once (``--batch-inflight``), through the server's own routes at the batch priority.

At start it resumes every batch with work left (a crash or ``kill -9`` loses only the lines in
flight, which run again: a line is recorded once, by its key). Cancel stops taking lines; a batch
past its completion window ends ``expired``. Either way the lines finished are kept.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Callable
from typing import Any

from sie_server.batches.line_writer import LineWriter
from sie_server.batches.lines import InputLine, LineResult, internal_error, parse_line, problem_result, run_line
from sie_server.batches.sqlite_store import SqliteStore, now
from sie_server.contract.batch_wire import BatchStatus, FileObject
from sie_server.errors import SIEError
from sie_server.observability.metrics import Metrics

log = logging.getLogger(__name__)
RATE_WINDOW_S = 30.0


class BatchRunner:
    def __init__(
        self,
        store: SqliteStore,
        app: Callable[[], Any],
        *,
        inflight: int,
        max_line_bytes: int,
        metrics: Metrics | None = None,
        token: Callable[[], str | None] = lambda: None,
    ):
        self.store = store
        self.writer = LineWriter(store)
        self.app = app  # the server's ASGI app (outermost, with its middleware)
        self.slots = asyncio.Semaphore(inflight)
        self.inflight_limit = inflight
        self.max_line_bytes = max_line_bytes
        self.metrics = metrics
        self.token = token
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.cancelling: set[str] = set()
        self.running_lines = 0
        self.peak_lines = 0
        self.finished: collections.deque[float] = collections.deque()  # when lines finished (for lines/s)
        self.lines_done = 0
        self.lines_failed = 0

    def start(self) -> None:
        if not self.store.exists():  # no batch was ever made here: nothing to resume, nothing to open
            return
        try:
            live = self.store.live_batches()
        except SIEError as exc:  # the data dir is another server's: the Batch API answers 503 saying so
            log.error("batches not resumed: %s", exc.message)
            return
        for batch_id in live:
            log.info("resuming batch %s", batch_id)
            self.submit(batch_id)

    async def stop(self) -> None:
        tasks = list(self.tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.to_thread(self.writer.close)

    def submit(self, batch_id: str) -> None:
        task = asyncio.get_running_loop().create_task(self._run(batch_id), name=f"batch {batch_id}")
        self.tasks[batch_id] = task
        task.add_done_callback(lambda _: self.tasks.pop(batch_id, None))
        self._gauge()

    def lines_per_second(self) -> float:
        cutoff = time.monotonic() - RATE_WINDOW_S
        while self.finished and self.finished[0] < cutoff:
            self.finished.popleft()
        return len(self.finished) / RATE_WINDOW_S

    def _gauge(self) -> None:
        if self.metrics is not None:
            self.metrics.batches_in_progress.set(len(self.tasks))

    def cancel(self, batch_id: str) -> None:
        """Take no more lines of a batch (its status is ``cancelling`` on disk already)."""
        self.cancelling.add(batch_id)
        if batch_id not in self.tasks:  # nothing running it (it never started): end it now
            self.submit(batch_id)

    def _stopping(self, batch_id: str, expires_at: int | None) -> bool:
        """Asked before each line, so it reads no disk: a cancel is known here, an expiry by the clock."""
        return batch_id in self.cancelling or (expires_at is not None and now() >= expires_at)

    async def _run(self, batch_id: str) -> None:
        try:
            await self._lines(batch_id)
            self._finalize(batch_id)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("batch %s failed", batch_id)
            self.store.update_batch(batch_id, status=BatchStatus.FAILED.value, failed_at=now())
        finally:
            self.tasks.pop(batch_id, None)
            self.cancelling.discard(batch_id)
            self._gauge()

    async def _lines(self, batch_id: str) -> None:
        found = self.store.get_batch(batch_id)
        assert found is not None
        batch = found[0]
        if batch.status is BatchStatus.VALIDATING:
            self.store.update_batch(batch_id, status=BatchStatus.IN_PROGRESS.value, in_progress_at=now())
        if batch.status in (BatchStatus.FINALIZING, BatchStatus.CANCELLING):
            return
        done = self.store.done_lines(batch_id)
        seen: set[str] = set()
        running: set[asyncio.Task[None]] = set()
        try:
            for index, raw in enumerate(self.store.input_lines(batch.input_file_id)):
                parsed = parse_line(index, raw, batch.endpoint, self.max_line_bytes, seen)
                if index in done:
                    continue
                if isinstance(parsed, InputLine):
                    await self.slots.acquire()
                    if self._stopping(batch_id, batch.expires_at):
                        self.slots.release()
                        break
                    task = asyncio.get_running_loop().create_task(self._line(batch_id, batch.endpoint, parsed))
                    running.add(task)
                    task.add_done_callback(running.discard)
                else:
                    await self._record(batch_id, batch.endpoint, problem_result(batch_id, parsed))
                if index % 64 == 0:
                    await asyncio.sleep(0)  # a long run of refused lines leaves the loop to others
            if running:
                await asyncio.gather(*running)
        except asyncio.CancelledError:
            for task in running:
                task.cancel()
            raise

    async def _line(self, batch_id: str, endpoint: str, line: InputLine) -> None:
        self.running_lines += 1
        self.peak_lines = max(self.peak_lines, self.running_lines)
        try:
            try:
                result = await run_line(self.app(), batch_id, line, self.token())
            except Exception:
                log.exception("batch %s line %d failed outside its route", batch_id, line.index)
                result = internal_error(batch_id, line)
            await self._record(batch_id, endpoint, result)
        finally:
            self.running_lines -= 1
            self.slots.release()

    async def _record(self, batch_id: str, endpoint: str, result: LineResult) -> None:
        if not await self.writer.record((batch_id, result.index, result.ok, result.record)):
            return
        self.finished.append(time.monotonic())
        if result.ok:
            self.lines_done += 1
        else:
            self.lines_failed += 1
        if self.metrics is not None:
            self.metrics.batch_lines.labels(endpoint, "completed" if result.ok else "failed").inc()

    def _finalize(self, batch_id: str) -> None:
        found = self.store.get_batch(batch_id)
        assert found is not None
        batch, owner = found
        stamp = now()
        if batch.status is BatchStatus.CANCELLING:
            end: dict[str, Any] = {"status": BatchStatus.CANCELLED.value, "cancelled_at": stamp}
        elif batch.expires_at is not None and stamp >= batch.expires_at and not self._all_done(batch_id):
            end = {"status": BatchStatus.EXPIRED.value, "expired_at": stamp}
        else:
            self.store.update_batch(batch_id, status=BatchStatus.FINALIZING.value, finalizing_at=stamp)
            end = {"status": BatchStatus.COMPLETED.value, "completed_at": now()}
        counts = batch.request_counts
        files: dict[str, Any] = {}
        if counts.completed and batch.output_file_id is None:
            files["output_file_id"] = self._result_file(batch_id, owner, "output")
        if counts.failed and batch.error_file_id is None:
            files["error_file_id"] = self._result_file(batch_id, owner, "error")
        self.store.update_batch(batch_id, **files, **end)
        log.info("batch %s %s: %d done, %d failed", batch_id, end["status"], counts.completed, counts.failed)

    def _all_done(self, batch_id: str) -> bool:
        found = self.store.get_batch(batch_id)
        assert found is not None
        counts = found[0].request_counts
        return counts.completed + counts.failed >= counts.total

    def _result_file(self, batch_id: str, owner: str, kind: str) -> str:
        file_id = self.store.new_file_id()
        name = f"{batch_id}_{kind}.jsonl"
        file = FileObject(id=file_id, bytes=0, created_at=now(), filename=name, purpose="batch_output")
        self.store.add_file(file, owner, 0, batch_id=batch_id, kind=kind)
        return file_id
