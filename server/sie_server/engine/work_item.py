"""One input of one request waiting in the shared queue, and how a batch of them runs on a lane's thread."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from sie_server.adapters.runtime.base import ModelAdapter, Tokens
from sie_server.adapters.runtime.encoder import Encoder
from sie_server.adapters.runtime.options import BatchOptions
from sie_server.catalog.schema import ModelConfig
from sie_server.observability import logging as request_logs
from sie_server.observability import tracing

GroupKey = tuple[str, BatchOptions]


@dataclass(eq=False)
class WorkItem:
    """One input of one request, waiting to be run as part of some batch."""

    model: ModelConfig
    tokens: Tokens
    #: what the batch is run with; its type says which forward pass (encode, score, extract)
    options: BatchOptions
    future: asyncio.Future[Any]
    priority: str = "interactive"
    enqueued_at: float = field(default_factory=time.monotonic)
    started_at: float = 0.0
    finished_at: float = 0.0
    #: the request it belongs to, for log lines about its batch; its span's context when tracing is on
    request_id: str | None = field(default_factory=request_logs.current_request_id)
    trace: Any = field(default_factory=tracing.current)
    #: items of one group may share a batch: same model, same options
    group: GroupKey = field(init=False)

    def __post_init__(self) -> None:
        self.group = (self.model.id, self.options)

    @property
    def cost(self) -> int:
        return self.tokens.length


def timed_run(
    adapter: Encoder[Any], batch: list[Tokens], options: BatchOptions, guard: Callable[[], AbstractContextManager[None]]
) -> tuple[list[Any], float]:
    """``adapter.run`` on the lane's thread inside ``guard`` (engine/yielding.py), with the seconds it took
    there (queueing excluded)."""
    started = time.perf_counter()
    with guard():
        results = adapter.run(batch, options)
    return results, time.perf_counter() - started


def tag_logs(batch: list[WorkItem]) -> None:
    """This lane task's log lines carry the batch's request ids (and the request's id when it has one)."""
    ids = tuple(dict.fromkeys(i.request_id for i in batch if i.request_id))
    if len(ids) == 1:
        request_logs.REQUEST_ID.set(ids[0])
    elif ids:
        request_logs.BATCH_IDS.set(ids)


def batch_runner(adapter: ModelAdapter, head: WorkItem) -> Encoder[Any] | None:
    """The model as the encoder that runs this batch; None for a model of another family (a generator)."""
    return adapter if isinstance(adapter, Encoder) and adapter.accepts(head.options) else None


__all__ = ["GroupKey", "WorkItem", "batch_runner", "tag_logs", "timed_run"]
