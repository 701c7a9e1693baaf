"""Plain ASGI middlewares (they must not wrap ``receive``: disconnects stay visible to routes)."""

from __future__ import annotations

import hmac
import logging
import time
from typing import Any, Protocol

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sie_server.api.errors import error_response
from sie_server.api.keys import Access, is_work
from sie_server.api.quota import KeyQuota, open_ticket
from sie_server.contract import headers as h
from sie_server.errors import Forbidden, SIEError
from sie_server.observability import logging as request_logs
from sie_server.observability import tracing

log = logging.getLogger(__name__)
_REQUEST_ID = h.REQUEST_ID.encode()


class RequestRecorder(Protocol):
    def started(self) -> None: ...

    def finished(self, model: str | None, task: str | None, status: str, seconds: float) -> None: ...


class RequestMetrics:
    """Gives every HTTP request its id (the caller's ``X-Request-ID`` if well formed, else a new one),
    current for the request's log lines and returned in the answer's ``X-Request-ID``; its span when
    tracing is on; and counts ``/v1/`` and ``/v2/`` requests by model, task and outcome (``ok``, an
    error code, ``client_gone``)."""

    def __init__(self, app: ASGIApp, recorder: RequestRecorder):
        self.app = app
        self.recorder = recorder

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = request_logs.accept_request_id(_header(scope, _REQUEST_ID))
        token = request_logs.REQUEST_ID.set(request_id)  # (the model's is set by the route, in this task)
        try:
            if tracing.enabled():
                with tracing.request_span(scope["method"], scope["path"], scope.get("headers", ()), request_id) as span:
                    await self._handle(scope, receive, send, request_id, span)
            else:
                await self._handle(scope, receive, send, request_id, None)
        finally:
            request_logs.REQUEST_ID.reset(token)

    async def _handle(self, scope: Scope, receive: Receive, send: Send, request_id: str, span: Any) -> None:
        work = is_work(scope["method"], scope["path"])
        started = time.perf_counter()
        outcome: dict[str, Any] = {"status": "client_gone", "code": 0}
        id_header = (_REQUEST_ID, request_id.encode())

        async def capture(message: Message) -> None:
            if message["type"] == "http.response.start":
                outcome["code"] = status = message["status"]
                if status < 400:
                    outcome["status"] = "ok"
                else:
                    code = dict(message.get("headers", [])).get(h.ERROR_CODE.encode())
                    outcome["status"] = code.decode() if code else "error"
                if span is not None:
                    tracing.set_status(span, status, (scope.get("state") or {}).get("sie_model"))
                message = {**message, "headers": [*message.get("headers", []), id_header]}
            await send(message)

        if work:
            self.recorder.started()
        try:
            await self.app(scope, receive, capture)
        finally:
            tags = scope.get("state") or {}
            seconds = time.perf_counter() - started
            if work:
                self.recorder.finished(tags.get("sie_model"), tags.get("sie_task"), outcome["status"], seconds)
            if log.isEnabledFor(logging.DEBUG):
                log.debug("%s %s answered %s (%s) in %.1f ms", scope["method"], scope["path"], outcome["code"],
                          outcome["status"], seconds * 1000, extra={"model": tags.get("sie_model")})  # fmt: skip


async def refuse(error: SIEError, scope: Scope, receive: Receive, send: Send) -> None:
    """An error answer from a middleware outside ``RequestMetrics`` (a missing key), with the request's id."""
    response = error_response(error, scope["path"])
    response.headers[h.REQUEST_ID] = request_logs.accept_request_id(_header(scope, _REQUEST_ID))
    await response(scope, receive, send)


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return bytes(value).decode("latin-1")
    return None


class _Refuse:
    """Answers work routes with an error when ``refusal`` says so, else passes the request on."""

    def __init__(self, app: ASGIApp):
        self.app = app

    def refusal(self, scope: Scope) -> SIEError | None:
        raise NotImplementedError

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and is_work(scope["method"], scope["path"]):
            refused = self.refusal(scope)
            if refused is not None:
                await refuse(refused, scope, receive, send)
                return
        await self.app(scope, receive, send)


class QueueOnly(_Refuse):
    """On a queue worker, work routes answer only the worker's own in-process calls (which carry
    ``token``); direct HTTP work is refused so every request goes through the gateway."""

    def __init__(self, app: ASGIApp, token: str):
        super().__init__(app)
        self.token = token.encode()

    def refusal(self, scope: Scope) -> SIEError | None:
        if scope["method"] != "POST":
            return None
        sent = dict(scope.get("headers", [])).get(h.QUEUE_TOKEN.encode(), b"")
        if hmac.compare_digest(sent, self.token):
            return None
        return Forbidden("this worker takes work from its queue only; send requests to the gateway")


class ApiKeys:
    """API and admin keys (``api/keys.py``) and, with a per-key limit, each work request's quota
    ticket (``api/quota.py``), held until its whole answer is sent. A queue worker's own
    in-process calls carry its queue token and pass without a key (the gateway checked it)."""

    def __init__(self, app: ASGIApp, access: Access, quota: KeyQuota | None = None, queue_token: str | None = None):
        self.app = app
        self.access = access
        self.quota = quota
        self.queue_token = queue_token.encode() if queue_token else None
        self.idle = not access.enabled and quota is None  # no keys, no limit: nothing to check per request

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.idle or scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers", []))
        if self.queue_token and hmac.compare_digest(headers.get(h.QUEUE_TOKEN.encode(), b""), self.queue_token):
            await self.app(scope, receive, send)
            return
        verdict = self.access.check(scope["method"], scope["path"], headers)
        if verdict.refusal is not None:
            await refuse(verdict.refusal, scope, receive, send)
            return
        if self.quota is None or scope["method"] != "POST" or not is_work(scope["method"], scope["path"]):
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        caller = verdict.caller or f"client-{client[0] if client else 'unknown'}"
        with open_ticket(self.quota, caller):
            await self.app(scope, receive, send)


class HeadAsGet:
    """``HEAD`` wherever ``GET`` works: the GET route answers, and the body is left out."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def headers_only(message: Message) -> None:
            if message["type"] == "http.response.body":
                if not message.get("more_body", False):
                    await send({"type": "http.response.body", "body": b""})
                return
            await send(message)

        await self.app({**scope, "method": "GET"}, receive, headers_only)
