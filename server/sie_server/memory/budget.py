"""The memory budget: parsing it, sizing it from the device, and choosing what to evict.

The budget only answers questions ("does it fit, and if not, which idle models would have
to go, oldest first"); the pool acts on the answer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*$")
DEFAULT_FRACTION = 0.8


def parse_budget(text: str | None, available_bytes: int) -> int:
    """``"6GiB"``, ``"512MB"``, ``"1234"`` (bytes) or a fraction ``"0.5"`` of ``available_bytes``."""
    if text is None or not text.strip():
        return int(available_bytes * DEFAULT_FRACTION)
    match = _SIZE.match(text)
    if not match or match.group(2).lower() not in _UNITS:
        raise ValueError(f"memory budget {text!r}: use bytes with a unit (6GiB, 512MB) or a fraction (0.5)")
    number, unit = float(match.group(1)), match.group(2).lower()
    if not unit and number <= 1.0:
        return int(available_bytes * number)
    value = int(number * _UNITS[unit])
    if value <= 0:
        raise ValueError(f"memory budget {text!r} must be positive")
    return value


def parse_bytes(text: str) -> int:
    """``"256MiB"``, ``"1GB"``, ``"1234"`` (bytes) or ``"0"``: a size in bytes, never a fraction."""
    match = _SIZE.match(text)
    if not match or match.group(2).lower() not in _UNITS:
        raise ValueError(f"size {text!r}: use bytes with a unit (256MiB, 1GB) or 0")
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


def mib(n: int) -> str:
    """A size as the pool's messages and logs write it: ``"12.5 MiB"``."""
    return f"{n / 2**20:.1f} MiB"


def available_bytes(device: str) -> int:
    """Free device memory (CUDA) or available RAM (CPU, from /proc/meminfo)."""
    if device.startswith("cuda"):
        import torch

        free, _total = torch.cuda.mem_get_info(torch.device(device))
        return int(free)
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import os

    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES"))


#: what a load must leave free in RAM (CPU) beyond its own estimate, so it does not push the machine
#: into swap or the OOM killer
FREE_MARGIN_BYTES = 512 * 2**20


def exceeds_free_memory(need: int, free: int, margin: int = FREE_MARGIN_BYTES) -> bool:
    """Whether ``need`` more bytes would eat into the last ``margin`` bytes of what is really free,
    whatever the budget says (a budget set above the machine's memory, or others using it)."""
    return need > free - margin


@dataclass(frozen=True)
class Resident:
    model_id: str
    charge: int
    last_used: float
    evictable: bool


def eviction_plan(budget: int, need: int, residents: Sequence[Resident]) -> list[str] | None:
    """Ids to evict (least recently used first) so that ``need`` more bytes fit; None if impossible."""
    used = sum(r.charge for r in residents)
    if used + need <= budget:
        return []
    victims: list[str] = []
    for resident in sorted((r for r in residents if r.evictable), key=lambda r: r.last_used):
        victims.append(resident.model_id)
        used -= resident.charge
        if used + need <= budget:
            return victims
    return None
