"""One queue for every model and caller; a loop that forms batches and runs them on the device.

Each queued item carries its own future: a batch that fails is run again in halves, down to
single items, so only the items that fail on their own get an error (engine/isolation.py); the
others get their answers and the loop goes on. Items whose caller has gone (future cancelled) are dropped
before they reach the model. Which class goes next is the policy's decision.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Executor
from contextlib import AbstractContextManager, nullcontext
from functools import partial
from typing import Any

from sie_server.adapters.runtime.encoder import Encoder
from sie_server.compute_thread import ComputeThread
from sie_server.engine.batching import form_batch, padded_cost
from sie_server.engine.finite import FiniteCheck
from sie_server.engine.isolation import OOM_RETRY_AFTER_S, is_out_of_memory, run_apart, settle
from sie_server.engine.policy import BATCH, PRIORITIES, PriorityPolicy
from sie_server.engine.work_item import GroupKey, WorkItem, batch_runner, tag_logs, timed_run
from sie_server.engine.yielding import LiveGate
from sie_server.errors import InferenceError, InvalidInput, QueueFull, ResourceExhausted, SIEError
from sie_server.memory.pool import ModelPool
from sie_server.observability import tracing
from sie_server.observability.metrics import Metrics

log = logging.getLogger(__name__)
QUEUE_FULL_RETRY_AFTER_S = 1.0
Running = asyncio.Future[tuple[list[Any], float]]  # a batch on its lane's thread: (results, seconds)
Started = tuple[Encoder[Any], Running]


class Scheduler:
    def __init__(
        self,
        pool: ModelPool,
        metrics: Metrics,
        *,
        policy: PriorityPolicy,
        max_queued_items: int,
        load_timeout_s: float,
    ):
        self.pool = pool
        self.metrics = metrics
        self.policy = policy
        self.max_queued_items = max_queued_items
        self.load_timeout_s = load_timeout_s
        self._groups: dict[GroupKey, list[WorkItem]] = {}
        self._waiting: Counter[tuple[str, str]] = Counter()  # (model, priority) -> items
        self._running: dict[str, list[WorkItem]] = {}  # lane -> its batch
        self._lane_tasks: set[asyncio.Task[None]] = set()
        self._wake = asyncio.Event()
        lanes = {policy.lane(p) for p in PRIORITIES}
        self._executors = {lane: ComputeThread(f"sie-{lane}") for lane in lanes}
        #: on a CPU with two lanes, a batch-class pass pauses at its next module while a live one runs
        self.gate = LiveGate(policy.defer_s) if policy.lanes and policy.defer_s > 0 else None
        self.finite = FiniteCheck(metrics)  # encode and score results: NaN or Inf rerun in fp32, else failed
        self._task: asyncio.Task[None] | None = None

    # ----- admission -----------------------------------------------------------------------
    @property
    def queued(self) -> int:
        return sum(self._waiting.values())

    def busy(self, model_id: str) -> bool:
        """A model with queued or running work must stay resident."""
        running = any(batch[0].model.id == model_id for batch in self._running.values())
        return running or any(m == model_id and n for (m, _), n in self._waiting.items())

    def running(self) -> list[tuple[str, float]]:
        """Each batch on a lane now: its model and when it began to run (monotonic; 0.0 while its model
        loads). What /readyz reads to find a stalled batch (engine/model_health.py)."""
        return [(batch[0].model.id, batch[0].started_at) for batch in self._running.values()]

    def loop_ended(self) -> BaseException | None:
        """Why the batch loop ended, when it has outside a stop: then no batch would ever run again."""
        task = self._task
        if task is None or not task.done() or task.cancelled():
            return None
        return task.exception() or RuntimeError("the batch loop returned")

    def submit(self, items: list[WorkItem]) -> None:
        if self.queued + len(items) > self.max_queued_items:
            raise QueueFull(
                f"the server queue is full ({self.queued} items waiting, limit {self.max_queued_items}); retry later",
                retry_after=QUEUE_FULL_RETRY_AFTER_S,
            )
        for item in items:
            self._groups.setdefault(item.group, []).append(item)
        self._count(items, +1)
        self._wake.set()

    def _count(self, items: list[WorkItem], delta: int) -> None:
        """Items entering (+1) or leaving (-1) the queue; the gauge is set once per (model, class)."""
        changed = Counter((item.model.id, item.priority) for item in items)
        for key, n in changed.items():
            self._waiting[key] += delta * n
            self.metrics.queue_items.labels(*key).set(self._waiting[key])

    # ----- lifecycle -----------------------------------------------------------------------
    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="sie-scheduler")

    def is_idle(self) -> bool:
        """Nothing queued and nothing running."""
        return not self._running and self.queued == 0

    async def stop(self) -> None:
        tasks = [t for t in (self._task, *self._lane_tasks) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for executor in self._executors.values():
            executor.shutdown(wait=False, cancel_futures=True)

    # ----- choosing ------------------------------------------------------------------------
    def _drop_abandoned(self) -> None:
        for key, items in list(self._groups.items()):
            live = [i for i in items if not i.future.done()]
            if len(live) < len(items):
                gone = [i for i in items if i.future.done()]
                self._count(gone, -1)
                self.metrics.dropped_items.labels(key[0]).inc(len(gone))
            if live:
                self._groups[key] = live
            else:
                del self._groups[key]

    def _plan(self) -> tuple[list[WorkItem], int, set[str]] | None:
        """The next batch (not yet taken off the queue), its token budget and the classes waiting.

        Only classes whose lane is free are considered; the policy picks among them, then the
        group whose oldest item of that class has waited longest (the most urgent work).
        """
        self._drop_abandoned()
        waiting = {i.priority for items in self._groups.values() for i in items}
        ready = {p for p in waiting if self.policy.lane(p) not in self._running}
        chosen = self.policy.next_class(self.policy.startable(ready, *self._batch_wait()))
        if chosen is None:
            return None
        best: GroupKey | None = None
        best_age = float("inf")
        for key, items in self._groups.items():
            ages = [i.enqueued_at for i in items if i.priority == chosen]
            if ages and min(ages) < best_age:
                best, best_age = key, min(ages)
        assert best is not None
        candidates = [i for i in self._groups[best] if i.priority == chosen]
        model = candidates[0].model
        budget = self.policy.token_budget(chosen, model.profile(self.pool.device_kind).max_batch_tokens)
        # lanes running the same model share its activation reserve: stay within it together
        in_flight = sum(padded_cost([i.cost for i in b]) for b in self._running.values() if b[0].model.id == model.id)
        budget = max(1, budget - in_flight)
        profile = model.profile(self.pool.device_kind)
        batch = form_batch(candidates, budget, profile.max_padding_ratio, profile.min_batch_tokens)
        return batch, budget, waiting

    def _batch_wait(self) -> tuple[set[str], float | None]:
        """The classes running now, and how long the oldest batch-class item has waited (None: none waits)."""
        oldest = min((i.enqueued_at for items in self._groups.values() for i in items if i.priority == BATCH),
                     default=None)  # fmt: skip
        waited = None if oldest is None else time.monotonic() - oldest
        return {b[0].priority for b in self._running.values()}, waited

    def _lane_free(self) -> bool:
        """Whether some waiting class has its lane free (checked before planning, which walks the queue)."""
        return any(n and self.policy.lane(p) not in self._running for (_, p), n in self._waiting.items())

    def _take(self, batch: list[WorkItem]) -> None:
        key = batch[0].group
        chosen = set(map(id, batch))
        rest = [i for i in self._groups[key] if id(i) not in chosen]
        if rest:
            self._groups[key] = rest
        else:
            del self._groups[key]
        self._count(batch, -1)

    async def _next_batch(self) -> list[WorkItem]:
        """Wait for work; hold a batch that is not full up to its model's ``max_batch_wait_ms``."""
        while True:
            planned = self._plan() if self._lane_free() else None
            if planned is None:
                self._wake.clear()
                # batch work held back beside an interactive batch (--batch-defer-ms) starts when its wait is up
                held = self.policy.deferred_for(*self._batch_wait())
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), held)
                continue
            batch, budget, waiting = planned
            wait_s = batch[0].model.profile(self.pool.device_kind).max_batch_wait_ms / 1000
            held = time.monotonic() - min(i.enqueued_at for i in batch)
            if wait_s > held and padded_cost([i.cost for i in batch]) < budget:
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), wait_s - held)
                planned = self._plan()
                if planned is None:
                    continue
                batch, budget, waiting = planned
            self.policy.record(batch[0].priority, waiting)
            self._take(batch)
            return batch

    # ----- running -------------------------------------------------------------------------
    async def _loop(self) -> None:
        while True:
            batch = await self._next_batch()
            lane = self.policy.lane(batch[0].priority)
            self._running[lane] = batch
            # started here, not held in a local: this loop must not keep the batch's adapter alive
            task = asyncio.get_running_loop().create_task(
                self._run_lane(lane, batch, self._start(batch, self._executors[lane]))
            )
            self._lane_tasks.add(task)
            task.add_done_callback(self._lane_tasks.discard)

    def _start(self, batch: list[WorkItem], executor: Executor) -> Started | None:
        """Hand the batch to its lane's thread now when its model is resident (the lane task would
        otherwise start it only after every callback already queued on the event loop, such as
        the answers of the batch that just finished); None: the lane task loads the model first."""
        adapter = self.pool.resident(batch[0].model)
        encoder = None if adapter is None else batch_runner(adapter, batch[0])
        return None if encoder is None else (encoder, self._submit(encoder, batch, executor))

    async def _run_lane(self, lane: str, batch: list[WorkItem], started: Started | None) -> None:
        deliver = None
        tag_logs(batch)
        try:
            head = batch[0]
            with tracing.batch_span(head.model.id, head.options.task, ((i.trace, i.enqueued_at) for i in batch)):
                deliver = await self._run(batch, self._executors[lane], started)
        except Exception:  # the lane must outlive any batch
            log.exception("scheduler: unexpected failure around a batch")
        finally:
            del self._running[lane]
            self._wake.set()
        if deliver is not None:  # after the wake-up: the next batch starts before these answers are sent
            deliver()

    async def _run(self, batch: list[WorkItem], executor: Executor, started: Started | None) -> Callable[[], None]:
        """Run the batch (loading its model first if needed); what sets its items' answers or errors."""
        head = batch[0]
        model_id = head.model.id
        try:
            if started is None:
                acquired = await self.pool.acquire(head.model, wait=True, timeout_s=self.load_timeout_s, request=False)
                runner = batch_runner(acquired, head)
                if runner is None:
                    raise InvalidInput(f"model {model_id} does not support {head.options.task}")
                adapter, running = runner, None
            else:
                adapter, running = started
            started_at = time.monotonic()
            queue_wait = self.metrics.queue_wait.labels(model_id, head.priority)  # one class per batch
            for item in batch:
                item.started_at = started_at
                queue_wait.observe(started_at - item.enqueued_at)
            try:
                results = await self._execute(adapter, batch, executor, running)
            except Exception as exc:
                if not is_out_of_memory(exc):
                    if len(batch) == 1:
                        raise
                    return await self._apart(adapter, batch, executor)
                evicted = self.pool.evict_others(keep=model_id)
                log.warning("%s: one item ran out of memory; evicted %s and retrying once", model_id, evicted)
                results = await self._execute(adapter, batch, executor)
        except SIEError as exc:
            return partial(self._fail, batch, exc)
        except Exception as exc:
            if is_out_of_memory(exc):
                exhausted = ResourceExhausted(
                    f"model {model_id} ran out of memory on a single item even after splitting the batch and "
                    "evicting idle models; retry later or send shorter inputs",
                    retry_after=OOM_RETRY_AFTER_S,
                )
                return partial(self._fail, batch, exhausted)
            log.exception("batch of %d for %s failed", len(batch), model_id)
            failed = InferenceError(f"model {model_id} failed on this batch ({type(exc).__name__})")
            return partial(self._fail, batch, failed)
        return partial(self._settle, batch, await self.finite.settle(adapter, batch, results, executor))

    async def _apart(self, adapter: Encoder[Any], batch: list[WorkItem], executor: Executor) -> Callable[[], None]:
        """The batch failed as a whole: run it again in halves, down to single items, so that only the
        items that fail on their own get an error."""
        model_id = batch[0].model.id
        log.warning("batch of %d for %s failed; running its items apart", len(batch), model_id, exc_info=True)
        self.metrics.isolation_retries.labels(model_id, batch[0].options.task).inc()
        live = [i for i in batch if not i.future.done()]  # callers that left need no answer
        outcomes = settle(await run_apart(live, partial(self._execute, adapter, executor=executor)), model_id)
        failed = sum(isinstance(o, SIEError) for o in outcomes)
        if failed:
            log.warning("%s: %d of %d items failed on their own", model_id, failed, len(live))
        return partial(self._settle, live, await self.finite.settle(adapter, live, outcomes, executor))

    def _submit(self, adapter: Encoder[Any], batch: list[WorkItem], executor: Executor) -> Running:
        return asyncio.get_running_loop().run_in_executor(
            executor, timed_run, adapter, [i.tokens for i in batch], batch[0].options, self._guard(batch[0].priority)
        )

    def _guard(self, priority: str) -> Callable[[], AbstractContextManager[None]]:
        """What a batch of this class runs inside: live passes hold the gate, batch-class ones yield to it."""
        if self.gate is None:
            return nullcontext
        return self.gate.yielding if priority == BATCH else self.gate.live

    async def _execute(
        self,
        adapter: Encoder[Any],
        batch: list[WorkItem],
        executor: Executor,
        running: Running | None = None,
    ) -> list[Any]:
        """Run one batch (``running``: already handed to the lane's thread); on out-of-memory split it in
        halves and run those, down to single items."""
        head = batch[0]
        try:
            with tracing.inference_span(len(batch)):
                results, seconds = await (running if running is not None else self._submit(adapter, batch, executor))
        except Exception as exc:
            if not is_out_of_memory(exc):
                raise
            self.metrics.oom.labels(head.model.id).inc()
            if len(batch) == 1:
                raise
            middle = len(batch) // 2
            log.warning("%s: batch of %d ran out of memory; splitting", head.model.id, len(batch))
            first = await self._execute(adapter, batch[:middle], executor)
            return first + await self._execute(adapter, batch[middle:], executor)
        self._observe(batch, seconds)
        return results

    def _observe(self, batch: list[WorkItem], seconds: float) -> None:
        model_id = batch[0].model.id
        self.metrics.batch_seconds.labels(model_id).observe(seconds)
        real = sum(i.cost for i in batch)
        padded = padded_cost([i.cost for i in batch])
        self.metrics.batch_items.labels(model_id).observe(len(batch))
        self.metrics.batch_tokens.labels(model_id).observe(real)
        self.metrics.padding_ratio.labels(model_id).observe(padded / max(real, 1))
        self.metrics.real_tokens.labels(model_id).inc(real)
        self.metrics.padded_tokens.labels(model_id).inc(padded)

    @staticmethod
    def _settle(batch: list[WorkItem], outcomes: list[Any]) -> None:
        """Each item its own answer or its own error."""
        finished = time.monotonic()
        for item, outcome in zip(batch, outcomes, strict=True):
            item.finished_at = finished
            if item.future.done():
                continue
            if isinstance(outcome, SIEError):
                item.future.set_exception(outcome)
            else:
                item.future.set_result(outcome)

    @staticmethod
    def _fail(batch: list[WorkItem], exc: SIEError) -> None:
        for item in batch:
            if not item.future.done():
                item.future.set_exception(exc)


__all__ = ["PRIORITIES", "Scheduler", "WorkItem"]
