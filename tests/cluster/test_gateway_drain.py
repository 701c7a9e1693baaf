"""The gateway's drain, on real processes (nats-server, a gateway, a worker): the first SIGTERM
refuses new work and lets calls in flight get their answers, ``--drain-timeout-s`` bounds it (calls
still waiting then get 503, a stream an error event), and a second signal exits at once with 0."""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from tests.cluster.test_cluster import items_started
from tests.helpers.cluster import Gateway, Nats, running, worker
from tests.helpers.server import ServerProcess
from tests.helpers.wait import wait_until

SLOW = "test/slow"
ENDLESS = "test/endless"
# 480 tokens at 20 ms a decode step (the tiny model's context is 512): about 10 s of work
LONG = {"prompt": "hello", "max_new_tokens": 480}


@contextmanager
def cluster(
    catalog: Path, nats: Nats, logs: Path, model: str, *gateway_args: str
) -> Iterator[tuple[Gateway, ServerProcess]]:
    # batch-class work one item a batch (0.25 s each on test/slow); one item a work message
    w = worker(catalog, nats.url, logs / "worker.log", "--preload", model, "--batch-max-tokens", "8")
    gateway = Gateway(catalog, nats.url, "--split-items", "1", *gateway_args, log=logs / "gateway.log")
    with running(w, gateway):
        yield gateway, w


def _in_thread(target: Any) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def _stream_events(url: str, started: threading.Event, events: list[dict[str, Any]]) -> None:
    """The stream's events; a last ``{"cut": ...}`` when the connection ended without ``[DONE]``."""
    try:
        with httpx.stream("POST", f"{url}/v1/generate/{ENDLESS}", json={**LONG, "stream": True}, timeout=60) as answer:
            for line in answer.iter_lines():
                if line.startswith("data: ") and line != "data: [DONE]":
                    events.append(json.loads(line.removeprefix("data: ")))
                    started.set()
    except httpx.TransportError as exc:
        events.append({"cut": repr(exc)})


def _decoding(proc: ServerProcess) -> int:
    return int(httpx.get(f"{proc.url}/readyz").json().get("inflight_requests", 0))


def test_a_drain_answers_calls_in_flight_refuses_new_work_and_exits_0(
    cluster_catalog: Path, nats: Nats, tmp_path: Path
) -> None:
    with cluster(cluster_catalog, nats, tmp_path, SLOW) as (gateway, w):
        texts = [{"text": f"slow {i}"} for i in range(8)]  # 8 batches of 0.25 s on the worker
        answers: list[httpx.Response] = []
        call = _in_thread(lambda: answers.append(httpx.post(
            f"{gateway.url}/v1/encode/{SLOW}", json={"items": texts}, headers={"X-SIE-Priority": "batch"}, timeout=60
        )))  # fmt: skip
        wait_until(lambda: items_started(w, "batch") >= 1, timeout=30, message="the worker never started the work")

        gateway.proc.send_signal(signal.SIGTERM)
        wait_until(lambda: httpx.get(f"{gateway.url}/readyz").status_code == 503, message="/readyz never said 503")
        assert httpx.get(f"{gateway.url}/readyz").json()["status"] == "draining"
        refused = httpx.post(f"{gateway.url}/v1/encode/{SLOW}", json={"items": [{"text": "late"}]}, timeout=10)
        assert refused.status_code == 503 and refused.headers["x-sie-error-code"] == "QUEUE_FULL"
        assert refused.headers["retry-after"]
        assert "gateway is shutting down" in refused.json()["detail"]["message"]

        assert gateway.proc.wait(timeout=30) == 0
        call.join(5)
        (answer,) = answers
        assert answer.status_code == 200, answer.text
        assert [item["id"] for item in answer.json()["items"]] == [f"item-{i}" for i in range(8)]


def test_a_drain_past_its_deadline_ends_the_stream_with_an_error_and_exits_0(
    cluster_catalog: Path, nats: Nats, tmp_path: Path
) -> None:
    with cluster(cluster_catalog, nats, tmp_path, ENDLESS, "--drain-timeout-s", "1") as (gateway, w):
        started, events = threading.Event(), list[dict[str, Any]]()
        streaming = _in_thread(lambda: _stream_events(gateway.url, started, events))
        answers: list[httpx.Response] = []
        whole = _in_thread(
            lambda: answers.append(httpx.post(f"{gateway.url}/v1/generate/{ENDLESS}", json=LONG, timeout=60))
        )
        assert started.wait(30), f"the stream never started: {events} {gateway.tail()}"
        wait_until(lambda: _decoding(w) >= 2, timeout=30, message="the worker never held both generations")

        signalled = time.monotonic()
        gateway.proc.send_signal(signal.SIGTERM)
        assert gateway.proc.wait(timeout=15) == 0
        exited_after = time.monotonic() - signalled
        streaming.join(5)
        whole.join(5)

        assert 1 <= exited_after < 6  # the deadline held it, then it ended well before the 10 s of work
        (answer,) = answers
        assert answer.status_code == 503 and answer.headers["x-sie-error-code"] == "QUEUE_FULL"
        assert answer.headers["retry-after"]
        message = answer.json()["detail"]["message"]
        assert "gateway shut down before this work finished" in message and "--drain-timeout-s" in message
        assert all("text" in e for e in events[:-1]) and len(events) > 1, f"text first, then the end: {events}"
        last = events[-1]
        assert "detail" in last, f"the stream did not end with an error event: {last}"
        assert last["detail"]["code"] == "QUEUE_FULL" and "--drain-timeout-s" in last["detail"]["message"]
        assert "drain deadline passed" in gateway.tail()
        # the gateway told the worker its callers are gone: it stops decoding for them
        wait_until(lambda: _decoding(w) == 0, timeout=15, message="the worker went on decoding")


def test_a_second_signal_exits_the_gateway_at_once_with_status_0(
    cluster_catalog: Path, nats: Nats, tmp_path: Path
) -> None:
    with cluster(cluster_catalog, nats, tmp_path, ENDLESS, "--drain-timeout-s", "120") as (gateway, _):
        started, events = threading.Event(), list[dict[str, Any]]()
        _in_thread(lambda: _stream_events(gateway.url, started, events))
        assert started.wait(30), f"the stream never started: {events} {gateway.tail()}"

        gateway.proc.send_signal(signal.SIGTERM)
        wait_until(lambda: httpx.get(f"{gateway.url}/readyz").status_code == 503, message="/readyz never said 503")
        assert gateway.proc.poll() is None, "the first signal alone must not end a drain with a stream running"
        signalled = time.monotonic()
        gateway.proc.send_signal(signal.SIGTERM)
        assert gateway.proc.wait(timeout=5) == 0
        assert time.monotonic() - signalled < 3
        wait_until(lambda: "cut" in events[-1], message="the stream went on after the gateway exited")
