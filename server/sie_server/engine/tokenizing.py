"""Tokenization off the event loop: one dedicated thread, jobs taken in turns.

Every request is tokenized before its items can be costed and queued. With many
concurrent clients that is one hand-off per request, so the hand-off must be cheap for the
event loop: a job is a plain object on a ``SimpleQueue`` and its answer comes back through
one ``call_soon_threadsafe``. (``asyncio.to_thread`` builds a context copy, a
``concurrent.futures.Future`` with its own lock and condition and a chain of callbacks for
each call, and spreads the work over up to ``cores + 4`` threads that compete with the
model's threads for the same cores.)

A job over many inputs runs in chunks of ``chunk`` inputs and goes back to the end of the
line after each chunk, so a one-text request waits behind at most one chunk of a large
request, not behind all of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from queue import SimpleQueue
from typing import Any, Generic, TypeVar

from sie_server.adapters.runtime.base import Tokens

In = TypeVar("In")
CHUNK = 64


@dataclass(eq=False)
class _Job(Generic[In]):
    fn: Callable[[list[In]], list[Tokens]]
    inputs: Sequence[In]
    future: asyncio.Future[list[Tokens]]
    loop: asyncio.AbstractEventLoop
    chunk: int  # inputs per call
    position: int = 0  # inputs done so far
    done: list[Tokens] = field(default_factory=list)


class TokenizerThread:
    """Runs tokenizer calls on one daemon thread, in turns of at most ``chunk`` inputs."""

    def __init__(self, name: str = "sie-tokenize", chunk: int = CHUNK):
        self.chunk = chunk
        self._jobs: SimpleQueue[_Job[Any] | None] = SimpleQueue()
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()

    async def run(
        self, fn: Callable[[list[In]], list[Tokens]], inputs: Sequence[In], *, split: bool = True
    ) -> list[Tokens]:
        """``fn(inputs)`` on the tokenizer thread.

        With ``split`` the inputs go in chunks and the answers are concatenated in order (``fn``
        must answer position by position); ``split=False`` makes one call, for a ``fn`` whose
        answers refer to positions in the list it was given.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[list[Tokens]] = loop.create_future()
        chunk = self.chunk if split else max(1, len(inputs))
        self._jobs.put(_Job(fn, inputs, future, loop, chunk))
        return await future

    def stop(self) -> None:
        """The thread ends after the jobs already queued."""
        self._jobs.put(None)

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            self._turn(job)
            del job  # while waiting for the next one, hold no reference to this caller's adapter

    def _turn(self, job: _Job[Any]) -> None:
        """One chunk of ``job``; the job goes back in line if it has more."""
        if job.future.done():  # the caller went away while it waited: drop the rest
            return
        end = job.position + job.chunk
        try:
            job.done.extend(job.fn(list(job.inputs[job.position : end])))
        except BaseException as exc:  # the caller gets it, as from any adapter call
            _answer(job, None, exc)
            return
        job.position = end
        if end < len(job.inputs):
            self._jobs.put(job)  # the rest after whoever is waiting now
        else:
            _answer(job, job.done, None)


def _answer(job: _Job[Any], result: list[Tokens] | None, error: BaseException | None) -> None:
    with contextlib.suppress(RuntimeError):  # RuntimeError: the loop has closed (shutdown), nobody waits
        job.loop.call_soon_threadsafe(_settle, job.future, result, error)


def _settle(future: asyncio.Future[list[Tokens]], result: list[Tokens] | None, error: BaseException | None) -> None:
    if future.done():  # the caller went away meanwhile
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result if result is not None else [])
