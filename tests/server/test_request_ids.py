"""X-Request-ID: taken from the caller or made, returned in the answer, on the JSON log lines of that
request in the server's log, and carried from the gateway to the worker."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from sie_server.compose import create_app
from sie_server.observability import logging as request_logs
from sie_server.settings import Settings
from tests.helpers.catalog import tiny_embedder, write_config
from tests.helpers.cluster import Gateway, Nats, running, worker
from tests.helpers.fault_adapters import POISON_ENCODE
from tests.helpers.server import ServerProcess
from tests.helpers.tiny_models import build_bert_embedder
from tests.helpers.wait import wait_until

MODEL = "test/tiny-embedder"
POISONED = "test/poison-embedder"  # a batch holding a text starting with POISON_ENCODE fails in the model
BODY = {"items": [{"text": "hello"}]}
FAULTS = "tests.helpers.fault_adapters"


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("request-id-catalog")
    embedder = build_bert_embedder(folder / "embedder")
    write_config(folder, tiny_embedder(MODEL, embedder))
    write_config(folder, {**tiny_embedder(POISONED, embedder), "adapter": f"{FAULTS}:PoisonEmbedding"})
    return folder


@pytest.fixture(scope="module")
def json_server(catalog: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    log = tmp_path_factory.mktemp("request-id-logs") / "json_server.log"
    proc = ServerProcess(catalog, "--offline", "--threads", "1", "--log-format", "json", "--verbose", log=log)
    with running(proc):
        yield proc


def json_lines(log: Path) -> list[dict[str, Any]]:
    """The log's JSON lines (other output, such as a library's progress bar, may be text)."""
    found = []
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            found.append(json.loads(line))  # a line that starts like JSON must be JSON
    return found


def lines_of(log: Path, request_id: str) -> list[dict[str, Any]]:
    return [line for line in json_lines(log) if line.get("request_id") == request_id]


def wait_for_lines(log: Path | None, request_id: str) -> list[dict[str, Any]]:
    assert log is not None, "the process was started without a log file"
    return wait_until(lambda: lines_of(log, request_id), message=f"no log line with request_id {request_id}")


def wait_for_answered(log: Path | None, request_id: str) -> list[dict[str, Any]]:
    """The request's debug line (written once its answer has gone, so it may come after the answer)."""
    assert log is not None, "the process was started without a log file"
    path = f"/v1/encode/{MODEL} answered 200"
    return wait_until(
        lambda: [line for line in lines_of(log, request_id) if path in line["message"]],
        message=f"no {path!r} line with request_id {request_id} in {log.name}",
    )


def test_a_given_id_comes_back_and_is_on_that_requests_log_lines(json_server: ServerProcess) -> None:
    answer = httpx.post(
        f"{json_server.url}/v1/encode/{MODEL}", json=BODY, headers={"X-Request-ID": "caller-42.a:b"}, timeout=60
    )
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-request-id"] == "caller-42.a:b"
    done = wait_for_answered(json_server.log, "caller-42.a:b")
    assert done[0]["model"] == MODEL
    assert done[0]["level"] == "DEBUG" and done[0]["logger"] == "sie_server.api.middleware"
    assert {"time", "level", "logger", "message"} <= set(done[0])


def test_uvicorns_own_lines_are_json_too(json_server: ServerProcess) -> None:
    assert json_server.log is not None
    started = [line for line in json_lines(json_server.log) if "Uvicorn running on" in line["message"]]
    assert started and started[0]["logger"] == "uvicorn.error" and started[0]["level"] == "INFO"
    assert not any("Uvicorn running on" in line for line in json_server.log.read_text().splitlines() if line[:1] != "{")


def test_an_id_is_made_when_none_is_sent(json_server: ServerProcess) -> None:
    first = httpx.post(f"{json_server.url}/v1/encode/{MODEL}", json=BODY, timeout=60).headers["x-request-id"]
    second = httpx.get(f"{json_server.url}/v1/models").headers["x-request-id"]
    assert re.fullmatch(r"[0-9a-f]{32}", first) and re.fullmatch(r"[0-9a-f]{32}", second)
    assert first != second
    wait_for_lines(json_server.log, first)


@pytest.mark.parametrize("sent", ["has spaces", "x" * 129, "semi;colon", "new\u00e9"])
def test_a_malformed_id_is_replaced(json_server: ServerProcess, sent: str) -> None:
    raw = sent.encode("latin-1")
    answer = httpx.post(f"{json_server.url}/v1/encode/{MODEL}", json=BODY, headers=[(b"X-Request-ID", raw)], timeout=60)
    assert answer.status_code == 200
    given = answer.headers["x-request-id"]
    assert given != sent and re.fullmatch(r"[0-9a-f]{32}", given)
    wait_for_lines(json_server.log, given)


def test_an_error_answer_carries_the_id_too(json_server: ServerProcess) -> None:
    answer = httpx.post(f"{json_server.url}/v1/encode/no/such-model", json=BODY, headers={"X-Request-ID": "missing-1"})
    assert answer.status_code == 404
    assert answer.headers["x-request-id"] == "missing-1"


def test_a_failed_batch_is_logged_with_its_requests_id(json_server: ServerProcess) -> None:
    """The batch runs in the engine's own task, not the request's: its failure line still names the request."""
    body = {"items": [{"text": f"{POISON_ENCODE} at noon"}]}
    answer = httpx.post(f"{json_server.url}/v1/encode/{POISONED}", json=body, headers={"X-Request-ID": "poisoned-1"},
                        timeout=60)  # fmt: skip
    assert answer.status_code == 500
    assert answer.headers["x-request-id"] == "poisoned-1"
    log = json_server.log
    assert log is not None
    lines = wait_until(
        lambda: [line for line in lines_of(log, "poisoned-1") if line["level"] == "ERROR"],
        message="no error line for the failed batch",
    )
    assert lines[0]["logger"] == "sie_server.engine.scheduler"
    assert "simulated failure on a poisoned text" in lines[0]["exc_info"]


def test_a_refusal_for_a_missing_key_carries_the_id(catalog: Path) -> None:
    app = create_app(Settings(models_dir=catalog, offline=True, threads=1, api_keys=("secret-key",)))
    client = TestClient(app)  # no lifespan: the key check answers before any engine work
    refused = client.post(f"/v1/encode/{MODEL}", json=BODY, headers={"X-Request-ID": "no-key-1"})
    assert refused.status_code == 401
    assert refused.headers["x-request-id"] == "no-key-1"
    made = client.post(f"/v1/encode/{MODEL}", json=BODY).headers["x-request-id"]
    assert re.fullmatch(r"[0-9a-f]{32}", made)


def test_text_lines_name_the_request_too() -> None:
    stream = io.StringIO()
    logger = logging.getLogger("tests.request_ids.text")
    logger.propagate = False
    logger.addHandler(request_logs.handler("text", stream))
    token = request_logs.REQUEST_ID.set("text-id-1")
    try:
        logger.warning("about a request")
    finally:
        request_logs.REQUEST_ID.reset(token)
    logger.warning("about nothing")
    first, second = stream.getvalue().splitlines()
    assert first.endswith("WARNING tests.request_ids.text: about a request [request_id=text-id-1]")
    assert second.endswith("WARNING tests.request_ids.text: about nothing")


def test_the_gateway_and_the_worker_log_the_same_id(catalog: Path, tmp_path: Path) -> None:
    nats = Nats(tmp_path / "jetstream")
    flags = ("--log-format", "json", "--verbose")
    try:
        gateway_log, worker_log = tmp_path / "gateway.log", tmp_path / "worker.log"
        gateway = Gateway(catalog, nats.url, *flags, log=gateway_log)
        work = worker(catalog, nats.url, worker_log, *flags)
        with running(gateway, work):
            answer = httpx.post(f"{gateway.url}/v1/encode/{MODEL}", json=BODY,
                                headers={"X-Request-ID": "through-gw-7"}, timeout=60)  # fmt: skip
            assert answer.status_code == 200, answer.text
            assert answer.headers["x-request-id"] == "through-gw-7"
            for log in (gateway_log, worker_log):  # the gateway's line and the worker's own (its in-process call)
                wait_for_answered(log, "through-gw-7")
    finally:
        nats.stop()
