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


def form_batch(
    waiting: Sequence[T], max_batch_tokens: int, max_padding: float = 1.25, min_batch_tokens: int = 512
) -> list[T]:
    """Pick the oldest item and the items nearest to it in length, within the token budget.

    The oldest item always goes (so nothing waits behind a stream of newer work); the
    batch grows one neighbour at a time in length order, the neighbour closest in length
    first, while ``longest x count`` stays within ``max_batch_tokens`` and the padded tokens
    stay within ``max_padding`` times the real ones (below ``min_batch_tokens`` padded
    tokens the padding limit does not apply: tiny batches are worth filling). Items the
    limits leave out form the next batches, each of similar lengths. An item longer than
    the whole budget runs alone.
    """
    if not waiting:
        return []
    ordered = sorted(waiting, key=lambda item: item.cost)
    oldest = min(range(len(ordered)), key=lambda i: ordered[i].enqueued_at)
    lo = hi = oldest
    longest = real = ordered[oldest].cost

    def fits(new_longest: int, size: int, new_real: int) -> bool:
        padded = new_longest * size
        return padded <= max_batch_tokens and (padded <= min_batch_tokens or padded <= max_padding * new_real)

    while True:
        size = hi - lo + 2
        shorter = ordered[lo - 1] if lo > 0 else None
        longer = ordered[hi + 1] if hi + 1 < len(ordered) else None
        options = []
        if shorter is not None:
            options.append((longest - shorter.cost, "shorter", shorter.cost))
        if longer is not None:
            options.append((longer.cost - longest, "longer", longer.cost))
        for _, side, cost in sorted(options):
            new_longest = max(longest, cost)
            if fits(new_longest, size, real + cost):
                if side == "shorter":
                    lo -= 1
                else:
                    hi += 1
                longest, real = new_longest, real + cost
                break
        else:
            break
    return list(ordered[lo : hi + 1])
