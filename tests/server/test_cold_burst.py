"""A burst on a cold model (issue 46, item 5), on real processes: 500 requests at once to MiniLM (from its
package) while it is not loaded start exactly one load; ``--max-load-waiters`` of them are held and
answered 200 once the model is up, every other one is answered at once with 503 MODEL_LOADING and a
``Retry-After``, and none is left waiting past its deadline (``X-SIE-Timeout-Ms``). The same through a
gateway in front of a queue worker (nats-server with JetStream on loopback).

The load waits at a gate (tests/helpers/held_adapters.py) until every refusal has come back, so the number
held is exact however fast this machine reads 500 requests; the gate stands for a slow load.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.helpers.catalog import MINILM, real_config, write_config
from tests.helpers.cluster import Gateway, Nats, running, worker
from tests.helpers.held_adapters import LOAD_GATE
from tests.helpers.metrics import scrape
from tests.helpers.server import ServerProcess
from tests.helpers.wait import async_wait_until

BURST = 500
HELD = 40  # --max-load-waiters for these tests (the default, 128, is in settings.py)
DEADLINE_MS = 120_000  # each request's X-SIE-Timeout-Ms
CLIENT_TIMEOUT_S = 180.0  # past the deadline: a request the server left hanging shows as an httpx timeout
SERVING = ("--cpu-precision", "fp32", "--max-load-waiters", str(HELD))


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    folder = tmp_path / "catalog"
    folder.mkdir()
    write_config(folder, {**real_config(MINILM), "adapter": "tests.helpers.held_adapters:GatedEmbedding"})
    return folder


async def burst(url: str, gate: Path) -> tuple[list[httpx.Response | BaseException], str]:
    """BURST encodes at once; the gate opens once all but HELD have been answered. The answers in order,
    and the model's state (GET /v1/models/{id}) while the held ones waited."""
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncClient(base_url=url, timeout=CLIENT_TIMEOUT_S, limits=limits) as client:
        headers = {"X-SIE-Timeout-Ms": str(DEADLINE_MS)}
        calls = [
            asyncio.ensure_future(
                client.post(f"/v1/encode/{MINILM}", json={"items": [{"text": f"burst text {i}"}]}, headers=headers)
            )
            for i in range(BURST)
        ]
        try:
            await async_wait_until(
                lambda: sum(c.done() for c in calls) >= BURST - HELD,
                timeout=120,
                interval=0.05,
                message="the requests past the bound were not all answered while the model loaded",
            )
            state = str((await client.get(f"/v1/models/{MINILM}")).json()["state"])
            answered_early = sum(c.done() for c in calls)
        finally:
            gate.touch()
        answers = list(await asyncio.gather(*calls, return_exceptions=True))
    assert answered_early == BURST - HELD, f"{answered_early} answered before the load finished"
    return answers, state


def check(answers: list[httpx.Response | BaseException], state: str) -> None:
    failures = [a for a in answers if isinstance(a, BaseException)]
    assert not failures, f"{len(failures)} requests got no answer, e.g. {failures[0]!r}"
    responses = [a for a in answers if isinstance(a, httpx.Response)]
    assert state == "loading"
    statuses = Counter(r.status_code for r in responses)
    assert statuses == {200: HELD, 503: BURST - HELD}, statuses
    for r in responses:
        if r.status_code == 200:
            assert r.json()["items"][0]["dense"]["dims"] == 384
        else:
            assert r.headers["x-sie-error-code"] == "MODEL_LOADING", r.text
            assert int(r.headers["retry-after"]) >= 1
            assert "--max-load-waiters" in r.json()["detail"]["message"]


def test_a_burst_on_a_cold_model_holds_a_bounded_number(catalog: Path, tmp_path: Path) -> None:
    gate = tmp_path / "open"
    with ServerProcess(catalog, "--offline", "--threads", "1", *SERVING, env={LOAD_GATE: str(gate)},
                       log=tmp_path / "server.log") as server:  # fmt: skip
        # one caller that stops waiting first: 504 at its deadline, and its place among the held is free again
        late = httpx.post(f"{server.url}/v1/encode/{MINILM}", json={"items": [{"text": "late"}]},
                          headers={"X-SIE-Timeout-Ms": "300"}, timeout=60)  # fmt: skip
        assert late.status_code == 504 and late.headers["x-sie-error-code"] == "DEADLINE_EXCEEDED", late.text
        answers, state = asyncio.run(burst(server.url, gate))
        check(answers, state)
        assert scrape(server.url, "sie_model_loads_total", model=MINILM) == 1
        refused = scrape(server.url, "sie_requests_total", model=MINILM, task="encode", status="MODEL_LOADING")
        assert refused == BURST - HELD
        assert httpx.get(f"{server.url}/v1/models/{MINILM}").json()["state"] == "loaded"


@pytest.fixture
def nats(tmp_path: Path) -> Iterator[Nats]:
    server = Nats(tmp_path / "jetstream")
    yield server
    server.stop()


def test_the_same_burst_through_a_gateway(catalog: Path, nats: Nats, tmp_path: Path) -> None:
    gate = tmp_path / "open"
    queue_worker = worker(catalog, nats.url, tmp_path / "w.log", *SERVING, env={LOAD_GATE: str(gate)})
    gateway = Gateway(catalog, nats.url, log=tmp_path / "gateway.log")
    with running(queue_worker, gateway):
        answers, state = asyncio.run(burst(gateway.url, gate))
        check(answers, state)
        assert scrape(queue_worker.url, "sie_model_loads_total", model=MINILM) == 1
