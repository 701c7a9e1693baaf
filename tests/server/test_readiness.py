"""Health that does not lie (issue 46, item 6), on real server processes: ``/readyz`` names every model that
cannot serve and why, and turns 503 ``"failing"`` when the pod cannot do what it was started for (a pinned or
preloaded model whose load failed, or a batch wedged past ``--stall-after-s``), while ``/healthz`` answers at
once under the wedged batch. A model loaded on demand whose load failed is named but leaves the pod ready
(engine/model_health.py says why: the failure is the same on every replica, and its callers get 502 at once).
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers.catalog import tiny_embedder, tiny_llm, write_config
from tests.helpers.held_adapters import WEDGE, held_marker
from tests.helpers.server import ServerProcess
from tests.helpers.wait import wait_until

WEDGED = "test/wedged"
WEDGED_LLM = "test/wedged-llm"
BROKEN = "test/broken"  # its weights folder does not exist: every load fails
QUICK_S = 1.0  # both probes answer within this while a batch is wedged


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory, tiny_models: dict[str, Path]) -> Path:
    folder = tmp_path_factory.mktemp("readiness-catalog")
    wedged = tiny_embedder(WEDGED, tiny_models["embedder"])
    write_config(folder, {**wedged, "adapter": "tests.helpers.held_adapters:WedgedEmbedding"})
    write_config(folder, tiny_embedder(BROKEN, folder / "no-such-weights"))
    write_config(
        folder, {**tiny_llm(WEDGED_LLM, tiny_models["llm"]), "adapter": "tests.helpers.held_adapters:WedgedLM"}
    )
    return folder


@pytest.fixture(scope="module")
def wedge(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("wedge") / "wedge"


@pytest.fixture(scope="module")
def server(catalog: Path, wedge: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    logs = tmp_path_factory.mktemp("readiness-logs")
    proc = ServerProcess(catalog, "--offline", "--threads", "1", "--stall-after-s", "1", env={WEDGE: str(wedge)},
                         log=logs / "server.log")  # fmt: skip
    with proc:
        yield proc


def encode(url: str, model: str, text: str = "hello world") -> httpx.Response:
    return httpx.post(f"{url}/v1/encode/{model}", json={"items": [{"text": text}]}, timeout=120)


def readiness(url: str, timeout: float = 10.0) -> tuple[int, dict[str, Any]]:
    r = httpx.get(f"{url}/readyz", timeout=timeout)
    return r.status_code, r.json()


def answering(url: str, status: int, timeout: float = 10.0) -> dict[str, Any] | None:
    """/readyz's body when it answers ``status``, else None."""
    code, body = readiness(url, timeout)
    return body if code == status else None


def test_an_optional_model_that_fails_to_load_is_named_but_the_pod_stays_ready(server: ServerProcess) -> None:
    failed = encode(server.url, BROKEN)
    assert failed.status_code == 502 and failed.headers["x-sie-error-code"] == "MODEL_LOAD_FAILED"
    status, body = readiness(server.url)
    assert status == 200 and body["status"] == "ready", body
    problem = body["models"][BROKEN]
    assert problem["problem"] == "load_failed" and problem["required"] is False
    assert BROKEN in problem["message"]


def test_a_wedged_batch_makes_readyz_fail_while_healthz_answers(server: ServerProcess, wedge: Path) -> None:
    url = server.url
    assert encode(url, WEDGED).status_code == 200  # loaded (its warm-up ran before the wedge)
    held_marker(wedge).unlink(missing_ok=True)
    wedge.touch()
    with ThreadPoolExecutor(1) as pool:
        try:
            stuck = pool.submit(encode, url, WEDGED, "not in the result cache")
            wait_until(held_marker(wedge).exists, timeout=60, message="the batch never reached the wedge")
            health = httpx.get(f"{url}/healthz", timeout=QUICK_S)  # a timeout here fails the test
            assert health.status_code == 200 and health.text == "ok"
            readiness(url, timeout=QUICK_S)  # answered at once too, whatever it says yet
            body = wait_until(
                lambda: answering(url, 503, timeout=QUICK_S),
                timeout=30,
                message="/readyz never failed while a batch was wedged",
            )
            assert body["status"] == "failing", body
            problem = body["models"][WEDGED]
            assert problem["problem"] == "stalled" and problem["required"] is True
            assert "--stall-after-s" in problem["message"]
            assert httpx.get(f"{url}/healthz", timeout=QUICK_S).status_code == 200
        finally:
            wedge.unlink(missing_ok=True)
        assert stuck.result().status_code == 200  # the wedged batch ends and is answered
    body = wait_until(lambda: answering(url, 200), timeout=30, message="/readyz never recovered")
    assert WEDGED not in body.get("models", {}), body


def generate(url: str) -> httpx.Response:
    body = {"prompt": "hello world", "max_new_tokens": 8, "temperature": 0}
    return httpx.post(f"{url}/v1/generate/{WEDGED_LLM}", json=body, timeout=120)


def test_a_wedged_decode_step_makes_readyz_fail_too(server: ServerProcess, wedge: Path) -> None:
    url = server.url
    assert generate(url).status_code == 200  # loaded, and its decode loop has run
    held_marker(wedge).unlink(missing_ok=True)
    wedge.touch()
    with ThreadPoolExecutor(1) as pool:
        try:
            stuck = pool.submit(generate, url)
            wait_until(held_marker(wedge).exists, timeout=60, message="no decode step reached the wedge")
            assert httpx.get(f"{url}/healthz", timeout=QUICK_S).text == "ok"
            body = wait_until(
                lambda: answering(url, 503, timeout=QUICK_S),
                timeout=30,
                message="/readyz never failed while a decode step was wedged",
            )
            problem = body["models"][WEDGED_LLM]
            assert problem["problem"] == "stalled" and "no decode step" in problem["message"], body
        finally:
            wedge.unlink(missing_ok=True)
        assert stuck.result().status_code == 200
    body = wait_until(lambda: answering(url, 200), timeout=30, message="/readyz never recovered")
    assert WEDGED_LLM not in body.get("models", {}), body


def test_a_preloaded_model_that_fails_to_load_makes_the_pod_unready(catalog: Path, tmp_path: Path) -> None:
    proc = ServerProcess(catalog, "--offline", "--threads", "1", "--preload", BROKEN, log=tmp_path / "s.log")
    try:
        body = wait_until(
            lambda: _failing(proc),
            timeout=120,
            message="/readyz never said failing with a preloaded model that cannot load",
        )
        problem = body["models"][BROKEN]
        assert problem["problem"] == "load_failed" and problem["required"] is True
        assert httpx.get(f"{proc.url}/healthz").text == "ok"  # alive: a restart would not load it either
        tei = httpx.get(f"{proc.url}/health")
        assert tei.status_code == 503 and tei.json()["error_type"] == "Unhealthy"
    finally:
        proc.stop()


def _failing(proc: ServerProcess) -> dict[str, Any] | None:
    """/readyz's body once it says failing; None before (starting, or the process not answering yet)."""
    if proc.proc.poll() is not None:
        raise RuntimeError(f"server exited: {proc.tail()}")
    try:
        body = answering(proc.url, 503, timeout=2.0)
    except httpx.HTTPError:
        return None
    return body if body is not None and body.get("status") == "failing" else None
