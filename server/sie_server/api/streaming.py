"""Answers that are generated: server-sent events as text arrives, or one answer at the end,
and in both cases decoding stops when the caller goes away."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence

from fastapi.responses import StreamingResponse
from pydantic import BaseModel

from sie_server.api.deadlines import next_within, within
from sie_server.api.service import TextStream
from sie_server.contract import codec, envelope
from sie_server.contract.headers import CallOptions
from sie_server.errors import DeadlineExceeded, InvalidInput, SIEError

DONE = b"data: [DONE]\n\n"


def event(answer: BaseModel | dict[str, object]) -> bytes:
    payload = answer.model_dump() if isinstance(answer, BaseModel) else answer
    return b"data: " + codec.dumps_json(payload) + b"\n\n"


def sse(
    stream: TextStream,
    chunk: Callable[[str], BaseModel | None],
    final: Callable[[TextStream], Sequence[BaseModel]],
    call: CallOptions,
    shape: envelope.Shape = envelope.Shape.SIE,
) -> StreamingResponse:
    """``data: <chunk>`` per piece of text (none where ``chunk`` answers None), then the final events,
    then ``data: [DONE]``. A failure part way (or the caller's deadline passing) is an error event in
    the route's envelope. Closing the response (the caller left) cancels the generation."""

    async def events() -> AsyncIterator[bytes]:
        finished = False
        try:
            deltas = stream.deltas()
            while True:
                try:
                    delta = await next_within(deltas, call)
                except StopAsyncIteration:
                    break
                piece = chunk(delta)
                if piece is not None:  # None: this piece is held for the final events
                    yield event(piece)
            for last in final(stream):
                yield event(last)
            finished = True
        except SIEError as exc:
            finished = True
            yield event(envelope.error_body(exc, shape))
        finally:
            if not finished:
                stream.cancel()
        yield DONE

    return StreamingResponse(events(), media_type=codec.SSE, headers={"Cache-Control": "no-cache"})


async def whole(stream: TextStream, call: CallOptions) -> None:
    """Wait for the whole answer; stop decoding if the caller goes away or its deadline passes first."""
    try:
        async with within(call):
            await _whole(stream, call)
    except DeadlineExceeded:
        stream.cancel()
        raise


async def _whole(stream: TextStream, call: CallOptions) -> None:
    finished = asyncio.ensure_future(stream.finish())
    watcher = asyncio.ensure_future(call.disconnected()) if call.disconnected else None
    try:
        await asyncio.wait([t for t in (finished, watcher) if t is not None], return_when=asyncio.FIRST_COMPLETED)
    finally:
        if watcher is not None:
            watcher.cancel()
    if not finished.done():
        stream.cancel()
        finished.cancel()
        raise InvalidInput("client disconnected")
    finished.result()
