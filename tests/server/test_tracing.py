"""OpenTelemetry spans: request -> queue wait -> batch -> inference, the caller's traceparent continued,
gateway -> worker in one trace; and nothing set up (nor imported) when OTEL_EXPORTER_OTLP_ENDPOINT is unset."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from sie_server.compose import create_app
from sie_server.observability import tracing
from sie_server.settings import Settings
from tests.helpers.catalog import tiny_embedder, tiny_llm, write_config
from tests.helpers.cluster import Gateway, Nats, running, worker
from tests.helpers.server import REPO, free_port, pythonpath
from tests.helpers.tiny_models import build_bert_embedder, build_tiny_llm
from tests.helpers.wait import wait_until

MODEL = "test/tiny-embedder"
LLM = "test/tiny-llm"
CALLER_TRACE = "0af7651916cd43dd8448eb211c80319c"
CALLER_SPAN = "b7ad6b7169203331"


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tracing-catalog")
    write_config(folder, tiny_embedder(MODEL, build_bert_embedder(folder / "embedder")))
    return folder


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    assert tracing.setup("sie-server", environ={}, exporter=exporter)
    yield exporter
    tracing.shutdown()


def _client(catalog: Path) -> TestClient:
    return TestClient(create_app(Settings(models_dir=catalog, offline=True, threads=1, preload=[MODEL])))


def test_a_request_yields_request_queue_batch_and_inference_spans(catalog: Path, spans: InMemorySpanExporter) -> None:
    traceparent = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"
    with _client(catalog) as client:
        answer = client.post(f"/v1/encode/{MODEL}", json={"items": [{"text": "a"}, {"text": "b c d"}]},
                             headers={"traceparent": traceparent, "X-Request-ID": "traced-1"})  # fmt: skip
        assert answer.status_code == 200, answer.text
    finished = spans.get_finished_spans()
    requests = [s for s in finished if s.kind == SpanKind.SERVER and s.name == f"POST /v1/encode/{MODEL}"]
    assert len(requests) == 1
    request = requests[0]
    assert request.resource.attributes["service.name"] == "sie-server"
    assert f"{request.context.trace_id:032x}" == CALLER_TRACE  # the caller's trace is continued
    assert request.parent is not None and f"{request.parent.span_id:016x}" == CALLER_SPAN
    assert request.attributes is not None
    assert request.attributes["sie.request_id"] == "traced-1"
    assert request.attributes["http.response.status_code"] == 200
    waits = [s for s in finished if s.name == "queue wait"]
    assert waits and all(w.parent is not None and w.parent.span_id == request.context.span_id for w in waits)
    assert all(w.end_time is not None and w.start_time is not None and w.end_time >= w.start_time for w in waits)
    batches = [s for s in finished if s.name == "batch" and any(link.context == request.context for link in s.links)]
    assert batches, "no batch span links to the request's span"
    batch_ids = {b.context.span_id for b in batches}
    inference = [s for s in finished if s.name == "inference" and s.parent is not None]
    assert any(s.parent is not None and s.parent.span_id in batch_ids for s in inference)


def test_a_generation_yields_queue_wait_and_decode_spans_under_its_request(
    tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    write_config(tmp_path, tiny_llm(LLM, build_tiny_llm(tmp_path / "llm")))
    client = TestClient(create_app(Settings(models_dir=tmp_path, offline=True, threads=1, preload=[LLM])))
    with client:
        answer = client.post(f"/v1/generate/{LLM}", json={"prompt": "hello", "max_new_tokens": 5})
        assert answer.status_code == 200, answer.text
    finished = spans.get_finished_spans()
    [request] = [s for s in finished if s.kind == SpanKind.SERVER and s.name == f"POST /v1/generate/{LLM}"]
    under = {s.name: s for s in finished if s.parent is not None and s.parent.span_id == request.context.span_id}
    wait, decode = under["queue wait"], under["decode"]
    assert wait.start_time is not None and wait.end_time is not None and decode.end_time is not None
    assert wait.start_time <= wait.end_time == decode.start_time <= decode.end_time <= (request.end_time or 0)
    assert decode.attributes is not None
    assert decode.attributes["sie.completion_tokens"] == answer.json()["usage"]["completion_tokens"]


def test_without_the_endpoint_variable_no_tracer_is_set_up(catalog: Path) -> None:
    assert tracing.setup("sie-server", environ={}) is False
    assert not tracing.enabled()
    with _client(catalog) as client:
        answer = client.post(f"/v1/encode/{MODEL}", json={"items": [{"text": "a"}]})
    assert answer.status_code == 200
    assert tracing.current() is None
    assert "x-request-id" in answer.headers


def test_a_server_without_the_variable_imports_no_opentelemetry(catalog: Path) -> None:
    """A served request, in a fresh interpreter, with the variable unset: the opentelemetry SDK is never
    imported (FastAPI itself imports the opentelemetry API, whose tracer is a no-op without a provider)."""
    script = f"""
import sys
from fastapi.testclient import TestClient
from sie_server.compose import create_app
from sie_server.observability import tracing
from sie_server.settings import Settings
assert not tracing.setup("sie-server")
app = create_app(Settings(models_dir={str(catalog)!r}, offline=True, threads=1))
with TestClient(app) as client:
    assert client.post("/v1/encode/{MODEL}", json={{"items": [{{"text": "a"}}]}}).status_code == 200
print(sorted(m for m in sys.modules if m.startswith("opentelemetry.sdk")))
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run([sys.executable, "-c", script], env={**env, "PYTHONPATH": pythonpath()}, cwd=REPO,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"


def _lines(log: Path) -> list[dict[str, Any]]:
    found = []
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            try:
                found.append(json.loads(line))
            except ValueError:
                continue
    return found


def _trace_of(log: Path, request_id: str) -> str | None:
    for line in _lines(log):
        # the request's own line (a line about its batch carries the batch's trace)
        if line.get("request_id") == request_id and line.get("trace_id") and "answered" in line["message"]:
            return str(line["trace_id"])
    return None


def test_gateway_and_worker_spans_share_the_trace(catalog: Path, tmp_path: Path) -> None:
    """Each process exports its spans to stdout (OTEL_TRACES_EXPORTER=console; nothing listens at the
    endpoint); their log lines about the request carry the trace id, which must be the same."""
    nats = Nats(tmp_path / "jetstream")
    otel = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{free_port()}", "OTEL_TRACES_EXPORTER": "console"}
    flags = ("--log-format", "json", "--verbose")
    try:
        gateway_log, worker_log = tmp_path / "gateway.log", tmp_path / "worker.log"
        gateway = Gateway(catalog, nats.url, *flags, env=otel, log=gateway_log)
        work = worker(catalog, nats.url, worker_log, *flags, env=otel)
        with running(gateway, work):
            import httpx

            answer = httpx.post(f"{gateway.url}/v1/encode/{MODEL}", json={"items": [{"text": "hi"}]},
                                headers={"X-Request-ID": "traced-cluster"}, timeout=60)  # fmt: skip
            assert answer.status_code == 200, answer.text
            at_gateway = wait_until(lambda: _trace_of(gateway_log, "traced-cluster"), message="gateway trace id")
            at_worker = wait_until(lambda: _trace_of(worker_log, "traced-cluster"), message="worker trace id")
            assert at_gateway == at_worker
            spans = [line for line in _lines(worker_log) if line.get("name") == "batch"]
            assert spans, "the worker printed no batch span"
    finally:
        nats.stop()
