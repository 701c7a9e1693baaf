"""The caller's deadline (``X-SIE-Timeout-Ms``) around the work it asked for: past it, the work is
cancelled (queued items are dropped by the scheduler, a generation stops, a gateway stops waiting)
and the caller gets 504 DEADLINE_EXCEEDED. Counted by the request metrics under that code."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TypeVar

from sie_server.contract.headers import CallOptions
from sie_server.errors import DeadlineExceeded

T = TypeVar("T")
PASSED = "X-SIE-Timeout-Ms passed before the work started; nothing was run"
EXPIRED = "no answer within X-SIE-Timeout-Ms; the request's remaining work was dropped"


def _left(call: CallOptions) -> float | None:
    left = call.remaining_s()
    if left is not None and left <= 0:
        raise DeadlineExceeded(PASSED)
    return left


@asynccontextmanager
async def within(call: CallOptions) -> AsyncIterator[None]:
    left = _left(call)
    if left is None:
        yield
        return
    scope = asyncio.timeout(left)
    try:
        async with scope:
            yield
    except TimeoutError:
        if scope.expired():
            raise DeadlineExceeded(EXPIRED) from None
        raise


async def next_within(items: AsyncIterator[T], call: CallOptions) -> T:
    """The next item of a stream, or DEADLINE_EXCEEDED (the stream is closed) once the deadline passes."""
    left = call.remaining_s()
    if left is None:
        return await anext(items)
    try:
        return await asyncio.wait_for(anext(items), max(left, 0.0))
    except TimeoutError:
        raise DeadlineExceeded(EXPIRED) from None
