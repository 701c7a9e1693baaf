"""A long prompt that arrives while other sequences decode is read in steps with their decode steps in between
(engine/decode_loop.py, ``Generator.prefill_steps``): the running streams wait for one step's read, never for the
whole prompt. Packaged SmolLM2 Q4_1 on llama.cpp, in this process; every llama_decode call is recorded, so the
bound is stated in prompt tokens read between two of a stream's tokens, not in seconds."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import torch

from sie_server.adapters.generators.llamacpp import LlamaCppAdapter
from sie_server.adapters.generators.llamacpp_prefix import FA_TILE_ROWS
from sie_server.adapters.generators.llamacpp_sizing import PREFILL_CHUNK
from sie_server.adapters.runtime.base import ModelAdapter
from sie_server.catalog.schema import ModelConfig, Profile
from sie_server.engine.decode_loop import BURST_STEPS, READ_STEP_TOKENS
from sie_server.engine.generation import GenerationService
from sie_server.engine.sequences import SamplingParams, Sequence
from sie_server.memory.pool import ModelPool
from sie_server.observability.metrics import Metrics
from tests.helpers.catalog import SMOLLM, real_config

RUNNING = 7  # streams decoding when the long prompt arrives
CONTEXT = " ".join(f"Fact {i}: the item numbered {i} costs {3 * i} dollars." for i in range(90))


class Recorded(LlamaCppAdapter):
    """SmolLM2 on llama.cpp that never ends a sequence by itself and records each llama_decode call:
    ("step", rows) for a decode step, ("read", tokens) for a slice of prompts."""

    calls: list[tuple[str, int]]

    def load(self, weights: Path) -> None:
        super().load(weights)
        self.eos_ids = frozenset()
        self.calls = []

    def _decode(self, entries: list[tuple[int, int, int, bool]]) -> torch.Tensor:
        self.calls.append(("step" if all(e[3] for e in entries) else "read", len(entries)))
        return super()._decode(entries)


def smollm() -> ModelConfig:
    config: dict[str, Any] = real_config(SMOLLM)
    config["profiles"] = {"cpu": {**config["profiles"]["cpu"], "max_batch_tokens": 4096}}
    return ModelConfig.model_validate(config)


@pytest.fixture
async def service() -> AsyncIterator[GenerationService]:
    def make(config: ModelConfig, profile: Profile, device: str) -> ModelAdapter:
        return Recorded(config, profile, device)

    pool = ModelPool("cpu", "cpu", offline=True, budget_bytes=8 * 2**30, metrics=Metrics(), factory=make)
    svc = GenerationService(pool, load_timeout_s=120)
    yield svc
    await svc.stop()


async def start(svc: GenerationService, model: ModelConfig, text: str, tokens: int) -> Sequence:
    seq, _ = await svc.start(
        model, prompt=None, messages=[{"role": "user", "content": text}], params=SamplingParams(tokens, 0.0),
        wait_for_load=True,
    )  # fmt: skip
    return seq


async def recorded(svc: GenerationService, model: ModelConfig) -> Recorded:
    adapter = await svc.pool.acquire(model, wait=True, timeout_s=120)
    assert isinstance(adapter, Recorded)
    return adapter


async def until(condition: Any, timeout_s: float = 120) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.005)


async def test_a_long_prompt_is_read_in_steps_between_the_running_streams_tokens(service: GenerationService) -> None:
    model = smollm()
    adapter = await recorded(service, model)
    running = [await start(service, model, f"Count from {i} upwards.", 60) for i in range(RUNNING)]
    loop = service.loops[model.id]
    await until(lambda: loop.steps >= 3 and len(loop.active) == RUNNING)
    adapter.calls.clear()
    long = await start(service, model, CONTEXT + " What does item 7 cost?", 4)
    texts = await asyncio.gather(*(service.complete(s) for s in [*running, long]))
    prompt = len(long.prompt_ids)
    assert prompt > 8 * READ_STEP_TOKENS, prompt

    reads = [n for kind, n in adapter.calls if kind == "read"]
    assert sum(reads) == prompt  # the whole prompt, read once (nothing cached shares it)
    assert max(reads) <= READ_STEP_TOKENS and min(reads) >= FA_TILE_ROWS, reads  # never below the tiled kernel
    first = next(i for i, (kind, _) in enumerate(adapter.calls) if kind == "read")
    last = max(i for i, (kind, _) in enumerate(adapter.calls) if kind == "read")
    during = adapter.calls[first : last + 1]
    # between two reads of the long prompt, one decode step of every running stream: none waits longer
    assert during[1::2] == [("step", RUNNING)] * (len(reads) - 1), during
    assert all(len(s.generated) == 60 and s.finish_reason == "length" for s in running)
    assert long.finish_reason == "length" and len(long.generated) == 4 and texts[-1]
    assert loop.task is not None
    await loop.task  # the loop ends once the last sequence has left
    assert not loop.busy and len(adapter._free_ids) == adapter.max_rows  # every sequence id back


async def test_with_nothing_running_a_long_prompt_is_read_at_once(service: GenerationService) -> None:
    model = smollm()
    adapter = await recorded(service, model)
    adapter.calls.clear()
    long = await start(service, model, CONTEXT + " What does item 7 cost?", 2)
    await service.complete(long)
    reads = [n for kind, n in adapter.calls if kind == "read"]
    assert sum(reads) == len(long.prompt_ids) and max(reads) == PREFILL_CHUNK, reads


async def test_a_read_stopped_halfway_frees_its_cells(service: GenerationService) -> None:
    model = smollm()
    adapter = await recorded(service, model)
    running = [await start(service, model, f"Count from {i} upwards.", 500) for i in range(2)]
    loop = service.loops[model.id]
    await until(lambda: loop.steps >= 2)
    await start(service, model, CONTEXT + " What does item 7 cost?", 4)
    await until(lambda: sum(1 for kind, _ in adapter.calls if kind == "read") >= 3)
    assert loop.reading is not None
    task = loop.task
    assert task is not None
    task.cancel()  # the loop stops halfway through the read (as at shutdown)
    await asyncio.gather(task, return_exceptions=True)
    await asyncio.get_running_loop().run_in_executor(service.executor, lambda: None)  # after the close it queued
    assert loop.reading is None and len(adapter._free_ids) == adapter.max_rows
    assert all(s.finish_reason is None for s in running)


async def test_tokens_reach_the_stream_as_they_are_decoded_not_at_the_end_of_a_burst(
    service: GenerationService,
) -> None:
    """Steps run back to back on the decode thread (``DecodeLoop._burst``); each token is still sent as it comes."""
    model = smollm()
    await recorded(service, model)
    seq = await start(service, model, "Count from 1 upwards.", 2 * BURST_STEPS)
    loop = service.loops[model.id]
    seen = [loop.steps async for _ in service.stream(seq)]  # the steps taken when each delta arrived
    assert len(seq.generated) == 2 * BURST_STEPS and loop.steps >= 2 * BURST_STEPS - 1
    assert len(set(seen)) >= BURST_STEPS, seen  # most deltas arrive while their burst goes on
