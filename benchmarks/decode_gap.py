"""What a long prompt costs the streams already decoding (issue 24, "a long prompt does not stall the streams"):
SmolLM2-135M-Instruct's packaged GGUF on llama.cpp, in this process, RUNNING streams decoding when a RAG-sized
prompt (~2,000 tokens) arrives.

    .venv/bin/python -m benchmarks.decode_gap [--steps whole 512 256 128 64] [--rounds 3] [--threads 2]

For each read step size (``engine.decode_loop.READ_STEP_TOKENS``: prompt tokens read between two decode steps
of the running streams; ``whole``: the prompt read at once, as before the stepwise read), alternating rounds:
the longest gap between two decode steps of the running streams while the prompt is read (the longest a
stream waits for its next token), the median gap outside it, and the long prompt's time to its first token.
Medians over rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from benchmarks._common import cpu_flags_line, cpu_model
from sie_server.adapters.generators.llamacpp import LlamaCppAdapter, SeqBatch
from sie_server.adapters.generators.llamacpp_sizing import PREFILL_CHUNK
from sie_server.adapters.runtime.base import ModelAdapter
from sie_server.adapters.runtime.generator import PrefillSteps, run_steps
from sie_server.catalog.schema import ModelConfig, Profile
from sie_server.engine import decode_loop
from sie_server.engine.generation import GenerationService
from sie_server.engine.sequences import SamplingParams, Sequence
from sie_server.memory.pool import ModelPool
from sie_server.observability.metrics import Metrics
from tests.helpers.catalog import SMOLLM, real_config

RUNNING = 7
FACT = "Fact {i}: the item numbered {i} costs {d} dollars and weighs {k} kilograms."
CONTEXT = " ".join(FACT.format(i=i, d=3 * i, k=i % 9) for i in range(115))


class Timed(LlamaCppAdapter):
    """SmolLM2 on llama.cpp that never ends a sequence by itself and notes when each decode step ends;
    ``whole`` reads every prompt at once (the loop's steps are one prefill)."""

    whole = False
    step_ends: list[float]

    def load(self, weights: Path) -> None:
        super().load(weights)
        self.eos_ids = frozenset()
        self.step_ends = []

    def decode(self, batch: SeqBatch, tokens: list[int], positions: list[int]) -> torch.Tensor:
        logits = super().decode(batch, tokens, positions)
        self.step_ends.append(time.perf_counter())
        return logits

    def prefill_steps(self, prompts: list[list[int]], step_tokens: int) -> PrefillSteps:
        if not self.whole:
            return (yield from super().prefill_steps(prompts, step_tokens))
        yield from ()
        return run_steps(super().prefill_steps(prompts, PREFILL_CHUNK))


async def one_round(service: GenerationService, model: ModelConfig, step: str, round_no: int) -> dict[str, float]:
    adapter = await service.pool.acquire(model, wait=True, timeout_s=300)
    assert isinstance(adapter, Timed)
    adapter.whole = step == "whole"
    decode_loop.READ_STEP_TOKENS = PREFILL_CHUNK if step == "whole" else int(step)

    async def start(text: str, tokens: int) -> Sequence:
        seq, _ = await service.start(
            model, prompt=None, messages=[{"role": "user", "content": text}], params=SamplingParams(tokens, 0.0),
            wait_for_load=True,
        )  # fmt: skip
        return seq

    running = [await start(f"Round {round_no}: count from {i} upwards.", 400) for i in range(RUNNING)]
    loop = service.loops[model.id]
    while loop.steps < 10:
        await asyncio.sleep(0.002)
    arrived = time.perf_counter()
    long = await start(f"Round {round_no} {step}. " + CONTEXT + " What does item 7 cost?", 1)
    await service.complete(long)
    first_token = time.perf_counter() - arrived
    adapter.step_ends = [t for t in adapter.step_ends if t > arrived - 1.0]
    while len([t for t in adapter.step_ends if t > arrived + first_token]) < 10:
        await asyncio.sleep(0.002)
    for seq in running:
        seq.cancelled = True
    await asyncio.gather(*(service.complete(s) for s in running), return_exceptions=True)
    ends = list(adapter.step_ends)
    answered = arrived + first_token
    during = [b - a for a, b in itertools.pairwise(ends) if b > arrived and a < answered]  # overlaps the read
    outside = [b - a for a, b in itertools.pairwise(ends) if a > answered]
    return {
        "prompt": len(long.prompt_ids),
        "gap_max": max(during or [0.0]),
        "gap_calm": statistics.median(outside),
        "first_token": first_token,
    }


async def run(steps: list[str], rounds: int) -> None:
    config: dict[str, Any] = real_config(SMOLLM)
    config["profiles"] = {"cpu": {**config["profiles"]["cpu"], "max_batch_tokens": 8192}}
    model = ModelConfig.model_validate(config)

    def make(config: ModelConfig, profile: Profile, device: str) -> ModelAdapter:
        return Timed(config, profile, device)

    pool = ModelPool("cpu", "cpu", offline=True, budget_bytes=8 * 2**30, metrics=Metrics(), factory=make)
    service = GenerationService(pool, load_timeout_s=300)
    results: dict[str, list[dict[str, float]]] = {s: [] for s in steps}
    try:
        for r in range(rounds):
            for step in steps if r % 2 == 0 else list(reversed(steps)):
                results[step].append(await one_round(service, model, step, r))
    finally:
        await service.stop()
    prompt = int(results[steps[0]][0]["prompt"])
    print(f"{RUNNING} streams decoding, a {prompt}-token prompt arrives; medians of {rounds} alternating rounds")
    print("read step      | longest gap while it is read | gap after | long prompt's first token")
    for step in steps:
        got = results[step]
        med = {k: statistics.median(g[k] for g in got) for k in ("gap_max", "gap_calm", "first_token")}
        label = "whole prompt" if step == "whole" else f"{step} tokens"
        print(
            f"{label:<14} | {med['gap_max'] * 1000:>8.0f} ms{'':<18} | {med['gap_calm'] * 1000:>6.1f} ms"
            f" | {med['first_token']:.2f} s"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", nargs="+", default=["whole", "512", "256", "128", "64"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"CPU {cpu_model()}; {cpu_flags_line()}; {args.threads} threads")
    asyncio.run(run(args.steps, args.rounds))


if __name__ == "__main__":
    main()
