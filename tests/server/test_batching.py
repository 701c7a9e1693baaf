"""Forming a batch: oldest item first, nearest lengths, never over the token budget."""

from __future__ import annotations

import random
from dataclasses import dataclass

from sie_server.engine.batching import form_batch, padded_cost


@dataclass
class Fake:
    cost: int
    enqueued_at: float


def test_takes_everything_that_fits() -> None:
    items = [Fake(10, i) for i in range(5)]
    assert len(form_batch(items, 100)) == 5


def test_never_exceeds_budget_and_always_holds_the_oldest() -> None:
    rng = random.Random(7)
    for _ in range(200):
        items = [Fake(rng.randint(1, 300), rng.random()) for _ in range(rng.randint(1, 60))]
        budget = rng.randint(64, 4096)
        batch = form_batch(items, budget)
        oldest = min(items, key=lambda i: i.enqueued_at)
        assert oldest in batch
        assert len(batch) == 1 or padded_cost([i.cost for i in batch]) <= budget


def test_over_long_item_runs_alone() -> None:
    items = [Fake(500, 0.0), Fake(5, 1.0)]
    assert form_batch(items, 100) == [items[0]]


def test_groups_similar_lengths() -> None:
    items = [Fake(10, 0.0), Fake(200, 1.0), Fake(11, 2.0), Fake(12, 3.0), Fake(190, 4.0)]
    batch = form_batch(items, 100)
    assert sorted(i.cost for i in batch) == [10, 11, 12]


def test_padding_limit_splits_mixed_lengths_into_similar_batches() -> None:
    items = [Fake(10, 0.0), Fake(11, 1.0), Fake(12, 2.0), Fake(100, 3.0), Fake(104, 4.0)]
    first = form_batch(items, 10_000, max_padding=1.25, min_batch_tokens=0)
    assert sorted(i.cost for i in first) == [10, 11, 12]
    rest = [i for i in items if i not in first]
    assert sorted(i.cost for i in form_batch(rest, 10_000, max_padding=1.25, min_batch_tokens=0)) == [100, 104]
    # small batches are filled regardless: 5 x 104 = 520 padded tokens <= 1024
    assert len(form_batch(items, 10_000, max_padding=1.25, min_batch_tokens=1024)) == 5
