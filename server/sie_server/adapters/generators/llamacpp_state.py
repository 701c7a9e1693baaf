"""llama.cpp's sequence state (``llama_state_seq_get_data`` / ``llama_state_seq_set_data``) as arrays.

What the vendored llama.cpp (``llama_context::state_seq_*``, ``llama_kv_cache::state_write``) writes for
one sequence of a unified F16 KV cache with flash attention (V not transposed), every number little-endian:

    u32 magic 0xaf143cd8, i32 seq_id, u32 n_stream (1: unified), u32 cell_count,
    cell_count x (i32 pos, u32 n_seq_id = 1, i32 seq_id),
    u32 v_trans = 0, u32 n_layer,
    n_layer x (i32 type = 1 (F16), u64 row_bytes, cell_count rows of K),
    n_layer x (i32 type = 1 (F16), u64 row_bytes, cell_count rows of V).

A row is one cell's keys (or values) of every KV head, head after head. ``pack`` writes that, so
another engine's prefill (adapters/generators/torch_prefill.py) can hand llama.cpp the KV cells of a
prompt; ``unpack`` reads it back. Anything else (a quantized or transposed cache, cell extensions of
M-RoPE models, several streams) is a ValueError: the caller reads the prompt with llama.cpp instead.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

MAGIC = 0xAF143CD8
F16 = 1  # ggml_type GGML_TYPE_F16


@dataclass
class SeqState:
    """One sequence's cells: their positions, and per layer the keys and values, ``[cells, kv_heads * head_dim]``."""

    positions: np.ndarray  # int32 [cells]
    keys: list[np.ndarray]  # float16
    values: list[np.ndarray]

    @property
    def cells(self) -> int:
        return len(self.positions)

    def head(self, count: int) -> SeqState:
        """The first ``count`` cells."""
        return SeqState(self.positions[:count], [k[:count] for k in self.keys], [v[:count] for v in self.values])


def pack(seq_id: int, state: SeqState) -> bytes:
    cells, layers = state.cells, len(state.keys)
    if len(state.values) != layers or any(a.shape[0] != cells for a in (*state.keys, *state.values)):
        raise ValueError("keys and values need one array per layer, a row per cell")
    meta = np.empty((cells, 3), dtype="<i4")
    meta[:, 0], meta[:, 1], meta[:, 2] = state.positions, 1, seq_id
    parts = [struct.pack("<IiII", MAGIC, seq_id, 1, cells), meta.tobytes(), struct.pack("<II", 0, layers)]
    for rows in (*state.keys, *state.values):
        data = np.ascontiguousarray(rows, dtype="<f2")
        parts += [struct.pack("<iQ", F16, data.shape[1] * 2), data.tobytes()]
    return b"".join(parts)


def unpack(blob: bytes | bytearray | memoryview) -> SeqState:
    """The cells of a sequence state; ValueError for one this reader does not know, or a truncated one."""
    try:
        return _unpack(memoryview(blob).cast("B"))
    except struct.error as exc:
        raise ValueError(f"a truncated sequence state ({exc})") from exc


def _unpack(view: memoryview) -> SeqState:
    magic, _seq, streams, cells = struct.unpack_from("<IiII", view, 0)
    if magic != MAGIC:
        raise ValueError(f"not a llama.cpp sequence state (magic {magic:#x})")
    if streams != 1:
        raise ValueError(f"{streams} KV streams (a unified cache has one)")
    at = 16
    meta = np.frombuffer(view, dtype="<i4", count=cells * 3, offset=at).reshape(cells, 3)
    if cells and not (meta[:, 1] == 1).all():
        raise ValueError("cells shared by several sequences, or with extensions this reader does not know")
    at += cells * 12
    v_trans, layers = struct.unpack_from("<II", view, at)
    at += 8
    if v_trans:
        raise ValueError("a transposed V cache (flash attention off)")
    arrays: list[np.ndarray] = []
    for _ in range(2 * layers):
        kind, row_bytes = struct.unpack_from("<iQ", view, at)
        at += 12
        if kind != F16:
            raise ValueError(f"a KV cache of ggml type {kind}, not F16")
        arrays.append(np.frombuffer(view, dtype="<f2", count=cells * row_bytes // 2, offset=at).reshape(cells, -1))
        at += cells * row_bytes
    if at != len(view):
        raise ValueError(f"{len(view) - at} bytes past the last layer's values")
    return SeqState(meta[:, 0].copy(), arrays[:layers], arrays[layers:])
