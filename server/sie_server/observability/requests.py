"""Counting the server's requests as they finish: by model, task and outcome, with their latency,
and how many are being answered now (the drain waits for zero); the last minute for ``/v1/status``."""

from __future__ import annotations

from typing import Any

from sie_server.observability.live import LiveStats
from sie_server.observability.metrics import Metrics


class RequestCounter:
    def __init__(self, metrics: Metrics):
        self.metrics = metrics
        self.inflight = 0
        self.live = LiveStats()  # the status page's last minute
        # (model, task, status) -> its request counter and (model, task) latency histogram: the
        # label lookups (validation and a lock each) done once per series, not on every request
        self._series: dict[tuple[str, str, str], tuple[Any, Any]] = {}

    def started(self) -> None:
        self.inflight += 1

    def finished(self, model: str | None, task: str | None, status: str, seconds: float) -> None:
        self.inflight -= 1
        if not model or not task:
            return
        key = (model, task, status)
        series = self._series.get(key)
        if series is None:
            series = (self.metrics.requests.labels(*key), self.metrics.request_duration.labels(model, task))
            self._series[key] = series
        series[0].inc()
        series[1].observe(seconds)
        self.live.finished(model, task, status, seconds)
