"""Queue work for extract: each input a work item on the shared scheduler, one result or error per input.

Every handler's items are batched with every other caller's for the same model and options. An input
that failed, or was not done shortly before ``X-SIE-Timeout-Ms``, gets its own error and its neighbours
are answered; an internal failure fails the request.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Iterable
from typing import Any, Protocol, TypeVar

from sie_server.adapters.runtime.base import Tokens
from sie_server.adapters.runtime.options import BatchOptions
from sie_server.catalog.schema import ModelConfig
from sie_server.contract.headers import CallOptions
from sie_server.engine.outcomes import Timing
from sie_server.engine.scheduler import Scheduler, WorkItem
from sie_server.errors import DeadlineExceeded, InvalidInput, SIEError
from sie_server.memory.pool import ModelPool

DEADLINE_MARGIN_S = 0.25  # answer what is done this long before X-SIE-Timeout-Ms runs out
LATE = "not done within X-SIE-Timeout-Ms; this item's work was dropped and the rest answered"
A = TypeVar("A")
T = TypeVar("T")


class Queue(Protocol):
    """What queueing extract work needs of the service: its pool and scheduler."""

    pool: ModelPool
    scheduler: Scheduler
    load_timeout_s: float


async def adapter_of(
    service: Queue, model: ModelConfig, call: CallOptions, family: tuple[type[A], ...], does: str
) -> A:
    """The model's adapter, loaded (waiting for it as the caller asked), when it is of ``family``: a tuple, as
    ``isinstance`` takes it, since the family contracts are abstract classes."""
    adapter = await service.pool.acquire(model, wait=call.wait_for_load, timeout_s=service.load_timeout_s)
    if not isinstance(adapter, family):
        raise InvalidInput(f"model {model.id} does not {does} (its adapter is {model.adapter})")
    return adapter


async def decode_all(timing: Timing, jobs: Iterable[Awaitable[T]]) -> list[T]:
    """Every item's inputs decoded at once (off the event loop), the time counted as tokenization."""
    started = time.perf_counter()
    done = await asyncio.gather(*jobs)
    timing.tokenization_ms += (time.perf_counter() - started) * 1000
    return list(done)


async def run_each(
    service: Queue,
    model: ModelConfig,
    tokens: list[Tokens],
    options: BatchOptions,
    call: CallOptions,
    timing: Timing,
) -> list[Any]:
    """Queue each input and await them all: a result, or the SIEError its input got, per input in order."""
    if not tokens:
        return []
    loop = asyncio.get_running_loop()
    items = [WorkItem(model, t, options, loop.create_future(), priority=call.priority) for t in tokens]
    service.scheduler.submit(items)
    try:
        await _settled([i.future for i in items], call)
    except BaseException:
        for item in items:
            item.future.cancel()
        raise
    results: list[Any] = []
    for item in items:
        if not item.future.done():  # past the caller's deadline: dropped (if queued), failed alone
            item.future.cancel()
            results.append(DeadlineExceeded(LATE))
            continue
        result = item.future.exception() or item.future.result()
        if isinstance(result, BaseException) and not isinstance(result, SIEError):
            raise result  # an internal failure: the whole request fails
        results.append(result)
    if all(isinstance(r, DeadlineExceeded) for r in results):
        raise DeadlineExceeded(LATE)
    started = [i.started_at for i in items if i.started_at]
    if started:
        timing.queue_ms += (min(started) - min(i.enqueued_at for i in items)) * 1000
        timing.inference_ms += (max(i.finished_at for i in items) - min(started)) * 1000
    return list(results)


async def _settled(futures: list[asyncio.Future[Any]], call: CallOptions) -> None:
    """Until every future is done, or until shortly before the caller's deadline (so the items done by
    then are answered and the others fail alone, before the request's own deadline ends it all)."""
    left = call.remaining_s()
    timeout = None if left is None else max(left - min(DEADLINE_MARGIN_S, left / 10), 0.0)
    await asyncio.wait(futures, timeout=timeout)
