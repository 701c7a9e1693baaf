"""Per-request plumbing around the routes: the access log switch and the request metrics middleware."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from sie_server.api.middleware import RequestMetrics
from sie_server.observability.metrics import Metrics
from sie_server.observability.requests import RequestCounter
from sie_server.serving import uvicorn_config
from sie_server.settings import Settings


def test_access_log_only_with_verbose() -> None:
    app = FastAPI()
    assert uvicorn_config(app, Settings()).access_log is False
    assert uvicorn_config(app, Settings(verbose=True)).access_log is True


def route(status: int, code: bytes | None = None) -> Any:
    """A stand-in route: tags the request like ``resolve`` does and answers ``status``."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        scope.setdefault("state", {}).update(sie_model="m/one", sie_task="encode")
        headers = [(b"content-type", b"application/json")] + ([(b"x-sie-error-code", code)] if code else [])
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": b"{}"})

    return app


async def test_request_metrics_count_each_outcome_by_status_and_error_code() -> None:
    metrics = Metrics()
    state = RequestCounter(metrics)
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    answers = [(200, None), (200, None), (400, b"INVALID_INPUT"), (503, b"QUEUE_FULL"), (500, None)]
    for status, code in answers:
        middleware = RequestMetrics(route(status, code), state)
        await middleware({"type": "http", "path": "/v1/encode/m/one", "method": "POST"}, receive, send)
    counts = {
        outcome: metrics.registry.get_sample_value(
            "sie_requests_total", {"model": "m/one", "task": "encode", "status": outcome}
        )
        for outcome in ("ok", "INVALID_INPUT", "QUEUE_FULL", "error")
    }
    assert counts == {"ok": 2.0, "INVALID_INPUT": 1.0, "QUEUE_FULL": 1.0, "error": 1.0}
    duration = {"model": "m/one", "task": "encode"}
    assert metrics.registry.get_sample_value("sie_request_duration_seconds_count", duration) == len(answers)
    assert state.inflight == 0
    assert [m["status"] for m in sent if m["type"] == "http.response.start"] == [s for s, _ in answers]
