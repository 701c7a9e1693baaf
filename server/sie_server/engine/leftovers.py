"""Failing the work a drain did not finish in time, so every caller gets an answer before exit.

Encode, score and extract items waiting in the scheduler or in a running batch get the error on
their futures (the request answers it; a batch that finishes later finds its futures done and
sets nothing). Generations, waiting or decoding, end with the error: a whole answer becomes that
error, a stream ends with an error event. The scheduler and the decode loops keep their work in
their own fields; this module reads them because failing everything at once is the drain's job,
not theirs.
"""

from __future__ import annotations

from sie_server.engine.generation import GenerationService
from sie_server.engine.scheduler import Scheduler, WorkItem
from sie_server.errors import SIEError


def _items(scheduler: Scheduler) -> list[WorkItem]:
    queued = [item for items in scheduler._groups.values() for item in items]
    running = [item for batch in scheduler._running.values() for item in batch]
    return [*queued, *running]


def fail_batched(scheduler: Scheduler, error: SIEError) -> int:
    """Fail every queued or running item that has no answer yet; how many were failed."""
    failed = 0
    for item in _items(scheduler):
        if not item.future.done():
            item.future.set_exception(error)
            failed += 1
    return failed


def fail_generations(generation: GenerationService, error: SIEError) -> int:
    """End every waiting or decoding sequence with ``error``; how many were ended."""
    failed = 0
    for loop in generation.loops.values():
        for seq in [*loop.active, *loop.waiting]:
            if seq.finish_reason is not None or seq.cancelled or seq.error is not None:
                continue
            seq.error = error
            seq.cancelled = True  # the decode loop drops it at its next step
            seq.deltas.put_nowait(None)
            failed += 1
    return failed


def fail_leftovers(scheduler: Scheduler, generation: GenerationService, error: SIEError) -> int:
    return fail_batched(scheduler, error) + fail_generations(generation, error)
