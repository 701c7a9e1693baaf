"""The GPU check's server: one ``sie-server`` process on CUDA with the check's catalog and budget."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.helpers.server import ServerProcess

READY_S = 60.0
#: a request may wait for a cold load: SGLang's engine start (CUDA graphs) and a GGUF conversion
REQUEST_S = 150.0


@contextmanager
def serve(models_dir: Path, budget_bytes: int, log: Path) -> Iterator[httpx.Client]:
    server = ServerProcess(
        models_dir,
        "--device",
        "cuda",
        "--memory-budget",
        str(budget_bytes),
        "--load-timeout-s",
        str(REQUEST_S),
        log=log,
    )
    try:
        server.wait_ready(READY_S)
        with httpx.Client(base_url=server.url, timeout=REQUEST_S) as client:
            yield client
    finally:
        server.stop()
