"""The exact result cache through a real server: a cached answer is the computed one bit for bit,
counted in the timing and the metrics, shared by identical requests in flight, bypassed by a header,
off at size 0, charged to the memory budget, and never an old vector after a new revision."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from tests.helpers.catalog import tiny_cross_encoder, tiny_embedder, write_config
from tests.helpers.metrics import scrape
from tests.helpers.server import ServerProcess
from tests.helpers.tiny_models import build_bert_embedder, build_cross_encoder
from tests.helpers.wait import wait_until

EMB = "test/cache-emb"
CE = "test/cache-ce"
SWAP = "test/cache-swap"
BYPASS = ("X-SIE-Cache", "bypass")


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    weights = tmp_path_factory.mktemp("cache-weights")
    embedder, scorer = build_bert_embedder(weights / "emb"), build_cross_encoder(weights / "ce")
    folder = tmp_path_factory.mktemp("cache-catalog")
    write_config(folder, tiny_embedder(EMB, embedder))
    write_config(folder, tiny_cross_encoder(CE, scorer))
    write_config(folder, tiny_embedder(SWAP, embedder))
    return folder


def serve(catalog: Path, logs: Path, *args: str) -> ServerProcess:
    return ServerProcess(catalog, "--offline", "--threads", "1", *args, log=logs / "server.log").wait_ready()


@pytest.fixture(scope="module")
def server(catalog: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = serve(catalog, tmp_path_factory.mktemp("cache-logs"))
    try:
        yield proc
    finally:
        proc.stop()


def encode(url: str, model: str, texts: list[str], **headers: str) -> dict[str, Any]:
    r = httpx.post(
        f"{url}/v1/encode/{model}", json={"items": [{"text": t} for t in texts]}, headers=headers, timeout=60
    )
    assert r.status_code == 200, r.text
    return dict(r.json())


def vectors(answer: dict[str, Any]) -> list[bytes]:
    """Each item's dense vector as float32 bytes (JSON carries float32 values in their shortest exact form)."""
    return [np.asarray(item["dense"]["values"], dtype=np.float32).tobytes() for item in answer["items"]]


def test_a_cached_answer_is_the_computed_one(server: ServerProcess) -> None:
    texts = ["bit for bit", "a second text", "and a third one"]
    first = encode(server.url, EMB, texts)
    assert first["timing"]["cache_hits"] == 0
    again = encode(server.url, EMB, texts)
    assert again["timing"]["cache_hits"] == 3
    assert vectors(again) == vectors(first) and again["usage"] == first["usage"]
    fresh = [encode(server.url, EMB, [t], **{BYPASS[0]: BYPASS[1]}) for t in texts]
    assert all(f["timing"]["cache_hits"] == 0 for f in fresh)
    assert [v for f in fresh for v in vectors(f)] == vectors(first)  # one item, one batch shape: recomputed alike
    r = httpx.post(
        f"{server.url}/v1/encode/{EMB}", json={"items": [{"text": "x"}]}, headers={"X-SIE-Cache": "sometimes"}
    )
    assert r.status_code == 400 and "X-SIE-Cache" in r.json()["detail"]["message"]


def test_cross_encoder_scores_are_cached_per_pair(server: ServerProcess) -> None:
    body = {"query": {"text": "which one"}, "items": [{"id": "a", "text": "this one"}, {"id": "b", "text": "that"}]}
    first = httpx.post(f"{server.url}/v1/score/{CE}", json=body, timeout=60).json()
    second = httpx.post(f"{server.url}/v1/score/{CE}", json=body, timeout=60).json()
    assert first["timing"]["cache_hits"] == 0 and second["timing"]["cache_hits"] == 2
    assert second["scores"] == first["scores"]
    other = {**body, "query": {"text": "another query"}}
    assert httpx.post(f"{server.url}/v1/score/{CE}", json=other, timeout=60).json()["timing"]["cache_hits"] == 0


def test_metrics_and_the_budget_count_the_cache(server: ServerProcess) -> None:
    before = scrape(server.url, "sie_cache_hits_total", model=EMB, absent_as_zero=True)
    encode(server.url, EMB, ["counted"])
    encode(server.url, EMB, ["counted"])
    assert scrape(server.url, "sie_cache_hits_total", model=EMB) == before + 1
    assert scrape(server.url, "sie_cache_misses_total", model=EMB) >= 1
    assert scrape(server.url, "sie_cache_bytes") > 0 and scrape(server.url, "sie_cache_entries") >= 1
    memory = httpx.get(f"{server.url}/v1/memory").json()
    assert 0 < memory["cache_bytes"] <= memory["charged_bytes"]
    assert memory["charged_bytes"] >= sum(m["charge_bytes"] for m in memory["models"]) + memory["cache_bytes"]


def test_sixty_four_identical_requests_run_one_forward_pass(server: ServerProcess) -> None:
    items_before = scrape(server.url, "sie_batch_items_sum", model=EMB)

    async def all_at_once() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
            calls = [
                client.post(f"/v1/encode/{EMB}", json={"items": [{"text": "sixty-four callers"}]}) for _ in range(64)
            ]
            return list(await asyncio.gather(*calls))

    answers = asyncio.run(all_at_once())
    assert all(r.status_code == 200 for r in answers)
    assert len({vectors(r.json())[0] for r in answers}) == 1
    assert scrape(server.url, "sie_batch_items_sum", model=EMB) == items_before + 1  # items actually run


def test_a_new_revision_never_serves_an_old_vector(
    server: ServerProcess, catalog: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    text = ["which weights"]
    old = vectors(encode(server.url, SWAP, text))
    assert encode(server.url, SWAP, text)["timing"]["cache_hits"] == 1
    other = build_bert_embedder(tmp_path_factory.mktemp("other-weights") / "emb", seed=7)
    config = tiny_embedder(SWAP, other)
    config["source"]["revision"] = "7" * 40
    write_config(catalog, config)  # seen by the running server's catalog within its rescan interval
    fresh: list[list[bytes]] = []

    def new_weights_loaded() -> bool:
        fresh[:] = [vectors(encode(server.url, SWAP, text, **{BYPASS[0]: BYPASS[1]}))]
        return fresh[0] != old

    wait_until(new_weights_loaded, timeout=60, interval=0.2, message="the new revision was never loaded")
    new = encode(server.url, SWAP, text)  # no reload call: the key itself changed with the config
    assert new["timing"]["cache_hits"] == 0 and vectors(new) == fresh[0] != old
    assert encode(server.url, SWAP, text)["timing"]["cache_hits"] == 1
    assert httpx.post(f"{server.url}/v1/models/{SWAP}/reload", timeout=60).status_code == 200
    assert encode(server.url, SWAP, text)["timing"]["cache_hits"] == 0  # a reload drops the model's entries


def test_size_zero_turns_it_off(catalog: Path, tmp_path: Path) -> None:
    proc = serve(catalog, tmp_path, "--encode-cache", "0")
    try:
        for _ in range(2):
            assert encode(proc.url, EMB, ["same", "same"])["timing"]["cache_hits"] == 0
        assert scrape(proc.url, "sie_batch_items_sum", model=EMB) == 4  # every item ran
        assert scrape(proc.url, "sie_cache_bytes") == 0
        assert httpx.get(f"{proc.url}/v1/memory").json()["cache_bytes"] == 0
    finally:
        proc.stop()
