"""A family's first load runs alone.

The first load of an adapter class imports its libraries, and two threads importing transformers' lazily loaded
modules at once can break each other (seen on transformers 5.17: four models' first requests at once, two loads
failing with "cannot import name 'AutoTokenizer' from 'transformers'"). So each adapter class's first load holds
one process-wide lock; later loads of a class whose libraries are imported run side by side.
"""

from __future__ import annotations

import threading
from pathlib import Path

from sie_server.adapters.runtime.base import ModelAdapter

_lock = threading.Lock()
_imported: set[type[ModelAdapter]] = set()


def load(adapter: ModelAdapter, weights: Path) -> None:
    """``adapter.load(weights)``, alone if no adapter of its class has loaded yet in this process."""
    kind = type(adapter)
    if kind in _imported:
        adapter.load(weights)
        return
    with _lock:
        adapter.load(weights)
        _imported.add(kind)
