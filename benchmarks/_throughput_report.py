"""The throughput benchmark's runs and its two printed tables (throughput per mode; the forward
pass per batch against the same batches run alone)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from benchmarks._common import MINILM_FLOP_PER_TOKEN, Meter
from benchmarks._forward import ForwardAlone

GOALS = {"L": 1.30, "S": 0.90, "C": 0.85, "W": 0.85}
PADDING_GOAL = 1.10


@dataclass
class Outcome:
    """What one timed window produced: vectors (None where the client discards the answers)."""

    texts: int
    requests: int
    vectors: np.ndarray | None
    seconds: float | None = None  # the load generator's own duration, where it reports one


@dataclass
class Run:
    key: str
    label: str
    meter: Meter
    outcome: Outcome
    deltas: dict[str, float] | None = None  # server counters over the window
    times: list[float] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return self.outcome.seconds or self.meter.seconds

    @property
    def rate(self) -> float:
        return self.outcome.texts / self.seconds

    @property
    def padding(self) -> float | None:
        real = self.deltas.get("sie_real_tokens_total", 0.0) if self.deltas else 0.0
        return self.deltas["sie_padded_tokens_total"] / real if self.deltas and real > 0 else None


def print_throughput(runs: list[Run], texts: list[str], real_tokens: int, peak: float) -> None:
    base = runs[0]
    header = (
        f"{'mode':34s} {'texts/s':>8s} {'ratio':>7s} {'goal':>6s} {'GFLOP/s':>8s} {'%peak':>6s} "
        f"{'padding':>8s} {'w/pad GF/s':>10s} {'max|diff|':>10s} {'srv cores':>9s} {'cli cores':>9s} "
        f"{'cli ms/req':>10s} {'other':>6s}"
    )
    print(header)
    print("-" * len(header))
    for run in runs:
        meter = run.meter
        tokens = real_tokens
        if run.outcome.texts != len(texts) and run.deltas:  # W: the texts wrk completed, by the server's count
            tokens = int(run.deltas["sie_real_tokens_total"])
        gflops = tokens * MINILM_FLOP_PER_TOKEN / run.seconds / 1e9
        goal = GOALS.get(run.key)
        verdict = "" if goal is None else f"{goal:.2f}{'+' if run.rate / base.rate >= goal else '!'}"
        padding = "n/a" if run.padding is None else f"{run.padding:.3f}"
        if run is not base and run.padding is not None:
            padding += "+" if run.padding <= PADDING_GOAL else "!"
        padded = "n/a" if run.padding is None else f"{gflops * run.padding:.1f}"
        vectors, reference = run.outcome.vectors, base.outcome.vectors
        diff = "-"
        if run is not base and vectors is not None and reference is not None:
            diff = f"{float(np.max(np.abs(vectors - reference))):.2e}"
        per_request = "-" if not run.outcome.requests else f"{1000 * meter.client_cpu_s / run.outcome.requests:.2f}"
        print(
            f"{run.label:34s} {run.rate:8.1f} {run.rate / base.rate:6.2f}x {verdict:>6s} {gflops:8.1f} "
            f"{100 * gflops / peak:5.1f}% {padding:>8s} {padded:>10s} {diff:>10s} "
            f"{meter.cores(meter.server_cpu_s):>9s} {meter.cores(meter.client_cpu_s):>9s} {per_request:>10s} "
            f"{meter.cores(meter.other_cpu_s):>6s}"
        )


def print_forward(runs: list[Run], alone: ForwardAlone | None) -> None:
    header = (
        f"{'forward pass':34s} {'batches':>8s} {'items':>6s} {'ms/batch':>9s} {'us/padded tok':>13s} {'vs alone':>9s}"
    )
    print(header)
    print("-" * len(header))
    if alone is not None:
        print(
            f"{'alone: C-like batches, no HTTP':34s} {alone.batches:8d} {alone.items / alone.batches:6.1f} "
            f"{alone.ms_per_batch:9.1f} {alone.us_per_padded_token:13.1f} {'1.00x':>9s}"
        )
    for run in runs[1:]:
        deltas = run.deltas or {}
        batches = deltas.get("sie_batch_seconds_count", 0.0)
        padded = deltas.get("sie_padded_tokens_total", 0.0)
        if not batches or not padded:
            print(f"{run.label:34s} {'n/a (the server exports no sie_batch_seconds)':>48s}")
            continue
        seconds = deltas["sie_batch_seconds_sum"]
        per_token = 1e6 * seconds / padded
        ratio = "" if alone is None else f"{per_token / alone.us_per_padded_token:8.2f}x"
        print(
            f"{run.label:34s} {int(batches):8d} {run.outcome.texts / batches:6.1f} {1000 * seconds / batches:9.1f} "
            f"{per_token:13.1f} {ratio:>9s}"
        )
