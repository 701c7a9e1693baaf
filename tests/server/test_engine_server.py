"""Engine behaviour seen from outside, on a real server process: batching across callers in the
metrics, admission control, disconnects, memory limits, failed-load isolation, reload, drain."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.helpers.catalog import tiny_embedder, tiny_llm, write_config
from tests.helpers.metrics import scrape
from tests.helpers.server import ServerProcess
from tests.helpers.wait import async_wait_until, stays, wait_until, wait_until_steady

FAULTS = "tests.helpers.fault_adapters"
MAX_QUEUED = 6
REQUIRED_METRICS = [
    "sie_requests_total",
    "sie_request_duration_seconds",
    "sie_queue_items",
    "sie_queue_wait_seconds",
    "sie_batch_items",
    "sie_batch_tokens",
    "sie_padding_ratio",
    "sie_model_loaded",
    "sie_model_memory_bytes",
    "sie_memory_budget_bytes",
    "sie_memory_untracked_bytes",
    "sie_model_loads_total",
    "sie_model_evictions_total",
    "sie_model_load_seconds",
    "sie_oom_total",
]


def slow(model_id: str, weights: Path) -> dict[str, object]:
    return {**tiny_embedder(model_id, weights), "adapter": f"{FAULTS}:SlowEmbedding"}


@pytest.fixture(scope="module")
def engine_catalog(tmp_path_factory: pytest.TempPathFactory, tiny_models: dict[str, Path]) -> Path:
    folder = tmp_path_factory.mktemp("engine-catalog")
    weights = tiny_models["embedder"]
    for name in ("slow-batching", "slow-queue", "slow-drain"):
        write_config(folder, slow(f"test/{name}", weights))
    write_config(folder, {**tiny_embedder("test/slow-disconnect", weights), "adapter": f"{FAULTS}:SlowerEmbedding"})
    flaky = tmp_path_factory.mktemp("flaky-weights")
    for item in weights.iterdir():
        (flaky / item.name).write_bytes(item.read_bytes())
    write_config(folder, {**tiny_embedder("test/flaky", flaky), "adapter": f"{FAULTS}:FlakyLoad"})
    huge = tiny_embedder("test/huge", weights)
    huge["profiles"] = {"cpu": {"max_batch_tokens": 1024, "activation_reserve_bytes": 10**15}}
    write_config(folder, huge)
    write_config(folder, tiny_embedder("test/plain", weights))
    write_config(folder, {**tiny_llm("test/endless", tiny_models["llm"]), "adapter": f"{FAULTS}:EndlessSlowLM"})
    return folder


def start(catalog: Path, logs: Path, *args: str) -> ServerProcess:
    return ServerProcess(
        catalog,
        "--offline",
        "--threads",
        "1",
        "--max-queued-items",
        str(MAX_QUEUED),
        *args,
        log=logs / "server.log",
    ).wait_ready()


@pytest.fixture(scope="module")
def engine_server(engine_catalog: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    # the result cache off: these tests are about the queue, and send the same texts again and again
    # (the cache's own tests: tests/server/test_encode_cache.py)
    proc = start(
        engine_catalog, tmp_path_factory.mktemp("engine-logs"), "--memory-budget", "2GiB", "--encode-cache", "0"
    )
    try:
        yield proc
    finally:
        proc.stop()


metric = scrape  # one sample of a server's /metrics; a series that is not there raises MissingSeries


async def encode_all(url: str, model: str, batches: list[list[str]], **headers: str) -> list[httpx.Response]:
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        calls = [
            client.post(f"/v1/encode/{model}", json={"items": [{"text": t} for t in texts]}, headers=headers)
            for texts in batches
        ]
        return list(await asyncio.gather(*calls))


def test_concurrent_callers_share_batches(engine_server: ServerProcess) -> None:
    url, model = engine_server.url, "test/slow-batching"
    httpx.post(f"{url}/v1/encode/{model}", json={"items": [{"text": "warm"}]}, timeout=60)
    singles_before = metric(url, "sie_batch_items_bucket", model=model, le="1.0")
    responses = asyncio.run(encode_all(url, model, [["hello"]] * MAX_QUEUED))
    assert [r.status_code for r in responses] == [200] * MAX_QUEUED
    batches = metric(url, "sie_batch_items_count", model=model) - 1
    singles = metric(url, "sie_batch_items_bucket", model=model, le="1.0") - singles_before
    assert metric(url, "sie_batch_items_sum", model=model) - 1 == MAX_QUEUED
    assert singles < batches < MAX_QUEUED  # some batch held items of several callers
    assert metric(url, "sie_requests_total", model=model, status="ok", task="encode") == MAX_QUEUED + 1


def test_admission_limit_answers_queue_full(engine_server: ServerProcess) -> None:
    url, model = engine_server.url, "test/slow-queue"
    responses = asyncio.run(encode_all(url, model, [["a", "b", "c"]] * 5))
    codes = sorted(r.status_code for r in responses)
    assert 200 in codes and 503 in codes
    refused = next(r for r in responses if r.status_code == 503)
    assert refused.headers["x-sie-error-code"] == "QUEUE_FULL"
    assert int(refused.headers["retry-after"]) >= 1
    assert f"limit {MAX_QUEUED}" in refused.json()["detail"]["message"]


def test_disconnected_clients_items_are_dropped(engine_server: ServerProcess) -> None:
    url, model = engine_server.url, "test/slow-disconnect"
    httpx.post(f"{url}/v1/encode/{model}", json={"items": [{"text": "warm"}]}, timeout=60)

    async def scenario() -> None:
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            busy = asyncio.create_task(client.post(f"/v1/encode/{model}", json={"items": [{"text": "x"}]}))
            await async_wait_until(  # the warm-up's item and now busy's have left the queue for a batch
                lambda: metric(url, "sie_queue_wait_seconds_count", model=model, priority="interactive") == 2,
                message="the busy request's batch never started",
            )
            gone = asyncio.create_task(client.post(f"/v1/encode/{model}", json={"items": [{"text": "gone"}] * 5}))
            await async_wait_until(  # its 5 items wait behind the busy batch (however long a loaded CPU took)
                lambda: metric(url, "sie_queue_items", model=model, priority="interactive") == 5,
                message="the 5 items never reached the queue",
            )
            gone.cancel()  # the caller goes away: its connection closes while the items wait
            with pytest.raises(asyncio.CancelledError):
                await gone
            assert (await busy).status_code == 200

    asyncio.run(scenario())
    wait_until(
        lambda: metric(url, "sie_dropped_items_total", model=model, absent_as_zero=True) == 5,
        message="the disconnected client's 5 items were not dropped",
    )
    assert metric(url, "sie_batch_items_sum", model=model) == 2  # warm-up and the busy request only


def rss_bytes(pid: int) -> int:
    """The process's resident set, as the kernel reports it (VmRSS, KiB)."""
    line = next(x for x in Path(f"/proc/{pid}/status").read_text().splitlines() if x.startswith("VmRSS:"))
    return int(line.split()[1]) * 1024


def test_metrics_and_memory_endpoints(engine_server: ServerProcess) -> None:
    url = engine_server.url
    httpx.post(f"{url}/v1/encode/test/plain", json={"items": [{"text": "x"}]}, timeout=60)
    text = httpx.get(f"{url}/metrics").text
    for name in REQUIRED_METRICS:
        assert f"# TYPE {name.removesuffix('_total')}" in text, name
    assert metric(url, "sie_memory_budget_bytes") == 2 * 2**30
    memory = httpx.get(f"{url}/v1/memory").json()
    assert memory["budget_bytes"] == 2 * 2**30
    assert 0 < memory["used_bytes"] <= memory["budget_bytes"]
    plain = next(m for m in memory["models"] if m["id"] == "test/plain")
    assert plain["charge_bytes"] == plain["resident_bytes"] + plain["reserve_bytes"] > 0
    # used = the models' charges + what the process holds beyond them and its start (its resident set here)
    assert memory["used_bytes"] == memory["charged_bytes"] + memory["untracked_bytes"]
    assert memory["charged_bytes"] == sum(m["charge_bytes"] for m in memory["models"])
    assert memory["untracked_bytes"] == max(
        0, memory["process_bytes"] - memory["runtime_bytes"] - memory["charged_bytes"]
    )
    rss = rss_bytes(engine_server.proc.pid)
    assert 0.8 * rss <= memory["process_bytes"] <= 1.2 * rss, (memory["process_bytes"], rss)
    assert 0 < memory["runtime_bytes"] <= memory["process_bytes"]
    assert metric(url, "sie_memory_untracked_bytes") >= 0
    info = httpx.get(f"{url}/v1/models/test/plain").json()
    assert info["charge_bytes"] == plain["charge_bytes"] and info["state"] == "loaded"


def test_model_larger_than_budget_is_resource_exhausted(engine_server: ServerProcess) -> None:
    r = httpx.post(f"{engine_server.url}/v1/encode/test/huge", json={"items": [{"text": "x"}]}, timeout=60)
    assert r.status_code == 503 and r.headers["x-sie-error-code"] == "RESOURCE_EXHAUSTED"
    assert "more than the whole memory budget" in r.json()["detail"]["message"]
    assert httpx.get(f"{engine_server.url}/v1/models/test/huge").json()["state"] == "available"


def test_failed_load_is_isolated_until_reload(engine_server: ServerProcess, engine_catalog: Path) -> None:
    url = engine_server.url
    r = httpx.post(f"{url}/v1/encode/test/flaky", json={"items": [{"text": "x"}]}, timeout=60)
    assert r.status_code == 502 and r.headers["x-sie-error-code"] == "MODEL_LOAD_FAILED"
    assert "simulated corrupt weights" in r.json()["detail"]["message"]
    assert httpx.post(f"{url}/v1/encode/test/plain", json={"items": [{"text": "x"}]}).status_code == 200
    loads = metric(url, "sie_model_loads_total", model="test/flaky")
    r = httpx.post(f"{url}/v1/encode/test/flaky", json={"items": [{"text": "x"}]}, timeout=60)
    assert r.status_code == 502 and metric(url, "sie_model_loads_total", model="test/flaky") == loads
    weights = Path(httpx.get(f"{url}/v1/models/test/flaky").json()["last_error"].split(" in ")[1].split(" (")[0])
    (weights / "READY").touch()
    reloaded = httpx.post(f"{url}/v1/models/test/flaky/reload", timeout=60)
    assert reloaded.status_code == 200 and reloaded.json()["state"] == "loaded"
    assert httpx.post(f"{url}/v1/encode/test/flaky", json={"items": [{"text": "x"}]}).status_code == 200


def test_a_client_that_leaves_stops_its_decoding(engine_server: ServerProcess) -> None:
    url, model = engine_server.url, "test/endless"
    body = {"prompt": "hello", "max_new_tokens": 400, "stream": True}
    with httpx.stream("POST", f"{url}/v1/generate/{model}", json=body, timeout=60) as response:
        lines = response.iter_lines()
        assert next(line for line in lines if line.startswith("data: "))  # decoding has started

    steps = wait_until_steady(  # a decode step takes 20 ms: 0.2 s without one means decoding has stopped
        lambda: metric(url, "sie_batch_items_count", model=model, absent_as_zero=True),  # none before a step ends
        quiet_s=0.2,
        message="decoding never stopped after the client left",
    )
    stays(
        lambda: metric(url, "sie_batch_items_count", model=model) == steps,
        for_s=0.5,
        message="decoding went on after the client left",
    )
    assert 0 < steps < 100  # counted, and far short of the 400 tokens it was asked for


def test_sigterm_drains_accepted_work_then_exits(engine_catalog: Path, tmp_path: Path) -> None:
    proc = start(engine_catalog, tmp_path, "--preload", "test/slow-drain")
    url, model = proc.url, "test/slow-drain"

    async def scenario() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            accepted = [
                asyncio.create_task(client.post(f"/v1/encode/{model}", json={"items": [{"text": f"t{i}"}]}))
                for i in range(3)
            ]

            async def held() -> bool:
                return bool((await client.get("/readyz")).json().get("inflight_requests", 0) >= 3)

            await async_wait_until(held, message="the server never held all three requests")
            proc.proc.send_signal(signal.SIGTERM)

            async def draining() -> httpx.Response | None:
                answer = await client.get("/readyz")
                return answer if answer.status_code != 200 else None

            ready = await async_wait_until(draining, message="/readyz still answers 200 after SIGTERM")
            late = await client.post(f"/v1/encode/{model}", json={"items": [{"text": "late"}]})
            return [ready, late, *await asyncio.gather(*accepted)]

    try:
        ready, late, *answers = asyncio.run(scenario())
        assert ready.status_code == 503 and ready.json()["status"] == "draining"
        assert late.status_code == 503 and late.headers["x-sie-error-code"] == "QUEUE_FULL"
        assert "shutting down" in late.json()["detail"]["message"]
        assert [a.status_code for a in answers] == [200, 200, 200]
        assert proc.proc.wait(timeout=20) == 0
    finally:
        proc.stop()
