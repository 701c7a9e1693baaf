"""The gateway's waits on workers (a reply, the next part of a stream, a worker to come up), so a
drain past its deadline can fail them all at once.

Each wait runs inside ``Waits.watch()``. ``fail(error)`` cancels every task inside one, and the
wait raises ``error`` instead of the cancellation: the request answers it, a stream ends with its
error event. A wait begun after that raises ``error`` at once. Watches do not nest within a task.
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Any

from sie_server.errors import SIEError


class Waits:
    def __init__(self) -> None:
        self.error: SIEError | None = None
        self._waiting: set[asyncio.Task[Any]] = set()
        self._failed: set[asyncio.Task[Any]] = set()

    def watch(self) -> _Watch:
        return _Watch(self)

    def fail(self, error: SIEError) -> int:
        """End every wait under way with ``error``, and every later one; how many were under way."""
        self.error = error
        ending = self._waiting - self._failed
        for task in ending:
            self._failed.add(task)
            task.cancel()
        return len(ending)


class _Watch:
    __slots__ = ("_task", "_waits")

    def __init__(self, waits: Waits):
        self._waits = waits
        self._task: asyncio.Task[Any] | None = None

    def __enter__(self) -> None:
        if self._waits.error is not None:
            raise self._waits.error
        self._task = asyncio.current_task()
        assert self._task is not None, "a wait runs in a task"
        self._waits._waiting.add(self._task)

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        task, waits = self._task, self._waits
        assert task is not None
        waits._waiting.discard(task)
        if task not in waits._failed:
            return None
        waits._failed.discard(task)
        if kind is not asyncio.CancelledError or waits.error is None:
            return None  # answered before the cancellation reached it
        task.uncancel()  # the cancellation was ours: it becomes the drain's error
        raise waits.error from None
