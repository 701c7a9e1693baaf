"""``sie-server mcp --url http://host:port [--api-key KEY]``: the MCP tools on stdin/stdout, each call
sent to a running server or gateway through the Python SDK. Logs go to stderr (stdout is the protocol)."""

from __future__ import annotations

import anyio

from sie_sdk import SIEAsyncClient
from sie_server.mcp.sdk_backend import SDKBackend


async def serve(url: str | None, api_key: str | None) -> None:
    from mcp.server.stdio import stdio_server

    from sie_server.mcp.handlers import build_server

    async with SIEAsyncClient(url, api_key=api_key) as client:
        server = build_server(SDKBackend(client))
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())


def run(url: str | None, api_key: str | None) -> int:
    anyio.run(serve, url, api_key)
    return 0
