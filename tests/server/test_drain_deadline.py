"""Shutdown that ends, on a real server process: ``--drain-timeout-s`` bounds a drain (what is
still running then gets a 503, a stream an error event), and a second signal exits at once with 0."""

from __future__ import annotations

import base64
import json
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers.catalog import tiny_detector, tiny_llm, write_config
from tests.helpers.documents import scanned_pdf, text_image
from tests.helpers.fault_adapters import SLOW_PICTURE_S
from tests.helpers.server import ServerProcess
from tests.helpers.wait import wait_until

MODEL = "test/endless"
SLOW_READER = "test/slow-pages"
# 480 tokens at 20 ms a decode step (the tiny model's context is 512): about 10 s of work
LONG = {"prompt": "hello", "max_new_tokens": 480}


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory, tiny_models: dict[str, Path]) -> Path:
    folder = tmp_path_factory.mktemp("drain-catalog")
    endless = tiny_llm(MODEL, tiny_models["llm"])
    write_config(folder, {**endless, "adapter": "tests.helpers.fault_adapters:EndlessSlowLM"})
    # reads a PDF's rendered pages, SLOW_PICTURE_S a page: one page a batch
    slow = {**tiny_detector(SLOW_READER, tiny_models["owlv2"]), "inputs": ["image", "document"]}
    slow["adapter"] = "tests.helpers.fault_adapters:SlowPictures"
    slow["profiles"] = {"cpu": {"max_batch_tokens": 64}, "cuda": {"max_batch_tokens": 64}}
    write_config(folder, slow)
    return folder


@pytest.fixture
def server(catalog: Path, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[ServerProcess]:
    args: tuple[str, ...] = getattr(request, "param", ())
    proc = ServerProcess(catalog, "--offline", "--threads", "1", "--preload", MODEL, "--preload", SLOW_READER, *args,
                         log=tmp_path / "server.log")  # fmt: skip
    try:
        yield proc.wait_ready()
    finally:
        proc.stop()


def _stream_events(url: str, started: threading.Event, events: list[dict[str, Any]]) -> None:
    """The stream's events; a last ``{"cut": ...}`` when the connection ended without ``[DONE]``."""
    body = {**LONG, "stream": True}
    try:
        with httpx.stream("POST", f"{url}/v1/generate/{MODEL}", json=body, timeout=60) as response:
            for line in response.iter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                events.append(json.loads(line.removeprefix("data: ")))
                started.set()
    except httpx.TransportError as exc:
        events.append({"cut": repr(exc)})


def _decoding(url: str) -> bool:
    return bool(httpx.get(f"{url}/readyz").json().get("inflight_requests", 0) >= 2)


@pytest.mark.parametrize("server", [("--drain-timeout-s", "1.5")], indirect=True)
def test_a_drain_past_its_deadline_fails_what_is_left_and_exits(server: ServerProcess) -> None:
    url = server.url
    started, events = threading.Event(), list[dict[str, Any]]()
    streaming = threading.Thread(target=_stream_events, args=(url, started, events), daemon=True)
    streaming.start()
    answers: list[httpx.Response] = []
    whole = threading.Thread(
        target=lambda: answers.append(httpx.post(f"{url}/v1/generate/{MODEL}", json=LONG, timeout=60)), daemon=True
    )
    whole.start()
    assert started.wait(30), f"the stream never started: {events} {answers} {server.tail()}"
    wait_until(lambda: _decoding(url), message="the server never held both generations")

    signalled = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(timeout=15) == 0
    exited_after = time.monotonic() - signalled
    streaming.join(5)
    whole.join(5)

    assert 1.5 <= exited_after < 6  # the deadline held it, then it ended well before the 10 s of work
    (answer,) = answers
    assert answer.status_code == 503 and answer.headers["x-sie-error-code"] == "QUEUE_FULL"
    assert answer.headers["retry-after"]
    message = answer.json()["detail"]["message"]
    assert "shut down before this work finished" in message and "--drain-timeout-s" in message
    assert all("text" in e for e in events[:-1]) and len(events) > 1, f"text first, then the end: {events}"
    last = events[-1]
    assert "detail" in last, f"the stream did not end with an error event: {last}"
    assert last["detail"]["code"] == "QUEUE_FULL"
    assert "--drain-timeout-s" in last["detail"]["message"]
    assert "drain deadline passed" in server.tail()


@pytest.mark.parametrize("second", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("server", [("--drain-timeout-s", "120")], indirect=True)
def test_a_second_signal_exits_at_once_with_status_0(server: ServerProcess, second: signal.Signals) -> None:
    url = server.url
    started, events = threading.Event(), list[dict[str, Any]]()
    threading.Thread(target=_stream_events, args=(url, started, events), daemon=True).start()
    assert started.wait(30), f"the stream never started: {events} {server.tail()}"

    server.proc.send_signal(signal.SIGTERM)
    wait_until(lambda: httpx.get(f"{url}/readyz").status_code == 503, message="/readyz never said draining")
    assert server.proc.poll() is None, "the first signal alone must not end a drain with work running"
    tei = httpx.get(f"{url}/health")  # TEI's health check says the same, in TEI's error body
    assert tei.status_code == 503 and tei.json() == {"error": "the server is draining", "error_type": "Unhealthy"}
    signalled = time.monotonic()
    server.proc.send_signal(second)
    assert server.proc.wait(timeout=5) == 0
    assert time.monotonic() - signalled < 3
    wait_until(lambda: "cut" in events[-1], message="the stream went on after the process exited")


@pytest.mark.parametrize("server", [("--drain-timeout-s", "1.5")], indirect=True)
def test_a_document_still_being_read_at_the_drain_deadline_gets_its_own_error(server: ServerProcess) -> None:
    url = server.url
    pdf = scanned_pdf([text_image([f"page {k + 1} is a wide page"], size=40) for k in range(3)], dpi=100.0)
    body = {"items": [{"id": "scan", "document": {"data": base64.b64encode(pdf).decode(), "format": "pdf"}}]}
    answers: list[httpx.Response] = []
    reading = threading.Thread(
        target=lambda: answers.append(httpx.post(f"{url}/v1/extract/{SLOW_READER}", json=body, timeout=60)),
        daemon=True,
    )
    reading.start()
    wait_until(lambda: httpx.get(f"{url}/readyz").json().get("inflight_requests", 0) >= 1,
               message="the server never took the document")  # fmt: skip

    signalled = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(timeout=15) == 0
    reading.join(5)

    # three pages take 3 x SLOW_PICTURE_S; the drain ended it at its deadline with the item's own error
    assert 1.5 <= time.monotonic() - signalled < 3 * SLOW_PICTURE_S
    (answer,) = answers
    assert answer.status_code == 200, answer.text
    (item,) = answer.json()["items"]
    assert item["id"] == "scan" and item["entities"] == [] and item["error"]["code"] == "QUEUE_FULL"
    assert "--drain-timeout-s" in item["error"]["message"]
