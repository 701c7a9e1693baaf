"""Sparse (SPLADE) and multivector (ColBERT) encode and score, with tiny models and the packaged small SPLADE."""

from __future__ import annotations

import httpx
import msgpack
import numpy as np

from tests.conftest import TINY_VOCAB
from tests.helpers.catalog import SPLADE_SMALL
from tests.helpers.invoice import INVOICE_PASSAGES, INVOICE_QUERY

SPLADE, COLBERT = "test/tiny-splade", "test/tiny-colbert"


def encode(base_url: str, model: str, texts: list[str], **params: object) -> dict:  # type: ignore[type-arg]
    body = {"items": [{"text": t} for t in texts], "params": params}
    r = httpx.post(f"{base_url}/v1/encode/{model}", json=body, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def test_sparse_shape_and_values(base_url: str) -> None:
    item = encode(base_url, SPLADE, ["invoice total due"], output_types=["sparse"])["items"][0]
    assert "dense" not in item
    sparse = item["sparse"]
    indices, values = np.array(sparse["indices"]), np.array(sparse["values"])
    assert sparse["dims"] == TINY_VOCAB and sparse["dtype"] == "float32"
    assert len(indices) == len(values) > 0
    assert np.all(np.diff(indices) > 0) and indices.max() < TINY_VOCAB
    assert np.all(values > 0)


def test_sparse_in_msgpack_is_numpy_arrays(base_url: str) -> None:
    body = msgpack.packb({"items": [{"text": "hello"}], "params": {"output_types": ["sparse"]}})
    r = httpx.post(
        f"{base_url}/v1/encode/{SPLADE}",
        content=body,
        headers={"Content-Type": "application/msgpack", "Accept": "application/msgpack"},
    )
    sparse = msgpack.unpackb(r.content, raw=False, strict_map_key=False)["items"][0]["sparse"]
    assert sparse["indices"][b"type"] == "<i4" and sparse["values"][b"type"] == "<f4"


def test_sparse_score_is_the_dot_product(base_url: str) -> None:
    docs = ["invoice total due", "lunch at the cafeteria"]
    q = encode(base_url, SPLADE, ["invoice"], output_types=["sparse"], options={"is_query": True})["items"][0]["sparse"]
    d = [i["sparse"] for i in encode(base_url, SPLADE, docs, output_types=["sparse"])["items"]]

    def dot(a: dict, b: dict) -> float:  # type: ignore[type-arg]
        shared = dict(zip(b["indices"], b["values"], strict=True))
        return sum(v * shared.get(i, 0.0) for i, v in zip(a["indices"], a["values"], strict=True))

    body = {"query": {"text": "invoice"}, "items": [{"id": str(i), "text": t} for i, t in enumerate(docs)]}
    scores = {s["item_id"]: s["score"] for s in httpx.post(f"{base_url}/v1/score/{SPLADE}", json=body).json()["scores"]}
    assert scores["0"] == np.float32(dot(q, d[0])) or abs(scores["0"] - dot(q, d[0])) < 1e-4
    assert abs(scores["1"] - dot(q, d[1])) < 1e-4


def test_multivector_shapes_markers_and_query_padding(base_url: str) -> None:
    doc = encode(base_url, COLBERT, ["hello world , acme ."], output_types=["multivector"])["items"][0]["multivector"]
    # [CLS] [D] hello world acme [SEP]: the two punctuation tokens are masked in documents
    assert doc["num_tokens"] == 6 and doc["token_dims"] == 16
    vectors = np.array(doc["values"])
    assert vectors.shape == (6, 16)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    query = encode(base_url, COLBERT, ["hello ,"], output_types=["multivector"], options={"is_query": True})
    assert query["items"][0]["multivector"]["num_tokens"] == 12  # padded with [MASK] to query_max_length


def test_maxsim_score_matches_the_vectors(base_url: str) -> None:
    docs = ["invoice total due", "lunch"]
    q = np.array(
        encode(base_url, COLBERT, ["invoice"], output_types=["multivector"], options={"is_query": True})["items"][0][
            "multivector"
        ]["values"]
    )
    ds = [
        np.array(i["multivector"]["values"])
        for i in encode(base_url, COLBERT, docs, output_types=["multivector"])["items"]
    ]
    expected = {str(i): float((q @ d.T).max(axis=1).sum()) for i, d in enumerate(ds)}
    body = {"query": {"text": "invoice"}, "items": [{"id": str(i), "text": t} for i, t in enumerate(docs)]}
    got = {s["item_id"]: s["score"] for s in httpx.post(f"{base_url}/v1/score/{COLBERT}", json=body).json()["scores"]}
    assert got.keys() == expected.keys()
    for key in got:
        assert abs(got[key] - expected[key]) < 1e-4


def test_dense_dtypes(base_url: str) -> None:
    f32 = np.array(encode(base_url, "test/tiny-embedder", ["hello"])["items"][0]["dense"]["values"])
    int8 = encode(base_url, "test/tiny-embedder", ["hello"], output_dtype="int8")["items"][0]["dense"]
    assert int8["dtype"] == "int8" and int8["dims"] == 32
    np.testing.assert_array_equal(int8["values"], np.clip(np.rint(f32 * 127), -127, 127))
    ubinary = encode(base_url, "test/tiny-embedder", ["hello"], output_dtype="ubinary")["items"][0]["dense"]
    assert len(ubinary["values"]) == 4
    np.testing.assert_array_equal(ubinary["values"], np.packbits(f32 > 0))
    binary = encode(base_url, "test/tiny-embedder", ["hello"], output_dtype="binary")["items"][0]["dense"]
    np.testing.assert_array_equal(np.array(binary["values"]) + 128, np.packbits(f32 > 0))


def test_packaged_splade_ranks_the_invoice_first(base_url: str) -> None:
    items = [{"id": k, "text": v} for k, v in INVOICE_PASSAGES.items()]
    r = httpx.post(
        f"{base_url}/v1/score/{SPLADE_SMALL}", json={"query": {"text": INVOICE_QUERY}, "items": items}, timeout=120
    )
    order = [s["item_id"] for s in r.json()["scores"]]
    assert order[0] == "invoice"
    query = encode(base_url, SPLADE_SMALL, [INVOICE_QUERY], output_types=["sparse"], options={"is_query": True})
    assert query["items"][0]["sparse"]["dims"] == 30522


def test_sdk_maxsim_equals_the_server_score(base_url: str) -> None:
    from sie_sdk import SIEClient, maxsim

    with SIEClient(base_url) as client:
        query = client.encode(COLBERT, "invoice", output_types=["multivector"], is_query=True)["multivector"]
        doc = client.encode(COLBERT, "invoice total due", output_types=["multivector"])["multivector"]
        served = client.score(COLBERT, {"text": "invoice"}, [{"id": "d", "text": "invoice total due"}])
    assert abs(maxsim(query, doc) - served["scores"][0]["score"]) < 1e-4
