"""Calling the worker's own ASGI app in-process, with the response body as it is produced.

(httpx's ASGI transport collects the whole body first, which would turn a streamed
generation into one late answer.)
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any


@dataclass
class AppResponse:
    status: int
    headers: dict[str, str]
    parts: AsyncGenerator[bytes, None]  # the body, part by part as the app sends it

    async def read(self) -> bytes:
        return b"".join([part async for part in self.parts])


async def call_app(app: Any, path: str, body: bytes, headers: dict[str, str]) -> AppResponse:
    """POST ``body`` to ``path``; returns once the app has started its response."""
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
        "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
        "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()],
        "client": ("127.0.0.1", 0), "server": ("worker", 80),
    }  # fmt: skip
    sent: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    finished = asyncio.Event()
    request = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        if request:
            return request.pop()
        await finished.wait()  # the caller stopped reading: tell the app its client left
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        await sent.put(message)

    async def run() -> None:
        try:
            await app(scope, receive, send)
        finally:
            await sent.put({"type": "done"})

    task = asyncio.get_running_loop().create_task(run())
    start = await sent.get()
    if start["type"] != "http.response.start":
        await task  # raises what the app raised
        raise RuntimeError(f"the app ended without a response ({start['type']})")
    response_headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in start.get("headers", [])}

    async def parts() -> AsyncGenerator[bytes, None]:
        try:
            while True:
                message = await sent.get()
                if message["type"] == "done":
                    return
                if message["type"] == "http.response.body":
                    if message.get("body"):
                        yield bytes(message["body"])
                    if not message.get("more_body", False):
                        return
        finally:
            finished.set()
            with contextlib.suppress(Exception):
                await task

    return AppResponse(int(start["status"]), response_headers, parts())
