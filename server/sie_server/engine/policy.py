"""Who goes next: the priority policy. The scheduler asks it and never branches on priority itself."""

from __future__ import annotations

from collections.abc import Collection

INTERACTIVE = "interactive"
BATCH = "batch"
PRIORITIES = (INTERACTIVE, BATCH)


class PriorityPolicy:
    """Interactive work first; while both classes wait, batch work gets at least ``batch_share``
    of the batches, so it never starves. Only contended choices count towards the share, so a
    long quiet spell of one class does not buy it a burst later."""

    def __init__(self, batch_share: float = 0.1, batch_max_tokens: int | None = None):
        if not 0.0 <= batch_share <= 1.0:
            raise ValueError("batch_share must be between 0 and 1")
        self.batch_share = batch_share
        self.batch_max_tokens = batch_max_tokens
        self._contended = {INTERACTIVE: 0, BATCH: 0}

    def next_class(self, waiting: Collection[str]) -> str | None:
        """The class to serve next, given the classes that have work waiting."""
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
