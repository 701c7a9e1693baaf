"""Cluster mode vs one server: gateway + N workers (N = 1, 2) on this machine, same corpus.

    .venv/bin/python -m benchmarks.cluster_overhead [--count 1000] [--latency 200]

Real MiniLM, 2 torch threads per server process. For each setup: sequential requests of 64
texts (throughput) and sequential single-item requests (p50/p99 latency). The single
server is the baseline, measured in the same run. On 2 cores, two workers share the same
two cores, so they are not expected to be faster; the point is the queue hop's cost.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.corpus import build_corpus
from sie_sdk import SIEClient
from tests.helpers.catalog import MINILM, copy_real
from tests.helpers.cluster import Gateway, Nats
from tests.helpers.server import ServerProcess

QUERY = "How much do we owe Acme Corp, and when is it due?"


def measure(url: str, corpus: list[str], latency_requests: int) -> tuple[float, float, float]:
    with SIEClient(url, timeout=600) as client:
        client.encode(MINILM, corpus[:64])  # warm up (load on the workers)
        t0 = time.perf_counter()
        for i in range(0, len(corpus), 64):
            client.encode(MINILM, corpus[i : i + 64])
        rate = len(corpus) / (time.perf_counter() - t0)
        samples = []
        for _ in range(latency_requests):
            t = time.perf_counter()
            client.encode(MINILM, QUERY)
            samples.append(time.perf_counter() - t)
    ms = np.array(samples) * 1000
    return rate, float(np.percentile(ms, 50)), float(np.percentile(ms, 99))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--latency", type=int, default=200)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    corpus = build_corpus(args.count)
    results: dict[str, tuple[float, float, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "catalog"
        folder.mkdir()
        copy_real(folder, MINILM)
        single = ServerProcess(folder, "--offline", "--threads", str(args.threads), "--preload", MINILM).wait_ready()
        try:
            results["single server"] = measure(single.url, corpus, args.latency)
        finally:
            single.stop()
        for workers in (1, 2):
            nats = Nats(Path(tmp) / f"js{workers}")
            procs = [
                ServerProcess(
                    folder, "--offline", "--threads", str(args.threads), "--preload", MINILM, "--queue", nats.url
                )
                for _ in range(workers)
            ]
            gateway = Gateway(folder, nats.url, log=Path(tmp) / f"gateway{workers}.log")
            try:
                for proc in procs:
                    proc.wait_ready()
                gateway.wait_ready()
                time.sleep(2.5)  # first worker heartbeats reach the gateway
                results[f"gateway + {workers} worker{'s' if workers > 1 else ''}"] = measure(
                    gateway.url, corpus, args.latency
                )
            except Exception:
                print((Path(tmp) / f"gateway{workers}.log").read_text()[-3000:])
                raise
            finally:
                gateway.stop()
                for proc in procs:
                    proc.stop()
                nats.stop()
    base_rate, base_p50, _base_p99 = results["single server"]
    print(f"{len(corpus)} texts in requests of 64; {args.latency} single-item requests; {args.threads} threads each")
    print(f"{'setup':22s} {'texts/s':>8s} {'ratio':>6s} {'p50 ms':>7s} {'p99 ms':>7s} {'hop p50':>8s}")
    for name, (rate, p50, p99) in results.items():
        print(f"{name:22s} {rate:8.1f} {rate / base_rate:5.2f}x {p50:7.2f} {p99:7.2f} {p50 - base_p50:+7.2f}")


if __name__ == "__main__":
    main()
