"""Queue work on the shared scheduler: each input a work item, batched with every other caller's for the same
model and options. ``run`` answers every input or fails the call (encode, score, entities); ``run(each=True)``
(the other extract kinds) answers each input alone: an input that failed, or was not done shortly before
``X-SIE-Timeout-Ms``, gets its own error and its neighbours are answered; an internal failure fails the request.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol, TypeVar

from sie_server.adapters.runtime.base import Tokens
from sie_server.adapters.runtime.options import BatchOptions
from sie_server.catalog.schema import ModelConfig
from sie_server.contract.headers import CallOptions
from sie_server.engine.outcomes import Timing
from sie_server.engine.scheduler import Scheduler, WorkItem
from sie_server.engine.tokenizing import TokenizerThread
from sie_server.errors import DeadlineExceeded, ErrorCode, InvalidInput, SIEError
from sie_server.memory.pool import ModelPool

DEADLINE_MARGIN_S = 0.25  # answer what is done this long before X-SIE-Timeout-Ms runs out
LATE = "not done within X-SIE-Timeout-Ms; this item's work was dropped and the rest answered"
A = TypeVar("A")
In = TypeVar("In")
T = TypeVar("T")


class CallerGone(SIEError):
    """The client disconnected before its answer was ready (nobody reads this error)."""

    code = ErrorCode.INVALID_INPUT

    def __init__(self) -> None:
        super().__init__("client disconnected", status=499)


class Queue(Protocol):
    """What queueing work needs of the service: its pool and scheduler."""

    pool: ModelPool
    scheduler: Scheduler
    load_timeout_s: float


class Tokenizing(Queue, Protocol):
    """A service that also tokenizes off the event loop: its tokenizer thread."""

    tokenizer: TokenizerThread


async def adapter_of(
    service: Queue, model: ModelConfig, call: CallOptions, family: tuple[type[A], ...], does: str
) -> A:
    """The model's adapter, loaded (waiting for it as the caller asked), when it is of ``family``: a tuple, as
    ``isinstance`` takes it, since the family contracts are abstract classes."""
    adapter = await service.pool.acquire(model, wait=call.wait_for_load, timeout_s=service.load_timeout_s)
    if not isinstance(adapter, family):
        raise InvalidInput(f"model {model.id} does not {does} (its adapter is {model.adapter})")
    return adapter


async def tokenize(
    service: Tokenizing, timing: Timing, fn: Callable[[list[In]], list[Tokens]], inputs: list[In], *, split: bool
) -> list[Tokens]:
    """``fn(inputs)`` on the tokenizer thread (off the event loop), the time counted as tokenization; see
    ``TokenizerThread.run``."""
    started = time.perf_counter()
    tokens = await service.tokenizer.run(fn, inputs, split=split)
    timing.tokenization_ms += (time.perf_counter() - started) * 1000
    return tokens


async def decode_all(timing: Timing, jobs: Iterable[Awaitable[T]]) -> list[T]:
    """Every item's inputs decoded at once (off the event loop), the time counted as tokenization."""
    started = time.perf_counter()
    done = await asyncio.gather(*jobs)
    timing.tokenization_ms += (time.perf_counter() - started) * 1000
    return list(done)


async def run(
    service: Queue,
    model: ModelConfig,
    tokens: list[Tokens],
    options: BatchOptions,
    call: CallOptions,
    timing: Timing,
    *,
    each: bool = False,
) -> list[Any]:
    """Queue each input and await them all: the results in input order.

    By default the first failure fails the call. With ``each``, every input is answered alone: its result or
    the SIEError it got, and an input not done shortly before the caller's deadline gets DeadlineExceeded (all
    of them late: the call fails); an internal failure still fails the call. Either way a caller that leaves
    first gets CallerGone (its queued items dropped)."""
    if not tokens:
        return []
    items = _submit(service, model, tokens, options, call)
    if each:
        await _held(items, _watched(_settled([i.future for i in items], call), call))
        results = _each(items)
    else:
        results = await _held(items, _every(items, call))
    _count(timing, items)
    return results


def _submit(
    service: Queue, model: ModelConfig, tokens: list[Tokens], options: BatchOptions, call: CallOptions
) -> list[WorkItem]:
    loop = asyncio.get_running_loop()
    items = [WorkItem(model, t, options, loop.create_future(), priority=call.priority) for t in tokens]
    service.scheduler.submit(items)
    return items


async def _held(items: list[WorkItem], waiting: Awaitable[T]) -> T:
    """``waiting`` awaited; if it fails (or is cancelled), every item's work is dropped."""
    try:
        return await waiting
    except BaseException:
        for item in items:
            item.future.cancel()
        raise


def _count(timing: Timing, items: list[WorkItem]) -> None:
    """The items' wait in the queue and their run time, from the first start to the last finish."""
    started = [i.started_at for i in items if i.started_at]
    if started:
        timing.queue_ms += (min(started) - min(i.enqueued_at for i in items)) * 1000
        timing.inference_ms += (max(i.finished_at for i in items) - min(started)) * 1000


def _each(items: list[WorkItem]) -> list[Any]:
    """Each item's result or its own SIEError, a late one's work dropped; raises what fails the call."""
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
    return results


async def _every(items: list[WorkItem], call: CallOptions) -> list[Any]:
    """The items' results in order; CallerGone (and the items dropped) if the caller leaves first."""
    single = len(items) == 1  # the common case under many clients: no gather around one future
    answer: asyncio.Future[Any] = items[0].future if single else asyncio.gather(*(i.future for i in items))
    result = await _watched(answer, call)
    return [result] if single else list(result)


async def _watched(answer: Awaitable[T], call: CallOptions) -> T:
    """``answer`` awaited; if the caller leaves first it is cancelled (within ``_held``: the items dropped) and
    CallerGone raised."""
    if call.disconnected is None:
        return await answer
    waiting = asyncio.ensure_future(answer)  # a future as it is; a coroutine as a task, to cancel
    watcher: asyncio.Future[Any] = asyncio.ensure_future(call.disconnected())
    watcher.add_done_callback(lambda w: w.cancelled() or waiting.cancel())  # gone: drop the queued items
    try:
        return await waiting
    except asyncio.CancelledError:
        if watcher.done() and not watcher.cancelled():
            raise CallerGone() from None
        raise
    finally:
        watcher.cancel()


async def _settled(futures: list[asyncio.Future[Any]], call: CallOptions) -> None:
    """Until every future is done, or until shortly before the caller's deadline (so the items done by
    then are answered and the others fail alone, before the request's own deadline ends it all)."""
    left = call.remaining_s()
    timeout = None if left is None else max(left - min(DEADLINE_MARGIN_S, left / 10), 0.0)
    await asyncio.wait(futures, timeout=timeout)
