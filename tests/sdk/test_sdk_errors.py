"""Every error answer and transport failure becomes one typed exception."""

from __future__ import annotations

import httpx
import pytest
from sdk_fakes import MODEL, Api, FakeServer, error_response

from sie_sdk import (
    NO_RETRY,
    APIError,
    InferenceError,
    InvalidInputError,
    ModelLoadFailedError,
    ModelLoadingError,
    ModelNotFoundError,
    PayloadTooLargeError,
    ProtocolError,
    QueueFullError,
    RequestError,
    ResourceExhaustedError,
    ServerError,
    SIEConnectionError,
    SIEError,
    SIETimeoutError,
)
from sie_sdk._error_answers import parse_retry_after

CASES = [
    (400, "INVALID_INPUT", InvalidInputError, RequestError),
    (413, "INVALID_INPUT", PayloadTooLargeError, InvalidInputError),
    (404, "MODEL_NOT_FOUND", ModelNotFoundError, RequestError),
    (503, "MODEL_LOADING", ModelLoadingError, ServerError),
    (502, "MODEL_LOAD_FAILED", ModelLoadFailedError, ServerError),
    (503, "RESOURCE_EXHAUSTED", ResourceExhaustedError, ServerError),
    (503, "QUEUE_FULL", QueueFullError, ServerError),
    (500, "INFERENCE_ERROR", InferenceError, ServerError),
    (418, "I_AM_A_TEAPOT", RequestError, APIError),
    (504, "GATEWAY_SLOW", ServerError, APIError),
]


@pytest.mark.parametrize(("status", "code", "cls", "parent"), CASES)
async def test_error_codes_map_to_exceptions(
    make_api, fake_server: FakeServer, status: int, code: str, cls: type[APIError], parent: type[APIError]
) -> None:
    api = make_api(retry=NO_RETRY)
    retry_after = 2.5 if status == 503 else None
    fake_server.queued.append(error_response(status, code, f"{code} happened", retry_after=retry_after))

    with pytest.raises(cls) as caught:
        await api.encode(MODEL, "x")

    error = caught.value
    assert type(error) is cls
    assert isinstance(error, parent) and isinstance(error, SIEError)
    assert error.status_code == status
    assert error.code == code
    assert error.message == f"{code} happened"
    assert error.retry_after == retry_after
    assert code in str(error) and str(status) in str(error)


async def test_body_that_is_not_the_envelope_gives_its_text(make_api, fake_server: FakeServer) -> None:
    fake_server.queued.append(httpx.Response(502, text="<html>Bad gateway</html>"))
    with pytest.raises(ServerError) as caught:
        await make_api().encode(MODEL, "x")
    assert type(caught.value) is ServerError
    assert caught.value.code is None
    assert caught.value.message == "<html>Bad gateway</html>"


async def test_code_from_header_when_body_lacks_it(make_api, fake_server: FakeServer) -> None:
    headers = {"X-SIE-Error-Code": "MODEL_NOT_FOUND"}
    fake_server.queued.append(httpx.Response(404, text="gone", headers=headers))
    with pytest.raises(ModelNotFoundError, match="gone"):
        await make_api().get_model(MODEL)


async def test_fastapi_style_string_detail(make_api, fake_server: FakeServer) -> None:
    fake_server.queued.append(httpx.Response(405, json={"detail": "Method Not Allowed"}))
    with pytest.raises(RequestError, match="Method Not Allowed"):
        await make_api().list_models()


async def test_undecodable_success_body_is_a_protocol_error(make_api, fake_server: FakeServer) -> None:
    fake_server.queued.append(httpx.Response(200, content=b"\xc1", headers={"content-type": "application/msgpack"}))
    with pytest.raises(ProtocolError):
        await make_api().encode(MODEL, "x")


async def test_answer_with_wrong_item_count_is_a_protocol_error(make_api, fake_server: FakeServer) -> None:
    fake_server.queued.append(httpx.Response(200, json={"model": MODEL, "items": []}))
    with pytest.raises(ProtocolError, match="expected 1 result"):
        await make_api(wire="json").encode(MODEL, "x")


@pytest.mark.parametrize(
    ("raised", "expected"),
    [
        (httpx.ConnectError("connection refused"), SIEConnectionError),
        (httpx.ReadError("connection reset"), SIEConnectionError),
        (httpx.RemoteProtocolError("server hung up"), SIEConnectionError),
        (httpx.ReadTimeout("read timed out"), SIETimeoutError),
        (httpx.ConnectTimeout("connect timed out"), SIETimeoutError),
    ],
)
async def test_transport_errors_become_connection_errors(
    api: Api, fake_server: FakeServer, raised: Exception, expected: type[SIEError]
) -> None:
    fake_server.queued.append(raised)
    with pytest.raises(expected) as caught:
        await api.encode(MODEL, "x")
    assert type(caught.value) is expected
    assert caught.value.__cause__ is raised
    assert fake_server.attempts == 1  # transport failures are not retried by default


@pytest.mark.parametrize(
    ("header", "seconds"),
    [("3", 3.0), ("0.05", 0.05), ("-1", 0.0), ("soon", None), (None, None), ("", None), ("nan", None)],
)
def test_parse_retry_after(header: str | None, seconds: float | None) -> None:
    assert parse_retry_after(header) == seconds


def test_parse_retry_after_http_date() -> None:
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # in the past
    future = parse_retry_after("Fri, 01 Jan 2100 00:00:00 GMT")
    assert future is not None and future > 0
