# Generated from sdk/sie_sdk/_async_transport.py by scripts/gen_sync_client.py; do not edit.
# Edit _async_transport.py, then regenerate with `make sync-client`.
"""The blocking client's I/O: one call's attempts sent with ``httpx.Client.send`` and ``time.sleep``, and
a streamed answer's server-sent events read line by line.

Generated from _async_transport.py by ``scripts/gen_sync_client.py``: edit that file, then run ``make sync-client``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx

from ._results import SSEDecoder
from ._retry import PreparedRequest, RetryState
from .errors import SIEConnectionError, translate_transport_errors
from .types import GenerateChunk


def send(http: httpx.Client, prepared: PreparedRequest[Any]) -> httpx.Response:
    """Send with retries until a 2xx answer (returned) or a typed error (raised)."""
    state = RetryState(prepared)
    while True:
        try:
            with translate_transport_errors():
                response = http.send(state.next_request(), stream=prepared.stream)
                if not response.is_success:
                    response.read()
        except SIEConnectionError as error:
            delay = state.after_transport_error(error)
        else:
            wait = state.after_response(response)
            if wait is None:
                return response
            delay = wait
        time.sleep(delay)


def events(response: httpx.Response) -> Iterator[GenerateChunk]:
    """The chunks of a streamed generate answer, up to the server's ``[DONE]``; the response is closed after."""
    decoder = SSEDecoder()
    try:
        with translate_transport_errors():
            for line in response.iter_lines():
                chunk = decoder.feed(line)
                if chunk is not None:
                    yield chunk
                if decoder.done:
                    return
        decoder.finish()
    finally:
        response.close()
