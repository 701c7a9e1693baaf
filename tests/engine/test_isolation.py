"""Fault isolation in the engine without a model: a batch item or a sequence that fails on its own
gets its own error, and every other one its answer."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from sie_server.adapters.runtime.base import ModelAdapter, Tokens
from sie_server.adapters.runtime.generator import ByteDetokenizer, Detokenizer, Generator
from sie_server.adapters.runtime.options import EncodeOptions
from sie_server.catalog.schema import ModelConfig, Profile
from sie_server.engine.generation import GenerationService
from sie_server.engine.isolation import run_apart
from sie_server.engine.sampling import sample, sample_rows
from sie_server.engine.sequences import SamplingParams, Sequence
from sie_server.errors import InferenceError, InvalidInput, SIEError
from sie_server.memory.pool import ModelPool
from sie_server.observability.metrics import Metrics
from tests.engine.conftest import EngineFactory, fake_config
from tests.helpers.fake_adapter import Behaviour, FakeAdapter
from tests.helpers.metrics import sample as metric

POISON_WORDS = 7  # a text of this many words fails in the fake encoder, whatever batch it is in


# ----- encode batches ---------------------------------------------------------------------------
class PoisonFake(FakeAdapter):
    """The fake encoder; a batch holding a text of POISON_WORDS words (length + 2) raises ValueError,
    and with ``fail_all`` every batch raises (a model failing on everything). Records each attempt."""

    def __init__(self, *args: Any, attempts: list[list[int]], fail_all: bool):
        super().__init__(*args)
        self.attempts = attempts
        self.fail_all = fail_all

    def run(self, batch: list[Tokens], options: EncodeOptions) -> list[dict[str, Any]]:
        lengths = [t.length for t in batch]
        self.attempts.append(lengths)
        if self.fail_all or POISON_WORDS + 2 in lengths:
            raise ValueError("simulated failure inside the model")
        return super().run(batch, options)


def poison_factory(attempts: list[list[int]], *, fail_all: bool = False) -> Callable[[Behaviour], Any]:
    def factory(behaviour: Behaviour) -> Any:
        def make(config: ModelConfig, profile: Profile, device: str) -> ModelAdapter:
            return PoisonFake(config, profile, device, behaviour, attempts=attempts, fail_all=fail_all)

        return make

    return factory


async def test_a_failing_batch_is_run_apart_and_only_the_poisoned_request_fails(
    make_engine: EngineFactory, tmp_path: Path
) -> None:
    attempts: list[list[int]] = []
    engine = make_engine(behaviour=Behaviour(run_delay_s=0.1), factory=poison_factory(attempts))
    model = fake_config("t/m", tmp_path / "m", max_batch_tokens=256)
    blocker = asyncio.create_task(engine.encode(model, ["occupy the device"]))
    await engine.until_started(1)
    poison = " ".join(["w"] * POISON_WORDS)
    texts = [["a b", "c"], [poison], ["d e f"], ["g h i j"]]
    results = await asyncio.gather(blocker, *(engine.encode(model, t) for t in texts), return_exceptions=True)
    assert results[1] == [4.0, 3.0] and results[3] == [5.0] and results[4] == [6.0]
    failed = results[2]
    assert isinstance(failed, InvalidInput)
    assert failed.message == "model t/m cannot process this input (ValueError); the rest of its batch was served"
    assert sorted(attempts[1]) == [3, 4, 5, 6, POISON_WORDS + 2]  # the five items together first
    # then in halves (the batch is in length order), a failing half again, down to the poisoned item alone
    assert attempts[2:] == [[3, 4], [5, 6, 9], [5], [6, 9], [6], [9]]
    assert engine.metric("sie_isolation_retries_total", model="t/m", kind="encode") == 1  # one batch run apart


async def test_a_batch_whose_every_item_fails_alone_is_a_server_error(
    make_engine: EngineFactory, tmp_path: Path
) -> None:
    attempts: list[list[int]] = []
    engine = make_engine(factory=poison_factory(attempts, fail_all=True))
    model = fake_config("t/m", tmp_path / "m", max_batch_tokens=256)
    with pytest.raises(InferenceError, match=r"model t/m failed on this input \(ValueError\)"):
        await engine.encode(model, ["a", "b c", "d e f"])
    assert len(attempts) == 5  # all three, then halves [a] and [b c, d e f], then [b c] and [d e f]


async def test_run_apart_gives_each_item_its_result_or_its_own_exception() -> None:
    runs: list[list[int]] = []

    async def run(items: list[int]) -> list[int]:
        runs.append(items)
        if 3 in items:
            raise ValueError(str(items))
        return [i * 10 for i in items]

    outcomes = await run_apart(list(range(8)), run)
    assert outcomes[:3] + outcomes[4:] == [0, 10, 20, 40, 50, 60, 70]
    assert isinstance(outcomes[3], ValueError)
    assert runs == [[0, 1, 2, 3], [0, 1], [2, 3], [2], [3], [4, 5, 6, 7]]


# ----- sampling ---------------------------------------------------------------------------------
def row(temperature: float = 0.0, seed: int | None = None) -> Sequence:
    seq = Sequence([1], SamplingParams(temperature=temperature))
    if seed is not None:
        seq.generator = torch.Generator().manual_seed(seed)
    return seq


def test_a_row_that_cannot_be_sampled_fails_alone_and_the_others_keep_their_tokens() -> None:
    logits = torch.randn(4, 50)
    logits[1] = float("nan")
    rows = [row(), row(), row(temperature=1e-300), row(temperature=1.0, seed=5)]
    outcomes = sample_rows(logits, rows, "t/llm")
    assert outcomes[0] == int(logits[0].argmax())
    assert isinstance(outcomes[1], InferenceError) and "non-finite scores" in outcomes[1].message
    assert isinstance(outcomes[2], InvalidInput) and "temperature 1e-300" in outcomes[2].message
    assert outcomes[3] == sample(logits[3:], [row(temperature=1.0, seed=5)])[0]  # its seeded draw, unchanged


# ----- decode loop ------------------------------------------------------------------------------
VOCAB = 16
STEP_POISON = 15  # a prompt with this token ("p") makes every decode step of its batch raise


class FakeGenerator(Generator):
    """Letters a..p are tokens 0..15; the next token is always the last one plus one (a, b, c...).
    A batch is the list of its rows' "poisoned" flags."""

    def load(self, weights: Path) -> None:
        self.context_length = 512

    def unload(self) -> None:
        pass

    def resident_bytes(self) -> int:
        return 0

    def prompt_ids(self, prompt: str | None, messages: list[dict[str, str]] | None) -> list[int]:
        return [ord(c) - ord("a") for c in prompt or ""]

    def detokenizer(self) -> Detokenizer:
        return ByteDetokenizer(lambda t: bytes([ord("a") + t]))

    @staticmethod
    def _next(tokens: list[int]) -> torch.Tensor:
        return torch.nn.functional.one_hot(torch.tensor(tokens) % VOCAB, VOCAB).roll(1, -1).float() * 10

    def prefill(self, prompts: list[list[int]]) -> tuple[list[bool], torch.Tensor]:
        return [STEP_POISON in p for p in prompts], self._next([p[-1] for p in prompts])

    def decode(self, batch: list[bool], tokens: list[int], positions: list[int]) -> torch.Tensor:
        if any(batch):
            raise RuntimeError("simulated decode failure")
        return self._next(tokens)

    def merge(self, first: list[bool] | None, second: list[bool]) -> list[bool]:
        return (first or []) + second

    def keep(self, batch: list[bool], rows: list[int]) -> list[bool] | None:
        return [batch[i] for i in rows] or None


def llm_config(folder: Path) -> ModelConfig:
    folder.mkdir(parents=True, exist_ok=True)
    return ModelConfig.model_validate(
        {
            "id": "t/llm",
            "source": {"path": str(folder)},
            "adapter": "causal_lm",
            "tasks": {"generate": {}},
            "max_sequence_length": 512,
            "profiles": {"cpu": {"max_batch_tokens": 1024}},
        }
    )


@pytest.fixture
async def generation() -> AsyncIterator[GenerationService]:
    def make(config: ModelConfig, profile: Profile, device: str) -> ModelAdapter:
        return FakeGenerator(config, profile, device)

    pool = ModelPool("cpu", "cpu", offline=True, budget_bytes=10**9, metrics=Metrics(), factory=make)
    service = GenerationService(pool, load_timeout_s=30)
    yield service
    await service.stop()


async def generate_together(
    service: GenerationService, model: ModelConfig, prompts: list[tuple[str, float]]
) -> list[Any]:
    """Start every sequence while the decode thread is held, so they join the batch before its first
    decode step; each one's text or error."""
    gate = threading.Event()
    held = asyncio.get_running_loop().run_in_executor(service.executor, gate.wait, 30)
    seqs = [
        (await service.start(model, prompt=p, messages=None, params=SamplingParams(6, t), wait_for_load=True))[0]
        for p, t in prompts
    ]
    gate.set()
    assert await held, "the decode thread was held too long"
    return list(await asyncio.gather(*(service.complete(s) for s in seqs), return_exceptions=True))


async def test_a_bad_temperature_fails_its_own_sequence_only(generation: GenerationService, tmp_path: Path) -> None:
    model = llm_config(tmp_path / "llm")
    got = await generate_together(generation, model, [("a", 0), ("c", 1e-300), ("e", 0), ("g", 0)])
    assert got[0] == "bcdefg" and got[2] == "fghijk" and got[3] == "hijklm"
    assert isinstance(got[1], InvalidInput) and "temperature 1e-300" in got[1].message


async def test_a_failing_decode_step_is_run_apart_and_only_its_culprit_fails(
    generation: GenerationService, tmp_path: Path
) -> None:
    model = llm_config(tmp_path / "llm")
    got = await generate_together(generation, model, [("a", 0), ("op", 0), ("e", 0), ("g", 0)])
    assert got[0] == "bcdefg" and got[2] == "fghijk" and got[3] == "hijklm"  # the step was rebuilt around them
    assert isinstance(got[1], InvalidInput) and "the rest of its batch was served" in got[1].message
    loop = generation.loops["t/llm"]
    assert loop.steps >= 5 and not loop.busy
    registry = generation.pool.metrics.registry
    assert metric(registry, "sie_isolation_retries_total", model="t/llm", kind="decode") == 1  # run apart once
    assert metric(registry, "sie_isolation_retries_total", absent_as_zero=True, model="t/llm", kind="prefill") == 0


async def test_every_sequence_failing_alone_is_a_server_error(generation: GenerationService, tmp_path: Path) -> None:
    model = llm_config(tmp_path / "llm")
    got = await generate_together(generation, model, [("p", 0), ("ap", 0)])
    assert all(isinstance(g, InferenceError) for g in got), got
    assert all(isinstance(g, SIEError) and "failed on this input (RuntimeError)" in g.message for g in got)
    after = await generate_together(generation, model, [("a", 0)])  # the loop still serves
    assert after == ["bcdefg"]
