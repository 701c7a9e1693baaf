"""A GGUF model's load cost is read from its header once per file version (memory/estimate.py).

``GGUFReader`` builds about 150 MiB of small Python objects for SmolLM2's 49k-token vocabulary; parsed at
every load, a few of them outlived each load scattered over pymalloc's 1 MiB arenas, and the server grew about
3.5 MiB a SmolLM2 load -> evict cycle (benchmarks/RESULTS.md, "Memory that comes back")."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from pathlib import Path

import numpy as np
from gguf import GGUFWriter

from sie_server.adapters.generators.llamacpp_sizing import attention_cache_bytes, kv_cache_bytes
from sie_server.memory.estimate import _gguf_shape, compute_threads, gguf_estimate
from tests.helpers.tiny_gguf import smollm2_gguf


def _python_peak(call: Callable[[], object]) -> int:
    """The most memory Python objects took during ``call``."""
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_second_load_of_the_same_gguf_does_not_parse_its_header_again() -> None:
    path = smollm2_gguf()
    _gguf_shape.cache_clear()
    figures: list[tuple[int, int]] = []
    first = _python_peak(lambda: figures.append(gguf_estimate(path, 8704)))
    again = _python_peak(lambda: figures.append(gguf_estimate(path, 8704)))
    assert first > 50 * 2**20, f"the first read parses the header: {first / 2**20:.1f} MiB of Python objects"
    assert again < 8 * 2**20, f"a second load of the file re-parsed its header: {again / 2**20:.1f} MiB"
    assert figures[0] == figures[1]


def _write_gguf(path: Path, layers: int, width: int) -> None:
    writer = GGUFWriter(str(path), "llama")
    writer.add_block_count(layers)
    writer.add_embedding_length(width)
    writer.add_head_count(4)
    writer.add_head_count_kv(2)
    writer.add_tensor("token_embd.weight", np.zeros((8, width), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def test_a_gguf_rewritten_in_place_is_estimated_from_its_new_header(tmp_path: Path) -> None:
    path = tmp_path / "model.gguf"
    _write_gguf(path, layers=2, width=64)
    _, kv_before = gguf_estimate(path, 1024)
    _write_gguf(path, layers=6, width=128)  # a new size: a new file version, whatever the clock's tick
    _, kv_after = gguf_estimate(path, 1024)
    attention = attention_cache_bytes(1024, 128, 4, compute_threads())
    assert kv_before == kv_cache_bytes(1024, 2, 64, 4, 2) + attention_cache_bytes(1024, 64, 4, compute_threads())
    assert kv_after == kv_cache_bytes(1024, 6, 128, 4, 2) + attention
