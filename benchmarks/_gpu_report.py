"""The GPU check's report: the machine it ran on, each step's verdict and figures, one JSON and one short
Markdown table (the table is what goes into benchmarks/RESULTS.md). No GPU or torch needed here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Machine:
    device: str  # "NVIDIA H200 (143771 MiB)", or the CPU's model name in the dry run
    driver: str
    torch: str
    cuda: str
    transformers: str
    python: str


def parse_query(csv_line: str) -> tuple[str, str, int]:
    """``name, driver_version, memory.total`` (``nvidia-smi --format=csv,noheader,nounits``) of the first GPU."""
    first = csv_line.strip().splitlines()[0]
    name, driver, total = (part.strip() for part in first.split(","))
    return name, driver, int(float(total.split()[0]))


@dataclass
class Check:
    name: str
    ok: bool | None  # None: not run (and why is in detail)
    detail: str
    seconds: float = 0.0


@dataclass
class Report:
    machine: Machine
    mode: str  # "gpu" or "cpu dry run"
    checks: list[Check] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(c.ok is not False for c in self.checks)

    def as_json(self) -> dict[str, Any]:
        return {
            "machine": vars(self.machine),
            "mode": self.mode,
            "passed": self.passed,
            "checks": [vars(c) for c in self.checks],
            "figures": self.figures,
            "notes": self.notes,
        }


def one_line(text: str, limit: int = 260) -> str:
    """A table cell: whitespace (newlines too) collapsed, pipes escaped, cut at ``limit`` characters."""
    flat = " ".join(text.split()).replace("|", "/")
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def verdict(ok: bool | None) -> str:
    return "not run" if ok is None else ("pass" if ok else "FAIL")


def ratio(ours: float | None, theirs: float | None) -> float | None:
    return None if not ours or not theirs else ours / theirs


def markdown(report: Report, when: str, commit: str) -> str:
    """The summary to paste into benchmarks/RESULTS.md."""
    m = report.machine
    lines = [
        f"## GPU check ({report.mode}): `scripts/gpu-check.sh`",
        "",
        f"{when}, tree at `{commit}`, on **{m.device}**, driver {m.driver}, torch {m.torch} (CUDA {m.cuda}), "
        f"transformers {m.transformers}, Python {m.python}.",
        "",
        "| check | result | detail | s |",
        "| --- | --- | --- | --- |",
    ]
    lines += [f"| {c.name} | {verdict(c.ok)} | {one_line(c.detail)} | {c.seconds:.1f} |" for c in report.checks]
    if report.notes:
        lines += [""] + [f"- {note}" for note in report.notes]
    lines += ["", f"Overall: {'pass' if report.passed else 'FAIL'}.", ""]
    return "\n".join(lines)
