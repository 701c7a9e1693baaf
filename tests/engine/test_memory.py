"""The memory budget: LRU eviction, never over budget, single-flight loads, pins, busy and idle models."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from sie_server.errors import ResourceExhausted
from sie_server.memory.budget import Resident, eviction_plan, parse_budget
from tests.engine.conftest import EngineFactory, fake_config
from tests.helpers.fake_adapter import Behaviour

MB = 10**6


def test_parse_budget() -> None:
    assert parse_budget("6GiB", 0) == 6 * 2**30
    assert parse_budget("512MB", 0) == 512 * MB
    assert parse_budget("0.5", 1000) == 500
    assert parse_budget(None, 1000) == 800
    assert parse_budget("123456", 0) == 123456
    with pytest.raises(ValueError, match="memory budget"):
        parse_budget("lots", 0)


def test_eviction_plan_is_lru_and_skips_busy() -> None:
    residents = [Resident("a", 100, 1.0, True), Resident("b", 100, 0.5, False), Resident("c", 100, 2.0, True)]
    assert eviction_plan(350, 50, residents) == []
    assert eviction_plan(300, 100, residents) == ["a"]  # b is older but busy
    assert eviction_plan(300, 200, residents) == ["a", "c"]
    assert eviction_plan(300, 300, residents) is None


async def test_lru_eviction_keeps_charges_within_budget(make_engine: EngineFactory, tmp_path: Path) -> None:
    engine = make_engine(budget=250 * MB)
    a, b, c = (fake_config(f"t/{n}", tmp_path / n, reserve=100 * MB) for n in "abc")
    await engine.encode(a, ["x"])
    await engine.encode(b, ["x"])
    await engine.encode(a, ["x"])  # a is now the most recently used
    await engine.encode(c, ["x"])
    assert engine.pool.peek("t/b").state.value == "available"  # type: ignore[union-attr]
    assert {s.config.id for s in engine.pool.slots() if s.state.value == "loaded"} == {"t/a", "t/c"}
    assert engine.pool.used_bytes == 200 * MB <= engine.pool.budget_bytes
    assert engine.metric("sie_model_evictions_total", model="t/b", reason="lru") == 1
    assert engine.metric("sie_memory_used_bytes") == 200 * MB


async def test_round_robin_churn_never_exceeds_budget(make_engine: EngineFactory, tmp_path: Path) -> None:
    engine = make_engine(budget=250 * MB)
    models = [fake_config(f"t/m{i}", tmp_path / f"m{i}", reserve=100 * MB) for i in range(4)]
    for _ in range(3):
        for model in models:
            assert await engine.encode(model, ["x y"]) == [4.0]
            assert engine.pool.used_bytes <= engine.pool.budget_bytes
    assert len(engine.behaviour.loads) == 12  # two fit, four rotate: every call loads
    assert sum(engine.metric("sie_model_loads_total", model=m.id) for m in models) == 12


async def test_model_larger_than_budget_evicts_nothing(make_engine: EngineFactory, tmp_path: Path) -> None:
    engine = make_engine(budget=150 * MB)
    small = fake_config("t/small", tmp_path / "small", reserve=100 * MB)
    huge = fake_config("t/huge", tmp_path / "huge", reserve=200 * MB)
    await engine.encode(small, ["x"])
    with pytest.raises(ResourceExhausted, match="more than the whole memory budget") as caught:
        await engine.encode(huge, ["x"])
    assert caught.value.status == 503
    assert engine.pool.peek("t/small").state.value == "loaded"  # type: ignore[union-attr]
    assert "t/huge" not in engine.behaviour.loads


async def test_concurrent_first_requests_load_once(make_engine: EngineFactory, tmp_path: Path) -> None:
    engine = make_engine(behaviour=Behaviour(load_delay_s=0.2))
    model = fake_config("t/m", tmp_path / "m")
    results = await asyncio.gather(*(engine.encode(model, ["a b"]) for _ in range(10)))
    assert results == [[4.0]] * 10
    assert engine.behaviour.loads == ["t/m"]


async def test_busy_and_pinned_models_are_not_evicted(make_engine: EngineFactory, tmp_path: Path) -> None:
    engine = make_engine(budget=150 * MB, pinned=frozenset({"t/pinned"}), behaviour=Behaviour(run_delay_s=0.3))
    pinned = fake_config("t/pinned", tmp_path / "p", reserve=100 * MB)
    other = fake_config("t/other", tmp_path / "o", reserve=100 * MB)
    await engine.encode(pinned, ["x"])
    with pytest.raises(ResourceExhausted, match="busy or pinned"):
        await engine.encode(other, ["x"])
    assert engine.pool.peek("t/pinned").state.value == "loaded"  # type: ignore[union-attr]


async def test_a_model_with_queued_work_is_not_evicted(make_engine: EngineFactory, tmp_path: Path) -> None:
    engine = make_engine(budget=150 * MB, behaviour=Behaviour(run_delay_s=0.3))
    busy = fake_config("t/busy", tmp_path / "busy", reserve=100 * MB)
    other = fake_config("t/other", tmp_path / "other", reserve=100 * MB)
    await engine.encode(busy, ["warm"])
    running = asyncio.create_task(engine.encode(busy, ["x"]))
    await engine.until_started(2)  # the warm-up's batch and this one, which is running now
    with pytest.raises(ResourceExhausted, match="retry shortly") as caught:
        await engine.encode(other, ["x"])
    assert caught.value.retry_after
    await running
    assert await engine.encode(other, ["x"]) == [3.0]  # idle now: busy is evicted for it
    assert engine.pool.peek("t/busy").state.value == "available"  # type: ignore[union-attr]


async def test_idle_models_are_evicted(make_engine: EngineFactory, tmp_path: Path) -> None:
    engine = make_engine()
    model = fake_config("t/m", tmp_path / "m", reserve=10 * MB)
    await engine.encode(model, ["x"])
    assert engine.pool.evict_idle(3600) == []
    await asyncio.sleep(0.05)  # the behaviour under test: idle for longer than the 0.01 s below
    assert engine.pool.evict_idle(0.01) == ["t/m"]
    assert engine.pool.used_bytes == 0
    assert engine.metric("sie_model_evictions_total", model="t/m", reason="idle") == 1
    assert engine.metric("sie_model_loaded", model="t/m") == 0


async def test_what_the_process_holds_beyond_the_charges_counts_against_the_budget(
    make_engine: EngineFactory, tmp_path: Path
) -> None:
    engine = make_engine(budget=350 * MB)
    a, b, c = (fake_config(f"t/{n}", tmp_path / n, reserve=100 * MB) for n in "abc")
    await engine.encode(a, ["x"])
    await engine.encode(b, ["x"])
    engine.holding.bytes = 200 * MB  # exactly the charges: nothing beyond them
    assert engine.pool.untracked_bytes == 0 and engine.pool.used_bytes == 200 * MB
    engine.holding.bytes = 300 * MB  # caches and buffers: 100 MB that no charge covers
    assert engine.pool.untracked_bytes == 100 * MB and engine.pool.used_bytes == 300 * MB
    await engine.encode(a, ["x"])  # a is now the most recently used
    await engine.encode(c, ["x"])  # the charges alone (300 MB) would fit; with what is held beyond them, b goes
    assert {s.config.id for s in engine.pool.slots() if s.state.value == "loaded"} == {"t/a", "t/c"}
    assert engine.metric("sie_model_evictions_total", model="t/b", reason="lru") == 1
    assert engine.metric("sie_memory_untracked_bytes") == 100 * MB


async def test_growth_beyond_the_charges_evicts_idle_models_until_within_budget(
    make_engine: EngineFactory, tmp_path: Path
) -> None:
    engine = make_engine(budget=350 * MB)
    a, b, c = (fake_config(f"t/{n}", tmp_path / n, reserve=100 * MB) for n in "abc")
    for model in (a, b, c):
        await engine.encode(model, ["x"])
    engine.holding.bytes = 300 * MB  # the charges, nothing beyond
    assert engine.pool.keep_within_budget() == []
    engine.holding.bytes = 400 * MB  # 100 MB grew beyond them: 400 > 350
    assert engine.pool.keep_within_budget() == ["t/a"]  # the least recently used
    assert engine.metric("sie_model_evictions_total", model="t/a", reason="over_budget") == 1
    engine.holding.bytes = 300 * MB  # a's memory given back: b and c, and the 100 MB beyond them
    assert engine.pool.keep_within_budget() == []
    assert engine.metric("sie_memory_used_bytes") == 300 * MB
    assert engine.metric("sie_memory_untracked_bytes") == 100 * MB
    engine.holding.bytes = 10_000 * MB  # beyond anything evicting could give back: nothing evicted
    assert engine.pool.keep_within_budget() == []
    assert {s.config.id for s in engine.pool.slots() if s.state.value == "loaded"} == {"t/b", "t/c"}


async def test_a_load_refused_for_what_the_process_holds_says_so(make_engine: EngineFactory, tmp_path: Path) -> None:
    engine = make_engine(budget=250 * MB, behaviour=Behaviour(run_delay_s=0.3))
    busy = fake_config("t/busy", tmp_path / "busy", reserve=100 * MB)
    other = fake_config("t/other", tmp_path / "other", reserve=100 * MB)
    await engine.encode(busy, ["warm"])
    engine.holding.bytes = 180 * MB  # 80 MB beyond busy's charge: other's 100 MB no longer fits
    running = asyncio.create_task(engine.encode(busy, ["x"]))
    await engine.until_started(2)
    with pytest.raises(ResourceExhausted, match=r"holds 76\.3 MiB beyond its models' charges"):
        await engine.encode(other, ["x"])
    await running
