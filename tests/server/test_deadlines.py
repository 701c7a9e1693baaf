"""``X-SIE-Timeout-Ms``: a caller bounds its wait. Past it the caller gets 504 DEADLINE_EXCEEDED,
its queued work is dropped before it runs (counted), a generation stops; on a cluster the
deadline travels with the work and a worker does not run work whose caller has stopped waiting."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.helpers.catalog import tiny_embedder, tiny_llm, write_config
from tests.helpers.cluster import Gateway, Nats, worker
from tests.helpers.metrics import scrape
from tests.helpers.server import ServerProcess, offline_server
from tests.helpers.wait import wait_until

FAULTS = "tests.helpers.fault_adapters"
TIMEOUT = "X-SIE-Timeout-Ms"


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory, tiny_models: dict[str, Path]) -> Path:
    folder = tmp_path_factory.mktemp("deadline-catalog")
    write_config(folder, {**tiny_embedder("test/slow", tiny_models["embedder"]), "adapter": f"{FAULTS}:SlowEmbedding"})
    write_config(folder, {**tiny_llm("test/endless", tiny_models["llm"]), "adapter": f"{FAULTS}:EndlessSlowLM"})
    return folder


@pytest.fixture(scope="module")
def server(catalog: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with offline_server(catalog, tmp_path_factory.mktemp("logs")) as proc:
        yield proc


def assert_deadline(r: httpx.Response, fragment: str) -> None:
    assert r.status_code == 504, r.text
    assert r.headers["x-sie-error-code"] == "DEADLINE_EXCEEDED"
    assert fragment in r.json()["detail"]["message"]


def encode(url: str, text: str, timeout_ms: int | None = None) -> httpx.Response:
    headers = {TIMEOUT: str(timeout_ms)} if timeout_ms is not None else {}
    return httpx.post(f"{url}/v1/encode/test/slow", json={"items": [{"text": text}]}, headers=headers, timeout=60)


def test_a_deadline_already_passed_runs_nothing(server: ServerProcess) -> None:
    assert_deadline(encode(server.url, "x", 0), "nothing was run")
    counted = scrape(server.url, "sie_requests_total", model="test/slow", task="encode", status="DEADLINE_EXCEEDED")
    assert counted >= 1


@pytest.mark.parametrize("value", ["abc", "-5", "1.5", str(10**12)])
def test_a_bad_timeout_header_is_400(server: ServerProcess, value: str) -> None:
    r = httpx.post(f"{server.url}/v1/encode/test/slow", json={"items": [{"text": "x"}]}, headers={TIMEOUT: value})
    assert r.status_code == 400 and "X-SIE-Timeout-Ms" in r.json()["detail"]["message"]


def test_queued_work_past_its_deadline_is_dropped_not_run(server: ServerProcess) -> None:
    url = server.url
    encode(url, "warm")
    dropped = scrape(url, "sie_dropped_items_total", model="test/slow", absent_as_zero=True)

    async def scenario() -> tuple[list[httpx.Response], httpx.Response, float]:
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            # a batch takes 0.25 s: the late request queues behind the first and its 100 ms pass there
            ahead = [asyncio.ensure_future(client.post("/v1/encode/test/slow", json={"items": [{"text": f"a{i}"}]}))
                     for i in range(4)]  # fmt: skip
            await asyncio.sleep(0.05)  # the others are queued first: this is the behaviour under test
            started = time.monotonic()
            late = await client.post(
                "/v1/encode/test/slow", json={"items": [{"text": "late"}]}, headers={TIMEOUT: "100"}
            )
            waited = time.monotonic() - started
            return list(await asyncio.gather(*ahead)), late, waited

    ahead, late, waited = asyncio.run(scenario())
    assert [r.status_code for r in ahead] == [200] * 4
    assert_deadline(late, "dropped")
    assert waited < 0.25  # answered at its deadline, not after its turn came
    wait_until(
        lambda: scrape(url, "sie_dropped_items_total", model="test/slow", absent_as_zero=True) > dropped,
        timeout=10,
        message="the late request's item was not dropped from the queue",
    )


def test_a_generation_stops_at_its_deadline(server: ServerProcess) -> None:
    url = server.url
    started = time.monotonic()
    r = httpx.post(f"{url}/v1/generate/test/endless", json={"prompt": "go", "max_new_tokens": 200},
                   headers={TIMEOUT: "300"}, timeout=60)  # fmt: skip
    assert_deadline(r, "dropped")
    assert time.monotonic() - started < 2.5  # 200 steps of 20 ms would take 4 s
    with httpx.stream("POST", f"{url}/v1/generate/test/endless", timeout=60, headers={TIMEOUT: "300"},
                      json={"prompt": "go", "max_new_tokens": 200, "stream": True}) as streamed:  # fmt: skip
        assert streamed.status_code == 200
        events = [line for line in streamed.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "data: [DONE]"
    assert "DEADLINE_EXCEEDED" in events[-2]


def test_a_cluster_worker_does_not_run_work_whose_caller_stopped_waiting(catalog: Path, tmp_path: Path) -> None:
    nats = Nats(tmp_path / "js")
    w = worker(catalog, nats.url, tmp_path / "w.log", "--preload", "test/slow").wait_ready()
    gateway = Gateway(catalog, nats.url, log=tmp_path / "gw.log").wait_ready()
    try:
        assert_deadline(encode(gateway.url, "x", 0), "nothing was run")
        r = httpx.post(f"{gateway.url}/v1/generate/test/endless", json={"prompt": "go", "max_new_tokens": 200},
                       headers={TIMEOUT: "400"}, timeout=60)  # fmt: skip
        assert_deadline(r, "dropped")
        assert encode(gateway.url, "still serving", 5000).status_code == 200
    finally:
        gateway.stop()
        w.stop()
        nats.stop()
