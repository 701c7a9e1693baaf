"""Cluster mode: the gateway's /v1/models mirrors the precision each worker's precision gate chose."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from sie_server.cpu_features import detect
from tests.helpers.catalog import tiny_embedder, write_config
from tests.helpers.cluster import Gateway, Nats, running, worker
from tests.helpers.wait import wait_until

PERTURBED = "test/int8-perturbed"


def test_the_gateway_shows_the_precision_its_worker_chose(
    nats: Nats, tmp_path: Path, tiny_models: dict[str, Path]
) -> None:
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    config = tiny_embedder(PERTURBED, tiny_models["embedder"])
    config["adapter"] = "tests.helpers.fault_adapters:PerturbedInt8Embedding"
    config["profiles"] = {"cpu": {"max_batch_tokens": 2048, "cpu_precision": ["int8", "bf16", "fp32"]}}
    write_config(catalog, config)
    w = worker(catalog, nats.url, tmp_path / "w.log", "--preload", PERTURBED)
    gateway = Gateway(catalog, nats.url, log=tmp_path / "gw.log")
    with running(w, gateway):

        def loaded() -> dict[str, Any] | None:
            info: dict[str, Any] = httpx.get(f"{gateway.url}/v1/models/{PERTURBED}", timeout=10).json()
            return info if info.get("loaded_on") == 1 else None

        info = wait_until(loaded, timeout=20, message=f"the gateway never saw {PERTURBED} loaded on the worker")
        own = httpx.get(f"{w.url}/v1/models/{PERTURBED}", timeout=10).json()["precision"]
        assert info["precision"] == own
        assert own["running"] == ("bf16" if detect().supports("bf16") else "fp32")
        assert own["gate"][0]["outcome"] == ("refused" if detect().supports("int8") else "unsupported")
        listing = httpx.get(f"{gateway.url}/v1/models", timeout=10).json()
        assert [m["precision"]["running"] for m in listing["models"]] == [own["running"]]
