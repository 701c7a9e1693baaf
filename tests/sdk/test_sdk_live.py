"""Both clients against the real server process of the repo-level ``base_url`` fixture.

The rest of tests/sdk checks the SDK against a fake; this module checks that the SDK and
the server read the wire contract the same way. It uses only models whose state the
server tests do not depend on (not test/tiny-cold).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import numpy as np
import pytest
from sdk_fakes import Api

from sie_sdk import (
    InvalidInputError,
    ModelLoadFailedError,
    ModelNotFoundError,
    SIEAsyncClient,
    SIEClient,
)

TINY = "test/tiny-embedder"
RERANKER = "test/tiny-reranker"


@pytest.fixture
async def live(mode: str, base_url: str) -> AsyncIterator[Api]:
    api = Api(SIEClient(base_url) if mode == "sync" else SIEAsyncClient(base_url))
    yield api
    await api.close()


async def test_encode_in_both_wires(live: Api, base_url: str) -> None:
    texts = ["hello world", "invoice total due"]
    results = await live.encode(TINY, texts)
    assert [r["id"] for r in results] == ["item-0", "item-1"]
    for result in results:
        assert result["model"] == TINY
        assert result["dense"].dtype == np.float32 and result["dense"].shape == (32,)
        assert np.linalg.norm(result["dense"]) == pytest.approx(1.0, abs=1e-5)
    with SIEClient(base_url, wire="json") as json_client:
        as_json = json_client.encode(TINY, texts)
    for msgpack_result, json_result in zip(results, as_json, strict=True):
        assert json_result["dense"].dtype == np.float32
        np.testing.assert_allclose(json_result["dense"], msgpack_result["dense"], atol=1e-6)


async def test_encode_single_item_float16_and_priority(live: Api) -> None:
    result = await live.encode(TINY, {"id": "a", "text": "hi"}, output_dtype="float16", priority="batch")
    assert result["id"] == "a"
    assert result["dense"].dtype == np.float16 and result["dense"].shape == (32,)


async def test_score(live: Api) -> None:
    result = await live.score(
        RERANKER,
        {"id": "q", "text": "invoice total"},
        [{"id": "d0", "text": "lunch"}, {"id": "d1", "text": "invoice"}],
    )
    assert result["model"] == RERANKER and result["query_id"] == "q"
    assert sorted(entry["item_id"] for entry in result["scores"]) == ["d0", "d1"]
    assert [entry["rank"] for entry in result["scores"]] == [0, 1]
    assert result["scores"][0]["score"] >= result["scores"][1]["score"]


async def test_models_and_health(live: Api) -> None:
    assert await live.health() is True
    assert TINY in {model["id"] for model in await live.list_models()}
    assert (await live.get_model(TINY))["id"] == TINY
    with pytest.raises(ModelNotFoundError) as caught:
        await live.get_model("nobody/nothing")
    assert caught.value.status_code == 404 and caught.value.code == "MODEL_NOT_FOUND"


async def test_errors_from_the_server(live: Api) -> None:
    with pytest.raises(InvalidInputError, match="does not support extract"):
        await live.extract(TINY, "x", labels=["person"])
    with pytest.raises(InvalidInputError, match="does not support generate"):
        await live.generate(TINY, "x")
    with pytest.raises(InvalidInputError, match="does not support encode"):
        await live.encode(RERANKER, "x")
    with pytest.raises(ModelLoadFailedError) as caught:
        await live.encode("test/missing-weights", "x")
    assert caught.value.status_code == 502


async def test_generate_and_extract_live(live: Api) -> None:
    answer = await live.generate("test/tiny-llm", "hello world", max_new_tokens=6)
    assert answer["usage"]["completion_tokens"] <= 6 and answer["finish_reason"] in ("stop", "length")
    chunks = await live.stream("test/tiny-llm", messages=[{"role": "user", "content": "hi"}], max_new_tokens=6)
    assert chunks[-1]["finish_reason"] in ("stop", "length") and "usage" in chunks[-1]
    found = await live.extract(
        "test/tiny-gliner", {"text": "Acme Corp sent an invoice"}, labels=["company"], threshold=0.0
    )
    assert found["entities"] and all("start" in e and "end" in e for e in found["entities"])
