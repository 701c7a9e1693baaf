"""Streaming generate: server-sent events up to ``[DONE]``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator

import httpx
import pytest
from sdk_fakes import Api, FakeServer, error_response

from sie_sdk import InferenceError, InvalidInputError, ProtocolError, RetryPolicy, SIEConnectionError

GEN_MODEL = "Qwen/Qwen2.5-0.5B-Instruct"


class BrokenStream(httpx.SyncByteStream, httpx.AsyncByteStream):
    """Sends some events, then the connection drops."""

    def __init__(self, before: bytes) -> None:
        self.before = before
        self.closed = False

    def __iter__(self) -> Iterator[bytes]:
        yield self.before
        raise httpx.ReadError("connection reset by peer")

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.before
        raise httpx.ReadError("connection reset by peer")

    def close(self) -> None:
        self.closed = True

    async def aclose(self) -> None:
        self.closed = True


async def test_stream_yields_chunks_until_done(api: Api, fake_server: FakeServer) -> None:
    chunks = await api.stream(GEN_MODEL, "Say hello", max_new_tokens=4)

    rec = fake_server.requests[-1]
    assert rec.path == f"/v1/generate/{GEN_MODEL}"
    assert rec.headers["accept"] == "text/event-stream"
    assert rec.body == {"prompt": "Say hello", "max_new_tokens": 4, "stream": True}
    assert [chunk["text"] for chunk in chunks] == ["Hel", "lo", ""]
    assert chunks[-1]["finish_reason"] == "stop"
    assert "".join(chunk["text"] for chunk in chunks) == "Hello"


async def test_events_after_done_are_ignored(api: Api, fake_server: FakeServer) -> None:
    fake_server.stream_body = b'data: {"text": "a"}\n\ndata: [DONE]\n\ndata: {"text": "late"}\n\n'
    assert [chunk["text"] for chunk in await api.stream(GEN_MODEL, "p")] == ["a"]


async def test_crlf_and_missing_blank_lines(api: Api, fake_server: FakeServer) -> None:
    fake_server.stream_body = b'event: message\r\ndata:{"text": "a"}\r\ndata: {"text": "b"}\r\ndata: [DONE]'
    assert [chunk["text"] for chunk in await api.stream(GEN_MODEL, "p")] == ["a", "b"]


async def test_stream_cut_before_done_is_a_connection_error(api: Api, fake_server: FakeServer) -> None:
    fake_server.stream_body = b'data: {"text": "a"}\n\n'
    with pytest.raises(SIEConnectionError, match=r"\[DONE\]"):
        await api.stream(GEN_MODEL, "p")


async def test_connection_dropping_mid_stream(api: Api, fake_server: FakeServer) -> None:
    fake_server.stream_body = BrokenStream(b'data: {"text": "a"}\n\n')
    with pytest.raises(SIEConnectionError) as caught:
        await api.stream(GEN_MODEL, "p")
    assert isinstance(caught.value.__cause__, httpx.ReadError)
    assert fake_server.stream_body.closed


async def test_error_event_raises_its_typed_error(api: Api, fake_server: FakeServer) -> None:
    fake_server.stream_body = (
        b'data: {"text": "a"}\n\ndata: {"detail": {"code": "INFERENCE_ERROR", "message": "oom"}}\n\n'
    )
    with pytest.raises(InferenceError, match="oom") as caught:
        await api.stream(GEN_MODEL, "p")
    assert caught.value.status_code == 500


async def test_bad_event_data_is_a_protocol_error(api: Api, fake_server: FakeServer) -> None:
    fake_server.stream_body = b"data: not json\n\n"
    with pytest.raises(ProtocolError):
        await api.stream(GEN_MODEL, "p")


async def test_error_answer_raises_when_the_stream_is_opened(api: Api, fake_server: FakeServer) -> None:
    message = f"model {GEN_MODEL} does not support generate"
    fake_server.queued.append(error_response(400, "INVALID_INPUT", message))
    with pytest.raises(InvalidInputError, match="does not support generate"):
        await api.generate(GEN_MODEL, "p", stream=True)  # before any iteration
    assert fake_server.attempts == 1


async def test_opening_a_stream_is_retried(make_api: Callable[..., Api], fake_server: FakeServer) -> None:
    fake_server.queued.append(error_response(503, "MODEL_LOADING", "loading", retry_after=0.01))
    chunks = await make_api(retry=RetryPolicy(default_delay_s=0.01)).stream(GEN_MODEL, "p")
    assert len(chunks) == 3 and fake_server.attempts == 2
