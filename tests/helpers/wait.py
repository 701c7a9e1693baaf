"""Poll until something has happened, with a deadline: the tests' only way to wait for an event.

A fixed ``sleep`` either waits too little on a slow machine (a flaky failure) or too long on a fast
one; these poll often and fail with a message saying what never happened.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

T = TypeVar("T")

INTERVAL_S = 0.01


def wait_until(
    predicate: Callable[[], T | None], *, timeout: float = 10.0, message: str, interval: float = INTERVAL_S
) -> T:
    """Call ``predicate`` until it returns something truthy and return that; after ``timeout``
    seconds raise AssertionError with ``message`` and the last value seen."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{message} (not within {timeout} s; last value {value!r})")
        time.sleep(interval)


@overload
async def async_wait_until(
    predicate: Callable[[], Awaitable[T | None]], *, timeout: float = ..., message: str, interval: float = ...
) -> T: ...
@overload
async def async_wait_until(
    predicate: Callable[[], T | None], *, timeout: float = ..., message: str, interval: float = ...
) -> T: ...
async def async_wait_until(
    predicate: Callable[[], Any], *, timeout: float = 10.0, message: str, interval: float = INTERVAL_S
) -> Any:
    """``wait_until`` for a test on the event loop: the predicate may be a coroutine function, and
    the loop runs between polls."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{message} (not within {timeout} s; last value {value!r})")
        await asyncio.sleep(interval)


def stays(predicate: Callable[[], bool], *, for_s: float, message: str, interval: float = 0.05) -> None:
    """Assert that ``predicate`` holds at every poll for ``for_s`` seconds (that something does NOT
    happen: the only case where a test must spend a fixed time)."""
    deadline = time.monotonic() + for_s
    while time.monotonic() < deadline:
        assert predicate(), message
        time.sleep(interval)
    assert predicate(), message


def wait_until_steady(read: Callable[[], float], *, quiet_s: float, timeout: float = 10.0, message: str) -> float:
    """Wait until ``read()`` gives the same value twice ``quiet_s`` apart (a counter that has stopped
    moving: ``quiet_s`` must be well above the interval at which it would move) and return that value."""
    deadline = time.monotonic() + timeout
    before = read()
    while True:
        time.sleep(quiet_s)
        now = read()
        if now == before:
            return now
        if time.monotonic() >= deadline:
            raise AssertionError(f"{message} (still moving after {timeout} s: {before} -> {now})")
        before = now
