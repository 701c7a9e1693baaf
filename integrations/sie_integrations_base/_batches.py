"""How ``SIEBackend`` cuts texts into requests and puts the answers back in input order."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any, Final, TypeVar

from sie_sdk.types import Item

# Batches of one async call in flight at once: enough for the server to batch across them.
ASYNC_CONCURRENCY: Final = 4

T = TypeVar("T")
R = TypeVar("R")


def chunked(items: Sequence[T], size: int) -> Iterator[list[T]]:
    """Consecutive slices of at most ``size`` items."""
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


def text_list(texts: Sequence[str]) -> list[str]:
    """``texts`` as a list of strings; one bare string is refused (it is a sequence of characters)."""
    if isinstance(texts, str):
        raise TypeError("pass a list of texts, not one string")
    return [str(text) for text in texts]


def score_batches(texts: Sequence[str], size: int) -> Iterator[tuple[int, list[Item]]]:
    """(offset, items) per request; item ids are positions so answers map back to inputs."""
    for start in range(0, len(text_list(texts)), size):
        yield start, [Item(id=str(i), text=str(text)) for i, text in enumerate(texts[start : start + size])]


def scatter(scores: list[float], entries: Sequence[Any], start: int) -> None:
    """Put one score answer's entries (``item_id`` = position in its batch) into ``scores``."""
    for entry in entries:
        scores[start + int(entry["item_id"])] = float(entry["score"])


async def gather_batches(call: Callable[[T], Awaitable[R]], batches: list[T]) -> list[R]:
    """``call`` on each batch, at most ``ASYNC_CONCURRENCY`` at once; answers in batch order."""
    gate = asyncio.Semaphore(ASYNC_CONCURRENCY)

    async def one(batch: T) -> R:
        async with gate:
            return await call(batch)

    return list(await asyncio.gather(*(one(batch) for batch in batches)))
