"""A loaded model's objects are frozen out of the garbage collector's full passes, and freed on eviction;
oneDNN's per-shape caches are bounded."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import weakref
from pathlib import Path

import pytest
import torch

from sie_server.memory.heap import SHAPE_CACHE_CAPACITY, SHAPE_CACHE_VARIABLES, bound_shape_caches
from tests.engine.conftest import EngineFactory, fake_config
from tests.helpers.fake_adapter import FakeAdapter
from tests.helpers.server import pythonpath

MB = 10**6


async def test_a_loaded_model_is_frozen_and_an_evicted_ones_cycles_are_collected(
    make_engine: EngineFactory, tmp_path: Path
) -> None:
    engine = make_engine(budget=150 * MB)
    first, second = (fake_config(f"t/{n}", tmp_path / n, reserve=100 * MB) for n in "ab")
    await engine.encode(first, ["x"])
    adapter = engine.pool.peek("t/a").adapter  # type: ignore[union-attr]
    assert isinstance(adapter, FakeAdapter)
    weights = weakref.ref(adapter.weights)  # a reference cycle, as a module tree is
    assert gc.get_freeze_count() > 0
    assert id(adapter.weights) not in {id(o) for o in gc.get_objects(generation=2)}  # frozen: full passes skip it
    del adapter
    await engine.encode(second, ["x"])  # only one fits: the first is evicted
    assert engine.pool.peek("t/a").adapter is None  # type: ignore[union-attr]
    assert weights() is None  # collected, not kept alive in the frozen generation
    assert gc.get_freeze_count() > 0  # what is still alive is frozen again


async def test_each_batch_reports_its_forward_time(make_engine: EngineFactory, tmp_path: Path) -> None:
    engine = make_engine()
    model = fake_config("t/m", tmp_path / "m", max_batch_tokens=8)
    await engine.encode(model, ["a b c", "d e f", "g"])  # 5 + 5 + 3 tokens: more than one batch
    batches = len(engine.behaviour.batches)
    assert batches > 1
    assert engine.metric("sie_batch_seconds_count", model="t/m") == batches
    assert engine.metric("sie_batch_seconds_sum", model="t/m") > 0


def test_shape_caches_are_bounded_unless_the_operator_set_a_bound() -> None:
    env: dict[str, str] = {"LRU_CACHE_CAPACITY": "256"}
    in_force = bound_shape_caches(environ=env)
    assert in_force == {"ONEDNN_PRIMITIVE_CACHE_CAPACITY": str(SHAPE_CACHE_CAPACITY), "LRU_CACHE_CAPACITY": "256"}
    assert env == in_force


GROWTH_PROBE = """
import torch
from sie_server.memory.heap import bound_shape_caches
if {bound}:
    bound_shape_caches()
torch.set_num_threads(1)
linear = torch.nn.Linear(384, 1536).to(torch.bfloat16)
def rss_kib():
    return int(open("/proc/self/status").read().split("VmRSS:")[1].split()[0])
with torch.inference_mode():
    linear(torch.ones(1, 384, dtype=torch.bfloat16))
    start = rss_kib()
    for rows in range(2, 402):  # 400 batch shapes, as variable-length batches make
        linear(torch.ones(rows, 384, dtype=torch.bfloat16))
print(rss_kib() - start)
"""


def _growth_kib(bound: bool) -> int:
    env = {k: v for k, v in os.environ.items() if k not in SHAPE_CACHE_VARIABLES}
    env["PYTHONPATH"] = pythonpath()
    probe = subprocess.run(
        [sys.executable, "-c", GROWTH_PROBE.format(bound=bound)], env=env, capture_output=True, text=True, check=True
    )
    return int(probe.stdout.split()[-1])


@pytest.mark.skipif(
    not torch.ops.mkldnn._is_mkldnn_bf16_supported(), reason="bfloat16 matmuls do not run on oneDNN here"
)
def test_new_batch_shapes_do_not_grow_the_process_without_bound() -> None:
    unbounded, bounded = _growth_kib(bound=False), _growth_kib(bound=True)
    assert unbounded > 100 * 1024  # a compiled primitive per shape kept: the growth the server saw
    assert bounded < unbounded * 0.6
