"""In-process checks, on the fake engine of tests/engine/conftest.py, of what ``/readyz`` reads about the models
(engine/model_health.py) and of the bound on requests waiting for a load (``--max-load-waiters``,
memory/slots.py). The real-process tests are tests/server/test_readiness.py and test_cold_burst.py."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from sie_server.adapters.runtime.base import ModelAdapter
from sie_server.catalog.schema import ModelConfig, Profile
from sie_server.contract.state_wire import Readiness
from sie_server.engine.generation import GenerationService
from sie_server.engine.model_health import ModelHealth
from sie_server.errors import ModelLoadFailed, ModelLoading
from tests.engine.conftest import Engine, EngineFactory, fake_config
from tests.helpers.fake_adapter import Behaviour, FakeAdapter
from tests.helpers.wait import async_wait_until

READY = Readiness(status="ready")


def gated_loads(gate: threading.Event) -> Callable[[Behaviour], Any]:
    """A fake factory whose models finish loading only once ``gate`` is set."""

    class GatedLoad(FakeAdapter):
        def load(self, weights: Path) -> None:
            assert gate.wait(30), "the test never opened the load gate"
            super().load(weights)

    def factory(behaviour: Behaviour) -> Callable[[ModelConfig, Profile, str], ModelAdapter]:
        return lambda config, profile, device: GatedLoad(config, profile, device, behaviour)

    return factory


@pytest.fixture
async def generation() -> AsyncIterator[Callable[[Engine], GenerationService]]:
    made: list[GenerationService] = []

    def make(engine: Engine) -> GenerationService:
        made.append(GenerationService(engine.pool, 30))
        return made[-1]

    yield make
    for service in made:
        await service.stop()


async def test_a_load_holds_at_most_the_bound_and_refuses_the_rest_at_once(
    make_engine: EngineFactory, tmp_path: Path
) -> None:
    gate = threading.Event()
    engine = make_engine(factory=gated_loads(gate))
    engine.pool.max_load_waiters = 3
    config = fake_config("test/m", tmp_path / "m")
    waits = [asyncio.ensure_future(engine.pool.acquire(config, wait=True, timeout_s=30)) for _ in range(5)]
    own = asyncio.ensure_future(engine.pool.acquire(config, wait=True, timeout_s=30, request=False))  # never refused
    try:
        await async_wait_until(lambda: sum(w.done() for w in waits) == 2, message="the two past the bound waited")
        slot = engine.pool.peek("test/m")
        assert slot is not None and slot.waiters == 3
        for refused in (w for w in waits if w.done()):
            error = refused.exception()
            assert isinstance(error, ModelLoading) and error.retry_after and "--max-load-waiters" in error.message
    finally:
        gate.set()
    results = await asyncio.gather(*waits, own, return_exceptions=True)
    assert sum(not isinstance(r, BaseException) for r in results) == 4  # the three held and the engine's own
    assert engine.behaviour.loads == ["test/m"] and slot.waiters == 0


async def test_failed_loads_are_named_and_only_a_required_one_fails_readiness(
    make_engine: EngineFactory, generation: Callable[[Engine], GenerationService], tmp_path: Path
) -> None:
    engine = make_engine(behaviour=Behaviour(fail_load={"test/pinned", "test/optional"}))
    for name in ("test/pinned", "test/optional"):
        with pytest.raises(ModelLoadFailed):
            await engine.pool.acquire(fake_config(name, tmp_path / name.split("/")[1]), wait=True, timeout_s=30)
    both = ModelHealth(engine.pool, engine.scheduler, generation(engine), required=["test/pinned"], stall_after_s=60)
    judged = both.judge(READY)
    assert judged.status == "failing" and judged.models is not None
    assert judged.models["test/pinned"].problem == "load_failed" and judged.models["test/pinned"].required
    assert judged.models["test/optional"].problem == "load_failed" and not judged.models["test/optional"].required
    assert "simulated broken weights" in judged.models["test/optional"].message
    optional = ModelHealth(engine.pool, engine.scheduler, generation(engine), required=[], stall_after_s=60)
    judged = optional.judge(READY)
    assert judged.status == "ready" and judged.models is not None
    assert set(judged.models) == {"test/pinned", "test/optional"}
    assert optional.judge(Readiness(status="draining")) == Readiness(status="draining")  # not judged further


async def test_a_batch_past_the_bound_is_stalled_until_it_ends(
    make_engine: EngineFactory, generation: Callable[[Engine], GenerationService], tmp_path: Path
) -> None:
    gate = threading.Event()
    engine = make_engine(behaviour=Behaviour(gate=gate))
    health = ModelHealth(engine.pool, engine.scheduler, generation(engine), required=[], stall_after_s=0.05)
    job = asyncio.ensure_future(engine.encode(fake_config("test/slow", tmp_path / "slow"), ["a b c"]))
    try:
        await engine.until_started(1)
        found = await async_wait_until(lambda: health.problems().get("test/slow"), message="the batch never stalled")
        assert found.problem == "stalled" and found.required  # a lane holds every model's work behind it
        assert health.judge(READY).status == "failing"
    finally:
        gate.set()
    await job
    assert health.problems() == {} and health.judge(READY) == READY


async def test_a_batch_loop_that_ended_stops_the_whole_server(
    make_engine: EngineFactory, generation: Callable[[Engine], GenerationService], monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = make_engine()
    health = ModelHealth(engine.pool, engine.scheduler, generation(engine), required=[], stall_after_s=60)
    assert health.problems() == {}

    async def broken() -> None:
        raise RuntimeError("a bug in forming batches")

    await engine.scheduler.stop()  # a stop is not an ending: nothing reported
    assert health.problems() == {}
    monkeypatch.setattr(engine.scheduler, "_next_batch", broken)
    engine.scheduler.start()
    found = await async_wait_until(lambda: health.problems().get("*"), message="the ended loop was not seen")
    assert found.problem == "stopped" and "a bug in forming batches" in found.message
    assert health.judge(READY).status == "failing"
