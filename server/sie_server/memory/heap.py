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
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager

SHAPE_CACHE_VARIABLES = ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY")
SHAPE_CACHE_CAPACITY = 64  # compiled primitives kept per cache: the shapes in use now, not every shape ever seen


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

    Garbage in reference cycles is collected first; frozen, it would never be freed.
    """
    gc.collect()
    gc.freeze()


@contextmanager
def thawed() -> Iterator[None]:
    """Within: every object is collectable again (an unloading model's cycles can be freed)."""
    gc.unfreeze()
    try:
        yield
    finally:
        gc.collect()
        gc.freeze()
