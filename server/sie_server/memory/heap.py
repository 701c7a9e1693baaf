"""Keeping Python's cyclic garbage collector off the request path.

A loaded model (torch, transformers, its modules and tokenizer) is a few hundred thousand
long-lived Python objects. Every full collection walks all of them while holding the GIL:
about 180 ms per collection on a 2-core EPYC with MiniLM loaded, during which no batch
makes progress. Under steady request load the young objects of requests in flight are
promoted often enough to trigger such a pass every few seconds. So once a model has
loaded, everything alive is moved out of the collector's reach (``gc.freeze``); reference
counting still frees those objects as usual. Before a model is unloaded they are moved back
(``gc.unfreeze``), so the collection the unload runs can reclaim the model's reference
cycles, and what is left is frozen again afterwards.

The native heap has its own trap: oneDNN (torch's CPU kernels for bfloat16 and some
float32 ops) keeps a compiled primitive for every distinct tensor shape it has run, in two
caches keyed by shape (oneDNN's own, ``ONEDNN_PRIMITIVE_CACHE_CAPACITY``, and ideep's,
``LRU_CACHE_CAPACITY``), each holding up to 1,024 entries by default. A server batches
requests of every length, so nearly every batch is a new shape: with MiniLM in bfloat16
the process grew from about 600 MiB to over 1.2 GiB in 90 s of variable-length traffic,
with Python's own heap flat (tracemalloc) and glibc counting the growth as in use
(``mallinfo2``), so neither ``malloc_trim`` nor jemalloc gave it back. With both caches
bounded the same traffic stays flat. ``bound_shape_caches`` sets both bounds before the
first primitive is built; a value the operator set in the environment is kept.

And glibc keeps what a model freed. Each thread that allocates gets a malloc arena (up to 8 per
core), and loads, warm-ups and lanes run on threads that come and go (compute_thread.py), so a
model's buffers are spread over several arenas; freed, they stay mapped in them. Load -> request ->
evict cycles of MiniLM and SmolLM2 in one server grew it from 604 MiB after the first to 916 MiB after
the tenth (all evicted each time); read with ``malloc_stats`` after 6 such cycles, glibc held 547 MB
for 160 MB in use, four thread arenas
holding 65-72 MB each with under 130 KB in use, and ``malloc_trim(0)`` gave back 323 MiB of the
850 MiB resident. So every eviction ends with ``trim_native_heap`` (``thawed`` below), after the
collection that freed the model: with it the same cycles level off (benchmarks/memory_cycles.py,
RESULTS.md). What stays after the first cycles is the families' code and data imported once
(libraries mapped, tokenizers, Python modules), not per load.

``malloc_trim`` does not reach one thing: the free space at the top of a thread arena (it gives back free
chunks inside every arena, but shrinks only the main arena's top). A thread arena's top is given back by
the ``free`` that grows it past ``M_TRIM_THRESHOLD``, and glibc raises that threshold with its mmap
threshold each time a large mmapped block is freed, up to 64 MiB; with up to 8 arenas a core, that is
up to 1 GiB on 2 cores kept by arenas no thread is using. PP-OCR (RapidOCR on ONNX Runtime: sessions
built on the load thread, ORT's own threads, the lanes) grew 3.6 MiB a cycle for 30 cycles that way,
with glibc's bytes in use flat (``mallinfo2``) and its free bytes growing. ``bound_arena_tops`` fixes
both thresholds (``mallopt``, which also ends the raising): blocks up to 32 MiB come from the arenas,
as glibc's raised threshold has them, and a top over 16 MiB is given back when a ``free`` grows it.

And the number of arenas. glibc gives a thread that finds every arena busy a new one, up to 8 a core: the
request, lane and library threads (ONNX Runtime's, CTranslate2's, PDFium's) end up spread over 16 arenas on
2 cores, and each keeps what its busiest moment needed. docling, PP-OCR and faster-whisper side by side in one
server (their pages and pictures are buffers of 1-30 MiB) settled at 1.6-1.9 GiB that way, against 1.3 GiB
with 2 arenas, and the 24-minute soak grew 1.8 GiB an hour. ``bound_arena_tops`` also caps the arenas at one
a core (``M_ARENA_MAX``, at startup in cli.py, so the server's later threads share those), unless the
operator set ``MALLOC_ARENA_MAX`` or its tunable.

Even so, a server whose models stay loaded never evicts, so nothing ever trims: with the arenas capped, the
same three families held 1,321 MiB resident for 428 MiB in use, and ``malloc_trim(0)`` gave back 492 MiB of
it. So the first load also starts ``HeapTrimmer``'s thread: every ``TRIM_EVERY_S`` it reads the resident set
and trims once it has grown ``TRIM_AFTER_GROWTH`` past where the last trim left it (tens of ms, outside the
GIL: glibc locks one arena at a time).
"""

from __future__ import annotations

import ctypes
import gc
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from functools import cache
from typing import cast

log = logging.getLogger(__name__)

SHAPE_CACHE_VARIABLES = ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY")
SHAPE_CACHE_CAPACITY = 64  # compiled primitives kept per cache: the shapes in use now, not every shape ever seen
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_ARENA_MAX = -1, -3, -8  # glibc's mallopt parameters
MMAP_THRESHOLD = 32 * 2**20  # blocks this large or larger are mmapped: glibc's own ceiling for its raised threshold
ARENA_TOP_KEPT = 16 * 2**20  # free space kept at an arena's top; more is given back (glibc raises it to 64 MiB)
ARENAS_PER_CORE = 1  # malloc arenas a core (glibc's default: 8)
TRIM_EVERY_S = 30.0  # how often the trimmer reads the resident set ...
TRIM_AFTER_GROWTH = 64 * 2**20  # ... and trims once it grew this much past the level the last trim left
#: how an operator sets glibc's thresholds (environment, ``GLIBC_TUNABLES``): then they are left alone
OPERATOR_THRESHOLDS = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_")
OPERATOR_TUNABLES = ("glibc.malloc.trim_threshold", "glibc.malloc.mmap_threshold")
OPERATOR_ARENAS = ("MALLOC_ARENA_MAX", "glibc.malloc.arena_max")  # the variable, the tunable


def bound_shape_caches(
    capacity: int = SHAPE_CACHE_CAPACITY, environ: MutableMapping[str, str] | None = None
) -> dict[str, str]:
    """Bound oneDNN's per-shape primitive caches, unless the environment already does; the values in force.

    Must run before the first model runs a batch: both libraries read their capacity once.
    """
    env = os.environ if environ is None else environ
    return {name: env.setdefault(name, str(capacity)) for name in SHAPE_CACHE_VARIABLES}


def freeze_long_lived() -> None:
    """Move every object alive now into the permanent generation: full collections skip them.

    Garbage in reference cycles is collected first; frozen, it would never be freed. The first call (the
    first load) also bounds what glibc's thread arenas keep (``bound_arena_tops``).
    """
    gc.collect()
    gc.freeze()
    bound_arena_tops()
    start_heap_trimmer()


def bound_arena_tops(environ: Mapping[str, str] | None = None) -> dict[str, int]:
    """Fix glibc's mmap and trim thresholds (``MMAP_THRESHOLD``, ``ARENA_TOP_KEPT``) and cap its arenas
    (``ARENAS_PER_CORE``) once a process, unless the operator set them in the environment (the thresholds:
    ``MALLOC_TRIM_THRESHOLD_``, ``MALLOC_MMAP_THRESHOLD_``; the arenas: ``MALLOC_ARENA_MAX``; or their
    ``GLIBC_TUNABLES``); the values set now: none when already set or on another C library, none of the
    operator's own."""
    env = os.environ if environ is None else environ
    tunables = env.get("GLIBC_TUNABLES", "")
    operator = any(name in env for name in OPERATOR_THRESHOLDS) or any(t in tunables for t in OPERATOR_TUNABLES)
    arenas_set = OPERATOR_ARENAS[0] in env or OPERATOR_ARENAS[1] in tunables
    mallopt = _mallopt()
    if _ARENA_TOPS_BOUND or mallopt is None or (operator and arenas_set):
        return {}
    _ARENA_TOPS_BOUND.append(True)
    settings = {} if operator else {M_MMAP_THRESHOLD: MMAP_THRESHOLD, M_TRIM_THRESHOLD: ARENA_TOP_KEPT}
    if not arenas_set:
        settings[M_ARENA_MAX] = ARENAS_PER_CORE * max(1, len(os.sched_getaffinity(0)))
    done = {_NAMES[option]: value for option, value in settings.items() if mallopt(option, value) == 1}
    log.info("glibc malloc settings: %s", done)
    return done


_NAMES = {M_TRIM_THRESHOLD: "M_TRIM_THRESHOLD", M_MMAP_THRESHOLD: "M_MMAP_THRESHOLD", M_ARENA_MAX: "M_ARENA_MAX"}
_ARENA_TOPS_BOUND: list[bool] = []  # set once a process


@contextmanager
def thawed() -> Iterator[None]:
    """Within: every object is collectable again (an unloading model's cycles can be freed); after: the
    garbage collected, the survivors frozen, and the C heap's free pages given back."""
    gc.unfreeze()
    try:
        yield
    finally:
        gc.collect()
        gc.freeze()
        trim_native_heap()


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``; None on another C library (musl, macOS)."""
    try:
        trim = ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return cast(Callable[[int], int], trim)


@cache
def _mallopt() -> Callable[[int, int], int] | None:
    """glibc's ``mallopt``; None on another C library."""
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return None
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return cast(Callable[[int, int], int], mallopt)


def _resident_bytes() -> int:
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return 0


def trim_native_heap() -> int:
    """Give the C heap's free pages back to the system (glibc's ``malloc_trim(0)``, every arena); the
    bytes the resident set shrank by (0 where the C library has no ``malloc_trim``)."""
    trim = _malloc_trim()
    if trim is None:
        return 0
    before, started = _resident_bytes(), time.perf_counter()
    trim(0)
    given = max(0, before - _resident_bytes())
    log.info("malloc_trim gave back %.1f MiB in %.0f ms", given / 2**20, 1e3 * (time.perf_counter() - started))
    return given


class HeapTrimmer:
    """Trims the C heap (``trim``) when the resident set (``resident``) has grown ``growth`` bytes past the
    lowest level seen since the last trim (the level after it, or lower where an eviction's trim brought it)."""

    def __init__(
        self,
        growth: int = TRIM_AFTER_GROWTH,
        resident: Callable[[], int] = _resident_bytes,
        trim: Callable[[], int] = trim_native_heap,
    ) -> None:
        self.growth, self.resident, self.trim = growth, resident, trim
        self.level = resident()

    def check(self) -> bool:
        """Whether it trimmed now."""
        now = self.resident()
        if now - self.level < self.growth:
            self.level = min(self.level, now)
            return False
        self.trim()
        self.level = self.resident()
        return True

    def run(self, every_s: float = TRIM_EVERY_S) -> None:
        while True:
            time.sleep(every_s)
            try:
                self.check()
            except Exception:  # never end the loop: a failed read is tried again next time
                log.exception("heap trimmer")


def start_heap_trimmer() -> bool:
    """Start ``HeapTrimmer``'s daemon thread once a process (not where the C library has no ``malloc_trim``);
    whether it started now."""
    if _TRIMMER_STARTED or _malloc_trim() is None:
        return False
    _TRIMMER_STARTED.append(True)
    threading.Thread(target=HeapTrimmer().run, name="sie-heap-trim", daemon=True).start()
    return True


_TRIMMER_STARTED: list[bool] = []
