"""Each model family gets only the work its interface declares; any other is the caller's 400, not a crash."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from sie_server.adapters.runtime.base import ModelAdapter, Tokens
from sie_server.adapters.runtime.encoder import PairScorer
from sie_server.adapters.runtime.options import EncodeOptions, ExtractOptions, ScoreOptions
from sie_server.catalog.schema import ModelConfig, Profile
from sie_server.engine.generation import GenerationService
from sie_server.engine.scheduler import WorkItem
from sie_server.engine.sequences import SamplingParams
from sie_server.errors import InvalidInput
from tests.engine.conftest import EngineFactory, fake_config


class FakeScorer(PairScorer):
    """A cross-encoder stand-in: scores a pair by its token count."""

    def load(self, weights: Path) -> None:
        self.loaded = True

    def unload(self) -> None:
        self.loaded = False

    def resident_bytes(self) -> int:
        return 0

    def warmup(self) -> None:
        """Nothing to warm up."""

    def tokenize_pairs(self, query: str, documents: list[str], instruction: str | None = None) -> list[Tokens]:
        return [Tokens(list(range(len(f"{query} {d}".split()))), None, False) for d in documents]

    def run(self, batch: list[Tokens], options: ScoreOptions) -> list[float]:
        return [float(t.length) for t in batch]


def scorer(config: ModelConfig, profile: Profile, device: str) -> ModelAdapter:
    return FakeScorer(config, profile, device)


async def test_encode_on_a_model_of_another_family_is_invalid_input(make_engine: EngineFactory, tmp_path: Path) -> None:
    engine = make_engine()
    engine.pool.factory = scorer  # the catalog says encode, the adapter only scores pairs
    model = fake_config("t/scorer", tmp_path / "s")
    with pytest.raises(InvalidInput, match="does not support encode") as caught:
        await engine.encode(model, ["a text"])
    assert caught.value.status == 400
    assert engine.behaviour.batches == []


async def test_a_batch_its_model_cannot_run_fails_alone(make_engine: EngineFactory, tmp_path: Path) -> None:
    engine = make_engine()
    model = fake_config("t/m", tmp_path / "m")
    assert await engine.encode(model, ["warm"]) == [3.0]  # resident: the batch would go straight to its lane
    loop = asyncio.get_running_loop()
    extract = WorkItem(model, Tokens([0, 1], None, False), ExtractOptions(("company",), 0.5), loop.create_future())
    engine.scheduler.submit([extract])
    with pytest.raises(InvalidInput, match="t/m does not support extract"):
        await extract.future
    assert [lengths for _, lengths in engine.behaviour.batches] == [[3]]  # the encoder never ran it
    assert await engine.encode(model, ["still serving"]) == [4.0]


async def test_items_with_equal_options_share_a_batch_and_others_do_not(
    make_engine: EngineFactory, tmp_path: Path
) -> None:
    engine = make_engine()
    model = fake_config("t/m", tmp_path / "m", max_batch_tokens=64)
    await engine.encode(model, ["warm"])
    loop = asyncio.get_running_loop()
    options = [EncodeOptions(("dense",)), EncodeOptions(("dense",)), EncodeOptions(("dense",), is_query=True)]
    items = [WorkItem(model, Tokens([0, 1, 2], None, False), o, loop.create_future()) for o in options]
    engine.scheduler.submit(items)
    await asyncio.gather(*(i.future for i in items))
    assert sorted(len(lengths) for _, lengths in engine.behaviour.batches[1:]) == [1, 2]


async def test_generate_on_an_encoder_is_invalid_input(make_engine: EngineFactory, tmp_path: Path) -> None:
    engine = make_engine()
    model = fake_config("t/m", tmp_path / "m")
    generation = GenerationService(engine.pool, load_timeout_s=30)
    try:
        with pytest.raises(InvalidInput, match="t/m does not support generate") as caught:
            await generation.start(model, prompt="hi", messages=None, params=SamplingParams(), wait_for_load=True)
        assert caught.value.status == 400
    finally:
        await generation.stop()
