"""How work travels in cluster mode: bodies past the message limit, residency, streams, dead letters."""

from __future__ import annotations

import asyncio
import json
import signal
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from pathlib import Path

import httpx
import numpy as np

from tests.helpers.cluster import Gateway, Nats, running, worker
from tests.helpers.server import ServerProcess
from tests.helpers.wait import stays, wait_until, wait_until_steady
from tests.server.test_engine_server import metric

TINY = "test/tiny-embedder"


def test_bodies_past_the_message_limit_travel_by_reference(cluster_catalog: Path, tmp_path: Path) -> None:
    nats = Nats(tmp_path / "jetstream", "max_payload: 65536")  # 64 KiB messages instead of 1 MiB
    w = worker(cluster_catalog, nats.url, tmp_path / "w.log", "--preload", TINY)
    gateway = Gateway(cluster_catalog, nats.url, "--split-items", "1000", log=tmp_path / "gw.log")
    try:
        w.wait_ready()
        gateway.wait_ready()
        texts = [f"passage {i}: " + "the invoice is due at the end of the month " * 14 for i in range(400)]
        big = httpx.post(f"{gateway.url}/v1/encode/{TINY}", json={"items": [{"text": t} for t in texts]},
                         timeout=120)  # fmt: skip
        assert big.status_code == 200, big.text
        assert len(big.content) > 65536
        items = big.json()["items"]
        assert [i["id"] for i in items] == [f"item-{i}" for i in range(400)]
        for k in (0, 199, 399):  # the same vectors as small requests that fit in a message
            one = httpx.post(f"{gateway.url}/v1/encode/{TINY}", json={"items": [{"text": texts[k]}]}, timeout=60)
            np.testing.assert_allclose(items[k]["dense"]["values"], one.json()["items"][0]["dense"]["values"],
                                       atol=1e-5)  # fmt: skip
        assert metric(gateway.url, "sie_gateway_payloads_by_reference_total", direction="request") == 1
        assert metric(gateway.url, "sie_gateway_payloads_by_reference_total", direction="reply") == 1
    finally:
        gateway.stop()
        w.stop()
        nats.stop()


def wait_for_holder(gateway: Gateway, model: str) -> dict[str, object]:
    def seen() -> dict[str, object] | None:  # both heartbeats seen, and which one holds the model
        info: dict[str, object] = httpx.get(f"{gateway.url}/v1/models/{model}").json()
        return info if info["workers"] == 2 and info["loaded_on"] == 1 else None

    return wait_until(seen, timeout=20, message=f"the gateway never saw one of two workers holding {model}")


def test_work_goes_to_the_worker_that_holds_the_model(cluster_catalog: Path, nats: Nats, tmp_path: Path) -> None:
    holder = worker(cluster_catalog, nats.url, tmp_path / "holder.log", "--preload", TINY)
    other = worker(cluster_catalog, nats.url, tmp_path / "other.log")
    gateway = Gateway(cluster_catalog, nats.url, log=tmp_path / "gw.log")
    try:
        for proc in (holder, other, gateway):
            proc.wait_ready()
        info = wait_for_holder(gateway, TINY)
        assert info["state"] == "loaded" and info["resident_bytes"] > 0  # type: ignore[operator]
        for i in range(16):
            r = httpx.post(f"{gateway.url}/v1/encode/{TINY}", json={"items": [{"text": f"q{i}"}]}, timeout=60)
            assert r.status_code == 200
        assert metric(holder.url, "sie_batch_items_sum", model=TINY) == 16
        # never loaded a second copy: a model never loaded there has no series at all
        assert metric(other.url, "sie_model_loads_total", model=TINY, absent_as_zero=True) == 0
    finally:
        gateway.stop()
        holder.stop()
        other.stop()


def test_work_sent_to_a_holder_that_dies_goes_to_another_worker(cluster_catalog: Path, nats: Nats, tmp_path: Path
                                                               ) -> None:  # fmt: skip
    holder = worker(cluster_catalog, nats.url, tmp_path / "holder.log", "--preload", "test/slow")
    other = worker(cluster_catalog, nats.url, tmp_path / "other.log")
    gateway = Gateway(cluster_catalog, nats.url, log=tmp_path / "gw.log")
    try:
        for proc in (holder, other, gateway):
            proc.wait_ready()
        wait_for_holder(gateway, "test/slow")

        async def scenario() -> list[httpx.Response]:
            async with httpx.AsyncClient(base_url=gateway.url, timeout=120) as client:
                calls = []
                for i in range(6):  # the later ones are sent to the holder after it died
                    calls.append(asyncio.ensure_future(
                        client.post("/v1/encode/test/slow", json={"items": [{"text": f"d{i}"}]})))  # fmt: skip
                    await asyncio.sleep(0.1)  # the behaviour under test: calls spread out, before and after the kill
                    if i == 2:
                        holder.proc.send_signal(signal.SIGKILL)
                return list(await asyncio.gather(*calls))

        answers = asyncio.run(scenario())
        assert [a.status_code for a in answers] == [200] * 6
        assert len({a.json()["items"][0]["dense"]["values"][0] for a in answers}) == 6
        assert metric(other.url, "sie_batch_items_sum", model="test/slow") >= 3
    finally:
        gateway.stop()
        holder.stop()
        other.stop()


def test_a_stream_arrives_in_parts_and_ends_with_an_error_if_its_worker_dies(
    cluster_catalog: Path, nats: Nats, tmp_path: Path
) -> None:
    w = worker(cluster_catalog, nats.url, tmp_path / "w.log", "--preload", "test/endless")
    with running(w, Gateway(cluster_catalog, nats.url, log=tmp_path / "gw.log")) as (_, gateway):
        events = []
        with stream_endless(gateway) as response:
            assert response.headers["content-type"].startswith("text/event-stream"), response.read()
            for line in response.iter_lines():
                if line.startswith("data: "):
                    events.append(line[6:])
                if len(events) == 3:  # parts arrive while the worker is still decoding
                    w.proc.send_signal(signal.SIGKILL)
        assert all("text" in json.loads(e) for e in events[:3])
        assert events[-1] == "[DONE]"
        error = json.loads(events[-2]).get("detail", {})
        assert error.get("code") == "INFERENCE_ERROR" and "stopped" in error["message"], events[-4:]


def test_a_caller_that_leaves_a_stream_stops_its_decoding(cluster_catalog: Path, nats: Nats, tmp_path: Path) -> None:
    w = worker(cluster_catalog, nats.url, tmp_path / "w.log", "--preload", "test/endless")
    with running(w, Gateway(cluster_catalog, nats.url, log=tmp_path / "gw.log")) as (_, gateway):
        with stream_endless(gateway) as response:
            assert next(line for line in response.iter_lines() if line.startswith("data: "))  # decoding started
        steps = wait_until_steady(  # a decode step takes 20 ms: 0.2 s without one means decoding has stopped
            lambda: metric(w.url, "sie_batch_items_count", model="test/endless", absent_as_zero=True),
            quiet_s=0.2,
            message="decoding never stopped after the caller left",
        )
        stays(lambda: metric(w.url, "sie_batch_items_count", model="test/endless") == steps, for_s=0.5,
              message="decoding went on after the caller left")  # fmt: skip
        assert 0 < steps < 150  # counted, and far short of the 400 tokens asked for (20 ms a step)


def stream_endless(gateway: ServerProcess) -> AbstractContextManager[httpx.Response]:
    body = {"prompt": "hello", "max_new_tokens": 400, "stream": True}
    return httpx.stream("POST", f"{gateway.url}/v1/generate/test/endless", json=body, timeout=60)


def test_poison_work_goes_to_the_dead_letter_stream(cluster_catalog: Path, nats: Nats, tmp_path: Path) -> None:
    first = worker(cluster_catalog, nats.url, tmp_path / "w1.log", "--max-deliver", "1")
    gateway = Gateway(cluster_catalog, nats.url, log=tmp_path / "gw.log")
    with running(first, gateway), ThreadPoolExecutor(1) as pool:
        answer = pool.submit(httpx.post, f"{gateway.url}/v1/encode/test/crash",
                             json={"items": [{"text": "poison"}]}, timeout=120)  # fmt: skip
        assert first.proc.wait(timeout=60) == 3  # the first delivery killed its worker
        with running(worker(cluster_catalog, nats.url, tmp_path / "w2.log", "--max-deliver", "1")):
            r = answer.result(timeout=120)
            assert r.status_code == 500 and r.headers["x-sie-error-code"] == "INFERENCE_ERROR"
            assert "dead-letter" in r.json()["detail"]["message"]
            assert nats.stream("SIE_DEAD_LETTER")["messages"] == 1
            ok = httpx.post(f"{gateway.url}/v1/encode/{TINY}", json={"items": [{"text": "x"}]}, timeout=60)
            assert ok.status_code == 200  # the surviving worker goes on serving


def test_a_slow_load_does_not_use_up_deliveries(cluster_catalog: Path, nats: Nats, tmp_path: Path) -> None:
    w = worker(cluster_catalog, nats.url, tmp_path / "w.log", "--max-deliver", "1")
    with running(w, Gateway(cluster_catalog, nats.url, log=tmp_path / "gw.log")) as (_, gateway):
        # a 3 s load with one delivery allowed: the worker holds the work while it loads
        r = httpx.post(f"{gateway.url}/v1/encode/test/slow-load", json={"items": [{"text": "x"}]}, timeout=60)
        assert r.status_code == 200, r.text
        assert nats.stream("SIE_DEAD_LETTER").get("messages", 0) == 0
