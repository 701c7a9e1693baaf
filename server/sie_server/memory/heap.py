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
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


def freeze_long_lived() -> None:
    """Move every object alive now into the permanent generation: full collections skip them."""
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
