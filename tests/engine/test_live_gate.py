"""On a CPU a batch-class forward pass stops at its model's next module while a live pass runs, and goes on
when the live pass ends or when it has waited ``--batch-defer-ms`` in all (engine/yielding.py)."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

from sie_server.adapters.runtime.base import Tokens
from sie_server.adapters.runtime.options import EncodeOptions
from sie_server.engine.policy import BATCH, INTERACTIVE
from sie_server.engine.yielding import LiveGate
from tests.engine.conftest import EngineFactory, fake_config
from tests.helpers.fake_adapter import Behaviour, FakeAdapter
from tests.helpers.wait import async_wait_until

LAYERS = 6


class Slow(nn.Module):
    """A layer that takes ``seconds`` and says when it ran."""

    def __init__(self, index: int, events: list[str], seconds: float):
        super().__init__()
        self.index, self.events, self.seconds = index, events, seconds

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(self.seconds)
        self.events.append(f"layer {self.index}")
        return x + 1


def net(events: list[str], seconds: float = 0.02) -> nn.Sequential:
    return nn.Sequential(*(Slow(i, events, seconds) for i in range(LAYERS)))


def run_in_thread(fn: Any) -> threading.Thread:
    thread = threading.Thread(target=fn, daemon=True)
    thread.start()
    return thread


def test_a_batch_pass_stops_at_the_next_module_while_a_live_pass_runs() -> None:
    gate, events = LiveGate(max_pause_s=30.0), []
    model = net(events)

    def batch_pass() -> None:
        with gate.yielding():
            model(torch.zeros(1))
        events.append("batch done")

    with gate.live():
        worker = run_in_thread(batch_pass)
        time.sleep(0.3)  # 15 layers' time: none may run
        assert events == []
        with torch.inference_mode():
            net(events, 0.0)(torch.zeros(1))  # the live pass's own modules never wait
        assert events == [f"layer {i}" for i in range(LAYERS)]
        events.clear()
    worker.join(10)
    assert events == [*(f"layer {i}" for i in range(LAYERS)), "batch done"]
    assert gate.pauses == 1 and 0.25 < gate.paused_total_s < 5


def test_a_batch_pass_waits_at_most_its_pause_budget_under_steady_live_work() -> None:
    gate, events = LiveGate(max_pause_s=0.2), []
    model = net(events, 0.0)
    with gate.live():
        started = time.perf_counter()

        def batch_pass() -> None:
            with gate.yielding():
                model(torch.zeros(1))

        run_in_thread(batch_pass).join(10)
        took = time.perf_counter() - started
    assert events == [f"layer {i}" for i in range(LAYERS)]  # done while the live pass still ran
    assert 0.15 < took < 5 and 0.15 < gate.paused_total_s < 0.5


def test_without_a_live_pass_nothing_waits_and_the_hook_is_gone_after() -> None:
    gate, events = LiveGate(max_pause_s=30.0), []
    with gate.yielding():
        net(events, 0.0)(torch.zeros(1))
    assert len(events) == LAYERS and gate.pauses == 0
    with gate.live():
        net(events, 0.0)(torch.zeros(1))  # no batch pass: no hook left to stop anyone
    assert len(events) == 2 * LAYERS


class TorchFake(FakeAdapter):
    """``t/live`` holds its pass until the test releases it; other models run a slow six-layer torch net."""

    release = threading.Event()
    events: list[str] = []

    def run(self, batch: list[Tokens], options: EncodeOptions) -> list[dict[str, Any]]:
        if self.config.id == "t/live":
            self.events.append("live start")
            assert self.release.wait(30)
            self.events.append("live end")
        else:
            net(self.events, 0.05)(torch.zeros(1))
        return super().run(batch, options)


async def test_the_scheduler_pauses_a_running_batch_class_pass_for_a_live_one(
    make_engine: EngineFactory, tmp_path: Path
) -> None:
    TorchFake.release.clear()
    TorchFake.events = events = []

    def factory(behaviour: Behaviour) -> Any:
        return lambda config, profile, device: TorchFake(config, profile, device, behaviour)

    engine = make_engine(defer_s=30.0, factory=factory)
    bulk_model = fake_config("t/bulk", tmp_path / "b", max_batch_tokens=64)
    live_model = fake_config("t/live", tmp_path / "l", max_batch_tokens=64)
    bulk = asyncio.create_task(engine.encode(bulk_model, ["b"], priority=BATCH))
    await async_wait_until(lambda: "layer 0" in events, message="the batch-class pass never began")
    live = asyncio.create_task(engine.encode(live_model, ["l"], priority=INTERACTIVE))
    await async_wait_until(lambda: "live start" in events, message="the live pass never began")
    await asyncio.sleep(0.4)  # eight layers' time
    during = events[events.index("live start") + 1 :]
    assert len([e for e in during if e.startswith("layer")]) <= 1  # at most the layer already running
    TorchFake.release.set()
    await asyncio.wait_for(asyncio.gather(bulk, live), 30)
    assert events[-1] == f"layer {LAYERS - 1}"  # the batch-class pass finished after the live one
    assert engine.scheduler.gate is not None and engine.scheduler.gate.pauses >= 1


async def test_no_gate_on_one_lane_or_without_a_defer(make_engine: EngineFactory) -> None:
    assert make_engine(defer_s=0.0).scheduler.gate is None  # a GPU: lanes share the device kernel by kernel
    assert make_engine(defer_s=0.25, lanes=False).scheduler.gate is None
