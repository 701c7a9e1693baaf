"""The exact result cache in front of the queue: identical items computed once, hits counted, bounded
in bytes and by the memory budget, never an answer of another model generation."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import numpy as np
import pytest

from sie_server.adapters.runtime.precision import PrecisionReport
from sie_server.catalog.schema import ModelConfig
from sie_server.engine.cache_scope import Counted, ItemCache
from sie_server.engine.outcomes import EncodeOutcome
from sie_server.engine.result_cache import ENTRY_OVERHEAD_BYTES, CacheKey, ResultCache, freeze
from sie_server.engine.service import CallOptions, TextInput
from sie_server.errors import InvalidInput
from tests.engine.conftest import Engine, EngineFactory, fake_config
from tests.helpers.fake_adapter import Behaviour
from tests.helpers.wait import async_wait_until

_ONE = freeze(({"dense": np.zeros(4, np.float32)}, Counted(3, False)))
assert _ONE is not None
ENTRY = _ONE[1] + ENTRY_OVERHEAD_BYTES  # one fake one-word item's charge


def cached(engine: Engine, capacity: int = 10**6) -> ResultCache:
    """The engine's service with a result cache charged to its pool, as compose.py wires it."""
    cache = ResultCache(capacity, engine.metrics)
    cache.room = engine.pool.free_bytes
    engine.pool.reclaimable = cache
    engine.service.results = ItemCache(cache, engine.pool)
    return cache


async def encode(engine: Engine, model: ModelConfig, texts: list[str], *, use_cache: bool = True) -> EncodeOutcome:
    return await engine.service.encode(
        model,
        [TextInput(str(i), t) for i, t in enumerate(texts)],
        output_types=["dense"],
        is_query=False,
        instruction=None,
        call=CallOptions(cache=use_cache),
    )


def items_run(engine: Engine) -> int:
    return sum(len(lengths) for _, lengths in engine.behaviour.batches)


async def test_a_second_pass_is_answered_from_the_cache(make_engine: EngineFactory, tmp_path: Path) -> None:
    engine = make_engine()
    cached(engine)
    model = fake_config("t/m", tmp_path / "m")
    first = await encode(engine, model, ["a", "b c", "d e f"])
    assert first.timing.cache_hits == 0 and items_run(engine) == 3
    second = await encode(engine, model, ["d e f", "a", "b c"])
    assert second.timing.cache_hits == 3 and items_run(engine) == 3  # no forward pass
    assert [o["dense"].tobytes() for o in second.outputs] == [first.outputs[k]["dense"].tobytes() for k in (2, 0, 1)]
    assert second.prompt_tokens == first.prompt_tokens  # usage as computed
    assert engine.metric("sie_cache_hits_total", model="t/m") == 3
    assert engine.metric("sie_cache_misses_total", model="t/m") == 3


async def test_identical_items_in_flight_run_one_forward_pass(make_engine: EngineFactory, tmp_path: Path) -> None:
    gate = threading.Event()
    engine = make_engine(behaviour=Behaviour(gate=gate))
    cached(engine)
    model = fake_config("t/m", tmp_path / "m")
    callers = [asyncio.create_task(encode(engine, model, ["the same text"])) for _ in range(64)]
    await engine.until_started(1)
    gate.set()
    outcomes = await asyncio.gather(*callers)
    assert items_run(engine) == 1
    assert len({o.outputs[0]["dense"].tobytes() for o in outcomes}) == 1
    hits = engine.metric("sie_cache_hits_total", model="t/m", absent_as_zero=True)
    joined = engine.metric("sie_cache_coalesced_total", model="t/m", absent_as_zero=True)
    assert hits + joined == 63 and engine.metric("sie_cache_misses_total", model="t/m") == 1


async def test_duplicates_within_a_request_are_computed_once(make_engine: EngineFactory, tmp_path: Path) -> None:
    engine = make_engine()
    cached(engine)
    model = fake_config("t/m", tmp_path / "m")
    outcome = await encode(engine, model, ["x y", "z", "x y", "x y"])
    assert items_run(engine) == 2 and outcome.prompt_tokens == 4 + 3 + 4 + 4
    assert [float(o["dense"][0]) for o in outcome.outputs] == [4.0, 3.0, 4.0, 4.0]


async def test_bypass_and_size_zero_compute_every_time(make_engine: EngineFactory, tmp_path: Path) -> None:
    engine = make_engine()
    cache = cached(engine)
    model = fake_config("t/m", tmp_path / "m")
    await encode(engine, model, ["a"], use_cache=False)
    assert len(cache) == 0  # bypass: not stored either
    await encode(engine, model, ["a"])
    again = await encode(engine, model, ["a"], use_cache=False)
    assert again.timing.cache_hits == 0 and items_run(engine) == 3
    off = make_engine()
    cached(off, capacity=0)
    for _ in range(2):
        assert (await encode(off, model, ["a", "a"])).timing.cache_hits == 0
    assert items_run(off) == 4  # off: neither stored nor shared


async def test_least_recently_used_entries_go_past_the_size(make_engine: EngineFactory, tmp_path: Path) -> None:
    engine = make_engine()
    cache = cached(engine, capacity=2 * ENTRY)
    model = fake_config("t/m", tmp_path / "m")
    await encode(engine, model, ["a"])
    await encode(engine, model, ["b"])
    await encode(engine, model, ["a"])  # a is now the most recently used
    await encode(engine, model, ["c"])  # b goes
    assert len(cache) == 2 and cache.nbytes == 2 * ENTRY
    assert engine.metric("sie_cache_evictions_total", model="t/m", reason="lru") == 1
    assert engine.metric("sie_cache_bytes") == 2 * ENTRY
    before = items_run(engine)
    assert (await encode(engine, model, ["a", "c"])).timing.cache_hits == 2
    assert (await encode(engine, model, ["b"])).timing.cache_hits == 0
    assert items_run(engine) == before + 1


async def test_the_cache_is_charged_to_the_budget_and_yields_to_models(
    make_engine: EngineFactory, tmp_path: Path
) -> None:
    budget = 1000 + 4 * ENTRY
    engine = make_engine(budget=budget)
    cache = cached(engine, capacity=10**6)  # larger than the budget: the budget bounds it
    small = fake_config("t/small", tmp_path / "s", reserve=1000)
    await encode(engine, small, ["a", "b", "c", "d", "e", "f"])
    assert len(cache) == 4 and cache.nbytes == 4 * ENTRY  # grew only into the budget's free room
    assert engine.pool.charged_bytes == 1000 + 4 * ENTRY and engine.pool.free_bytes() == 0
    other = fake_config("t/other", tmp_path / "o", reserve=2 * ENTRY)
    await encode(engine, other, ["z"], use_cache=False)  # needs room: the cache gives it, the model stays
    assert engine.pool.peek("t/small") is not None and engine.pool.peek("t/small").adapter is not None  # type: ignore[union-attr]
    assert cache.nbytes == 2 * ENTRY
    assert engine.metric("sie_cache_evictions_total", model="t/small", reason="budget") == 2
    assert engine.pool.charged_bytes <= budget


async def test_a_new_precision_or_revision_never_serves_an_old_vector(
    make_engine: EngineFactory, tmp_path: Path
) -> None:
    engine = make_engine()
    cache = cached(engine)
    model = fake_config("t/m", tmp_path / "m")
    await encode(engine, model, ["a b"])
    adapter = engine.pool.resident(model)
    assert adapter is not None
    adapter.precision_report = PrecisionReport("bf16", ("bf16", "fp32"), "test: the gate chose bf16")
    assert (await encode(engine, model, ["a b"])).timing.cache_hits == 0  # another precision: computed
    assert engine.metric("sie_cache_evictions_total", model="t/m", reason="generation") == 1
    assert (await encode(engine, model, ["a b"])).timing.cache_hits == 1
    revised = model.model_copy(update={"source": replace_source(model, "b" * 40)})
    assert (await encode(engine, revised, ["a b"])).timing.cache_hits == 0  # another revision: reloaded, computed
    assert items_run(engine) == 3 and len(cache) == 1


def replace_source(model: ModelConfig, revision: str) -> object:
    return model.source.model_copy(update={"revision": revision})


async def test_a_shared_input_error_reaches_every_asker(make_engine: EngineFactory, tmp_path: Path) -> None:
    gate = threading.Event()
    engine = make_engine(behaviour=Behaviour(bad_texts={"bad"}, gate=gate))
    cached(engine)
    model = fake_config("t/m", tmp_path / "m")
    blocker = asyncio.create_task(encode(engine, model, ["busy"]))
    await engine.until_started(1)
    callers = [asyncio.create_task(encode(engine, model, ["bad"])) for _ in range(3)]
    gate.set()
    results = await asyncio.gather(*callers, return_exceptions=True)
    assert all(isinstance(r, InvalidInput) for r in results)
    await blocker


async def test_followers_of_a_leader_that_left_compute_themselves(make_engine: EngineFactory, tmp_path: Path) -> None:
    gate = threading.Event()
    engine = make_engine(behaviour=Behaviour(gate=gate))
    cached(engine)
    model = fake_config("t/m", tmp_path / "m")
    blocker = asyncio.create_task(encode(engine, model, ["busy"]))
    await engine.until_started(1)
    leader = asyncio.create_task(encode(engine, model, ["wanted"]))
    await engine.until_queued(1)
    follower = asyncio.create_task(encode(engine, model, ["wanted"]))
    results = engine.service.results
    assert results is not None
    await async_wait_until(lambda: results.flight.waiting == 1, message="the follower never joined the leader")
    leader.cancel()
    gate.set()
    outcome = await follower
    assert float(outcome.outputs[0]["dense"][0]) == 3.0
    with pytest.raises(asyncio.CancelledError):
        await leader
    await blocker


def test_frozen_values_are_copies_that_cannot_change() -> None:
    row = np.arange(8, dtype=np.float32).reshape(2, 4)[0]
    frozen = freeze({"dense": row, "sparse": (np.array([1, 2]), np.array([0.5, 0.25], np.float32))})
    assert frozen is not None
    value, size = frozen
    assert value["dense"].base is None and not value["dense"].flags.writeable
    assert size > row.nbytes + 2 * 8 + 2 * 4
    assert freeze({"x": object()}) is None  # not cacheable: not stored
    cache = ResultCache(10**6)
    key = CacheKey("m", b"k")
    cache.put_many([(key, value, size)])
    assert cache.get(key) is value and cache.shrink(1) == size + ENTRY_OVERHEAD_BYTES and len(cache) == 0
