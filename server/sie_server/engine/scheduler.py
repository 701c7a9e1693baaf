"""One queue for every model and caller; a loop that forms batches and runs them on the device.

Each queued item carries its own future: a batch that fails sets the error on each of its
items and the loop goes on. Items whose caller has gone (future cancelled) are dropped
before they reach the model.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Hashable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from sie_server.adapters.base import Tokens
from sie_server.catalog.schema import ModelConfig
from sie_server.engine.batching import form_batch
from sie_server.errors import InferenceError, QueueFull, SIEError
from sie_server.memory.pool import ModelPool

log = logging.getLogger(__name__)
QUEUE_FULL_RETRY_AFTER_S = 1.0


@dataclass(eq=False)
class WorkItem:
    """One input of one request, waiting to be run as part of some batch."""

    model: ModelConfig
    operation: str
    tokens: Tokens
    options: dict[str, Any]
    future: asyncio.Future[Any]
    priority: str = "interactive"
    enqueued_at: float = field(default_factory=time.monotonic)
    started_at: float = 0.0
    finished_at: float = 0.0

    @property
    def cost(self) -> int:
        return self.tokens.length

    @property
    def group(self) -> tuple[str, str, Hashable]:
        """Items of one group may share a batch: same model, same operation, same options."""
        return (self.model.id, self.operation, tuple(sorted(self.options.items())))


class Scheduler:
    def __init__(self, pool: ModelPool, *, max_queued_items: int, load_timeout_s: float):
        self.pool = pool
        self.max_queued_items = max_queued_items
        self.load_timeout_s = load_timeout_s
        self._groups: dict[tuple[str, str, Hashable], list[WorkItem]] = {}
        self._queued = 0
        self._wake = asyncio.Event()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sie-infer")
        self._task: asyncio.Task[None] | None = None

    @property
    def queued(self) -> int:
        return self._queued

    def submit(self, items: list[WorkItem]) -> None:
        if self._queued + len(items) > self.max_queued_items:
            raise QueueFull(
                f"the server queue is full ({self._queued} items waiting, limit {self.max_queued_items}); "
                "retry later",
                retry_after=QUEUE_FULL_RETRY_AFTER_S,
            )
        for item in items:
            self._groups.setdefault(item.group, []).append(item)
        self._queued += len(items)
        self._wake.set()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="sie-scheduler")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self._executor.shutdown(wait=False, cancel_futures=True)

    def _next_batch(self) -> list[WorkItem]:
        """The batch to run next: the group whose oldest live item has waited longest."""
        best: tuple[str, str, Hashable] | None = None
        best_age = float("inf")
        for key, items in list(self._groups.items()):
            live = [i for i in items if not i.future.done()]
            self._queued -= len(items) - len(live)
            if not live:
                del self._groups[key]
                continue
            self._groups[key] = live
            oldest = min(i.enqueued_at for i in live)
            if oldest < best_age:
                best, best_age = key, oldest
        if best is None:
            return []
        waiting = self._groups[best]
        model = waiting[0].model
        batch = form_batch(waiting, model.profile(self.pool.device_kind).max_batch_tokens)
        chosen = set(map(id, batch))
        rest = [i for i in waiting if id(i) not in chosen]
        if rest:
            self._groups[best] = rest
        else:
            del self._groups[best]
        self._queued -= len(batch)
        return batch

    async def _loop(self) -> None:
        while True:
            batch = self._next_batch()
            if not batch:
                self._wake.clear()
                await self._wake.wait()
                continue
            try:
                await self._run(batch)
            except asyncio.CancelledError:
                raise
            except Exception:  # the loop must outlive any batch
                log.exception("scheduler: unexpected failure around a batch")

    async def _run(self, batch: list[WorkItem]) -> None:
        head = batch[0]
        loop = asyncio.get_running_loop()
        try:
            adapter = await self.pool.acquire(head.model, wait=True, timeout_s=self.load_timeout_s)
            started = time.monotonic()
            for item in batch:
                item.started_at = started
            results = await loop.run_in_executor(
                self._executor, adapter.run, head.operation, [i.tokens for i in batch], head.options
            )
        except SIEError as exc:
            self._fail(batch, exc)
            return
        except Exception as exc:
            log.exception("batch of %d for %s failed", len(batch), head.model.id)
            self._fail(
                batch, InferenceError(f"model {head.model.id} failed on this batch ({type(exc).__name__})")
            )
            return
        finished = time.monotonic()
        for item, result in zip(batch, results, strict=True):
            item.finished_at = finished
            if not item.future.done():
                item.future.set_result(result)

    @staticmethod
    def _fail(batch: list[WorkItem], exc: SIEError) -> None:
        for item in batch:
            if not item.future.done():
                item.future.set_exception(exc)
