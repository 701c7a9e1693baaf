"""Priority classes: interactive single-item latency alone, and under a saturating batch-class load.

    .venv/bin/python -m benchmarks.priority [--requests 100] [--batch-clients 4]

Unloaded: sequential interactive single-item encodes. Loaded: the same while
`--batch-clients` clients keep sending 64-text requests with `X-SIE-Priority: batch`.
Prints p50/p99 for both, the ratio, and the batch-class throughput it kept.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np

from tests.helpers.catalog import MINILM, copy_real
from tests.helpers.server import ServerProcess

QUERY = {"items": [{"text": "How much do we owe Acme Corp, and when is it due?"}]}


def batch_texts(seed: int) -> list[dict[str, str]]:
    rng = random.Random(seed)
    words = "invoice payment due total amount vendor contract lunch travel report quarterly revenue".split()
    return [{"text": " ".join(rng.choices(words, k=rng.randint(20, 120)))} for _ in range(64)]


def interactive(url: str, count: int) -> list[float]:
    samples = []
    with httpx.Client(base_url=url, timeout=120) as client:
        for _ in range(count):
            t0 = time.perf_counter()
            assert client.post(f"/v1/encode/{MINILM}", json=QUERY).status_code == 200
            samples.append(time.perf_counter() - t0)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--batch-clients", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-max-tokens", type=int, default=2048)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        copy_real(Path(tmp), MINILM)
        server = ServerProcess(
            Path(tmp),
            "--offline",
            "--threads",
            str(args.threads),
            "--preload",
            MINILM,
            "--batch-max-tokens",
            str(args.batch_max_tokens),
        ).wait_ready()
        try:
            interactive(server.url, 10)
            alone = interactive(server.url, args.requests)
            stop = threading.Event()
            done = [0]

            def load(seed: int) -> None:
                body = {"items": batch_texts(seed)}
                with httpx.Client(base_url=server.url, timeout=600) as client:
                    while not stop.is_set():
                        r = client.post(f"/v1/encode/{MINILM}", json=body, headers={"X-SIE-Priority": "batch"})
                        done[0] += len(body["items"]) if r.status_code == 200 else 0

            workers = [threading.Thread(target=load, args=(i,)) for i in range(args.batch_clients)]
            for worker in workers:
                worker.start()
            time.sleep(2.0)
            t0 = time.perf_counter()
            before = done[0]
            loaded = interactive(server.url, args.requests)
            batch_rate = (done[0] - before) / (time.perf_counter() - t0)
            stop.set()
            for worker in workers:
                worker.join()
        finally:
            server.stop()
    a50, a99 = (float(np.percentile(np.array(alone) * 1000, q)) for q in (50, 99))
    l50, l99 = (float(np.percentile(np.array(loaded) * 1000, q)) for q in (50, 99))
    print(f"interactive alone:            p50 {a50:.1f} ms  p99 {a99:.1f} ms")
    print(f"interactive under batch load: p50 {l50:.1f} ms  p99 {l99:.1f} ms  ({args.batch_clients} batch clients)")
    print(
        f"ratio loaded/alone: p50 {l50 / a50:.2f}x  p99 {l99 / a99:.2f}x   batch-class throughput kept: "
        f"{batch_rate:.0f} texts/s"
    )


if __name__ == "__main__":
    main()
