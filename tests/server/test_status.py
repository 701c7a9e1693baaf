"""``GET /v1/status`` and the load/evict/reload management routes on a real server process with
API and admin keys: a loading, a loaded and a failed model shown as such, the last minute's
figures moving after requests, the last errors, and the routes' auth and state changes."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers.server import ServerProcess
from tests.helpers.status_catalog import ADMIN_KEY, API_KEY, EMBEDDER, FLAKY, LLM, SLOW, status_catalog
from tests.helpers.wait import wait_until

USER = {"Authorization": f"Bearer {API_KEY}"}
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, Path]]:
    root = tmp_path_factory.mktemp("status")
    catalog, flaky = status_catalog(root)
    proc = ServerProcess(
        catalog, "--offline", "--threads", "1", "--api-key", API_KEY, "--admin-key", ADMIN_KEY, log=root / "server.log"
    )
    try:
        yield proc.wait_ready(), flaky
    finally:
        proc.stop()


def status(url: str) -> dict[str, Any]:
    r = httpx.get(f"{url}/v1/status", headers=USER, timeout=10)
    assert r.status_code == 200, r.text
    return dict(r.json())


def model(report: dict[str, Any], model_id: str) -> dict[str, Any]:
    return next(m for m in report["models"] if m["id"] == model_id)


def encode(url: str, model_id: str, text: str = "hello there") -> httpx.Response:
    return httpx.post(f"{url}/v1/encode/{model_id}", json={"items": [{"text": text}]}, headers=USER, timeout=60)


def test_the_page_is_open_and_the_status_needs_a_key(keyed: tuple[ServerProcess, Path]) -> None:
    url = keyed[0].url
    for path in ("/", "/status"):
        page = httpx.get(url + path, timeout=10)
        assert page.status_code == 200 and "text/html" in page.headers["content-type"]
        assert '<script src="status-assets/status.js">' in page.text
    script = httpx.get(f"{url}/status-assets/status.js", timeout=10)
    assert script.status_code == 200 and "v1/status" in script.text
    assert httpx.get(f"{url}/v1/status", timeout=10).status_code == 401
    assert httpx.get(f"{url}/v1/status", headers={"Authorization": "Bearer wrong"}, timeout=10).status_code == 403


def test_a_loaded_a_loading_and_a_failed_model(keyed: tuple[ServerProcess, Path]) -> None:
    url = keyed[0].url
    assert encode(url, EMBEDDER).status_code == 200
    failed = httpx.post(f"{url}/v1/models/{FLAKY}/load", headers=ADMIN, timeout=60)
    assert failed.status_code == 502 and failed.json()["detail"]["code"] == "MODEL_LOAD_FAILED"
    slow = threading.Thread(
        target=httpx.post, args=(f"{url}/v1/models/{SLOW}/load",), kwargs={"headers": ADMIN, "timeout": 60}
    )
    slow.start()
    try:
        loading = wait_until(
            lambda: (m := model(status(url), SLOW))["state"] == "loading" and m["charge_bytes"] > 0 and m,
            timeout=10,
            message="the slow model shown loading, its estimate reserved",
        )
        assert loading["loading_s"] >= 0
        report = status(url)
        loaded, broken = model(report, EMBEDDER), model(report, FLAKY)
        assert loaded["state"] == "loaded" and loaded["charge_bytes"] > 0 and loaded["load_seconds"] > 0
        assert broken["state"] == "failed" and "READY" in broken["error"]
        assert any(e["model"] == FLAKY and e["code"] == "MODEL_LOAD_FAILED" for e in report["errors"])
        assert report["memory"]["charged_bytes"] >= loaded["charge_bytes"] and report["memory"]["budget_bytes"] > 0
        states = [m["state"] for m in report["models"]]
        assert states.index("loaded") < states.index("loading") < states.index("failed") < states.index("available")
    finally:
        slow.join()
    assert model(status(url), SLOW)["state"] == "loaded"


def test_requests_move_the_last_minute(keyed: tuple[ServerProcess, Path]) -> None:
    url = keyed[0].url
    assert encode(url, EMBEDDER).status_code == 200
    before = model(status(url), EMBEDDER)
    for i in range(5):
        assert encode(url, EMBEDDER, f"text number {i}").status_code == 200
    after = model(status(url), EMBEDDER)
    assert after["requests"] >= before["requests"] + 5
    assert after["requests_per_s"] > before["requests_per_s"] and after["p50_ms"] > 0
    assert after["p99_ms"] >= after["p50_ms"]
    assert after["batch_fill"] is not None and 0 < after["batch_fill"] <= 1 and after["padding_ratio"] >= 1
    assert after["queued"] == {"interactive": 0, "batch": 0}  # answered: nothing waits
    assert after["decode_tokens_per_s"] is None  # not a generator


def test_a_generation_counts_its_decoded_tokens(keyed: tuple[ServerProcess, Path]) -> None:
    url = keyed[0].url
    assert model(status(url), LLM)["decode_tokens_per_s"] == 0
    r = httpx.post(f"{url}/v1/generate/{LLM}", json={"prompt": "hi", "max_new_tokens": 8}, headers=USER, timeout=120)
    assert r.status_code == 200, r.text
    assert model(status(url), LLM)["decode_tokens_per_s"] > 0


def test_a_failed_request_is_among_the_last_errors(keyed: tuple[ServerProcess, Path]) -> None:
    url = keyed[0].url
    assert httpx.post(f"{url}/v1/encode/{EMBEDDER}", json={"items": []}, headers=USER, timeout=10).status_code == 400
    newest = status(url)["errors"]
    assert any(e["model"] == EMBEDDER and e["code"] == "INVALID_INPUT" and e["at"] > 0 for e in newest)


def test_load_and_evict_take_the_admin_key(keyed: tuple[ServerProcess, Path]) -> None:
    url = keyed[0].url
    for action in ("load", "evict"):
        assert httpx.post(f"{url}/v1/models/{EMBEDDER}/{action}", timeout=10).status_code == 401
        assert httpx.post(f"{url}/v1/models/{EMBEDDER}/{action}", headers=USER, timeout=10).status_code == 403
        missing = httpx.post(f"{url}/v1/models/test/no-such-model/{action}", headers=ADMIN, timeout=10)
        assert missing.status_code == 404 and missing.json()["detail"]["code"] == "MODEL_NOT_FOUND"


def test_evict_then_load_changes_the_state(keyed: tuple[ServerProcess, Path]) -> None:
    url = keyed[0].url
    assert encode(url, EMBEDDER).status_code == 200
    evicted = httpx.post(f"{url}/v1/models/{EMBEDDER}/evict", headers=ADMIN, timeout=30)
    assert evicted.status_code == 200 and evicted.json()["state"] == "available"
    shown = model(status(url), EMBEDDER)
    assert shown["state"] == "available" and shown["charge_bytes"] == 0
    again = httpx.post(f"{url}/v1/models/{EMBEDDER}/evict", headers=ADMIN, timeout=30)
    assert again.status_code == 200 and again.json()["state"] == "available"  # not loaded: unchanged
    loaded = httpx.post(f"{url}/v1/models/{EMBEDDER}/load", headers=ADMIN, timeout=60)
    assert loaded.status_code == 200 and loaded.json()["state"] == "loaded"
    assert model(status(url), EMBEDDER)["state"] == "loaded"


def test_reload_mends_a_failed_model(keyed: tuple[ServerProcess, Path]) -> None:
    proc, flaky = keyed
    url = proc.url
    httpx.post(f"{url}/v1/models/{FLAKY}/load", headers=ADMIN, timeout=60)
    assert model(status(url), FLAKY)["state"] == "failed"
    (flaky / "READY").write_text("fixed")
    mended = httpx.post(f"{url}/v1/models/{FLAKY}/reload", headers=ADMIN, timeout=60)
    assert mended.status_code == 200 and mended.json()["state"] == "loaded"
    shown = model(status(url), FLAKY)
    assert shown["state"] == "loaded" and shown["error"] is None


def test_the_status_is_documented(keyed: tuple[ServerProcess, Path]) -> None:
    spec = httpx.get(f"{keyed[0].url}/openapi.json", timeout=30).json()
    answer = spec["paths"]["/v1/status"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert answer == {"$ref": "#/components/schemas/StatusReport"}
    assert {"ModelStatus", "PoolStatus", "ErrorEntry", "MemoryStatus"} <= set(spec["components"]["schemas"])
    for action in ("load", "evict", "reload"):
        assert "post" in spec["paths"][f"/v1/models/{{model}}/{action}"]
