"""The gateway's ``/v1/status`` and status page with a real NATS and one queue worker: models as
the worker reports them (loaded, failed with its error), the gateway's own last minute, the
pool with its live worker, pending work and dead letters; and the page's actions (evict, load,
reload) reaching the pool's workers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from tests.helpers.cluster import Gateway, Nats, running, worker
from tests.helpers.status_catalog import EMBEDDER, FLAKY, status_catalog
from tests.helpers.wait import wait_until


def status(url: str) -> dict[str, Any]:
    r = httpx.get(f"{url}/v1/status", timeout=10)
    assert r.status_code == 200, r.text
    return dict(r.json())


def model(report: dict[str, Any], model_id: str) -> dict[str, Any]:
    return next(m for m in report["models"] if m["id"] == model_id)


def test_gateway_status_shows_pools_workers_and_models(nats: Nats, tmp_path: Path) -> None:
    catalog, flaky = status_catalog(tmp_path / "models")
    with running(
        worker(catalog, nats.url, tmp_path / "worker.log"), Gateway(catalog, nats.url, log=tmp_path / "gateway.log")
    ) as (_, gateway):
        url = gateway.url
        wait_until(lambda: status(url)["pools"][0]["workers"], timeout=20, message="the worker seen live")
        body = {"items": [{"text": "through the gateway"}]}
        assert httpx.post(f"{url}/v1/encode/{EMBEDDER}", json=body, timeout=60).status_code == 200
        assert httpx.post(f"{url}/v1/encode/{FLAKY}", json=body, timeout=60).status_code == 502

        def shown() -> dict[str, Any] | None:
            report = status(url)
            ok = model(report, EMBEDDER)["state"] == "loaded" and model(report, FLAKY)["state"] == "failed"
            return report if ok else None

        report = wait_until(shown, timeout=20, message="the worker's heartbeat shows the loaded and the failed model")
        assert report["role"] == "gateway" and report["memory"] is None
        loaded, failed = model(report, EMBEDDER), model(report, FLAKY)
        assert loaded["loaded_on"] == 1 and loaded["workers"] == 1 and loaded["requests"] == 1
        assert loaded["p50_ms"] > 0 and loaded["charge_bytes"] > 0
        assert "READY" in failed["error"]
        assert any(e["model"] == FLAKY and e["code"] == "MODEL_LOAD_FAILED" for e in report["errors"])
        (pool,) = report["pools"]
        assert pool["name"] == "default" and set(pool["pending"]) == {"interactive", "batch"}  # sampled each second
        assert pool["dead_letters"] == 0
        (seen,) = pool["workers"]
        assert seen["models"][EMBEDDER] == "loaded" and seen["inflight"] >= 0 and not seen["stopping"]
        page = httpx.get(f"{url}/status", timeout=10)
        assert page.status_code == 200 and "pools-section" in page.text
        # the page's actions through the gateway: each reaches the pool's workers
        assert httpx.post(f"{url}/v1/models/{EMBEDDER}/evict", timeout=30).status_code == 200
        wait_until(lambda: model(status(url), EMBEDDER)["state"] == "available", timeout=20, message="evicted")
        assert httpx.post(f"{url}/v1/models/{EMBEDDER}/load", timeout=60).status_code == 200
        wait_until(lambda: model(status(url), EMBEDDER)["state"] == "loaded", timeout=20, message="loaded again")
        (flaky / "READY").write_text("mended")
        assert httpx.post(f"{url}/v1/models/{FLAKY}/reload", timeout=60).status_code == 200
        wait_until(lambda: model(status(url), FLAKY)["state"] == "loaded", timeout=20, message="reloaded")
