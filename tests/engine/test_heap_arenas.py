"""glibc's thread arenas give back the free space at their top (memory/heap.py, ``bound_arena_tops``):
``malloc_trim`` cannot, and glibc's raised trim threshold let each keep up to 64 MiB (PP-OCR's load ->
request -> evict cycles grew the server 3.6 MiB a cycle that way)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from sie_server.memory.heap import ARENA_TOP_KEPT, OPERATOR_THRESHOLDS, _mallopt, bound_arena_tops
from tests.helpers.server import pythonpath

MIB = 2**20

# The probe frees a 30 MiB mmapped block (glibc then raises its mmap threshold to 30 MiB and its trim
# threshold to 60 MiB, as a model's large buffers make it do), then a thread of its own allocates 48
# blocks of 1 MiB (in that thread's arena), frees them and ends; after malloc_trim, it reports how much
# its anonymous resident set grew from before the thread.
ARENA_PROBE = """
import ctypes, threading
from sie_server.memory.heap import bound_arena_tops
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
if {bound}:
    assert bound_arena_tops({{}}), "no threshold set"
def rss_kib():
    return int(open("/proc/self/status").read().split("RssAnon:")[1].split()[0])
def touched(size):
    block = libc.malloc(size)
    ctypes.memset(block, 1, size)
    return block
libc.free(touched(30 << 20))
before = rss_kib()
def work():
    blocks = [touched(1 << 20) for _ in range(48)]
    for block in reversed(blocks):
        libc.free(block)
thread = threading.Thread(target=work)
thread.start()
thread.join()
libc.malloc_trim(0)
print(rss_kib() - before)
"""


def _kept_kib(bound: bool) -> int:
    env = {k: v for k, v in os.environ.items() if k not in OPERATOR_THRESHOLDS and k != "GLIBC_TUNABLES"}
    env["PYTHONPATH"] = pythonpath()
    probe = subprocess.run(
        [sys.executable, "-c", ARENA_PROBE.format(bound=bound)], env=env, capture_output=True, text=True, check=True
    )
    return int(probe.stdout.split()[-1])


@pytest.mark.skipif(_mallopt() is None, reason="not glibc")
def test_a_thread_arena_gives_back_its_top_once_bounded() -> None:
    unbounded, bounded = _kept_kib(bound=False), _kept_kib(bound=True)
    assert unbounded > 32 * 1024, unbounded  # KiB: glibc's own thresholds keep the freed 48 MiB at the top
    assert bounded < ARENA_TOP_KEPT // 1024 + 1024, bounded  # at most the bound kept (plus a page or two)


def test_the_operators_thresholds_are_left_alone() -> None:
    assert bound_arena_tops({"MALLOC_TRIM_THRESHOLD_": "131072"}) == {}
    assert bound_arena_tops({"GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=65536"}) == {}
