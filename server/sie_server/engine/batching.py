"""Forming one batch from a model's waiting items: by length, within a token budget."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar


class Sized(Protocol):
    @property
    def cost(self) -> int: ...

    @property
    def enqueued_at(self) -> float: ...


T = TypeVar("T", bound=Sized)


def padded_cost(lengths: Sequence[int]) -> int:
    """Tokens a padded batch occupies: its longest item times its size."""
    return max(lengths) * len(lengths) if lengths else 0


def form_batch(waiting: Sequence[T], max_batch_tokens: int) -> list[T]:
    """Pick the oldest item and the items nearest to it in length, up to the token budget.

    The oldest item always goes (so nothing waits behind a stream of newer work); the
    batch grows one neighbour at a time in length order, taking whichever neighbour is
    closest in length to the batch, while ``longest x count`` stays within budget. An
    item longer than the whole budget runs alone.
    """
    if not waiting:
        return []
    ordered = sorted(waiting, key=lambda item: item.cost)
    oldest = min(range(len(ordered)), key=lambda i: ordered[i].enqueued_at)
    lo = hi = oldest
    longest = ordered[oldest].cost
    while True:
        size = hi - lo + 1
        shorter = ordered[lo - 1] if lo > 0 else None
        longer = ordered[hi + 1] if hi + 1 < len(ordered) else None
        take_shorter = shorter is not None and (longer is None or longest - shorter.cost <= longer.cost - longest)
        if take_shorter and shorter is not None and longest * (size + 1) <= max_batch_tokens:
            lo -= 1
            continue
        if longer is not None and longer.cost * (size + 1) <= max_batch_tokens:
            hi += 1
            longest = longer.cost
            continue
        if shorter is not None and not take_shorter and longest * (size + 1) <= max_batch_tokens:
            lo -= 1
            continue
        break
    return list(ordered[lo : hi + 1])
