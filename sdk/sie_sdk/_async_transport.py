"""The asyncio client's I/O: one call's attempts sent with ``httpx.AsyncClient.send`` and ``asyncio.sleep``, and
a streamed answer's server-sent events read line by line.

``_sync_transport.py`` is generated from this file: edit here, then run ``make sync-client``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx

from ._results import SSEDecoder
from ._retry import PreparedRequest, RetryState
from .errors import SIEConnectionError, translate_transport_errors
from .types import GenerateChunk


async def send(http: httpx.AsyncClient, prepared: PreparedRequest[Any]) -> httpx.Response:
    """Send with retries until a 2xx answer (returned) or a typed error (raised)."""
    state = RetryState(prepared)
    while True:
        try:
            with translate_transport_errors():
                response = await http.send(state.next_request(), stream=prepared.stream)
                if not response.is_success:
                    await response.aread()
        except SIEConnectionError as error:
            delay = state.after_transport_error(error)
        else:
            wait = state.after_response(response)
            if wait is None:
                return response
            delay = wait
        await asyncio.sleep(delay)


async def events(response: httpx.Response) -> AsyncIterator[GenerateChunk]:
    """The chunks of a streamed generate answer, up to the server's ``[DONE]``; the response is closed after."""
    decoder = SSEDecoder()
    try:
        with translate_transport_errors():
            async for line in response.aiter_lines():
                chunk = decoder.feed(line)
                if chunk is not None:
                    yield chunk
                if decoder.done:
                    return
        decoder.finish()
    finally:
        await response.aclose()
