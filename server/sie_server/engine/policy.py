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
    """

    def __init__(self, batch_share: float = 0.1, batch_max_tokens: int | None = None, lanes: bool = True):
        if not 0.0 <= batch_share <= 1.0:
            raise ValueError("batch_share must be between 0 and 1")
        self.batch_share = batch_share
        self.batch_max_tokens = batch_max_tokens
        self.lanes = lanes
        self._contended = {INTERACTIVE: 0, BATCH: 0}

    def lane(self, priority: str) -> str:
        """The execution lane a class runs in; batches in one lane run one at a time."""
        return priority if self.lanes else "device"

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
