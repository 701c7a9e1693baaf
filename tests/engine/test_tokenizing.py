"""Tokenization on the dedicated tokenizer thread: order, chunks taken in turns, errors, callers that leave."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from sie_server.adapters.runtime.base import Tokens
from sie_server.adapters.runtime.options import EncodeOptions
from sie_server.catalog.schema import ModelConfig
from sie_server.engine.extract.queue import run
from sie_server.engine.outcomes import Timing
from sie_server.engine.service import CallerGone, CallOptions, TextInput
from sie_server.engine.tokenizing import TokenizerThread
from sie_server.errors import InvalidInput
from tests.engine.conftest import Engine, EngineFactory, fake_config
from tests.helpers.fake_adapter import Behaviour
from tests.helpers.wait import async_wait_until


def tokens_of(texts: list[str]) -> list[Tokens]:
    return [Tokens([len(t)], None, False, t) for t in texts]


@pytest.fixture
def tokenizer() -> TokenizerThread:
    thread = TokenizerThread(chunk=4)
    yield thread
    thread.stop()


async def test_a_large_job_runs_in_chunks_and_answers_in_input_order(tokenizer: TokenizerThread) -> None:
    calls: list[list[str]] = []

    def tokenize(texts: list[str]) -> list[Tokens]:
        calls.append(texts)
        return tokens_of(texts)

    texts = [f"text {i}" for i in range(10)]
    tokens = await tokenizer.run(tokenize, texts)
    assert [t.data for t in tokens] == texts
    assert [len(c) for c in calls] == [4, 4, 2]


async def test_unsplit_job_is_one_call(tokenizer: TokenizerThread) -> None:
    calls: list[int] = []

    def windows(texts: list[str]) -> list[Tokens]:  # answers refer to positions in its own list
        calls.append(len(texts))
        return [Tokens([0], None, False, (index, 0, t)) for index, t in enumerate(texts) for _ in range(2)]

    tokens = await tokenizer.run(windows, [f"t{i}" for i in range(10)], split=False)
    assert calls == [10]
    assert [t.data[0] for t in tokens] == [i for i in range(10) for _ in range(2)]


async def test_a_small_job_waits_for_one_chunk_of_a_large_one_not_all_of_it(tokenizer: TokenizerThread) -> None:
    order: list[str] = []
    first_chunk_started, small_queued = threading.Event(), threading.Event()

    def large(texts: list[str]) -> list[Tokens]:
        if not order:  # hold the first chunk until the small job is in the line
            first_chunk_started.set()
            assert small_queued.wait(10)
        order.append("large")
        return tokens_of(texts)

    def small(texts: list[str]) -> list[Tokens]:
        order.append("small")
        return tokens_of(texts)

    big = asyncio.create_task(tokenizer.run(large, [str(i) for i in range(12)]))  # three chunks of 4
    assert await asyncio.to_thread(first_chunk_started.wait, 10)
    quick = asyncio.create_task(tokenizer.run(small, ["one text"]))
    await asyncio.sleep(0)  # one turn of the loop, not a wait: the task runs up to its put() on the line
    small_queued.set()
    await asyncio.gather(big, quick)
    assert order == ["large", "small", "large", "large"]


async def test_an_error_reaches_its_caller_and_the_thread_keeps_serving(tokenizer: TokenizerThread) -> None:
    def broken(texts: list[str]) -> list[Tokens]:
        raise InvalidInput("item 0 cannot be tokenized")

    with pytest.raises(InvalidInput, match="cannot be tokenized"):
        await tokenizer.run(broken, ["x"])
    assert [t.data for t in await tokenizer.run(tokens_of, ["still", "here"])] == ["still", "here"]


async def test_a_cancelled_callers_remaining_chunks_are_skipped(tokenizer: TokenizerThread) -> None:
    calls: list[int] = []
    release = threading.Event()

    def slow(texts: list[str]) -> list[Tokens]:
        calls.append(len(texts))
        assert release.wait(10)
        return tokens_of(texts)

    job = asyncio.create_task(tokenizer.run(slow, [str(i) for i in range(12)]))
    await async_wait_until(lambda: calls, message="the first chunk never reached the tokenizer")
    job.cancel()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await job
    await tokenizer.run(tokens_of, ["after"])  # the line has moved past the cancelled job
    assert calls == [4]


async def test_a_request_over_many_chunks_comes_back_in_order(make_engine: EngineFactory, tmp_path: Path) -> None:
    engine = make_engine()
    model = fake_config("t/m", tmp_path / "m", max_batch_tokens=64)
    texts = [" ".join(["w"] * (1 + i % 7)) for i in range(150)]  # more than two tokenizer chunks
    assert await engine.encode(model, texts) == [1 + i % 7 + 2.0 for i in range(150)]
    assert len(engine.behaviour.tokenize_calls) > 1 and sum(engine.behaviour.tokenize_calls) == 150


async def test_a_tokenizer_error_is_the_callers_error(make_engine: EngineFactory, tmp_path: Path) -> None:
    engine = make_engine(behaviour=Behaviour(bad_texts={"unreadable"}))
    model = fake_config("t/m", tmp_path / "m")
    with pytest.raises(InvalidInput, match="unreadable"):
        await engine.encode(model, ["fine", "unreadable"])
    assert engine.behaviour.batches == [] and engine.scheduler.queued == 0
    assert await engine.encode(model, ["fine"]) == [3.0]


async def _busy(
    make_engine: EngineFactory, tmp_path: Path
) -> tuple[Engine, ModelConfig, threading.Event, asyncio.Task[list[float]]]:
    """An engine whose device runs a blocker's batch, held at the returned gate until the test opens it."""
    gate = threading.Event()
    engine = make_engine(behaviour=Behaviour(gate=gate))
    model = fake_config("t/m", tmp_path / "m")
    blocker = asyncio.create_task(engine.encode(model, ["occupy the device"]))
    await engine.until_started(1)  # the blocker's batch runs (held at the gate)
    return engine, model, gate, blocker


def _leaving(left: asyncio.Event) -> CallOptions:
    """A caller that leaves when ``left`` is set."""

    async def disconnected() -> None:
        await left.wait()

    return CallOptions(disconnected=disconnected)


async def _never_ran(engine: Engine, model: ModelConfig, dropped: int) -> None:
    """The leavers' items (6 tokens each) were dropped by the next plan, never run."""
    await engine.encode(model, ["after"])  # the next plan drops what was left
    assert all(6 not in lengths for _, lengths in engine.behaviour.batches)
    assert engine.metric("sie_dropped_items_total", model="t/m") == dropped
    assert engine.scheduler.queued == 0


async def test_a_caller_that_leaves_gets_caller_gone_and_its_items_are_dropped(
    make_engine: EngineFactory, tmp_path: Path
) -> None:
    engine, model, gate, blocker = await _busy(make_engine, tmp_path)
    left = asyncio.Event()
    for texts in (["w w w w"], ["w w w w"] * 3):  # one item (awaited alone) and several (gathered)
        inputs = [TextInput(str(i), t) for i, t in enumerate(texts)]
        request = asyncio.create_task(
            engine.service.encode(
                model, inputs, output_types=["dense"], is_query=False, instruction=None, call=_leaving(left)
            )
        )
        await engine.until_queued(len(texts))
        left.set()
        with pytest.raises(CallerGone):
            await request
        left.clear()
    gate.set()
    await blocker
    await _never_ran(engine, model, dropped=4)


async def test_a_caller_that_leaves_a_call_answered_per_input_gets_caller_gone_and_its_items_are_dropped(
    make_engine: EngineFactory, tmp_path: Path
) -> None:
    """run(each=True), as document, speech and classification extracts queue their inputs, watches the caller as
    the default path does."""
    engine, model, gate, blocker = await _busy(make_engine, tmp_path)
    left = asyncio.Event()
    tokens = [Tokens(list(range(6)), None, False) for _ in range(3)]
    call = _leaving(left)
    request = asyncio.create_task(run(engine.service, model, tokens, EncodeOptions(), call, Timing(), each=True))
    await engine.until_queued(3)
    left.set()
    try:
        await async_wait_until(request.done, message="the call went on after its caller left")
    finally:
        gate.set()
    with pytest.raises(CallerGone):
        await request
    await blocker
    await _never_ran(engine, model, dropped=3)
