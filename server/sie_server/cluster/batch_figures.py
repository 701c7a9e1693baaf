"""The cluster's Batch API figures, as the gateway shows them on ``/v1/status`` and ``/metrics``.

A gateway runs no line, so it reads what the cluster holds, every ``EVERY_S`` seconds in the background
(the status route then answers at once, from the last reading):

- batches in progress: the batch records in a live status (validating, in progress, finalizing,
  cancelling), also set on the gauge ``sie_gateway_batches_in_progress``;
- lines done and failed: the request counts of every batch the cluster holds (a running batch's from
  its kept results); lines per second: how fast their sum grew over the last ``WINDOW_S`` seconds;
- lines in flight: the line messages workers have taken and not yet acked (the lines consumer's
  ack-pending count), and the limit: the live workers' ``--batch-inflight`` summed.

Each worker also counts the lines it finishes on its own ``/metrics`` (``sie_batch_lines_total`` by
endpoint and outcome, cluster/batch_worker.py), which Prometheus sums over the pool.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Callable

from prometheus_client import Gauge

from sie_server.cluster import nats_connection
from sie_server.cluster.batch_finalize import progress
from sie_server.cluster.batch_store import LINES_CONSUMER, LINES_STREAM, BatchStore
from sie_server.contract.batch_wire import LIVE_STATUSES, BatchStatus
from sie_server.contract.status import BatchesStatus

log = logging.getLogger(__name__)
EVERY_S = 5.0
WINDOW_S = 30.0


class BatchFigures:
    def __init__(self, in_progress: Gauge, inflight_limit: Callable[[], int]) -> None:
        self.gauge = in_progress
        self.inflight_limit = inflight_limit
        self.samples: collections.deque[tuple[float, int]] = collections.deque()
        self.peak = 0
        self.last = BatchesStatus(
            in_progress=0,
            lines_in_flight=0,
            peak_lines_in_flight=0,
            inflight_limit=0,
            lines_done=0,
            lines_failed=0,
            lines_per_s=0.0,
        )

    def status(self) -> BatchesStatus:
        """The last reading (``BatchesReporter`` of api/routes/status.py)."""
        return self.last.model_copy(update={"inflight_limit": self.inflight_limit()})

    async def run(self, store: BatchStore) -> None:
        """Read the figures every ``EVERY_S`` seconds until cancelled; a reading NATS cannot answer is skipped."""
        while True:
            try:
                await self.read(store)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.debug("batch figures: %s", nats_connection.describe(exc))
            await asyncio.sleep(EVERY_S)

    async def read(self, store: BatchStore) -> BatchesStatus:
        done = failed = live = 0
        for record in await store.batches():
            counts = record.batch.request_counts
            if record.batch.status in LIVE_STATUSES:
                live += 1
                if record.batch.status in (BatchStatus.IN_PROGRESS, BatchStatus.CANCELLING):
                    counts = await progress(store, record)
            done += counts.completed
            failed += counts.failed
        in_flight = 0
        with contextlib.suppress(Exception):  # no lines stream yet: none in flight
            info = await store.js.consumer_info(LINES_STREAM, LINES_CONSUMER)
            in_flight = int(info.num_ack_pending)
        self.peak = max(self.peak, in_flight)
        self.gauge.set(live)
        self.last = BatchesStatus(
            in_progress=live,
            lines_in_flight=in_flight,
            peak_lines_in_flight=self.peak,
            inflight_limit=self.inflight_limit(),
            lines_done=done,
            lines_failed=failed,
            lines_per_s=round(self._rate(time.monotonic(), done + failed), 3),
        )
        return self.last

    def _rate(self, at: float, finished: int) -> float:
        """Lines finished per second over the last ``WINDOW_S`` seconds of readings."""
        self.samples.append((at, finished))
        while len(self.samples) > 2 and at - self.samples[1][0] >= WINDOW_S:
            self.samples.popleft()
        first_at, first = self.samples[0]
        return max(0, finished - first) / (at - first_at) if at > first_at else 0.0
