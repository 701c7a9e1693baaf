"""The GPU check's server: one ``sie-server`` process with the check's catalog and budget, and what the check
reads from outside it (the device memory in use, its counters)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.helpers.server import ServerProcess

READY_S = 120.0
#: a request may wait for a cold load (the generator's weights, its warm-up)
REQUEST_S = 180.0


@contextmanager
def serve(models_dir: Path, device: str, budget_bytes: int, log: Path) -> Iterator[tuple[ServerProcess, httpx.Client]]:
    args = ["--device", device, "--offline", "--memory-budget", str(budget_bytes), "--load-timeout-s", str(REQUEST_S)]
    if device == "cpu":
        args += ["--threads", str(max(1, min(4, os.cpu_count() or 1)))]
    server = ServerProcess(models_dir, *args, log=log)
    try:
        server.wait_ready(READY_S)
        with httpx.Client(base_url=server.url, timeout=REQUEST_S) as client:
            yield server, client
    finally:
        server.stop()


def device_used_bytes(device: str, pid: int | None = None) -> int:
    """Bytes in use on the device: the whole GPU's (``torch.cuda.mem_get_info``: every process, contexts
    included), or on CPU the resident set of process ``pid``."""
    if device.startswith("cuda"):
        import torch

        free, total = torch.cuda.mem_get_info()
        return int(total - free)
    if pid is None:
        return 0
    with open(f"/proc/{pid}/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def counter(client: httpx.Client, name: str) -> float:
    """The sum of a Prometheus counter's samples over all its labels (``sie_model_evictions`` ...)."""
    from prometheus_client.parser import text_string_to_metric_families

    text = client.get("/metrics").text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        if family.name == name
        for sample in family.samples
        if sample.name == f"{name}_total"
    )
