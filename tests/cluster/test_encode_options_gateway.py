"""Encode options through a gateway (real nats-server, gateway and worker): ``params.dims``,
``params.truncation`` and ``items[].spans`` reach the worker and come back, also when the gateway
splits a request into slices (``--split-items 2``), with each item's chunks in its place; and
``X-SIE-Cache: bypass`` reaches the worker's result cache."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from tests.helpers.catalog import write_config
from tests.helpers.cluster import Gateway, Nats, running, worker
from tests.server.test_encode_options import LIMIT, MRL, mrl_config, unit, words


@pytest.fixture
def catalog(tmp_path: Path, tiny_models: dict[str, Path]) -> Path:
    folder = tmp_path / "catalog"
    folder.mkdir()
    write_config(folder, mrl_config(MRL, tiny_models["embedder"], doc_prefix="passage: "))
    return folder


def test_encode_options_pass_through_a_gateway(catalog: Path, tmp_path: Path) -> None:
    nats = Nats(tmp_path / "jetstream")
    try:
        w = worker(catalog, nats.url, tmp_path / "w.log", "--preload", MRL, "--cpu-precision", "fp32")
        gateway = Gateway(catalog, nats.url, "--split-items", "2", log=tmp_path / "gw.log")
        with running(w, gateway):
            check(gateway.url)
            check_cache_header(gateway.url)
    finally:
        nats.stop()


def encode(url: str, items: list[dict[str, Any]], **params: Any) -> dict[str, Any]:
    r = httpx.post(f"{url}/v1/encode/{MRL}", json={"items": items, "params": params}, timeout=60)
    assert r.status_code == 200, r.text
    answer: dict[str, Any] = r.json()
    return answer


def check(url: str) -> None:
    texts = ["invoice total due", "lunch in the cafeteria", "hello world"]
    full = np.array([i["dense"]["values"] for i in encode(url, [{"text": t} for t in texts])["items"]], np.float32)
    cut = encode(url, [{"text": t} for t in texts], dims=8)["items"]
    assert [i["dense"]["dims"] for i in cut] == [8, 8, 8]
    np.testing.assert_allclose([i["dense"]["values"] for i in cut], [unit(v[:8]) for v in full], atol=1e-5)
    r = httpx.post(f"{url}/v1/encode/{MRL}", json={"items": [{"text": "x"}], "params": {"dims": 12}}, timeout=60)
    assert r.status_code == 400 and "[32, 16, 8]" in r.text

    long = " ".join(words(3 * LIMIT))
    r = httpx.post(f"{url}/v1/encode/{MRL}", json={"items": [{"text": long}], "params": {"truncation": "error"}},
                   timeout=60)  # fmt: skip
    assert r.status_code == 400 and f"{3 * LIMIT + 4} tokens" in r.text, r.text
    chunked = encode(url, [{"text": "hello"}, {"text": long}], truncation="chunk")
    assert chunked["truncated_items"] == []
    alone = encode(url, [{"text": long}], truncation="chunk")["items"][0]["dense"]["values"]
    np.testing.assert_allclose(chunked["items"][1]["dense"]["values"], alone, atol=1e-5)

    # five items in three slices: each item's chunks come back with it
    items = [{"id": f"d{k}", "text": texts[k % 3], "spans": [[0, 5], [6, len(texts[k % 3])]]} for k in range(5)]
    answer = encode(url, items)
    assert [i["id"] for i in answer["items"]] == [f"d{k}" for k in range(5)]
    for k, item in enumerate(answer["items"]):
        assert [(c["start"], c["end"]) for c in item["chunks"]] == [(0, 5), (6, len(texts[k % 3]))]
        np.testing.assert_allclose(item["dense"]["values"], full[k % 3], atol=1e-5)


def check_cache_header(url: str) -> None:
    """A repeated text is answered by the worker's result cache, unless the caller bypasses it."""

    def hits(headers: dict[str, str]) -> int:
        body = {"items": [{"text": "a text only this check sends"}]}
        r = httpx.post(f"{url}/v1/encode/{MRL}", json=body, headers=headers, timeout=60)
        assert r.status_code == 200, r.text
        count: int = r.json()["timing"]["cache_hits"]
        return count

    assert hits({"X-SIE-Cache": "bypass"}) == 0  # computed, and not stored
    assert hits({}) == 0  # computed and stored
    assert hits({}) == 1
    assert hits({"X-SIE-Cache": "bypass"}) == 0
    r = httpx.post(f"{url}/v1/encode/{MRL}", json={"items": [{"text": "x"}]}, headers={"X-SIE-Cache": "maybe"})
    assert r.status_code == 400 and "X-SIE-Cache" in r.text
