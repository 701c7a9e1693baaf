"""Who goes next: the priority policy. The scheduler asks it and never branches on priority itself."""

from __future__ import annotations

from collections.abc import Collection

from sie_server.contract.headers import PRIORITIES, Priority

INTERACTIVE = Priority.INTERACTIVE.value
BATCH = Priority.BATCH.value
__all__ = ["BATCH", "INTERACTIVE", "PRIORITIES", "PriorityPolicy"]


class PriorityPolicy:
    """Interactive work before batch work, in one of two ways.

    With ``lanes`` (the default) each class has its own execution lane: an interactive batch
    starts at once even while a batch-class batch runs, and the two share the device kernel
    by kernel instead of the interactive one waiting for the whole batch. Batch-class batches
    are capped at ``batch_max_tokens`` and the two lanes together never exceed a model's
    ``max_batch_tokens``, so one activation reserve still covers both.

    With one shared lane, interactive batches are chosen first; while both classes wait,
    batch work gets at least ``batch_share`` of the batches, so it never starves. Only
    contended choices count, so a quiet spell of one class does not buy it a burst later.

    ``defer_s`` (on a CPU, ``--batch-defer-ms``): lanes are threads on the same few cores, and two
    forward passes at once each get half of them, so a live call beside a batch took up to 2.8x its
    idle p99 (benchmarks.batch_live). There a batch-class batch does not start while an interactive
    one runs, unless its oldest item has waited ``defer_s``, so batch work still moves under a steady
    stream of live calls. A batch-class pass already running when a live one starts stops at its
    model's next module until the live pass ends, again for at most ``defer_s`` (engine/yielding.py).
    """

    def __init__(
        self,
        batch_share: float = 0.1,
        batch_max_tokens: int | None = None,
        lanes: bool = True,
        defer_s: float = 0.0,
    ):
        if not 0.0 <= batch_share <= 1.0:
            raise ValueError("batch_share must be between 0 and 1")
        self.batch_share = batch_share
        self.batch_max_tokens = batch_max_tokens
        self.lanes = lanes
        self.defer_s = defer_s
        self._contended = {INTERACTIVE: 0, BATCH: 0}

    def lane(self, priority: str) -> str:
        """The execution lane a class runs in; batches in one lane run one at a time."""
        return priority if self.lanes else "device"

    def startable(self, ready: Collection[str], running: Collection[str], batch_waited_s: float | None) -> set[str]:
        """The classes of ``ready`` (waiting, their lane free) that may start now, given the classes of the
        batches running and how long the oldest batch-class item has waited."""
        allowed = set(ready)
        if BATCH in allowed and self.deferred_for(running, batch_waited_s) is not None:
            allowed.discard(BATCH)
        return allowed

    def deferred_for(self, running: Collection[str], batch_waited_s: float | None) -> float | None:
        """Seconds until waiting batch-class work (its oldest item waiting ``batch_waited_s``; None: none
        waits) may start beside the interactive batch running; None when it is not held back."""
        if batch_waited_s is None or not self.lanes or self.defer_s <= 0 or INTERACTIVE not in running:
            return None
        if batch_waited_s >= self.defer_s:
            return None
        return self.defer_s - batch_waited_s

    def next_class(self, waiting: Collection[str]) -> str | None:
        """The class to serve next, among classes with work waiting and a free lane."""
        if not waiting:
            return None
        if len(waiting) == 1:
            return next(iter(waiting))
        total = self._contended[INTERACTIVE] + self._contended[BATCH]
        owed = self._contended[BATCH] < self.batch_share * total
        return BATCH if owed else INTERACTIVE

    def record(self, chosen: str, waiting: Collection[str]) -> None:
        """Count a batch that was run; only choices made while both classes waited count."""
        if len(waiting) > 1:
            self._contended[chosen] += 1

    def token_budget(self, priority: str, model_budget: int) -> int:
        """Batch-class batches may be capped smaller so interactive work waits less behind them."""
        if priority == BATCH and self.batch_max_tokens:
            return min(model_budget, self.batch_max_tokens)
        return model_budget
