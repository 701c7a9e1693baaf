"""A memory budget set far above what the machine has: a load that fits the budget but not the
machine's free memory is refused with RESOURCE_EXHAUSTED naming the numbers (the load would swap or be
killed), evicts nothing for it, and the server serves on — on a real server process."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.helpers.catalog import tiny_embedder, write_config
from tests.helpers.server import ServerProcess

SMALL = "test/small"
LARGE = "test/larger-than-ram"  # its estimate (5 TB activation reserve) fits a 10 TiB budget, not the machine
BUDGET = "10TiB"


@pytest.fixture(scope="module")
def pressed(tmp_path_factory: pytest.TempPathFactory, tiny_models: dict[str, Path]) -> Iterator[ServerProcess]:
    catalog = tmp_path_factory.mktemp("pressure-catalog")
    weights = tiny_models["embedder"]
    write_config(catalog, tiny_embedder(SMALL, weights))
    large = tiny_embedder(LARGE, weights)
    large["profiles"] = {"cpu": {"max_batch_tokens": 1024, "activation_reserve_bytes": 5 * 10**12}}
    write_config(catalog, large)
    log = tmp_path_factory.mktemp("pressure-logs") / "server.log"
    proc = ServerProcess(catalog, "--offline", "--threads", "1", "--memory-budget", BUDGET, log=log)
    try:
        yield proc.wait_ready()
    finally:
        proc.stop()


def encode(url: str, model: str) -> httpx.Response:
    return httpx.post(f"{url}/v1/encode/{model}", json={"items": [{"text": "hello world"}]}, timeout=60)


def test_a_load_the_budget_allows_but_memory_does_not_is_refused(pressed: ServerProcess) -> None:
    url = pressed.url
    assert encode(url, SMALL).status_code == 200
    assert httpx.get(f"{url}/v1/memory", timeout=10).json()["budget_bytes"] == 10 * 2**40

    refused = encode(url, LARGE)
    assert refused.status_code == 503, refused.text
    assert refused.headers["x-sie-error-code"] == "RESOURCE_EXHAUSTED"
    assert int(refused.headers["retry-after"]) >= 1
    message = refused.json()["detail"]["message"]
    numbers = re.search(r"needs about ([0-9.]+) MiB but only ([0-9.]+) MiB of memory is available", message)
    assert numbers is not None, message
    need, free = (float(n) * 2**20 for n in numbers.groups())
    assert 5 * 10**12 < need < 5 * 10**12 + 2**30 and 0 < free < need  # the reserve plus tiny weights; real RAM
    assert "MemAvailable" in message and "memory budget of 10485760.0 MiB has room" in message

    assert pressed.proc.poll() is None  # not killed for memory
    large = httpx.get(f"{url}/v1/models/{LARGE}", timeout=10).json()
    assert large["state"] == "available" and large["charge_bytes"] == 0 and large["last_error"] is None
    small = httpx.get(f"{url}/v1/models/{SMALL}", timeout=10).json()
    assert small["state"] == "loaded"  # nothing was evicted for a load that could not happen
    assert encode(url, SMALL).status_code == 200
