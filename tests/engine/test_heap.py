"""A loaded model's objects are frozen out of the garbage collector's full passes, and freed on eviction."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

from tests.engine.conftest import EngineFactory, fake_config
from tests.helpers.fake_adapter import FakeAdapter

MB = 10**6


async def test_a_loaded_model_is_frozen_and_an_evicted_ones_cycles_are_collected(
    make_engine: EngineFactory, tmp_path: Path
) -> None:
    engine = make_engine(budget=150 * MB)
    first, second = (fake_config(f"t/{n}", tmp_path / n, reserve=100 * MB) for n in "ab")
    await engine.encode(first, ["x"])
    adapter = engine.pool.peek("t/a").adapter  # type: ignore[union-attr]
    assert isinstance(adapter, FakeAdapter)
    weights = weakref.ref(adapter.weights)  # a reference cycle, as a module tree is
    assert gc.get_freeze_count() > 0
    assert id(adapter.weights) not in {id(o) for o in gc.get_objects(generation=2)}  # frozen: full passes skip it
    del adapter
    await engine.encode(second, ["x"])  # only one fits: the first is evicted
    assert engine.pool.peek("t/a").adapter is None  # type: ignore[union-attr]
    assert weights() is None  # collected, not kept alive in the frozen generation
    assert gc.get_freeze_count() > 0  # what is still alive is frozen again


async def test_each_batch_reports_its_forward_time(make_engine: EngineFactory, tmp_path: Path) -> None:
    engine = make_engine()
    model = fake_config("t/m", tmp_path / "m", max_batch_tokens=8)
    await engine.encode(model, ["a b c", "d e f", "g"])  # 5 + 5 + 3 tokens: more than one batch
    batches = len(engine.behaviour.batches)
    assert batches > 1
    assert engine.metric("sie_batch_seconds_count", model="t/m") == batches
    assert engine.metric("sie_batch_seconds_sum", model="t/m") > 0
