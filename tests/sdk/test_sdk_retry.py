"""The retry policy: which answers are retried, how long to wait, and when to give up."""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx
import pytest
from sdk_fakes import MODEL, Api, FakeServer, error_response

from sie_sdk import (
    NO_RETRY,
    InferenceError,
    InvalidInputError,
    ModelLoadFailedError,
    ModelLoadingError,
    QueueFullError,
    RetryPolicy,
    SIEConnectionError,
)
from sie_sdk._core import ClientCore, RetryState

FAST = RetryPolicy(default_delay_s=0.01, max_delay_s=0.2)


def loading(retry_after: float | None = 0.05) -> httpx.Response:
    return error_response(503, "MODEL_LOADING", "model is loading", retry_after=retry_after)


@pytest.mark.parametrize("code", ["MODEL_LOADING", "QUEUE_FULL", "RESOURCE_EXHAUSTED"])
async def test_retryable_codes_are_retried_until_success(
    make_api: Callable[..., Api], fake_server: FakeServer, code: str
) -> None:
    fake_server.queued += [error_response(503, code, "busy", retry_after=0.02)] * 2
    result = await make_api(retry=FAST).encode(MODEL, "x")
    assert result["dense"].shape == (384,)
    assert fake_server.attempts == 3
    bodies = [rec.request.content for rec in fake_server.requests]
    assert bodies[0] == bodies[1] == bodies[2]  # the same request each time


async def test_retry_after_is_honoured(make_api: Callable[..., Api], fake_server: FakeServer) -> None:
    fake_server.queued += [loading(0.05), loading(0.05)]
    started = time.monotonic()
    await make_api(retry=RetryPolicy(default_delay_s=5.0)).encode(MODEL, "x")
    assert time.monotonic() - started >= 0.09  # two waits of Retry-After, not the 5 s default
    assert fake_server.attempts == 3


async def test_gives_up_at_the_deadline_with_the_last_error(
    make_api: Callable[..., Api], fake_server: FakeServer
) -> None:
    fake_server.queued += [loading(0.05)] * 100
    started = time.monotonic()
    with pytest.raises(ModelLoadingError) as caught:
        await make_api(retry=FAST, timeout=0.3).encode(MODEL, "x")
    assert time.monotonic() - started < 0.3  # gave up before the deadline, did not sleep past it
    assert 2 <= fake_server.attempts < 10
    assert caught.value.retry_after == 0.05


async def test_a_retry_after_beyond_the_deadline_raises_at_once(
    make_api: Callable[..., Api], fake_server: FakeServer
) -> None:
    fake_server.queued.append(loading(30))
    policy = RetryPolicy(max_delay_s=60.0)
    with pytest.raises(ModelLoadingError):
        await make_api(retry=policy, timeout=5.0).encode(MODEL, "x", timeout=0.5)
    assert fake_server.attempts == 1


async def test_waits_are_capped_by_max_delay(make_api: Callable[..., Api], fake_server: FakeServer) -> None:
    fake_server.queued += [loading(3600)] * 2
    policy = RetryPolicy(default_delay_s=1.0, max_delay_s=0.01)
    result = await make_api(retry=policy, timeout=2.0).encode(MODEL, "x")
    assert "dense" in result and fake_server.attempts == 3


async def test_max_attempts(make_api: Callable[..., Api], fake_server: FakeServer) -> None:
    fake_server.queued += [loading(0.0)] * 10
    with pytest.raises(ModelLoadingError):
        await make_api(retry=RetryPolicy(max_attempts=3), timeout=None).encode(MODEL, "x")
    assert fake_server.attempts == 3


@pytest.mark.parametrize(
    ("status", "code", "error"),
    [
        (400, "INVALID_INPUT", InvalidInputError),
        (502, "MODEL_LOAD_FAILED", ModelLoadFailedError),
        (500, "INFERENCE_ERROR", InferenceError),
    ],
)
async def test_not_retried(
    make_api: Callable[..., Api], fake_server: FakeServer, status: int, code: str, error: type[Exception]
) -> None:
    fake_server.queued.append(error_response(status, code, "no", retry_after=0.01))
    with pytest.raises(error):
        await make_api(retry=FAST).encode(MODEL, "x")
    assert fake_server.attempts == 1


async def test_a_4xx_is_never_retried_even_if_listed(make_api: Callable[..., Api], fake_server: FakeServer) -> None:
    fake_server.queued += [error_response(400, "INVALID_INPUT", "bad")] * 3
    policy = RetryPolicy(retry_codes=frozenset({"INVALID_INPUT"}), default_delay_s=0.01)
    with pytest.raises(InvalidInputError):
        await make_api(retry=policy).encode(MODEL, "x")
    assert fake_server.attempts == 1


@pytest.mark.parametrize("retry", [NO_RETRY, None])
async def test_retries_can_be_disabled(
    make_api: Callable[..., Api], fake_server: FakeServer, retry: RetryPolicy | None
) -> None:
    fake_server.queued.append(error_response(503, "QUEUE_FULL", "full", retry_after=0.01))
    with pytest.raises(QueueFullError):
        await make_api(retry=retry).encode(MODEL, "x")
    assert fake_server.attempts == 1


async def test_connection_refused_is_retried_only_when_asked(
    make_api: Callable[..., Api], fake_server: FakeServer
) -> None:
    fake_server.queued += [httpx.ConnectError("refused")] * 2
    policy = RetryPolicy(default_delay_s=0.01, retry_connect_errors=True)
    result = await make_api(retry=policy).encode(MODEL, "x")
    assert "dense" in result and fake_server.attempts == 3

    fake_server.queued += [httpx.ReadError("reset")]  # only connect failures are retried
    with pytest.raises(SIEConnectionError):
        await make_api(retry=policy).encode(MODEL, "x")
    assert fake_server.attempts == 4


async def test_the_attempt_timeout_shrinks_with_the_budget(
    make_api: Callable[..., Api], fake_server: FakeServer
) -> None:
    fake_server.queued += [loading(0.1)]
    await make_api(retry=FAST, timeout=10.0).encode(MODEL, "x")
    first, second = (rec.request.extensions["timeout"]["read"] for rec in fake_server.requests)
    assert second < first - 0.09


def test_retry_state_decisions_without_io() -> None:
    """The core alone: a fake clock, no sleeping, no transport."""
    now = [100.0]
    core = ClientCore("http://x", timeout=1.0, retry=RetryPolicy(default_delay_s=0.4, max_delay_s=10.0))
    state = RetryState(core.build_list_models(timeout=1.0), clock=lambda: now[0])
    request = state.next_request()
    assert request.extensions["timeout"]["read"] == 1.0

    assert state.after_response(loading(None)) == 0.4  # the default delay
    now[0] += 0.4
    assert state.after_response(loading(0.5)) == 0.5  # Retry-After
    now[0] += 0.5
    with pytest.raises(ModelLoadingError):  # 0.1 s left: the next wait would cross the deadline
        state.after_response(loading(0.5))
    assert state.after_response(httpx.Response(200)) is None
    assert state.attempts == 4
