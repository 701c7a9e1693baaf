"""What a drain past its deadline does to batched work: every caller still waiting, in the queue
or in the batch running now, gets the drain's error at once, and the scheduler itself carries on."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from sie_server.engine.leftovers import fail_batched
from sie_server.errors import QueueFull
from tests.engine.conftest import EngineFactory, fake_config
from tests.helpers.fake_adapter import Behaviour


async def test_waiting_and_running_work_gets_the_drain_error(make_engine: EngineFactory, tmp_path: Path) -> None:
    gate = threading.Event()
    engine = make_engine(behaviour=Behaviour(gate=gate))
    model = fake_config("t/m", tmp_path / "m", max_batch_tokens=8)
    running = asyncio.create_task(engine.encode(model, ["held by the gate"]))
    await engine.until_started(1)
    queued = [asyncio.create_task(engine.encode(model, ["w " * 3, "x"])) for _ in range(3)]
    await engine.until_queued(6)

    error = QueueFull("the server shut down before this work finished", retry_after=5)
    assert fail_batched(engine.scheduler, error) == 7  # one running item, six queued
    for task in [running, *queued]:
        with pytest.raises(QueueFull, match="shut down before this work finished"):
            await asyncio.wait_for(task, 2)  # answered now, not when the gate opens

    gate.set()  # the batch that was running finishes into futures that already have their answer
    assert await asyncio.wait_for(engine.encode(model, ["a b"]), 5) == [4.0]
    assert fail_batched(engine.scheduler, error) == 0
