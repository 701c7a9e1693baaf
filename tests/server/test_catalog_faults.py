"""The catalog folder changes under a running server: a config file that breaks keeps its last good
config serving and says why on /v1/models; a deleted config refuses new work for its model while the
work already queued for it finishes."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.helpers.catalog import tiny_embedder, write_config
from tests.helpers.fault_adapters import FAULT_LOG
from tests.helpers.metrics import scrape
from tests.helpers.server import ServerProcess
from tests.helpers.wait import async_wait_until, wait_until

EDITED = "test/edited"
DELETED = "test/deleted"
HELD = "tests.helpers.fault_adapters:PoisonEmbedding"  # holds its batches while a hold file exists


@dataclass
class Served:
    server: ServerProcess
    catalog: Path
    weights: Path
    faults: Path

    @property
    def hold(self) -> Path:
        return self.faults.with_name(self.faults.name + ".hold")  # fault_adapters.hold_file()

    def held(self) -> int:
        lines = self.faults.read_text().splitlines() if self.faults.exists() else []
        return sum(1 for line in lines if line.startswith("held "))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, tiny_models: dict[str, Path]) -> Iterator[Served]:
    catalog = tmp_path_factory.mktemp("changing-catalog")
    weights = tiny_models["embedder"]
    write_config(catalog, tiny_embedder(EDITED, weights))
    write_config(catalog, {**tiny_embedder(DELETED, weights), "adapter": HELD})
    logs = tmp_path_factory.mktemp("changing-logs")
    faults = logs / "faults.txt"
    proc = ServerProcess(catalog, "--offline", "--threads", "1", env={FAULT_LOG: str(faults)}, log=logs / "server.log")
    try:
        yield Served(proc.wait_ready(), catalog, weights, faults)
    finally:
        proc.stop()


def rewrite(path: Path, text: str) -> None:
    """Replace a file's content and move its mtime on (a rewrite within the clock's tick still counts)."""
    before = path.stat().st_mtime_ns
    path.write_text(text)
    os.utime(path, ns=(before + 10**9, before + 10**9))


def encode(url: str, model: str, text: str = "hello world") -> httpx.Response:
    return httpx.post(f"{url}/v1/encode/{model}", json={"items": [{"text": text}]}, timeout=60)


def test_a_config_that_breaks_keeps_its_last_good_config_serving(served: Served) -> None:
    url = served.server.url
    first = encode(url, EDITED)
    assert first.status_code == 200, first.text
    path = served.catalog / (EDITED.replace("/", "__") + ".yaml")
    good = path.read_text()
    rewrite(path, good + "profiles: [unclosed\n")

    def stale_error() -> str | None:
        info = httpx.get(f"{url}/v1/models/{EDITED}", timeout=10).json()
        return info["last_error"] if info["last_error"] and "not valid YAML" in info["last_error"] else None

    error = wait_until(stale_error, timeout=30, message="the broken file never showed on /v1/models")
    assert str(path) in error and "last good config" in error
    listed = {m["id"]: m for m in httpx.get(f"{url}/v1/models", timeout=10).json()["models"]}
    assert listed[EDITED]["last_error"] == error and listed[EDITED]["state"] == "loaded"
    again = encode(url, EDITED)
    assert again.status_code == 200, again.text
    assert again.json()["items"][0]["dense"]["values"] == first.json()["items"][0]["dense"]["values"]

    rewrite(path, good)  # fixed: the error goes away and the model serves on
    wait_until(
        lambda: httpx.get(f"{url}/v1/models/{EDITED}", timeout=10).json()["last_error"] is None,
        timeout=30,
        message="the fixed file's error never cleared",
    )
    assert encode(url, EDITED).status_code == 200


def test_a_deleted_config_refuses_new_work_after_its_queued_work(served: Served) -> None:
    url = served.server.url
    assert encode(url, DELETED).status_code == 200  # loaded
    path = served.catalog / (DELETED.replace("/", "__") + ".yaml")

    async def scenario() -> list[httpx.Response]:
        held_before = served.held()
        served.hold.touch()
        try:
            async with httpx.AsyncClient(base_url=url, timeout=60) as client:
                post = f"/v1/encode/{DELETED}"
                running = asyncio.ensure_future(client.post(post, json={"items": [{"text": "running"}]}))
                await async_wait_until(lambda: served.held() > held_before, message="the first batch never started")
                queued = [
                    asyncio.ensure_future(client.post(post, json={"items": [{"text": f"queued {i}"}]}))
                    for i in range(3)
                ]
                await async_wait_until(
                    lambda: (
                        scrape(url, "sie_queue_items", absent_as_zero=True, model=DELETED, priority="interactive") == 3
                    ),
                    message="the three requests never queued",
                )
                path.unlink()
                await async_wait_until(
                    lambda: httpx.get(f"{url}/v1/models/{DELETED}", timeout=10).status_code == 404,
                    timeout=30,
                    message="the deleted config was never noticed",
                )
                refused = await client.post(post, json={"items": [{"text": "new"}]})
                assert refused.status_code == 404 and refused.json()["detail"]["code"] == "MODEL_NOT_FOUND"
                served.hold.unlink()
                return [await running, *[await q for q in queued]]
        finally:
            served.hold.unlink(missing_ok=True)

    answers = asyncio.run(scenario())
    assert [r.status_code for r in answers] == [200] * 4, [r.text for r in answers]
    assert all(len(r.json()["items"][0]["dense"]["values"]) == 32 for r in answers)
    assert DELETED not in {m["id"] for m in httpx.get(f"{url}/v1/models", timeout=10).json()["models"]}
