"""An engine (pool + scheduler + service) built in-process around fake adapters."""

from __future__ import annotations

import gc
import warnings
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sie_server.catalog.schema import ModelConfig
from sie_server.engine.policy import PriorityPolicy
from sie_server.engine.scheduler import Scheduler
from sie_server.engine.service import CallOptions, InferenceService, TextInput
from sie_server.memory.pool import ModelPool
from sie_server.observability.metrics import Metrics
from tests.helpers.fake_adapter import Behaviour, fake_factory
from tests.helpers.metrics import sample
from tests.helpers.wait import async_wait_until


@pytest.fixture(autouse=True, scope="module")
def _no_garbage_from_earlier_files() -> None:
    """Free what earlier test files in this worker left unreachable, before an engine here freezes the heap.

    An in-process engine freezes every live object when a model loads (``memory/heap.py``) and thaws
    and collects when one unloads. Garbage another file left behind (a client socket in a reference
    cycle) would be frozen with it and freed inside an unrelated test here, whose ResourceWarning the
    ``error`` warning filter turns into that test's failure. It is freed now, its warnings ignored: it
    is not this file's.
    """
    gc.unfreeze()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()


def fake_config(
    model_id: str, folder: Path, *, reserve: int = 0, max_batch_tokens: int = 64, wait_ms: float = 0.0
) -> ModelConfig:
    folder.mkdir(parents=True, exist_ok=True)
    return ModelConfig.model_validate(
        {
            "id": model_id,
            "source": {"path": str(folder)},
            "adapter": "embedding",
            "tasks": {"encode": {"dense": {"dim": 4}}},
            "max_sequence_length": 512,
            "profiles": {
                "cpu": {
                    "max_batch_tokens": max_batch_tokens,
                    "max_batch_wait_ms": wait_ms,
                    "activation_reserve_bytes": reserve,
                }
            },
        }
    )


@dataclass
class SetHolding:
    """What the process holds, as a test sets it (the fake models hold nothing real)."""

    bytes: int = 0

    def held(self) -> int:
        return self.bytes


@dataclass
class Engine:
    behaviour: Behaviour
    pool: ModelPool
    scheduler: Scheduler
    service: InferenceService
    metrics: Metrics
    holding: SetHolding

    async def encode(self, config: ModelConfig, texts: list[str], priority: str = "interactive") -> list[float]:
        outcome = await self.service.encode(
            config,
            [TextInput(str(i), t) for i, t in enumerate(texts)],
            output_types=["dense"],
            is_query=False,
            instruction=None,
            call=CallOptions(priority=priority),
        )
        return [float(o["dense"][0]) for o in outcome.outputs]

    async def until_started(self, batches: int) -> None:
        """Wait until ``batches`` batches have begun on the fake models (the last may still be running)."""
        await async_wait_until(lambda: len(self.behaviour.started) >= batches, message=f"{batches} batches never began")

    async def until_queued(self, items: int) -> None:
        """Wait until at least ``items`` items wait in the scheduler's queue."""
        await async_wait_until(lambda: self.scheduler.queued >= items, message=f"{items} items never queued")

    def metric(self, name: str, *, absent_as_zero: bool = False, **labels: str) -> float:
        """One sample of this engine's metrics; a series that is not there raises MissingSeries."""
        return sample(self.metrics.registry, name, absent_as_zero=absent_as_zero, **labels)


EngineFactory = Callable[..., Engine]


@pytest.fixture
async def make_engine() -> AsyncIterator[EngineFactory]:
    engines: list[Engine] = []

    def make(
        budget: int = 10**9,
        *,
        batch_share: float = 0.1,
        batch_max_tokens: int | None = None,
        max_queued_items: int = 1000,
        pinned: frozenset[str] = frozenset(),
        behaviour: Behaviour | None = None,
        lanes: bool = True,
        defer_s: float = 0.0,
        factory: Callable[[Behaviour], Any] = fake_factory,
    ) -> Engine:
        behaviour = behaviour or Behaviour()
        metrics = Metrics()
        holding = SetHolding()
        pool = ModelPool(
            "cpu",
            "cpu",
            offline=True,
            budget_bytes=budget,
            metrics=metrics,
            pinned=pinned,
            factory=factory(behaviour),
            probe=holding,
        )
        scheduler = Scheduler(
            pool,
            metrics,
            policy=PriorityPolicy(batch_share, batch_max_tokens, lanes, defer_s=defer_s),
            max_queued_items=max_queued_items,
            load_timeout_s=30,
        )
        pool.is_busy = scheduler.busy
        service = InferenceService(None, pool, scheduler, load_timeout_s=30)  # type: ignore[arg-type]
        scheduler.start()
        engine = Engine(behaviour, pool, scheduler, service, metrics, holding)
        engines.append(engine)
        return engine

    yield make
    for engine in engines:
        await engine.scheduler.stop()
        engine.service.close()
