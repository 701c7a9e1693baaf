"""Figures the gateway exports per pool for alerting: the models' states as live workers report
them, and the messages parked in a pool's dead-letter stream."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from prometheus_client import Gauge

from sie_server.cluster import streams

ALERT_STATES = frozenset({"loaded", "loading", "failed"})  # model states worth a series


def model_states(workers: Iterable[tuple[str, Mapping[str, Mapping[str, Any]]]]) -> Counter[tuple[str, ...]]:
    """(pool, model, state) -> how many of the given (pool, models) workers report that model in that state."""
    found: Counter[tuple[str, ...]] = Counter()
    for pool, models in workers:
        for model_id, info in models.items():
            state = str(info.get("state", ""))
            if state in ALERT_STATES:
                found[pool, model_id, state] += 1
    return found


def set_counts(gauge: Gauge, counts: Mapping[tuple[str, ...], int], shown: set[tuple[str, ...]]) -> None:
    """Set the gauge to ``counts``; label sets shown before and absent now go to 0 (``shown`` is kept up to date)."""
    for labels in shown - set(counts):
        gauge.labels(*labels).set(0)
    for labels, count in counts.items():
        gauge.labels(*labels).set(count)
    shown.update(counts)


async def dead_letters(js: Any, pool: str) -> int | None:
    """Messages parked in the pool's dead-letter stream; None when unknown (no stream yet, NATS away)."""
    try:
        info = await js.stream_info(
            streams.DEAD_LETTER_STREAM, subjects_filter=streams.DEAD_LETTER_SUBJECT.format(pool=pool)
        )
    except Exception:
        return None
    subjects = info.state.subjects or {}
    return int(sum(subjects.values()))
