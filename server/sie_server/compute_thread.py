"""The threads that run models: one per lane, that ends when it has been idle a while.

Why a thread ends when idle: torch's CPU kernels run on libgomp (OpenMP). Every thread that
runs a parallel kernel gets its own team of worker threads, kept until that thread exits, and
libgomp counts every team's threads. Once they outnumber the CPUs, it makes all of them sleep
on a futex after ~100 spins instead of spinning between kernels, so every kernel of a decode
step pays a wake-up: on 2 cores that made SmolLM2's 8-row decode steps ~20% slower (voluntary
context switches went from ~0 to ~20,000 per 64 steps; benchmarks/RESULTS.md). A lane thread
that ends after ``idle_s`` without work takes its team with it, so while only one kind of work
runs (generation, or encodes of one class) only one team exists and its threads spin; while two
lanes really run at once, sleeping is right (they share the cores). Loads run on a thread of their
own (``in_own_thread``) for the same reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor, Future
from functools import partial
from typing import Any, TypeVar

T = TypeVar("T")

IDLE_S = 2.0


class ComputeThread(Executor):
    """An executor of one thread, started on the first submit and ended after ``idle_s`` idle."""

    def __init__(self, name: str, idle_s: float = IDLE_S):
        self.name = name
        self.idle_s = idle_s
        self._work: deque[tuple[Future[Any], Callable[..., Any], tuple[Any, ...], dict[str, Any]]] = deque()
        self._lock = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False
        self.started = 0  # threads started so far (a new one after each idle end)

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        future: Future[T] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError(f"{self.name} is shut down")
            self._work.append((future, fn, args, kwargs))
            if self._thread is None:
                self.started += 1
                self._thread = threading.Thread(target=self._run, name=f"{self.name}-{self.started}", daemon=True)
                self._thread.start()
            self._lock.notify()
        return future

    @property
    def alive(self) -> bool:
        with self._lock:
            return self._thread is not None

    def _next(self) -> tuple[Future[Any], Callable[..., Any], tuple[Any, ...], dict[str, Any]] | None:
        """The next piece of work, or None when this thread ends (idle too long, or shut down)."""
        with self._lock:
            while not self._work:
                if self._closed or (not self._lock.wait(self.idle_s) and not self._work):
                    self._thread = None
                    return None
            return self._work.popleft()

    def _run(self) -> None:
        while (item := self._next()) is not None:
            _do(*item)
            del item  # hold no batch while waiting for the next

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._closed = True
            if cancel_futures:
                while self._work:
                    self._work.popleft()[0].cancel()
            thread = self._thread
            self._lock.notify_all()
        if wait and thread is not None and thread is not threading.current_thread():
            thread.join()


def _do(future: Future[Any], fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    if not future.set_running_or_notify_cancel():
        return
    try:
        result = fn(*args, **kwargs)
    except BaseException as exc:
        future.set_exception(exc)
    else:
        future.set_result(result)


async def in_own_thread(name: str, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` on a new thread that ends with it (with the caller's context, like ``asyncio.to_thread``)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()
    context = contextvars.copy_context()

    def settle(outcome: Callable[[], None]) -> None:
        if not done.done():
            outcome()

    def work() -> None:
        outcome: Callable[[], None]
        try:
            result = context.run(fn, *args)
            outcome = partial(done.set_result, result)
        except BaseException as exc:
            outcome = partial(done.set_exception, exc)
        with contextlib.suppress(RuntimeError):  # the event loop has closed meanwhile
            loop.call_soon_threadsafe(settle, outcome)

    threading.Thread(target=work, name=name, daemon=True).start()
    return await done
