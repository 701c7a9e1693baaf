"""Which reduced precisions this CPU runs well, from the flags in ``/proc/cpuinfo`` (read once).

bf16 needs AVX512_BF16 or AMX-BF16 (without them bfloat16 matmuls are emulated and slower
than float32); int8 needs VNNI (AVX512_VNNI or AVX-VNNI), the dot-product instructions
that dynamic quantization's int8 matmuls use. float32 runs everywhere. No torch import:
the gateway reads this module's names too.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

from sie_server.catalog.schema import CpuPrecision

Precision = CpuPrecision
PRECISIONS: tuple[Precision, ...] = get_args(Precision)
#: precision -> CPU flags, any one of which makes it worth running
NEEDS: dict[Precision, tuple[str, ...]] = {
    "bf16": ("avx512_bf16", "amx_bf16"),
    "int8": ("avx512_vnni", "avx_vnni"),
}
RELEVANT_FLAGS: tuple[str, ...] = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "avx512_vnni", "avx_vnni", "amx_int8")
CPUINFO = Path("/proc/cpuinfo")


@dataclass(frozen=True, slots=True)
class CpuFeatures:
    """The precision-relevant flags found, and the precisions they allow (fp32 always)."""

    flags: tuple[str, ...]
    precisions: tuple[Precision, ...]
    model: str = ""

    def supports(self, precision: Precision) -> bool:
        return precision in self.precisions

    def missing(self, precision: Precision) -> str:
        """Why a precision is not supported, in words (empty when it is)."""
        if self.supports(precision):
            return ""
        return f"the CPU has none of {', '.join(NEEDS[precision])}"

    def as_dict(self) -> dict[str, Any]:
        return {"model": self.model, "features": list(self.flags), "precisions": list(self.precisions)}


def features_from_flags(flags: Iterable[str], model: str = "") -> CpuFeatures:
    """The features a CPU with these ``/proc/cpuinfo`` flags has."""
    found = set(flags)
    precisions = [p for p in PRECISIONS if p == "fp32" or any(f in found for f in NEEDS[p])]
    return CpuFeatures(tuple(f for f in RELEVANT_FLAGS if f in found), tuple(precisions), model)


def parse_cpuinfo(text: str) -> CpuFeatures:
    """The first processor's flags and model name from ``/proc/cpuinfo`` text (x86 layout)."""
    flags: list[str] = []
    model = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "flags" and not flags:
            flags = value.split()
        elif key == "model name" and not model:
            model = value.strip()
    return features_from_flags(flags, model)


@functools.cache
def detect() -> CpuFeatures:
    """This machine's CPU features (read once); a CPU whose flags cannot be read runs fp32 only."""
    try:
        return parse_cpuinfo(CPUINFO.read_text())
    except OSError:
        return features_from_flags(())
