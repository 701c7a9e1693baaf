"""``--batch-defer-ms``: on a CPU, batch-class work does not start beside a running interactive batch (the two
lanes would share the same cores) until its oldest item has waited that long; with 0 the lanes run side by
side, as on a GPU."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from sie_server.engine.policy import BATCH, INTERACTIVE, PriorityPolicy
from tests.engine.conftest import EngineFactory, fake_config
from tests.helpers.fake_adapter import Behaviour


def test_the_policy_holds_batch_work_only_beside_an_interactive_batch() -> None:
    policy = PriorityPolicy(defer_s=0.25)
    both = {INTERACTIVE, BATCH}
    assert policy.startable(both, running=set(), batch_waited_s=0.0) == both
    assert policy.startable({BATCH}, running={INTERACTIVE}, batch_waited_s=0.1) == set()
    assert policy.deferred_for({INTERACTIVE}, 0.1) == pytest.approx(0.15)  # the wait left
    assert policy.startable({BATCH}, running={INTERACTIVE}, batch_waited_s=0.25) == {BATCH}  # waited long enough
    assert policy.startable({BATCH}, running={BATCH}, batch_waited_s=0.0) == {BATCH}
    assert policy.deferred_for({INTERACTIVE}, None) is None  # no batch work waits
    assert PriorityPolicy(defer_s=0.0).startable({BATCH}, {INTERACTIVE}, 0.0) == {BATCH}  # a GPU: side by side
    assert PriorityPolicy(defer_s=0.25, lanes=False).startable({BATCH}, {INTERACTIVE}, 0.0) == {BATCH}


async def test_batch_work_waits_for_the_running_interactive_batch(make_engine: EngineFactory, tmp_path: Path) -> None:
    gate = threading.Event()
    engine = make_engine(behaviour=Behaviour(gate=gate), defer_s=60.0)
    model = fake_config("t/m", tmp_path / "m", max_batch_tokens=64)
    live = asyncio.create_task(engine.encode(model, ["i"], priority=INTERACTIVE))
    await engine.until_started(1)  # the interactive batch runs (held by the gate)
    bulk = asyncio.create_task(engine.encode(model, ["b b"], priority=BATCH))
    await engine.until_queued(1)
    await asyncio.sleep(0.2)  # room for the batch lane to (wrongly) start it
    assert len(engine.behaviour.started) == 1 and engine.scheduler.queued == 1
    gate.set()
    await asyncio.gather(live, bulk)
    assert [lengths for _, lengths in engine.behaviour.started] == [[3], [4]]  # the batch-class one after


async def test_held_batch_work_starts_once_its_wait_is_up(make_engine: EngineFactory, tmp_path: Path) -> None:
    gate = threading.Event()
    engine = make_engine(behaviour=Behaviour(gate=gate), defer_s=0.05)
    model = fake_config("t/m", tmp_path / "m", max_batch_tokens=64)
    live = asyncio.create_task(engine.encode(model, ["i"], priority=INTERACTIVE))
    await engine.until_started(1)
    bulk = asyncio.create_task(engine.encode(model, ["b b"], priority=BATCH))
    await engine.until_started(2)  # beside the interactive batch, still held by the gate: no wake-up but its timer
    assert len(engine.behaviour.batches) == 0
    gate.set()
    await asyncio.gather(live, bulk)
