"""A queue worker's share of the cluster's batches: it pulls messages from the ``SIE_BATCH_LINES``
stream (cluster/batch_store.py), at most ``inflight`` at once (``--batch-inflight``), beside its live work.

- A start message: read the batch's input file a chunk at a time and queue one message per line (a line
  that cannot run gets its error line at once); acked once every line is queued, so a worker that dies
  while queueing leaves the start message to another, which queues them again (the copies are dropped
  by the stream's de-duplication, or find their result kept).
- A line message: run the line through this worker's own app at the batch priority (batches/lines.py),
  keep its result under (batch, line) unless one is kept already, then ack. A line redelivered after a
  worker died is run again only if it has no result yet, and whatever happens the first result kept is
  the line's only one. A line of a batch being cancelled, ended or past its window is acked without running.
- After its ack, if nothing of the batch is left in the stream, the worker finalizes it
  (cluster/batch_finalize.py).

A line answered 503 or 429 (the queue is full, a model cannot fit right now) is put back with a delay
a few times before that answer becomes its error line; so is a line message that fails outside its run
(its stored body unreadable, a bug), whose error line then says so. A worker whose ``/readyz`` names a
problem fetches no lines while a ready peer is there to take them (cluster/pool_peers.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

import orjson

from sie_server.batches.lines import (
    InputLine,
    LineProblem,
    LineResult,
    internal_error,
    parse_line,
    problem_result,
    run_line,
)
from sie_server.cluster import nats_connection
from sie_server.cluster.batch_finalize import expired, finalize
from sie_server.cluster.batch_store import BATCH, LINE, LINE_REF, LINES_CONSUMER, LINES_STREAM, BatchStore
from sie_server.contract.batch_wire import BatchStatus
from sie_server.errors import ErrorCode

log = logging.getLogger(__name__)
FETCH_WAIT_S = 1.0
QUEUE_WINDOW = 256  # line publishes awaited together while a batch is queued
TRANSIENT = (429, 503)
TRANSIENT_TRIES = 5
OUTSIDE_TRIES = 5  # deliveries of a line message that fails outside its run before it gets its error line
INTERNAL = ErrorCode.INFERENCE_ERROR.value.lower()
RETRY_DELAY_S = 2.0


class BatchLines:
    def __init__(self, app: Any, store: BatchStore, *, inflight: int, ack_wait_s: float, max_line_bytes: int,
                 worker: str, stand_aside: Callable[[], bool] = lambda: False) -> None:  # fmt: skip
        self.app = app
        self.store = store
        self.inflight = inflight
        self.ack_wait_s = ack_wait_s
        self.max_line_bytes = max_line_bytes
        self.worker = worker
        self.stand_aside = stand_aside  # this worker leaves the lines to a ready peer now (cluster/pool_peers.py)
        self.tasks: set[asyncio.Task[None]] = set()
        self._freed = asyncio.Event()

    async def run(self, stopping: asyncio.Event) -> None:
        """Pull until ``stopping`` is set (or the server drains); lines in hand are finished first."""
        sub = await self.store.js.pull_subscribe_bind(durable=LINES_CONSUMER, stream=LINES_STREAM)
        try:
            while not stopping.is_set() and not self.app.state.sie.draining:
                room = self.inflight - len(self.tasks) if not self.stand_aside() else 0
                if room <= 0:
                    self._freed.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._freed.wait(), FETCH_WAIT_S)
                    continue
                try:
                    got = await sub.fetch(batch=room, timeout=FETCH_WAIT_S)
                except TimeoutError:
                    got = []
                except Exception as exc:  # a reconnect in progress, or a NATS that lost the stream
                    await asyncio.sleep(1.0)
                    if self.store.nc.is_connected:
                        log.warning("worker %s: fetching batch lines failed: %r", self.worker, exc)
                        sub = await self._bind_again(sub)
                    continue
                for msg in got:
                    task = asyncio.get_running_loop().create_task(self._handle(msg))
                    self.tasks.add(task)
                    task.add_done_callback(self._done)
        finally:
            if self.tasks:
                await asyncio.gather(*self.tasks, return_exceptions=True)
            with contextlib.suppress(Exception):
                await sub.unsubscribe()

    async def _bind_again(self, sub: Any) -> Any:
        """The stream and consumer made again if they are gone, and a new subscription to them."""
        try:
            await self.store.restore()
            fresh = await self.store.js.pull_subscribe_bind(durable=LINES_CONSUMER, stream=LINES_STREAM)
        except Exception as exc:
            log.warning("worker %s: could not restore the batch lines stream: %s", self.worker,
                        nats_connection.describe(exc))  # fmt: skip
            return sub
        with contextlib.suppress(Exception):
            await sub.unsubscribe()
        return fresh

    def _done(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        self._freed.set()
        if not task.cancelled() and task.exception() is not None:
            log.error("worker %s: a batch message failed", self.worker, exc_info=task.exception())

    async def _handle(self, msg: Any) -> None:
        from nats.errors import Error as NatsError

        batch_id = (msg.headers or {}).get(BATCH, "")
        keepalive = asyncio.get_running_loop().create_task(self._keep_alive(msg))
        try:
            if msg.subject.startswith("sie.batch.start."):
                done = await self._queue_lines(batch_id)
            else:
                done = await self._line(batch_id, msg)
            keepalive.cancel()
            if not done:
                return
            await msg.ack_sync()
            if await self.store.unsent(batch_id) == 0:
                await finalize(self.store, batch_id)
        except NatsError as exc:  # unacked: the message is delivered again
            log.warning("worker %s: batch %s: %s; the message will be redelivered", self.worker, batch_id,
                        nats_connection.describe(exc))  # fmt: skip
        except Exception:
            if msg.subject.startswith("sie.batch.start."):
                raise  # logged by _done; unacked, queued again by the next worker to take it
            keepalive.cancel()
            await self._failed_outside(batch_id, msg)
        finally:
            keepalive.cancel()

    async def _failed_outside(self, batch_id: str, msg: Any) -> None:
        """A line message that failed outside its run (its stored body unreadable, a bug): tried again
        after a delay, and after ``OUTSIDE_TRIES`` deliveries given its error line and acked, so the batch
        still ends with one line out per line in."""
        tries = msg.metadata.num_delivered
        log.exception("worker %s: batch %s: a line message failed outside its run (delivery %d of %d)",
                      self.worker, batch_id, tries, OUTSIDE_TRIES)  # fmt: skip
        if tries < OUTSIDE_TRIES:
            await msg.nak(delay=RETRY_DELAY_S)
            return
        custom_id = None
        with contextlib.suppress(Exception):
            custom_id = (await self.store.line(msg)).custom_id
        said = f"the line failed {tries} times before it could run"
        problem = problem_result(batch_id, LineProblem(int(msg.headers[LINE]), custom_id, INTERNAL, said))
        await self.store.record(batch_id, problem)
        await msg.ack_sync()
        if await self.store.unsent(batch_id) == 0:
            await finalize(self.store, batch_id)

    async def _live(self, batch_id: str) -> bool:
        record = await self.store.batch(batch_id)
        return record is not None and record.batch.status == BatchStatus.IN_PROGRESS and not expired(record)

    async def _queue_lines(self, batch_id: str) -> bool:
        """Read the input file and queue its lines; True once all are queued (or the batch is over)."""
        record = await self.store.batch(batch_id)
        if record is None or record.batch.status != BatchStatus.IN_PROGRESS:
            return True
        batch = record.batch
        seen: set[str] = set()
        pending: list[asyncio.Future[Any]] = []
        index = 0
        async for raw in self.store.lines(batch.input_file_id):
            if not raw.strip():
                continue
            parsed = parse_line(index, raw, batch.endpoint, self.max_line_bytes, seen)
            if isinstance(parsed, InputLine):
                pending.append(await self.store.publish_line(batch_id, parsed))
            else:
                problem = problem_result(batch_id, parsed)
                self._count(batch.endpoint, problem, await self.store.record(batch_id, problem))
            index += 1
            if len(pending) >= QUEUE_WINDOW:
                await asyncio.gather(*pending)
                pending.clear()
                if not await self._live(batch_id):  # cancelled while its lines were being queued
                    break
        await asyncio.gather(*pending)
        log.info("worker %s: batch %s: %d lines queued", self.worker, batch_id, index)
        return True

    async def _line(self, batch_id: str, msg: Any) -> bool:
        """Run one line and keep its result; False when it was put back to run later."""
        done = await self._settle(batch_id, msg)
        if done and LINE_REF in (msg.headers or {}):  # a line too large for its message: stored apart
            with contextlib.suppress(Exception):
                await self.store.objects.delete(msg.headers[LINE_REF])
        return done

    async def _settle(self, batch_id: str, msg: Any) -> bool:
        index = int(msg.headers[LINE])
        if not await self._live(batch_id):  # cancelling, or over: dropped without running
            return True
        kept = await self.store.result(batch_id, index)
        if kept is not None:  # run before by a worker that died before its ack
            log.info("worker %s: batch %s line %d has its result already (a redelivery); not run again",
                     self.worker, batch_id, index)  # fmt: skip
            await self.store.record(batch_id, kept)  # its failure mark, should that be what was lost
            return True
        line = await self.store.line(msg)
        try:
            result = await run_line(self.app, batch_id, line, self.app.state.sie.queue_token)
        except Exception:
            log.exception("worker %s: batch %s line %d failed outside its route", self.worker, batch_id, index)
            result = internal_error(batch_id, line)
        status = _status(result.record)
        if status in TRANSIENT and msg.metadata.num_delivered < TRANSIENT_TRIES:
            await msg.nak(delay=RETRY_DELAY_S)
            return False
        self._count(line.url, result, await self.store.record(batch_id, result))
        return True

    def _count(self, endpoint: str, result: LineResult, kept: LineResult) -> None:
        """A line this worker finished, on its /metrics (``sie_batch_lines_total``) as a single server counts
        it; not when another delivery's result was kept first."""
        metrics = getattr(self.app.state.sie, "metrics", None)
        if metrics is not None and kept is result:
            metrics.batch_lines.labels(endpoint, "completed" if result.ok else "failed").inc()

    async def _keep_alive(self, msg: Any) -> None:
        while True:
            await asyncio.sleep(self.ack_wait_s / 3)
            with contextlib.suppress(Exception):
                await msg.in_progress()


def _status(record: bytes) -> int | None:
    response = orjson.loads(record).get("response")
    return int(response["status_code"]) if isinstance(response, dict) else None
