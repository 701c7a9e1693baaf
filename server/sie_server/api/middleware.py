"""Request metrics as a plain ASGI middleware (it must not wrap ``receive``: disconnects stay visible)."""

from __future__ import annotations

import hmac
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sie_server.api.state import ServerState


class RequestMetrics:
    def __init__(self, app: ASGIApp, state: ServerState):
        self.app = app
        self.state = state
        # (model, task, status) -> its request counter and (model, task) latency histogram: the
        # label lookups (validation and a lock each) done once, not on every request
        self._series: dict[tuple[str, str, str], tuple[Any, Any]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/v1/"):
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        outcome: dict[str, Any] = {"status": "client_gone"}

        async def capture(message: Message) -> None:
            if message["type"] == "http.response.start":
                if message["status"] < 400:
                    outcome["status"] = "ok"
                else:
                    code = dict(message.get("headers", [])).get(b"x-sie-error-code")
                    outcome["status"] = code.decode() if code else "error"
            await send(message)

        self.state.inflight += 1
        try:
            await self.app(scope, receive, capture)
        finally:
            self.state.inflight -= 1
            tags = scope.get("state") or {}
            model, task = tags.get("sie_model"), tags.get("sie_task")
            if model and task:
                requests, duration = self._series_for(model, task, outcome["status"])
                requests.inc()
                duration.observe(time.perf_counter() - started)

    def _series_for(self, model: str, task: str, status: str) -> tuple[Any, Any]:
        key = (model, task, status)
        series = self._series.get(key)
        if series is None:
            metrics = self.state.metrics
            series = (metrics.requests.labels(*key), metrics.request_duration.labels(model, task))
            self._series[key] = series
        return series


class QueueOnly:
    """On a queue worker, work routes answer only the worker's own in-process calls (which carry
    ``token``); direct HTTP work is refused so every request goes through the gateway."""

    HEADER = b"x-sie-queue-token"

    def __init__(self, app: ASGIApp, token: str):
        self.app = app
        self.token = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/v1/") and scope["method"] == "POST":
            sent = dict(scope.get("headers", [])).get(self.HEADER, b"")
            if not hmac.compare_digest(sent, self.token):
                from sie_server.api.errors import error_response

                response = error_response(
                    "FORBIDDEN", "this worker takes work from its queue only; send requests to the gateway", 403
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
