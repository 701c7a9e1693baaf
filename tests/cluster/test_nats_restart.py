"""NATS going away under load, on real processes: requests in flight end (200, or 503 + Retry-After)
and never hang, gateway and workers reconnect by themselves, work JetStream acknowledged survives
a restart (file storage), and a worker cut off mid-work never gives a caller a second answer."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np

from tests.helpers.cluster import Gateway, Nats, running, worker
from tests.helpers.metrics import scrape
from tests.helpers.tcp_cut import TcpCut
from tests.helpers.wait import async_wait_until, wait_until

SLOW, TINY = "test/slow", "test/tiny-embedder"
LONG = "the invoice from Acme Corp is due at the end of the month and the total is large " * 6  # past 64 tokens
STREAM = "SIE_DEFAULT_INTERACTIVE"  # the default pool's interactive work
BOUND_S = 60.0  # a request in flight across a restart ends well within this (the gateway's timeout is 600 s)


def _body(tag: str, n: int) -> dict[str, object]:
    return {"items": [{"text": f"{tag} item {i}: {LONG}"} for i in range(n)]}


def _clean(*logs: Path) -> None:
    for log in logs:
        text = log.read_text()
        assert "Traceback" not in text, text[-3000:]


def _post_all(client: httpx.AsyncClient, bodies: list[dict[str, object]]) -> list[asyncio.Future[httpx.Response]]:
    return [asyncio.ensure_future(client.post(f"/v1/encode/{SLOW}", json=b)) for b in bodies]


def test_requests_in_flight_across_a_nats_restart_end_and_new_ones_succeed(
    cluster_catalog: Path, nats: Nats, tmp_path: Path
) -> None:
    logs = tmp_path / "w.log", tmp_path / "gw.log"
    w = worker(cluster_catalog, nats.url, logs[0], "--preload", SLOW)
    with running(w, Gateway(cluster_catalog, nats.url, log=logs[1])) as (_, gateway):
        pids = w.proc.pid, gateway.proc.pid

        async def scenario() -> tuple[list[httpx.Response], int]:
            # 20 requests of 48 long items: over a dozen batches of 0.25 s or more on the worker
            async with httpx.AsyncClient(base_url=gateway.url, timeout=BOUND_S) as client:
                calls = _post_all(client, [_body(f"r{k}", 48) for k in range(20)])
                await asyncio.wait(calls, return_when=asyncio.FIRST_COMPLETED)
                unanswered = sum(1 for c in calls if not c.done())
                await asyncio.to_thread(nats.restart)  # same port, same store
                return list(await asyncio.gather(*calls)), unanswered

        started = time.monotonic()
        answers, unanswered = asyncio.run(scenario())
        assert unanswered > 0, "every request was answered before NATS stopped: nothing was in flight"
        assert time.monotonic() - started < BOUND_S
        for answer in answers:
            assert answer.status_code in (200, 503), answer.text
            if answer.status_code == 503:
                assert answer.headers["x-sie-error-code"] == "QUEUE_FULL" and "retry-after" in answer.headers
            else:
                assert len(answer.json()["items"]) == 48
        # the same gateway and worker serve new requests once they have reconnected
        after = wait_until(lambda: _encode(gateway.url, TINY), timeout=30, message="no request succeeded after")
        assert after.status_code == 200
        assert (w.proc.poll(), gateway.proc.poll()) == (None, None) and (w.proc.pid, gateway.proc.pid) == pids
    _clean(*logs)


def _encode(url: str, model: str) -> httpx.Response | None:
    answer = httpx.post(f"{url}/v1/encode/{model}", json={"items": [{"text": "after the restart"}]}, timeout=30)
    return answer if answer.status_code == 200 else None


def test_work_acknowledged_by_jetstream_survives_a_nats_restart(
    cluster_catalog: Path, nats: Nats, tmp_path: Path
) -> None:
    logs = tmp_path / "gw.log", tmp_path / "w.log"
    with running(Gateway(cluster_catalog, nats.url, "--hold-s", "0", log=logs[0])) as (gateway,), \
            ThreadPoolExecutor(1) as pool:  # fmt: skip
        waiting = pool.submit(httpx.post, f"{gateway.url}/v1/encode/{TINY}", json={"items": [{"text": "kept"}]},
                              timeout=120)  # fmt: skip
        wait_until(lambda: nats.stream(STREAM).get("messages") == 1, timeout=30,
                   message="the gateway never published the work")  # fmt: skip
        nats.restart()
        assert nats.stream(STREAM).get("messages") == 1  # on file: still there after the restart
        assert not waiting.done()
        with running(worker(cluster_catalog, nats.url, logs[1])) as (w,):
            answer = waiting.result(timeout=120)
            assert answer.status_code == 200, answer.text
            assert scrape(w.url, "sie_batch_items_sum", model=TINY) == 1  # run once: not sent twice
        assert nats.stream(STREAM).get("messages") == 0
    _clean(*logs)


def test_a_worker_cut_off_mid_work_gives_each_caller_exactly_one_answer(
    cluster_catalog: Path, nats: Nats, tmp_path: Path
) -> None:
    logs = tmp_path / "cut.log", tmp_path / "gw.log", tmp_path / "other.log"
    relay = TcpCut(nats.port)  # the first worker reaches NATS only through it
    cut_off = worker(cluster_catalog, f"nats://127.0.0.1:{relay.port}", logs[0], "--preload", SLOW)
    try:
        with running(cut_off, Gateway(cluster_catalog, nats.url, log=logs[1])) as (_, gateway):

            async def scenario() -> list[httpx.Response]:
                async with httpx.AsyncClient(base_url=gateway.url, timeout=BOUND_S) as client:
                    calls = _post_all(client, [_body(f"c{k}", 64) for k in range(8)])
                    await async_wait_until(  # the worker has the work and is part way through it (4+ batches)
                        lambda: scrape(cut_off.url, "sie_batch_items_count", model=SLOW, absent_as_zero=True) >= 1,
                        timeout=60, message="the worker never ran a batch")  # fmt: skip
                    assert not all(c.done() for c in calls)
                    relay.cut()  # it finishes its batches without NATS: the answers wait in its client
                    with running(worker(cluster_catalog, nats.url, logs[2], "--preload", SLOW)):
                        return list(await asyncio.gather(*calls))  # redelivered to the other worker, answered

            answers = asyncio.run(scenario())
            assert [a.status_code for a in answers] == [200] * 8, [a.text[:200] for a in answers]
            relay.mend()  # the cut-off worker reconnects and sends its late answers: dropped, counted
            wait_until(lambda: scrape(gateway.url, "sie_gateway_replies_dropped_total", reason="duplicate",
                                      absent_as_zero=True) >= 1,
                       timeout=30, message="the cut-off worker's answers never reached the gateway")  # fmt: skip
            # each caller got the vectors of its own texts
            for k in (0, 7):
                alone = httpx.post(f"{gateway.url}/v1/encode/{SLOW}", json=_body(f"c{k}", 1), timeout=60).json()
                np.testing.assert_allclose(answers[k].json()["items"][0]["dense"]["values"],
                                           alone["items"][0]["dense"]["values"], atol=1e-5)  # fmt: skip
    finally:
        relay.close()
    _clean(*logs)


def test_requests_in_flight_while_nats_stays_away_get_503_with_retry_after(
    cluster_catalog: Path, nats: Nats, tmp_path: Path
) -> None:
    logs = tmp_path / "w.log", tmp_path / "gw.log"
    w = worker(cluster_catalog, nats.url, logs[0], "--preload", SLOW)
    with running(w, Gateway(cluster_catalog, nats.url, log=logs[1])) as (_, gateway):

        async def scenario() -> tuple[list[httpx.Response], float]:
            async with httpx.AsyncClient(base_url=gateway.url, timeout=BOUND_S) as client:
                calls = _post_all(client, [_body(f"a{k}", 64) for k in range(6)])
                await async_wait_until(
                    lambda: scrape(w.url, "sie_batch_items_count", model=SLOW, absent_as_zero=True) >= 1,
                    timeout=60, message="the worker never ran a batch")  # fmt: skip
                assert not all(c.done() for c in calls)
                nats.stop()  # and it does not come back while they wait
                stopped = time.monotonic()
                answers = list(await asyncio.gather(*calls))
                return answers, time.monotonic() - stopped

        answers, waited = asyncio.run(scenario())
        refused = [a for a in answers if a.status_code == 503]
        assert refused and all(a.status_code in (200, 503) for a in answers), [a.text[:200] for a in answers]
        for answer in refused:
            assert answer.headers["x-sie-error-code"] == "QUEUE_FULL" and int(answer.headers["retry-after"]) > 0
            assert "NATS" in answer.json()["detail"]["message"]
        assert waited < 20  # the gateway's bound (10 s away), not its 600 s timeout
        nats.restart()
        after = wait_until(lambda: _encode(gateway.url, TINY), timeout=30, message="no request succeeded after")
        assert after.status_code == 200
    _clean(*logs)


def test_answers_lost_while_the_gateway_was_away_are_sent_again_not_run_again(
    cluster_catalog: Path, nats: Nats, tmp_path: Path
) -> None:
    logs = tmp_path / "w.log", tmp_path / "gw.log"
    relay = TcpCut(nats.port)  # the gateway reaches NATS only through it
    w = worker(cluster_catalog, nats.url, logs[0], "--preload", SLOW)
    calls, items = 6, 64
    try:
        with running(w, Gateway(cluster_catalog, f"nats://127.0.0.1:{relay.port}", log=logs[1])) as (_, gateway):

            def answered() -> float:  # work messages answered (the gateway splits a call's items into several)
                return scrape(w.url, "sie_requests_total", model=SLOW, task="encode", status="ok", absent_as_zero=True)

            async def scenario() -> tuple[list[httpx.Response], float]:
                async with httpx.AsyncClient(base_url=gateway.url, timeout=BOUND_S) as client:
                    posted = _post_all(client, [_body(f"l{k}", items) for k in range(calls)])
                    await async_wait_until(
                        lambda: scrape(w.url, "sie_batch_items_count", model=SLOW, absent_as_zero=True) >= 1,
                        timeout=60, message="the worker never ran a batch")  # fmt: skip
                    relay.cut()  # the worker answers while the gateway is away: those answers are lost
                    assert nats.stream(STREAM).get("messages"), "all work was answered before the gateway went away"
                    await async_wait_until(lambda: nats.stream(STREAM).get("messages") == 0, timeout=30,
                                           message="the worker never answered all the work")  # fmt: skip
                    ran = answered()  # every work message answered (acked after its answer went out)
                    relay.mend()  # back within the gateway's 10 s grace: it asks for the lost answers
                    return list(await asyncio.gather(*posted)), ran

            answers, ran = asyncio.run(scenario())
            assert [a.status_code for a in answers] == [200] * calls, [a.text[:200] for a in answers]
            assert all(len(a.json()["items"]) == items for a in answers)
            # each call ran once on the worker: the lost answers came from its memory, not a second run
            assert scrape(w.url, "sie_batch_items_sum", model=SLOW) == calls * items
            assert answered() == ran
            assert "sent it again" in logs[0].read_text()
    finally:
        relay.close()
    _clean(*logs)
