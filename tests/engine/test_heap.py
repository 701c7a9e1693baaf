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


# The probe runs fresh input shapes through one float32 convolution (oneDNN compiles a primitive per
# shape for it on every x86 CPU, with or without bfloat16) and reports its RSS at three marks: after the
# first SETTLE shapes (past the bound: a bounded cache is full and evicting by then), after WINDOW more,
# and after WINDOW more again. What the server needs: once a bounded cache is full, new shapes stop
# growing the process; unbounded, every new shape keeps its primitive and the process grows on.
SETTLE, WINDOW = 2 * SHAPE_CACHE_CAPACITY, 150
GROWTH_PROBE = """
import torch
from sie_server.memory.heap import bound_shape_caches
if {bound}:
    bound_shape_caches()
torch.set_num_threads(1)
conv = torch.nn.Conv1d(384, 384, 3, padding=1)
def rss_kib():
    return int(open("/proc/self/status").read().split("VmRSS:")[1].split()[0])
marks = []
length = 2
with torch.inference_mode():
    for count in ({settle}, {window}, {window}):
        for _ in range(count):  # new shapes, as variable-length batches make
            conv(torch.ones(1, 384, length))
            length += 1
        marks.append(rss_kib())
print(*marks)
"""


def _rss_marks_kib(bound: bool) -> tuple[int, int, int]:
    env = {k: v for k, v in os.environ.items() if k not in SHAPE_CACHE_VARIABLES}
    env["PYTHONPATH"] = pythonpath()
    probe = subprocess.run(
        [sys.executable, "-c", GROWTH_PROBE.format(bound=bound, settle=SETTLE, window=WINDOW)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    first, second, third = (int(v) for v in probe.stdout.split()[-3:])
    return first, second, third


@pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="this torch build has no oneDNN")
def test_new_shapes_stop_growing_the_process_once_the_cache_bound_is_reached() -> None:
    _, *unbounded = _rss_marks_kib(bound=False)
    _, *bounded = _rss_marks_kib(bound=True)
    # unbounded (1,024 entries by default, more than the shapes measured), the last window of new shapes
    # grows the process: the growth the server saw (about 0.9 MiB a shape on a Zen 3 EPYC)
    unbounded_growth = unbounded[1] - unbounded[0]
    assert unbounded_growth > WINDOW * 100  # KiB: over 100 KiB a shape
    # bounded, the cache was full before that window: its new shapes cost (nearly) nothing more,
    # whatever a primitive weighs on this CPU
    bounded_growth = bounded[1] - bounded[0]
    assert bounded_growth < unbounded_growth / 4, (bounded, unbounded)
