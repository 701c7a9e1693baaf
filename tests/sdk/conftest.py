"""Fixtures for the SDK tests: a fake server and clients of both kinds talking to it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from sdk_fakes import BASE_URL, Api, FakeServer

from sie_sdk import RetryPolicy, SIEAsyncClient, SIEClient


@pytest.fixture
def fake_server() -> FakeServer:
    return FakeServer()


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def make_api(mode: str, fake_server: FakeServer) -> AsyncIterator[Callable[..., Api]]:
    """Build an ``Api`` over the sync or async client (per ``mode``), talking to ``fake_server``."""
    made: list[Api] = []

    def make(**kwargs: Any) -> Api:
        kwargs.setdefault("base_url", BASE_URL)
        transport = httpx.MockTransport(fake_server)
        if mode == "sync":
            client: SIEClient | SIEAsyncClient = SIEClient(transport=transport, **kwargs)
        else:
            client = SIEAsyncClient(transport=transport, **kwargs)
        made.append(Api(client))
        return made[-1]

    yield make
    for api in made:
        await api.close()


@pytest.fixture
async def api(make_api: Callable[..., Api]) -> Api:
    """A client with default settings but fast retries."""
    return make_api(retry=RetryPolicy(default_delay_s=0.01, max_delay_s=0.05))
