"""``/mcp`` on the server and the gateway: MCP's streamable HTTP over the routes' own ``Service``.

Stateless (each POST is answered on its own, in JSON), so any gateway replica answers any call and
there is no session to lose. Behind the same keys middleware as ``/v1/`` (``api/keys.py``); not in
the OpenAPI spec (it is one JSON-RPC endpoint, not REST). The MCP SDK is imported, and its session
manager started, on the first request; the app's lifespan stops it.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from starlette.types import Receive, Scope, Send

from sie_server.api.service import Service
from sie_server.mcp.allowed_hosts import allowed_hosts

if TYPE_CHECKING:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

log = logging.getLogger(__name__)
A = TypeVar("A")
Lifespan = Callable[[A], AbstractAsyncContextManager[Any]]


class McpMount:
    """The ASGI app at ``/mcp``."""

    def __init__(self, service: Service, *, allowed_hosts: Sequence[str] = ()):
        self.service = service
        self.allowed_hosts = tuple(allowed_hosts)  # besides loopback (mcp/allowed_hosts.py)
        self._manager: StreamableHTTPSessionManager | None = None
        self._runner: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self._stop = asyncio.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        manager = self._manager or await self._start()
        await manager.handle_request(scope, receive, send)

    async def _start(self) -> StreamableHTTPSessionManager:
        async with self._lock:
            if self._manager is not None:
                return self._manager
            from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
            from mcp.server.transport_security import TransportSecuritySettings

            from sie_server.mcp.handlers import build_server
            from sie_server.mcp.service_backend import ServiceBackend

            allowed = allowed_hosts(self.allowed_hosts)
            manager = StreamableHTTPSessionManager(
                build_server(ServiceBackend(self.service)),
                json_response=True,
                stateless=True,
                max_request_body_size=self.service.limits.max_body_bytes,
                security_settings=TransportSecuritySettings(
                    enable_dns_rebinding_protection=allowed.enforced,
                    allowed_hosts=list(allowed.hosts),
                    allowed_origins=list(allowed.origins),
                ),
            )
            if not log.isEnabledFor(logging.DEBUG):  # the SDK logs a line per request at INFO; --verbose keeps them
                logging.getLogger("mcp").setLevel(logging.WARNING)
            ready = asyncio.Event()
            # a context of its own: not this first request's (its id on every line, its quota ticket)
            self._runner = asyncio.create_task(self._run(manager, ready), context=contextvars.Context())
            waiting = asyncio.ensure_future(ready.wait())
            await asyncio.wait([waiting, self._runner], return_when=asyncio.FIRST_COMPLETED)
            if not ready.is_set():  # the manager failed to start: its exception, to this request
                waiting.cancel()
                await self._runner
                raise RuntimeError("the MCP session manager stopped before it started")
            self._manager = manager
            return manager

    async def _run(self, manager: StreamableHTTPSessionManager, ready: asyncio.Event) -> None:
        async with manager.run():  # its task group serves every request; entered and left in this task
            ready.set()
            await self._stop.wait()

    def around(self, lifespan: Lifespan[A] | None) -> Lifespan[A]:
        """The app's lifespan, and the MCP session manager stopped after it, if it was started."""

        @asynccontextmanager
        async def wrapped(app: A) -> AsyncIterator[None]:
            try:
                if lifespan is None:
                    yield
                else:
                    async with lifespan(app):
                        yield
            finally:
                if self._runner is not None:
                    self._stop.set()
                    await self._runner

        return wrapped
