"""LRU churn: four models behind a budget that holds two, round-robin traffic.

    .venv/bin/python -m benchmarks.lru_churn [--rounds 10] [--budget 800MB]

Four catalog entries serve the packaged MiniLM weights under four ids (four separate
model instances, about 368 MB charged each: 91 MB weights + 277 MB activation reserve for
an 8192-token batch). A sampler reads /v1/memory every 20 ms. Prints errors, loads,
evictions and the largest charged and measured figures against the budget.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

import httpx
import yaml

from tests.helpers.catalog import MINILM, real_config
from tests.helpers.server import ServerProcess

TEXTS = ["Invoice INV-2024-0117 from Acme Corp: total due 4,250.00 EUR by 31 March 2024."] * 8


def write_catalog(folder: Path, count: int) -> list[str]:
    base = real_config(MINILM)
    ids = []
    for i in range(count):
        config = {**base, "id": f"churn/minilm-{i}"}
        (folder / f"churn-{i}.yaml").write_text(yaml.safe_dump(config))
        ids.append(config["id"])
    return ids


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--budget", default="800MB")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        ids = write_catalog(folder, 4)
        server = ServerProcess(
            folder, "--offline", "--threads", str(args.threads), "--memory-budget", args.budget
        ).wait_ready()
        samples: list[tuple[int, int, int]] = []  # (used, budget, rss)
        stop = threading.Event()

        def sample() -> None:
            with httpx.Client(base_url=server.url, timeout=10) as client:
                while not stop.is_set():
                    memory = client.get("/v1/memory").json()
                    samples.append((memory["used_bytes"], memory["budget_bytes"], rss_bytes(server.proc.pid)))
                    time.sleep(0.02)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        errors = 0
        started = time.perf_counter()
        try:
            with httpx.Client(base_url=server.url, timeout=300) as client:
                for _ in range(args.rounds):
                    for model in ids:
                        r = client.post(f"/v1/encode/{model}", json={"items": [{"text": t} for t in TEXTS]})
                        errors += r.status_code != 200
                metrics = client.get("/metrics").text
        finally:
            stop.set()
            sampler.join()
            server.stop()
        elapsed = time.perf_counter() - started

    def total(name: str) -> float:
        return sum(float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines() if line.startswith(name + "{"))

    budget = samples[0][1]
    peak_used = max(s[0] for s in samples)
    print(f"requests {args.rounds * len(ids)} in {elapsed:.1f}s, errors {errors}")
    print(f"loads {total('sie_model_loads_total'):.0f}, evictions {total('sie_model_evictions_total'):.0f}")
    print(
        f"budget {budget / 2**20:.0f} MiB; charged bytes peak {peak_used / 2**20:.0f} MiB over {len(samples)} samples "
        f"({'never above budget' if peak_used <= budget else 'ABOVE BUDGET'})"
    )
    print(f"process RSS peak {max(s[2] for s in samples) / 2**20:.0f} MiB (weights and runtime, not charged bytes)")


if __name__ == "__main__":
    main()
