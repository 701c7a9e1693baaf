"""The Q4_1 kernel this project patches into llama.cpp (patches/llama.cpp/sgemm-q4_1.patch): an output is the same
bits whatever columns it is computed with, and its arithmetic is the one the patch states.

With the patch, ggml sends a matmul of Q4_1 weights by two or more columns (a prompt, several sequences decoding
together) to the tile kernel, and on AVX-512 VNNI by one column (one sequence decoding) too; elsewhere one column
goes to ``ggml_vec_dot_q4_1_q8_1``. Each column of a many-column product must equal that column's product alone,
bit for bit, for shapes that fill whole tiles and shapes that leave partial ones; else a prompt's logits would
depend on what it was batched with, and prefix reuse would not be exact. A one-column product must equal, bit for
bit, the arithmetic the kernel is built on: on AVX-512 VNNI, per block in order the exact integer dot product
times d_x * d_y added with one FMA and m_x * s_y with another (computed here in numpy); elsewhere ggml's own dot
product, row by row through ctypes. The products are also checked against float64 arithmetic on the dequantized
weights, so a kernel that agreed with a wrong reference would not pass either.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("llama_cpp")

from tests.helpers.ggml import InitParams, load_ggml

GGML_TYPE_F32, GGML_TYPE_Q4_1 = 0, 3
Q4_1_BLOCK = 20  # bytes per 32 weights: fp16 scale, fp16 min, 16 bytes of nibbles
Q8_1_BLOCK = 36  # bytes per 32 activations: fp16 scale, fp16 scale x sum, 32 int8
K = 512  # 16 blocks a row (and 48: the kernel multiplies scales ahead 32 blocks at a time)


@pytest.fixture(scope="module")
def ggml() -> ctypes.CDLL:
    base = load_ggml()
    base.ggml_new_tensor_2d.restype = ctypes.c_void_p
    base.ggml_new_tensor_2d.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    base.ggml_mul_mat.restype, base.ggml_mul_mat.argtypes = ctypes.c_void_p, [ctypes.c_void_p] * 3
    base.ggml_quantize_chunk.restype = ctypes.c_size_t
    base.ggml_quantize_chunk.argtypes = (
        [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p] + [ctypes.c_int64] * 3 + [ctypes.c_void_p]
    )
    return base


def quantize(ggml: ctypes.CDLL, weights: np.ndarray) -> np.ndarray:
    rows, k = weights.shape
    out = np.zeros(rows * k // 32 * Q4_1_BLOCK, dtype=np.uint8)
    src = np.ascontiguousarray(weights, dtype=np.float32)
    ggml.ggml_quantize_chunk(GGML_TYPE_Q4_1, src.ctypes.data, out.ctypes.data, 0, rows, k, None)
    return out


def dequantize(blocks: np.ndarray, rows: int, k: int = K) -> np.ndarray:
    b = blocks.reshape(rows, k // 32, Q4_1_BLOCK)
    d = b[..., 0:2].copy().view(np.float16).astype(np.float64)
    m = b[..., 2:4].copy().view(np.float16).astype(np.float64)
    nibbles = b[..., 4:]
    q = np.concatenate([nibbles & 15, nibbles >> 4], axis=-1).astype(np.float64)  # elements 0-15, then 16-31
    return (d * q + m).reshape(rows, k)


def matmul(ggml: ctypes.CDLL, blocks: np.ndarray, rows: int, x: np.ndarray, threads: int) -> np.ndarray:
    """ggml_mul_mat of the Q4_1 weights (rows x k) by the columns of x (columns x k): columns x rows."""
    columns, k = x.shape
    ctx = ggml.ggml_init(InitParams(64 << 20, None, False))
    assert ctx
    try:
        a = ggml.ggml_new_tensor_2d(ctx, GGML_TYPE_Q4_1, k, rows)
        b = ggml.ggml_new_tensor_2d(ctx, GGML_TYPE_F32, k, columns)
        ctypes.memmove(ggml.ggml_get_data(a), blocks.ctypes.data, blocks.nbytes)
        xs = np.ascontiguousarray(x, dtype=np.float32)
        ctypes.memmove(ggml.ggml_get_data(b), xs.ctypes.data, xs.nbytes)
        c = ggml.ggml_mul_mat(ctx, a, b)
        graph = ggml.ggml_new_graph(ctx)
        ggml.ggml_build_forward_expand(graph, c)
        assert ggml.compute(ctx, graph, threads) == 0
        out = np.empty((columns, rows), dtype=np.float32)
        ctypes.memmove(out.ctypes.data, ggml.ggml_get_data(c), out.nbytes)
        return out
    finally:
        ggml.ggml_free(ctx)


@pytest.mark.parametrize(
    ("rows", "columns", "k", "threads"),
    [
        (64, 2, K, 2),
        (67, 3, K, 2),
        (64, 8, K, 2),
        (67, 13, K, 2),
        (9, 129, K, 2),
        (67, 13, 3 * K, 2),
        # the threads take row tiles in chunks as each gets free: many chunks, more threads than cores, and
        # the last rows and columns (split statically) after them
        (1030, 5, K, 3),
        (264, 8, K, 2),
        (131, 130, K, 4),
    ],
)
def test_many_columns_give_each_column_alone_bit_for_bit(
    ggml: ctypes.CDLL, rows: int, columns: int, k: int, threads: int
) -> None:
    rng = np.random.default_rng(rows * 1000 + columns + k)
    blocks = quantize(ggml, rng.normal(0.0, 0.05, (rows, k)) + rng.normal(0.0, 0.02, (rows, 1)))
    x = rng.normal(0.0, 1.0, (columns, k)).astype(np.float32)
    together = matmul(ggml, blocks, rows, x, threads=threads)
    alone = np.stack([matmul(ggml, blocks, rows, x[j : j + 1], threads=1)[0] for j in range(columns)])
    assert together.view(np.uint32).tolist() == alone.view(np.uint32).tolist()
    exact = x.astype(np.float64) @ dequantize(blocks, rows, k).T  # the activations are rounded to 8 bits by ggml
    scale = np.abs(x).astype(np.float64) @ np.abs(dequantize(blocks, rows, k)).T
    assert np.max(np.abs(together - exact) / scale) < 0.02


def vnni512() -> bool:
    """Whether this CPU has the AVX-512 parts the wheel's VNNI tile kernel is built for (the wheel is built for the
    CPU it runs on)."""
    flags = set()
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    return {"avx512f", "avx512bw", "avx512vl", "avx512_vnni"} <= flags


def fma32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """float32 fused multiply-add: the product is exact in float64 (two 24-bit significands, or one and an
    integer under 2**16), the sum rounded once to float64 and then to float32."""
    return (a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)).astype(np.float32)


def chain_per_block(blocks: np.ndarray, rows: int, k: int, column: np.ndarray) -> np.ndarray:
    """The VNNI kernel's arithmetic, one output per row: for each block in order, its integer dot product
    (exact) scaled by d_x * d_y with one FMA, then m_x * s_y added with another."""
    nb = k // 32
    b = blocks.reshape(rows, nb, Q4_1_BLOCK)
    d = b[..., 0:2].copy().view(np.float16).astype(np.float32)[..., 0]
    m = b[..., 2:4].copy().view(np.float16).astype(np.float32)[..., 0]
    q = np.concatenate([b[..., 4:] & 15, b[..., 4:] >> 4], axis=-1).astype(np.int64)
    c = column.reshape(nb, Q8_1_BLOCK)
    dy = c[:, 0:2].copy().view(np.float16).astype(np.float32)[:, 0]
    sy = c[:, 2:4].copy().view(np.float16).astype(np.float32)[:, 0]
    qy = c[:, 4:].view(np.int8).astype(np.int64)
    acc = np.zeros(rows, dtype=np.float32)
    for block in range(nb):
        dot = (q[:, block] * qy[block]).sum(axis=-1).astype(np.float32)
        acc = fma32(d[:, block] * dy[block], dot, acc)
        acc = fma32(m[:, block], np.full(rows, sy[block], dtype=np.float32), acc)
    return acc


@pytest.fixture(scope="module")
def cpu(ggml: ctypes.CDLL) -> ctypes.CDLL:
    """libggml-cpu (loaded by ``ggml``): its quantizer for activations and its Q4_1 dot product, typed."""
    import llama_cpp

    lib = ctypes.CDLL(str(Path(llama_cpp.__file__).parent / "lib" / "libggml-cpu.so"))
    lib.quantize_row_q8_1.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    lib.ggml_vec_dot_q4_1_q8_1.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    lib.ggml_vec_dot_q4_1_q8_1.argtypes += [ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    return lib


@pytest.mark.parametrize(
    ("rows", "k", "threads"),
    [
        (64, K, 1),  # whole groups of four rows
        (3, K, 1),  # fewer rows than a group
        (67, 3 * K, 2),  # a partial group at the end of the last 16-row block
        (1030, K, 3),  # many chunks taken by the threads as they get free, a partial group
    ],
)
def test_one_column_gives_the_dot_product_row_by_row_bit_for_bit(
    ggml: ctypes.CDLL, cpu: ctypes.CDLL, rows: int, k: int, threads: int
) -> None:
    rng = np.random.default_rng(rows * 7 + k)
    blocks = quantize(ggml, rng.normal(0.0, 0.05, (rows, k)) + rng.normal(0.0, 0.02, (rows, 1)))
    x = rng.normal(0.0, 1.0, (1, k)).astype(np.float32)
    through_ggml = matmul(ggml, blocks, rows, x, threads=threads)[0]
    column = np.zeros(k // 32 * Q8_1_BLOCK, dtype=np.uint8)
    cpu.quantize_row_q8_1(x.ctypes.data, column.ctypes.data, k)
    if vnni512():
        expected = chain_per_block(blocks, rows, k, column)
    else:
        one = ctypes.c_float()
        row_bytes = k // 32 * Q4_1_BLOCK
        by_row = []
        for r in range(rows):
            cpu.ggml_vec_dot_q4_1_q8_1(
                k, ctypes.byref(one), 0, blocks.ctypes.data + r * row_bytes, 0, column.ctypes.data, 0, 1
            )
            by_row.append(one.value)
        expected = np.array(by_row, dtype=np.float32)
    assert through_ggml.view(np.uint32).tolist() == expected.view(np.uint32).tolist()
    exact = x.astype(np.float64) @ dequantize(blocks, rows, k).T
    scale = np.abs(x).astype(np.float64) @ np.abs(dequantize(blocks, rows, k)).T
    assert np.max(np.abs(through_ggml - exact[0]) / scale[0]) < 0.02
