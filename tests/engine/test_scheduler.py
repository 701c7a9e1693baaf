"""The shared queue: cross-request batches, token budgets, priorities, admission, abandoned work, OOM."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from sie_server.adapters.runtime.base import Tokens
from sie_server.adapters.runtime.options import EncodeOptions
from sie_server.engine.scheduler import WorkItem
from sie_server.errors import ModelLoadFailed, QueueFull, ResourceExhausted
from tests.engine.conftest import EngineFactory, fake_config
from tests.helpers.fake_adapter import Behaviour
from tests.helpers.wait import async_wait_until


async def test_items_from_different_requests_share_a_batch(make_engine: EngineFactory, tmp_path: Path) -> None:
    engine = make_engine(behaviour=Behaviour(run_delay_s=0.1))
    model = fake_config("t/m", tmp_path / "m", max_batch_tokens=64)
    blocker = asyncio.create_task(engine.encode(model, ["occupy the device"]))
    await engine.until_started(1)
    requests = [asyncio.create_task(engine.encode(model, ["a b", "c d e"])) for _ in range(3)]
    results = await asyncio.gather(blocker, *requests)
    assert results[1:] == [[4.0, 5.0]] * 3  # each request's answers in its own input order
    sizes = [len(lengths) for _, lengths in engine.behaviour.batches]
    assert sizes == [1, 6]
    assert engine.metric("sie_batch_items_sum", model="t/m") == 7
    assert engine.metric("sie_batch_items_count", model="t/m") == 2


async def test_a_request_spans_batches_and_is_reassembled_in_order(make_engine: EngineFactory, tmp_path: Path) -> None:
    engine = make_engine()
    model = fake_config("t/m", tmp_path / "m", max_batch_tokens=16)
    texts = [" ".join(["w"] * n) for n in (9, 1, 5, 12, 2, 7, 3)]
    assert await engine.encode(model, texts) == [n + 2.0 for n in (9, 1, 5, 12, 2, 7, 3)]
    batches = [lengths for _, lengths in engine.behaviour.batches]
    assert len(batches) > 1
    for lengths in batches:
        assert len(lengths) == 1 or max(lengths) * len(lengths) <= 16
    padded = engine.metric("sie_padded_tokens_total", model="t/m")
    real = engine.metric("sie_real_tokens_total", model="t/m")
    assert real == sum(n + 2 for n in (9, 1, 5, 12, 2, 7, 3)) and padded >= real


async def test_one_lane_serves_interactive_before_waiting_batch_work(
    make_engine: EngineFactory, tmp_path: Path
) -> None:
    engine = make_engine(behaviour=Behaviour(run_delay_s=0.05), lanes=False)
    model = fake_config("t/m", tmp_path / "m", max_batch_tokens=64)
    blocker = asyncio.create_task(engine.encode(model, ["x"]))
    await engine.until_started(1)
    background = asyncio.create_task(engine.encode(model, ["b b b b b"] * 3, priority="batch"))
    await engine.until_queued(3)  # the batch-class items
    urgent = asyncio.create_task(engine.encode(model, ["i"] * 2, priority="interactive"))
    await asyncio.gather(blocker, background, urgent)
    order = [lengths for _, lengths in engine.behaviour.batches]
    assert order[1] == [3, 3]  # the interactive request, though it arrived later
    assert order[2] == [7, 7, 7]


async def test_one_lane_keeps_batch_works_share_under_interactive_load(
    make_engine: EngineFactory, tmp_path: Path
) -> None:
    engine = make_engine(batch_share=0.2, behaviour=Behaviour(run_delay_s=0.001), lanes=False)
    model = fake_config("t/m", tmp_path / "m", max_batch_tokens=4)  # one item per batch
    blocker = asyncio.create_task(engine.encode(model, ["x x"]))
    await engine.until_started(1)
    calls = [engine.encode(model, ["i"], "interactive") for _ in range(60)]
    calls += [engine.encode(model, ["b b"], "batch") for _ in range(20)]
    await asyncio.gather(blocker, *calls)
    lengths = [lengths[0] for _, lengths in engine.behaviour.batches[1:]]
    first_40 = lengths[:40]
    batch_served = first_40.count(4)
    assert 6 <= batch_served <= 10  # ~20% of contended batches, never starved, never dominant


async def test_interactive_lane_does_not_wait_for_a_running_batch(make_engine: EngineFactory, tmp_path: Path) -> None:
    engine = make_engine(behaviour=Behaviour(run_delay_s=0.3), batch_max_tokens=8)
    model = fake_config("t/m", tmp_path / "m", max_batch_tokens=64)
    await engine.encode(model, ["warm"])
    finished: list[str] = []

    async def call(texts: list[str], priority: str) -> None:
        await engine.encode(model, texts, priority=priority)
        finished.append(priority)

    background = asyncio.create_task(call(["b b"] * 4, "batch"))  # 16 tokens: two capped batches
    await engine.until_started(2)  # the warm-up and the first capped batch-class batch
    await call(["i"], "interactive")
    assert finished == ["interactive"]  # done while the batch-class batch was still running
    await background
    lengths = [lengths for _, lengths in engine.behaviour.batches[1:]]
    assert all(max(b) * len(b) <= 8 for b in lengths if b[0] == 4)  # batch-class cap respected


async def test_queue_full_is_refused_before_any_work(make_engine: EngineFactory, tmp_path: Path) -> None:
    engine = make_engine(max_queued_items=3, behaviour=Behaviour(run_delay_s=0.1))
    model = fake_config("t/m", tmp_path / "m")
    blocker = asyncio.create_task(engine.encode(model, ["a", "b", "c"]))
    await engine.until_started(1)
    with pytest.raises(QueueFull) as caught:
        await engine.encode(model, ["d", "e", "f", "g"])
    assert caught.value.status == 503 and caught.value.retry_after
    await blocker


async def test_abandoned_items_never_reach_the_model(make_engine: EngineFactory, tmp_path: Path) -> None:
    engine = make_engine(behaviour=Behaviour(run_delay_s=0.1))
    model = fake_config("t/m", tmp_path / "m")
    blocker = asyncio.create_task(engine.encode(model, ["x"]))
    await engine.until_started(1)
    gone = asyncio.create_task(engine.encode(model, ["w w w"] * 5))
    await engine.until_queued(5)
    gone.cancel()
    await blocker
    await async_wait_until(
        lambda: engine.metric("sie_dropped_items_total", model="t/m", absent_as_zero=True) == 5,
        message="the abandoned items were not dropped",
    )
    assert all(5 not in lengths for _, lengths in engine.behaviour.batches)
    assert engine.metric("sie_dropped_items_total", model="t/m") == 5
    assert engine.scheduler.queued == 0


async def test_max_batch_wait_holds_a_partial_batch(make_engine: EngineFactory, tmp_path: Path) -> None:
    engine = make_engine()
    model = fake_config("t/m", tmp_path / "m", max_batch_tokens=64, wait_ms=300)
    await engine.encode(model, ["warm"])  # load first: the wait applies to batches, not loads
    engine.behaviour.batches.clear()
    first = asyncio.create_task(engine.encode(model, ["a"]))
    await asyncio.sleep(0.1)  # the behaviour under test: a second caller 0.1 s later, inside the 0.3 s wait
    second = asyncio.create_task(engine.encode(model, ["b"]))
    await asyncio.gather(first, second)
    assert [lengths for _, lengths in engine.behaviour.batches] == [[3, 3]]


async def test_out_of_memory_batch_is_split_and_answered(make_engine: EngineFactory, tmp_path: Path) -> None:
    engine = make_engine(behaviour=Behaviour(oom_above={"t/m": 2}))
    model = fake_config("t/m", tmp_path / "m", max_batch_tokens=1000)
    assert await engine.encode(model, ["a"] * 8) == [3.0] * 8
    assert all(len(lengths) <= 2 for _, lengths in engine.behaviour.batches)
    assert engine.metric("sie_oom_total", model="t/m") >= 3  # 8 -> 4+4 -> 2+2+2+2


async def test_out_of_memory_on_one_item_evicts_others_then_gives_up(
    make_engine: EngineFactory, tmp_path: Path
) -> None:
    engine = make_engine(behaviour=Behaviour(oom_above={"t/big": 0}))
    small = fake_config("t/small", tmp_path / "small")
    big = fake_config("t/big", tmp_path / "big")
    await engine.encode(small, ["x"])
    with pytest.raises(ResourceExhausted, match="ran out of memory on a single item"):
        await engine.encode(big, ["y"])
    assert engine.metric("sie_model_evictions_total", model="t/small", reason="oom") == 1
    assert await engine.encode(small, ["x"]) == [3.0]  # the other model reloads and serves


async def test_failed_load_is_isolated_and_remembered(make_engine: EngineFactory, tmp_path: Path) -> None:
    engine = make_engine(behaviour=Behaviour(fail_load={"t/bad"}))
    bad = fake_config("t/bad", tmp_path / "bad")
    good = fake_config("t/good", tmp_path / "good")
    for _ in range(2):
        with pytest.raises(ModelLoadFailed, match="simulated broken weights"):
            await engine.encode(bad, ["x"])
    assert engine.behaviour.loads.count("t/bad") == 1  # not retried on its own
    assert engine.pool.peek("t/bad").state.value == "failed"  # type: ignore[union-attr]
    assert await engine.encode(good, ["x"]) == [3.0]
    engine.behaviour.fail_load.clear()
    engine.pool.reset(bad)
    assert await engine.encode(bad, ["x"]) == [3.0]


async def test_the_next_batch_starts_before_the_last_ones_answers_are_sent(
    make_engine: EngineFactory, tmp_path: Path
) -> None:
    engine = make_engine(behaviour=Behaviour(run_delay_s=0.02))
    model = fake_config("t/m", tmp_path / "m", max_batch_tokens=4)  # 3-token items: one per batch
    await engine.encode(model, ["warm"])  # resident: batches are handed to the lane's thread at once
    loop = asyncio.get_running_loop()
    items = [WorkItem(model, Tokens([0, 1, 2], None, False), EncodeOptions(), loop.create_future()) for _ in range(2)]
    queued_when_answered: list[int] = []
    items[0].future.add_done_callback(lambda _: queued_when_answered.append(engine.scheduler.queued))
    engine.scheduler.submit(items)
    await asyncio.gather(*(i.future for i in items))
    assert queued_when_answered == [0]  # the second batch had left the queue before the first answer went out
    assert [lengths for _, lengths in engine.behaviour.batches[1:]] == [[3], [3]]
