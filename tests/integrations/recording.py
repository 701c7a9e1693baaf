"""httpx transports that pass requests through to the real server and remember them."""

from __future__ import annotations

from typing import Any

import httpx
import msgpack


def body_of(request: httpx.Request) -> dict[str, Any]:
    content = request.content
    if request.headers.get("content-type", "").startswith("application/msgpack"):
        return dict(msgpack.unpackb(content, raw=False))
    import json

    return dict(json.loads(content))


class Recording(httpx.BaseTransport):
    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.requests: list[httpx.Request] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.read()
        self.requests.append(request)
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()

    def bodies(self, path_part: str = "") -> list[dict[str, Any]]:
        return [body_of(r) for r in self.requests if path_part in r.url.path and r.content]


class AsyncRecording(httpx.AsyncBaseTransport):
    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.requests: list[httpx.Request] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await request.aread()
        self.requests.append(request)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()

    def bodies(self, path_part: str = "") -> list[dict[str, Any]]:
        return [body_of(r) for r in self.requests if path_part in r.url.path and r.content]
