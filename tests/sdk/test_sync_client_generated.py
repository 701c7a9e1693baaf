"""The blocking client is generated from the asyncio one, so the two cannot drift.

CI fails here when ``sdk/sie_sdk/_sync.py`` differs from what ``scripts/gen_sync_client.py``
makes of ``_async.py`` today, and when the rewrite rules no longer fit the async source.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gen_sync_client.py"


@pytest.fixture(scope="module")
def gen() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_sync_client", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_checked_in_sync_client_is_the_generated_one(gen: ModuleType) -> None:
    wanted = gen.generate(gen.SOURCE.read_text(encoding="utf-8"))
    current = gen.TARGET.read_text(encoding="utf-8")
    assert current == wanted, (
        "sdk/sie_sdk/_sync.py is not what scripts/gen_sync_client.py makes of _async.py: "
        "edit _async.py only, then run `make sync-client`"
    )
    assert current.startswith("# Generated from sdk/sie_sdk/_async.py")


def test_async_constructs_become_blocking_ones(gen: ModuleType) -> None:
    source = '''\
"""The asyncio client: ``httpx.AsyncClient.send`` and ``asyncio.sleep``."""
import asyncio
from collections.abc import AsyncIterator


async def lines(http: httpx.AsyncClient) -> AsyncIterator[str]:
    async with http.stream("GET", "/") as response:
        await response.aread()
        async for line in response.aiter_lines():  # ``aiter_lines`` streams
            yield line
    await asyncio.sleep(await delay())
    await http.aclose()
'''
    expected = '''\
"""The blocking client: ``httpx.Client.send`` and ``time.sleep``."""
import time
from collections.abc import Iterator


def lines(http: httpx.Client) -> Iterator[str]:
    with http.stream("GET", "/") as response:
        response.read()
        for line in response.iter_lines():  # ``iter_lines`` streams
            yield line
    time.sleep(delay())
    http.close()
'''
    assert gen.unasync(source, phrases=[("The asyncio client:", "The blocking client:")]) == expected


def test_a_phrase_rule_that_matches_nothing_fails(gen: ModuleType) -> None:
    with pytest.raises(gen.GenerationError, match="Asyncio helper"):
        gen.unasync('"""Blocking."""\n', phrases=[("Asyncio helper", "Blocking helper")])


def test_an_async_name_without_a_rule_fails(gen: ModuleType) -> None:
    source = "transport = httpx.AsyncHTTPTransport()\n"
    with pytest.raises(gen.GenerationError, match="Async"):
        gen.unasync(source, phrases=[])


def test_async_prose_without_a_rule_fails(gen: ModuleType) -> None:
    with pytest.raises(gen.GenerationError, match="await"):
        gen.unasync('def f() -> None:\n    """Call it, awaited."""\n', phrases=[])
