"""glibc's thread arenas give back the free space at their top (memory/heap.py, ``bound_arena_tops``):
``malloc_trim`` cannot, and glibc's raised trim threshold let each keep up to 64 MiB (PP-OCR's load ->
request -> evict cycles grew the server 3.6 MiB a cycle that way)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from sie_server.memory.heap import ARENA_TOP_KEPT, OPERATOR_ARENAS, OPERATOR_THRESHOLDS, _mallopt, bound_arena_tops
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


# The probe (one core) has 8 threads allocate at once, each holding its blocks until all have allocated, and
# reports how many arenas glibc then has (malloc_info's <heap> elements: the main arena and the threads').
ARENAS_PROBE = """
import ctypes, os, threading
from sie_server.memory.heap import bound_arena_tops
os.sched_setaffinity(0, {{min(os.sched_getaffinity(0))}})
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
if {bound}:
    assert bound_arena_tops({{}}), "nothing set"
barrier = threading.Barrier(8)
def work():
    blocks = [libc.malloc(4096) for _ in range(64)]
    barrier.wait()
    for block in blocks:
        libc.free(block)
threads = [threading.Thread(target=work) for _ in range(8)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
size = ctypes.c_size_t()
buffer = ctypes.c_char_p()
libc.open_memstream.restype = ctypes.c_void_p
stream = libc.open_memstream(ctypes.byref(buffer), ctypes.byref(size))
libc.malloc_info(0, ctypes.c_void_p(stream))
libc.fclose(ctypes.c_void_p(stream))
print(buffer.value.decode().count("<heap nr="))
"""


def _probe(code: str) -> int:
    env = {k: v for k, v in os.environ.items() if k not in (*OPERATOR_THRESHOLDS, OPERATOR_ARENAS[0], "GLIBC_TUNABLES")}
    env["PYTHONPATH"] = pythonpath()
    probe = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return int(probe.stdout.split()[-1])


def _kept_kib(bound: bool) -> int:
    return _probe(ARENA_PROBE.format(bound=bound))


@pytest.mark.skipif(_mallopt() is None, reason="not glibc")
def test_a_thread_arena_gives_back_its_top_once_bounded() -> None:
    unbounded, bounded = _kept_kib(bound=False), _kept_kib(bound=True)
    assert unbounded > 32 * 1024, unbounded  # KiB: glibc's own thresholds keep the freed 48 MiB at the top
    assert bounded < ARENA_TOP_KEPT // 1024 + 1024, bounded  # at most the bound kept (plus a page or two)


@pytest.mark.skipif(_mallopt() is None, reason="not glibc")
def test_threads_share_one_arena_a_core_once_bounded() -> None:
    unbounded, bounded = _probe(ARENAS_PROBE.format(bound=False)), _probe(ARENAS_PROBE.format(bound=True))
    assert unbounded >= 4, unbounded  # glibc's default: a new arena for each thread that finds them all busy
    assert bounded == 1, bounded  # one core: the main arena, shared


def test_the_operators_settings_are_left_alone() -> None:
    arenas = {"MALLOC_ARENA_MAX": "4"}
    assert bound_arena_tops({"MALLOC_TRIM_THRESHOLD_": "131072", **arenas}) == {}
    assert bound_arena_tops({"GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=65536:glibc.malloc.arena_max=4"}) == {}


def test_the_trimmer_trims_once_the_heap_grew_past_its_last_level() -> None:
    from sie_server.memory.heap import HeapTrimmer

    resident = [1000]
    trims: list[int] = []

    def trim() -> int:
        trims.append(resident[0])
        resident[0] = 1010  # the trim gave back all but 10 of the growth
        return 0

    trimmer = HeapTrimmer(growth=100, resident=lambda: resident[0], trim=trim)
    resident[0] = 1099
    assert not trimmer.check() and not trims
    resident[0] = 1100
    assert trimmer.check() and trims == [1100] and trimmer.level == 1010
    resident[0] = 900  # an eviction's trim: the level follows it down
    assert not trimmer.check() and trimmer.level == 900
    resident[0] = 1000
    assert trimmer.check() and trims == [1100, 1000]
