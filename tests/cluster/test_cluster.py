"""Cluster mode on a real nats-server: a gateway and worker processes on 127.0.0.1."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import httpx
import numpy as np

from tests.helpers.cluster import Gateway, Nats, worker
from tests.helpers.server import ServerProcess
from tests.helpers.wait import async_wait_until, wait_until
from tests.server.test_engine_server import metric

TINY = "test/tiny-embedder"


async def encode_many(url: str, model: str, texts: list[str], **headers: str) -> list[httpx.Response]:
    async with httpx.AsyncClient(base_url=url, timeout=120) as client:
        calls = [client.post(f"/v1/encode/{model}", json={"items": [{"text": t}]}, headers=headers) for t in texts]
        return list(await asyncio.gather(*calls))


def test_gateway_and_two_workers_answer_32_concurrent_clients(cluster_catalog: Path, nats: Nats, tmp_path: Path
                                                                ) -> None:  # fmt: skip
    workers = [worker(cluster_catalog, nats.url, tmp_path / f"w{i}.log", "--preload", TINY) for i in range(2)]
    gateway = Gateway(cluster_catalog, nats.url, log=tmp_path / "gw.log")
    try:
        for w in workers:
            w.wait_ready()
        gateway.wait_ready()
        texts = [f"text number {i}" for i in range(32)]
        answers = asyncio.run(encode_many(gateway.url, TINY, texts))
        assert [a.status_code for a in answers] == [200] * 32
        refused = httpx.post(f"{workers[0].url}/v1/encode/{TINY}", json={"items": [{"text": "x"}]}, timeout=60)
        assert refused.status_code == 403 and "queue only" in refused.json()["detail"]["message"]
        reference = ServerProcess(cluster_catalog, "--offline", "--threads", "1").wait_ready()
        try:
            direct = httpx.post(
                f"{reference.url}/v1/encode/{TINY}", json={"items": [{"text": t} for t in texts]}, timeout=60
            ).json()
        finally:
            reference.stop()
        for answer, expected in zip(answers, direct["items"], strict=True):
            np.testing.assert_allclose(answer.json()["items"][0]["dense"]["values"], expected["dense"]["values"],
                                       atol=1e-5)  # fmt: skip
        # a worker that ran none of them has no series for the model: 0 for the sums
        batches = sum(metric(w.url, "sie_batch_items_count", model=TINY, absent_as_zero=True) for w in workers)
        items = sum(metric(w.url, "sie_batch_items_sum", model=TINY, absent_as_zero=True) for w in workers)
        assert items == 32 and batches < 32  # batched across clients on the workers
        # a large request is split into slices and merged back in order
        many = [{"text": f"t{i}"} for i in range(70)]
        merged = httpx.post(f"{gateway.url}/v1/encode/{TINY}", json={"items": many}, timeout=120).json()
        assert [i["id"] for i in merged["items"]] == [f"item-{i}" for i in range(70)]
        gw_metrics = httpx.get(f"{gateway.url}/metrics", timeout=60).text
        assert 'sie_gateway_requests_total{status="ok",task="encode"} 33.0' in gw_metrics
    finally:
        gateway.stop()
        for w in workers:
            w.stop()


def test_requests_wait_for_a_worker_that_starts_later(cluster_catalog: Path, nats: Nats, tmp_path: Path) -> None:
    gateway = Gateway(cluster_catalog, nats.url, "--hold-s", "60", log=tmp_path / "gw.log").wait_ready()
    late = None
    try:
        refused = httpx.post(f"{gateway.url}/v1/encode/{TINY}", json={"items": [{"text": "x"}]},
                             headers={"X-SIE-Wait-For-Worker": "false"})  # fmt: skip
        assert refused.status_code == 202 and refused.headers["retry-after"] == "5"

        async def scenario() -> list[httpx.Response]:
            waiting = asyncio.ensure_future(encode_many(gateway.url, TINY, [f"held {i}" for i in range(4)]))
            await asyncio.sleep(5)  # the behaviour under test: still held (not refused) after 5 s without a worker
            assert not waiting.done()
            nonlocal late
            late = worker(cluster_catalog, nats.url, tmp_path / "late.log")
            return await waiting

        answers = asyncio.run(scenario())
        assert [a.status_code for a in answers] == [200] * 4
    finally:
        gateway.stop()
        if late is not None:
            late.stop()


def items_started(proc: ServerProcess, priority: str) -> float:
    """Items of test/slow that a worker has taken from its queue into a batch (none yet: 0)."""
    return metric(proc.url, "sie_queue_wait_seconds_count", model="test/slow", priority=priority, absent_as_zero=True)


def test_a_killed_worker_loses_nothing(cluster_catalog: Path, nats: Nats, tmp_path: Path) -> None:
    first = worker(cluster_catalog, nats.url, tmp_path / "w1.log", "--preload", "test/slow").wait_ready()
    gateway = Gateway(cluster_catalog, nats.url, log=tmp_path / "gw.log").wait_ready()
    second = None
    try:

        async def scenario() -> list[httpx.Response]:
            started = items_started(first, "interactive")
            calls = asyncio.ensure_future(encode_many(gateway.url, "test/slow", [f"k{i}" for i in range(6)]))
            await async_wait_until(  # the first worker holds the work now: a batch of it has started there
                lambda: items_started(first, "interactive") > started,
                timeout=30,
                message="the first worker never started on the work",
            )
            first.proc.send_signal(signal.SIGKILL)
            nonlocal second
            second = worker(cluster_catalog, nats.url, tmp_path / "w2.log")
            return await calls

        answers = asyncio.run(scenario())
        assert [a.status_code for a in answers] == [200] * 6
        assert len({a.json()["items"][0]["dense"]["values"][0] for a in answers}) == 6  # each its own answer
    finally:
        gateway.stop()
        first.stop()
        if second is not None:
            second.stop()


def test_interactive_overtakes_a_batch_backlog(cluster_catalog: Path, nats: Nats, tmp_path: Path) -> None:
    # one batch-class item per batch: the backlog takes ~20 x 0.25 s to drain
    slow = worker(cluster_catalog, nats.url, tmp_path / "w.log", "--preload", "test/slow", "--batch-max-tokens", "8")
    slow.wait_ready()
    gateway = Gateway(cluster_catalog, nats.url, log=tmp_path / "gw.log").wait_ready()
    try:

        async def scenario() -> tuple[float, list[float]]:
            async def timed(text: str, priority: str) -> float:
                async with httpx.AsyncClient(base_url=gateway.url, timeout=120) as client:
                    await client.post("/v1/encode/test/slow", json={"items": [{"text": text}]},
                                      headers={"X-SIE-Priority": priority})  # fmt: skip
                return time.monotonic()

            backlog = [asyncio.ensure_future(timed(f"b{i}", "batch")) for i in range(20)]
            await async_wait_until(  # the worker is working through the backlog
                lambda: items_started(slow, "batch") >= 2,
                timeout=30,
                message="the worker never started on the batch backlog",
            )
            urgent = await timed("now", "interactive")
            return urgent, list(await asyncio.gather(*backlog))

        urgent, backlog = asyncio.run(scenario())
        assert sum(done > urgent for done in backlog) >= 10  # most of the backlog finished after it
    finally:
        gateway.stop()
        slow.stop()


def test_bearer_tokens(cluster_catalog: Path, nats: Nats, tmp_path: Path) -> None:
    gateway = Gateway(cluster_catalog, nats.url, "--hold-s", "1", env={"SIE_AUTH_TOKENS": "alpha,beta"},
                      log=tmp_path / "gw.log").wait_ready()  # fmt: skip
    try:
        url = f"{gateway.url}/v1/models"
        assert httpx.get(url).status_code == 401
        assert httpx.get(url).headers["x-sie-error-code"] == "UNAUTHENTICATED"
        assert httpx.get(url, headers={"Authorization": "Bearer gamma"}).status_code == 403
        assert httpx.get(url, headers={"Authorization": "Bearer beta"}).status_code == 200
        assert httpx.get(f"{gateway.url}/healthz").status_code == 200  # probes need no token
    finally:
        gateway.stop()


def test_a_queue_that_does_not_take_work_is_503_not_504(cluster_catalog: Path, nats: Nats, tmp_path: Path) -> None:
    w = worker(cluster_catalog, nats.url, tmp_path / "w.log").wait_ready()
    gateway = Gateway(cluster_catalog, nats.url, log=tmp_path / "gw.log").wait_ready()
    try:
        wait_until(lambda: httpx.get(f"{gateway.url}/v1/models/{TINY}").json()["workers"] > 0,
                   message="the gateway never saw the worker")  # fmt: skip
        nats.stop()  # JetStream is gone: publishes get no acknowledgement
        r = httpx.post(f"{gateway.url}/v1/encode/{TINY}", json={"items": [{"text": "x"}]}, timeout=60)
        assert r.status_code == 503 and r.headers["x-sie-error-code"] == "QUEUE_FULL"
        assert "did not take the request" in r.json()["detail"]["message"] and r.headers["retry-after"] == "2"
    finally:
        gateway.stop()
        w.stop()
