"""Prefix reuse on the transformers path (adapters/generators/torch_prefix.py): a prompt sharing a long
prefix with an earlier one reads only the rest, and its logits match a cold read's at every step (1e-3),
alone and when another sequence joins and leaves the batch in between; a batch mixing a reused prompt and
new ones answers each row in the callers' order. The tiny random-weight Llama, in this process."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from sie_server.adapters.generators.causal_lm import CausalLMAdapter
from sie_server.catalog.schema import ModelConfig, Profile
from tests.helpers.catalog import tiny_llm

STEPS = 8
CONTEXT = [5 + (i * 7) % 50 for i in range(200)]  # 200 shared tokens (the tiny vocabulary has ~70)


@pytest.fixture(scope="module")
def adapter(tiny_models: dict[str, Path]) -> CausalLMAdapter:
    loaded = CausalLMAdapter(
        ModelConfig.model_validate(tiny_llm("test/tiny-llm", tiny_models["llm"])), Profile(), "cpu"
    )
    loaded.load(tiny_models["llm"])
    return loaded


def run(adapter: CausalLMAdapter, prompt: list[int], tokens: list[int], *, visitor: bool) -> torch.Tensor:
    batch, logits = adapter.prefill([prompt])
    steps, guest = [logits[0]], [7, 8, 9]
    for k, token in enumerate(tokens):
        if visitor and k == 2:
            joined, _ = adapter.prefill([guest])
            batch = adapter.merge(batch, joined)
        rows = batch.rows
        out = adapter.decode(batch, [token] * rows, [len(prompt) + k] + [len(guest) + k - 2] * (rows - 1))
        steps.append(out[0])
        if visitor and k == 5:
            kept = adapter.keep(batch, [0])
            assert kept is not None
            batch = kept
    return torch.stack(steps)


@pytest.mark.parametrize("visitor", [False, True], ids=["alone", "a-sequence-joins-and-leaves"])
def test_a_prompt_sharing_a_prefix_reads_the_rest_with_a_cold_reads_logits(
    adapter: CausalLMAdapter, visitor: bool
) -> None:
    cache = adapter.prefix_cache
    assert cache is not None and cache.cap_bytes > 0
    first, second = [*CONTEXT, 60, 61, 62], [*CONTEXT, 63, 64]
    tokens = [11, 12, 13, 14, 15, 16, 17, 18][:STEPS]
    cache.clear()
    cold = run(adapter, second, tokens, visitor=visitor)
    cache.clear()
    adapter.prefill([first])
    hits, reused = cache.stats.hits, cache.stats.reused_tokens
    warm = run(adapter, second, tokens, visitor=visitor)
    assert cache.stats.hits == hits + 1 and cache.stats.reused_tokens - reused == len(CONTEXT)
    assert float((warm - cold).abs().max()) <= 1e-3


def test_a_batch_mixing_a_reused_prompt_and_new_ones_answers_in_the_callers_order(adapter: CausalLMAdapter) -> None:
    cache = adapter.prefix_cache
    assert cache is not None
    prompts = [[20, 21, 22], [*CONTEXT, 40], [30, 31]]
    cache.clear()
    alone = torch.stack([adapter.prefill([p])[1][0] for p in prompts])
    cache.clear()
    adapter.prefill([[*CONTEXT, 50]])
    batch, together = adapter.prefill(prompts)
    assert cache.stats.hits >= 1 and batch.rows == 3
    torch.testing.assert_close(together, alone, atol=1e-3, rtol=0)
    first = adapter.decode(batch, [1, 1, 1], [len(p) for p in prompts])
    for row, prompt in enumerate(prompts):
        one, _ = adapter.prefill([prompt])
        torch.testing.assert_close(first[row], adapter.decode(one, [1], [len(prompt)])[0], atol=1e-3, rtol=0)
