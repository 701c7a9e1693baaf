"""Fault isolation: when a batch fails, run its members apart so only those that fail on their own
get an error, and say what each of them is told.

Used by the scheduler (encode, score and extract batches: halves, down to single items) and by the
decode loop (a prefill or decode step of several sequences: each sequence again, alone). A member
that fails alone while others of its batch succeed failed on its own values: the caller's input,
a 400. When every member fails alone the model itself is failing: a 500.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import torch

from sie_server.adapters.runtime.generator import Generator
from sie_server.errors import InferenceError, InvalidInput, ResourceExhausted, SIEError

log = logging.getLogger(__name__)
OOM_RETRY_AFTER_S = 2.0
T = TypeVar("T")
R = TypeVar("R")
Outcome = Any  # a result, or the exception its member raised when run alone


def is_out_of_memory(exc: BaseException) -> bool:
    return (
        isinstance(exc, MemoryError)
        or type(exc).__name__ == "OutOfMemoryError"
        or (isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower())
    )


def own_failure(exc: BaseException, model_id: str, *, others_served: bool) -> SIEError:
    """The error a member gets for the exception it raised when run alone (``others_served``: some
    other member of its batch succeeded, so the failure is tied to this member's input)."""
    if isinstance(exc, SIEError):
        return exc
    if is_out_of_memory(exc):
        return ResourceExhausted(
            f"model {model_id} ran out of memory on this input even when run alone; retry later or send a shorter one",
            retry_after=OOM_RETRY_AFTER_S,
        )
    if others_served:
        return InvalidInput(
            f"model {model_id} cannot process this input ({type(exc).__name__}); the rest of its batch was served"
        )
    return InferenceError(f"model {model_id} failed on this input ({type(exc).__name__})")


def settle(outcomes: list[Any], model_id: str) -> list[Any]:
    """Each outcome as it is, or as the ``SIEError`` its member gets when it is an exception."""
    served = any(not isinstance(o, BaseException) for o in outcomes)
    return [own_failure(o, model_id, others_served=served) if isinstance(o, BaseException) else o for o in outcomes]


async def run_apart(items: list[T], run: Callable[[list[T]], Awaitable[list[R]]]) -> list[R | BaseException]:
    """After a run of all ``items`` together failed: run them again in halves, a failing half again in
    halves, down to single items. Each item gets its result or the exception it raises on its own."""
    middle = len(items) // 2
    outcomes: list[R | BaseException] = []
    for half in (items[:middle], items[middle:]):
        if not half:
            continue
        try:
            outcomes.extend(await run(half))
        except Exception as exc:
            if len(half) == 1:
                outcomes.append(exc)
            else:
                apart = await run_apart(half, run)
                outcomes.extend(apart)
    return outcomes


def prefill_apart(adapter: Generator, batch: Any, prompts: list[list[int]]) -> tuple[Any, list[Any]]:
    """Prefill each prompt alone and merge those that succeed into ``batch`` (on the decode thread):
    the batch, and per prompt its logits (1 x vocab) or the exception it raised."""
    outcomes: list[Any] = []
    for prompt in prompts:
        joined = None
        try:
            joined, logits = adapter.prefill([prompt])
            batch = adapter.merge(batch, joined)
        except Exception as exc:
            log.warning("prefill of one sequence failed on its own", exc_info=True)
            if joined is not None:
                adapter.discard(joined)
            outcomes.append(exc)
        else:
            outcomes.append(logits)
    return batch, outcomes


def decode_apart(adapter: Generator, batch: Any, rows: list[tuple[list[int], int, int]]) -> tuple[Any, list[Any]]:
    """After a decode step of ``batch`` failed (its cache may be half written): drop the batch, then
    run each row alone again (prefill of the tokens its cache held, then the step's decode) and merge
    those that succeed into a new batch. ``rows``: (tokens held, token to feed, its position) per row.
    The new batch (None if none succeeded), and per row its logits (1 x vocab) or its exception."""
    adapter.discard(batch)
    rebuilt: Any = None
    outcomes: list[Any] = []
    for held, token, position in rows:
        alone = None
        try:
            alone, _ = adapter.prefill([held])
            logits = adapter.decode(alone, [token], [position])
            rebuilt = adapter.merge(rebuilt, alone)
        except Exception as exc:
            log.warning("decode step of one sequence failed on its own", exc_info=True)
            if alone is not None:
                adapter.discard(alone)
            outcomes.append(exc)
        else:
            outcomes.append(logits)
    return rebuilt, outcomes


def stack(outcomes: list[Any]) -> torch.Tensor:
    """The logits of the members that succeeded, one row each, in order."""
    return torch.cat([o for o in outcomes if isinstance(o, torch.Tensor)])
