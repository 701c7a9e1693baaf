"""Health that does not lie in a cluster (issue 46, item 6), on a real nats-server, gateway and worker: a queue
worker judges its models as a server does (a pinned model that cannot load, a wedged batch: 503 ``"failing"``
naming the model), the gateway's ``/readyz`` names each model that no live worker serves (and stays 200: every
gateway sees the same workers), and a gateway without NATS is 503 ``"disconnected"`` within seconds while its
``/healthz`` answers at once. ``cluster/gateway_readiness.py`` says what each answer means.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers.catalog import tiny_embedder, write_config
from tests.helpers.cluster import Gateway, Nats, worker
from tests.helpers.held_adapters import WEDGE, held_marker
from tests.helpers.metrics import scrape
from tests.helpers.server import ServerProcess
from tests.helpers.wait import wait_until

BROKEN = "test/broken"  # its weights folder does not exist: every load fails
WEDGED = "test/wedged"
QUICK_S = 1.0  # /healthz answers within this while a batch is wedged
# cold models nobody holds: their work goes to the pool's shared consumer, which any worker may fetch
COLD = [f"test/cold-{k}" for k in range(6)]


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory, tiny_models: dict[str, Path]) -> Path:
    folder = tmp_path_factory.mktemp("cluster-readiness-catalog")
    write_config(folder, tiny_embedder(BROKEN, folder / "no-such-weights"))
    wedged = tiny_embedder(WEDGED, tiny_models["embedder"])
    write_config(folder, {**wedged, "adapter": "tests.helpers.held_adapters:WedgedEmbedding"})
    for model in COLD:
        write_config(folder, tiny_embedder(model, tiny_models["embedder"]))
    return folder


def readiness(url: str, timeout: float = 5.0) -> tuple[int, dict[str, Any]]:
    try:
        answer = httpx.get(f"{url}/readyz", timeout=timeout)
    except httpx.HTTPError:
        return 0, {}
    return answer.status_code, answer.json()


def problem_named(url: str, status: int, model: str, problem: str) -> dict[str, Any] | None:
    """/readyz's body once it answers ``status`` and names ``model`` with ``problem``; else None."""
    code, body = readiness(url)
    named = body.get("models", {}).get(model, {})
    return body if code == status and named.get("problem") == problem else None


def alive(proc: ServerProcess) -> ServerProcess:
    if proc.proc.poll() is not None:
        raise RuntimeError(f"exited: {proc.tail()}")
    return proc


def test_a_worker_judges_its_models_and_the_gateway_names_those_no_worker_serves(
    nats: Nats, catalog: Path, tmp_path: Path
) -> None:
    wedge = tmp_path / "wedge"
    w = worker(catalog, nats.url, tmp_path / "worker.log", "--pin", BROKEN, "--stall-after-s", "1",
               env={WEDGE: str(wedge)})  # fmt: skip
    gateway = Gateway(catalog, nats.url, log=tmp_path / "gateway.log")
    try:
        gateway.wait_ready()
        body = wait_until(lambda: problem_named(alive(w).url, 503, BROKEN, "load_failed"), timeout=120,
                          message="the worker's /readyz never failed on its pinned model")  # fmt: skip
        assert body["status"] == "failing" and body["models"][BROKEN]["required"] is True, body
        assert httpx.get(f"{w.url}/healthz").text == "ok"
        body = wait_until(lambda: problem_named(gateway.url, 200, BROKEN, "load_failed"), timeout=15,
                          message="the gateway's /readyz never named the model no worker serves")  # fmt: skip
        problem = body["models"][BROKEN]
        assert body["status"] == "ready" and problem["required"] is False, body
        assert "no live worker of pool default serves it (1 live)" in problem["message"], problem

        # a batch wedged on the worker: both /readyz name the model as stalled, both /healthz answer at once
        encode = {"items": [{"text": "hello"}]}
        assert httpx.post(f"{gateway.url}/v1/encode/{WEDGED}", json=encode, timeout=120).status_code == 200
        wedge.touch()
        with ThreadPoolExecutor(1) as pool:
            try:
                stuck = pool.submit(httpx.post, f"{gateway.url}/v1/encode/{WEDGED}",
                                    json={"items": [{"text": "not in the cache"}]}, timeout=120)  # fmt: skip
                wait_until(held_marker(wedge).exists, timeout=60, message="the batch never reached the wedge")
                assert httpx.get(f"{w.url}/healthz", timeout=QUICK_S).text == "ok"
                assert httpx.get(f"{gateway.url}/healthz", timeout=QUICK_S).text == "ok"
                wait_until(lambda: problem_named(w.url, 503, WEDGED, "stalled"), timeout=30,
                           message="the worker's /readyz never said stalled")  # fmt: skip
                body = wait_until(lambda: problem_named(gateway.url, 200, WEDGED, "stalled"), timeout=15,
                                  message="the gateway's /readyz never named the stalled model")  # fmt: skip
                assert "--stall-after-s" in body["models"][WEDGED]["message"], body
            finally:
                wedge.unlink(missing_ok=True)
            assert stuck.result().status_code == 200  # the wedged batch ends and is answered
        wait_until(lambda: WEDGED not in readiness(gateway.url)[1].get("models", {}), timeout=15,
                   message="the gateway still named the model once its batch ended")  # fmt: skip
    finally:
        gateway.stop()
        w.stop()


def test_a_gateway_without_nats_is_unready_while_healthz_answers(nats: Nats, catalog: Path, tmp_path: Path) -> None:
    gateway = Gateway(catalog, nats.url, log=tmp_path / "gateway.log")
    try:
        gateway.wait_ready()
        assert readiness(gateway.url) == (200, {"status": "ready"})
        nats.stop()
        wait_until(lambda: readiness(gateway.url) == (503, {"status": "disconnected"}), timeout=5,
                   message="the gateway's /readyz stayed 200 without NATS")  # fmt: skip
        assert httpx.get(f"{gateway.url}/healthz", timeout=QUICK_S).text == "ok"
        tei = httpx.get(f"{gateway.url}/health", timeout=QUICK_S)
        assert tei.status_code == 503 and tei.json()["error_type"] == "Unhealthy"
        nats.restart()
        wait_until(lambda: readiness(gateway.url)[0] == 200, timeout=30,
                   message="the gateway did not become ready when NATS came back")  # fmt: skip
    finally:
        gateway.stop()


def test_a_failing_worker_leaves_the_pools_shared_work_to_a_ready_one(
    nats: Nats, catalog: Path, tmp_path: Path
) -> None:
    """A worker whose /readyz names a problem (here a pinned model that cannot load) takes no work from the
    pool's shared consumer while a ready worker is there: each cold model's call is answered by the ready one.
    Without the rule each call went to whichever worker fetched first (all six to the ready one: 1 in 64)."""
    failing = worker(catalog, nats.url, tmp_path / "failing.log", "--pin", BROKEN)
    ready = worker(catalog, nats.url, tmp_path / "ready.log")
    gateway = Gateway(catalog, nats.url, log=tmp_path / "gateway.log")
    try:
        ready.wait_ready()
        gateway.wait_ready()
        wait_until(lambda: problem_named(alive(failing).url, 503, BROKEN, "load_failed"), timeout=120,
                   message="the worker's /readyz never failed on its pinned model")  # fmt: skip
        wait_until(lambda: "stepping aside" in failing.tail(), timeout=30,
                   message="the failing worker never stepped aside for its ready peer")  # fmt: skip
        for k, model in enumerate(COLD):
            answer = httpx.post(f"{gateway.url}/v1/encode/{model}", json={"items": [{"text": f"cold {k}"}]},
                                timeout=120)  # fmt: skip
            assert answer.status_code == 200, answer.text
        ran = {name: [scrape(w.url, "sie_batch_items_sum", model=m, absent_as_zero=True) for m in COLD]
               for name, w in (("failing", failing), ("ready", ready))}  # fmt: skip
        assert ran == {"failing": [0.0] * len(COLD), "ready": [1.0] * len(COLD)}, ran
    finally:
        gateway.stop()
        ready.stop()
        failing.stop()
