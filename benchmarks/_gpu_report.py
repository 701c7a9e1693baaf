"""The GPU check's pure parts: reading nvidia-smi, choosing a torch wheel index, comparing answers,
planning the memory budget, and writing the report. No GPU, torch or network needed here."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

GIB = 2**30
#: CUDA builds of torch on download.pytorch.org, newest first
TORCH_CUDA_BUILDS = ((13, 0), (12, 9), (12, 8), (12, 6), (12, 4), (12, 1), (11, 8))
COSINE_FLOOR = 0.999
#: what each process on the GPU holds outside any budget (its CUDA context, kernels, graphs)
CONTEXT_ALLOWANCE_BYTES = 2 * GIB


@dataclass(frozen=True)
class Gpu:
    name: str
    driver: str
    cuda: str
    memory_total_mib: int


def parse_query(csv_line: str) -> tuple[str, str, int]:
    """``name, driver_version, memory.total`` (``--format=csv,noheader,nounits``) of the first GPU."""
    first = csv_line.strip().splitlines()[0]
    name, driver, total = (part.strip() for part in first.split(","))
    return name, driver, int(float(total.split()[0]))


def parse_cuda_version(banner: str) -> str:
    """The ``CUDA Version: 13.0`` of plain ``nvidia-smi``'s banner; "" when absent."""
    match = re.search(r"CUDA Version:\s*([0-9]+(?:\.[0-9]+)?)", banner)
    return match.group(1) if match else ""


def parse_memory_used_mib(csv_text: str) -> int:
    """``memory.used`` of the first GPU (``--format=csv,noheader,nounits``)."""
    return int(float(csv_text.strip().splitlines()[0].split(",")[0].split()[0]))


def torch_index(cuda: str) -> str:
    """The newest torch CUDA build the driver runs (a driver runs builds up to its own CUDA version)."""
    try:
        major, minor = (int(x) for x in [*cuda.split("."), "0"][:2])
    except ValueError:
        major, minor = TORCH_CUDA_BUILDS[-1]
    for build in TORCH_CUDA_BUILDS:
        if build <= (major, minor):
            return f"https://download.pytorch.org/whl/cu{build[0]}{build[1]}"
    return f"https://download.pytorch.org/whl/cu{TORCH_CUDA_BUILDS[-1][0]}{TORCH_CUDA_BUILDS[-1][1]}"


def min_cosine(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]]) -> float:
    """The lowest row-wise cosine between two equally shaped sets of vectors."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 2 or len(x) == 0:
        raise ValueError(f"shapes differ or are empty: {x.shape} vs {y.shape}")
    norms = np.linalg.norm(x, axis=1) * np.linalg.norm(y, axis=1)
    return float(np.min(np.sum(x * y, axis=1) / np.maximum(norms, 1e-12)))


def top1(scores: Sequence[float]) -> int:
    return int(np.argmax(np.asarray(scores)))


def says_paris(text: str) -> bool:
    return "paris" in text.lower()


def ratio(ours: float, theirs: float) -> float | None:
    return None if theirs <= 0 else ours / theirs


def budget_for(reserves: Sequence[int], weights_allowance: int = GIB) -> int:
    """A budget that holds all models but one: the largest ``len - 1`` reserves plus room for their
    weights, and less than every model together, so loading the last one evicts the least recently used."""
    if len(reserves) < 2:
        raise ValueError("eviction needs at least two models")
    kept = sorted(reserves, reverse=True)[: len(reserves) - 1]
    budget = sum(kept) + weights_allowance
    if budget >= sum(reserves):
        raise ValueError("the weights allowance must be smaller than the smallest reserve")
    return budget


def budget_respected(peak_used_mib: int, baseline_mib: int, budget_bytes: int, processes: int) -> bool:
    """Whether the GPU memory the server took (peak minus what was in use before it started) stayed
    within the budget plus each process's CUDA context."""
    taken = (peak_used_mib - baseline_mib) * 2**20
    return taken <= budget_bytes + processes * CONTEXT_ALLOWANCE_BYTES


@dataclass
class Check:
    name: str
    ok: bool | None  # None: skipped
    detail: str
    seconds: float = 0.0


@dataclass
class Report:
    gpu: Gpu
    checks: list[Check] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(c.ok is not False for c in self.checks)

    def as_json(self) -> dict[str, Any]:
        return {
            "gpu": vars(self.gpu),
            "passed": self.passed,
            "checks": [vars(c) for c in self.checks],
            "figures": self.figures,
            "notes": self.notes,
        }


def one_line(text: str, limit: int = 240) -> str:
    """A table cell: whitespace (newlines too) collapsed, pipes escaped, cut at ``limit`` characters."""
    flat = " ".join(text.split()).replace("|", "/")
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _verdict(ok: bool | None) -> str:
    return "skipped" if ok is None else ("pass" if ok else "FAIL")


def _fmt_ratio(value: Any) -> str:
    return "n/a" if value is None else f"{float(value):.2f}x"


def markdown(report: Report, when: str, commit: str) -> str:
    """The summary to paste into benchmarks/RESULTS.md."""
    gpu = report.gpu
    lines = [
        "## GPU check: `scripts/gpu-check.sh`",
        "",
        f"{when}, tree at `{commit}`, on **{gpu.name}** ({gpu.memory_total_mib} MiB), driver {gpu.driver}, "
        f"CUDA {gpu.cuda or 'unknown'}.",
        "",
        "| check | result | detail | seconds |",
        "| --- | --- | --- | --- |",
    ]
    lines += [f"| {c.name} | {_verdict(c.ok)} | {one_line(c.detail)} | {c.seconds:.1f} |" for c in report.checks]
    ratios = {k: v for k, v in report.figures.items() if k.endswith("_ratio")}
    if ratios:
        lines += ["", "| throughput | SIE / baseline |", "| --- | --- |"]
        lines += [f"| {name.removesuffix('_ratio')} | {_fmt_ratio(value)} |" for name, value in sorted(ratios.items())]
    if report.notes:
        lines += [""] + [f"- {note}" for note in report.notes]
    lines += ["", f"Overall: {'pass' if report.passed else 'FAIL'}.", ""]
    return "\n".join(lines)
