"""What the process really holds, beside what the budget charged for its models.

A model's charge is its weights plus an activation reserve. The process holds more than that
sum: code imported for a model family, tokenizers, allocator caches, per-shape kernel caches,
buffers of work in flight. The budget counts that excess too: ``untracked`` is what the process
holds above its holding at start (``runtime``) beyond the charges, and it is counted as used
memory that no eviction gives back.

Holding is read from the operating system on CPU (resident set size, ``/proc/self/statm``) and
from PyTorch's caching allocator on a GPU (``torch.cuda.memory_reserved``).
"""

from __future__ import annotations

import os
from typing import Protocol


class MemoryProbe(Protocol):
    """Bytes the process holds now, on the device the budget is for."""

    def held(self) -> int: ...


class ProcessMemory:
    """This process's holding on ``device``; 0 where the platform cannot tell (nothing is then
    counted beyond the charges)."""

    def __init__(self, device: str):
        self.device = device

    def held(self) -> int:
        if self.device.startswith("cuda"):
            import torch

            return int(torch.cuda.memory_reserved(torch.device(self.device)))
        try:
            with open("/proc/self/statm") as statm:
                resident_pages = int(statm.read().split()[1])
        except (OSError, IndexError, ValueError):
            return 0
        return resident_pages * os.sysconf("SC_PAGE_SIZE")


class Holding:
    """The process's holding against its models' charges."""

    def __init__(self, probe: MemoryProbe):
        self.probe = probe
        self.runtime = probe.held()  # at start, before any model: the server itself, not counted

    def now(self) -> int:
        return self.probe.held()

    def untracked(self, charged: int, held: int | None = None) -> int:
        """Bytes held (now, or ``held``) beyond the runtime and the charges (0 when the charges cover everything)."""
        return max(0, (self.now() if held is None else held) - self.runtime - charged)


class Reclaimable(Protocol):
    """Memory charged to the budget beside the models that gives way to them (the result cache,
    ``engine/result_cache.py``): its bytes count as charged, and a load takes room from it first."""

    @property
    def nbytes(self) -> int: ...

    def shrink(self, nbytes: int, reason: str = "budget") -> int: ...
