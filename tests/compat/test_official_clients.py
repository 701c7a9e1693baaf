"""The official ``openai`` and ``cohere`` Python clients, unmodified, against this server (and the gateway).

Each client gets the shared server's loopback URL and a dummy key; pytest-socket refuses any other host, so
a client that phoned home (telemetry, a tokenizer download) would fail the test instead of reaching out.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import cohere
import httpx
import numpy as np
import openai
import pytest

pytestmark = pytest.mark.allow_hosts(["127.0.0.1", "::1"])

EMBEDDER = "test/tiny-embedder"
RERANKER = "test/tiny-reranker"
LLM = "test/tiny-llm"
MISSING = "nope/no-such-model"
TEXTS = ["hello world", "invoice total due by 31 March"]
QUERY = "how much is the invoice total"
DOCUMENTS = ["lunch is served at noon", "invoice total due: 4,250 EUR", "hello world", "quarterly revenue grew"]
DUMMY_KEY = "sk-test-not-a-real-key"


@pytest.fixture
def client(base_url: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{base_url}/v1", api_key=DUMMY_KEY, max_retries=0, timeout=120) as c:
        yield c


@pytest.fixture
def cohere_http() -> Iterator[httpx.Client]:
    """The cohere clients' transport, closed after each test (a client left to the garbage collector leaks it)."""
    with httpx.Client(timeout=120) as http:
        yield http


def native_vectors(base_url: str, texts: list[str]) -> np.ndarray:
    r = httpx.post(f"{base_url}/v1/encode/{EMBEDDER}", json={"items": [{"text": t} for t in texts]}, timeout=60)
    assert r.status_code == 200, r.text
    return np.array([item["dense"]["values"] for item in r.json()["items"]], dtype="<f4")


def native_order(base_url: str) -> list[tuple[int, float]]:
    """(document index, score) best first, from ``/v1/score``."""
    body = {"query": {"text": QUERY}, "items": [{"id": str(i), "text": d} for i, d in enumerate(DOCUMENTS)]}
    r = httpx.post(f"{base_url}/v1/score/{RERANKER}", json=body, timeout=60)
    assert r.status_code == 200, r.text
    scores = sorted(r.json()["scores"], key=lambda s: s["rank"])
    return [(int(s["item_id"]), s["score"]) for s in scores]


# --- OpenAI: embeddings -------------------------------------------------------------------------------------


def test_embeddings_float_equal_native_encode(client: openai.OpenAI, base_url: str) -> None:
    response = client.embeddings.create(model=EMBEDDER, input=TEXTS, encoding_format="float")
    assert response.model == EMBEDDER and [d.index for d in response.data] == [0, 1]
    got = np.array([d.embedding for d in response.data], dtype="<f4")
    np.testing.assert_allclose(got, native_vectors(base_url, TEXTS), atol=1e-6)
    assert response.usage.prompt_tokens > 0 and response.usage.total_tokens == response.usage.prompt_tokens


def test_embeddings_base64_equal_native_encode(client: openai.OpenAI, base_url: str) -> None:
    response = client.embeddings.create(model=EMBEDDER, input=TEXTS, encoding_format="base64")
    raw: list[Any] = [d.embedding for d in response.data]
    assert all(isinstance(e, str) for e in raw)
    got = np.array([np.frombuffer(base64.b64decode(e), dtype="<f4") for e in raw])
    np.testing.assert_allclose(got, native_vectors(base_url, TEXTS), atol=1e-6)


def test_embeddings_client_default_decodes_the_same_numbers(client: openai.OpenAI, base_url: str) -> None:
    # without encoding_format the client asks for base64 itself and hands back floats
    response = client.embeddings.create(model=EMBEDDER, input=TEXTS[0])
    assert len(response.data) == 1 and len(response.data[0].embedding) == 32
    np.testing.assert_allclose(response.data[0].embedding, native_vectors(base_url, TEXTS[:1])[0], atol=1e-6)


# --- OpenAI: models ----------------------------------------------------------------------------------------


def test_models_list_finds_the_catalog(client: openai.OpenAI) -> None:
    models = list(client.models.list())
    by_id = {m.id: m for m in models}
    assert {EMBEDDER, RERANKER, LLM} <= set(by_id)
    for model in models:
        assert model.object == "model"
        assert isinstance(model.created, int) and isinstance(model.owned_by, str) and model.owned_by


def test_models_retrieve_an_id_with_a_slash(client: openai.OpenAI) -> None:
    assert client.models.retrieve(EMBEDDER).id == EMBEDDER


# --- OpenAI: chat and completions --------------------------------------------------------------------------

CHAT = [{"role": "user", "content": "hello"}]


def test_chat_completion(client: openai.OpenAI) -> None:
    r = client.chat.completions.create(model=LLM, messages=CHAT, max_tokens=8, temperature=0)  # type: ignore[arg-type]
    assert r.object == "chat.completion" and r.model == LLM
    choice = r.choices[0]
    assert choice.message.role == "assistant" and choice.message.content
    assert choice.finish_reason in ("stop", "length")
    assert r.usage is not None and r.usage.prompt_tokens > 0 and 1 <= r.usage.completion_tokens <= 8
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


def test_chat_completion_streamed_equals_plain(client: openai.OpenAI) -> None:
    kwargs: dict[str, Any] = {"model": LLM, "messages": CHAT, "max_tokens": 8, "temperature": 0}
    plain = client.chat.completions.create(**kwargs)
    stream = client.chat.completions.create(**kwargs, stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    assert chunks and all(c.object == "chat.completion.chunk" for c in chunks)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text and text == plain.choices[0].message.content
    reasons = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert reasons == [plain.choices[0].finish_reason]
    usages = [c.usage for c in chunks if c.usage is not None]
    assert len(usages) == 1 and plain.usage is not None
    assert usages[0].completion_tokens == plain.usage.completion_tokens
    assert usages[0].prompt_tokens == plain.usage.prompt_tokens


def test_completion_plain_and_streamed(client: openai.OpenAI) -> None:
    plain = client.completions.create(model=LLM, prompt="hello", max_tokens=5, temperature=0)
    assert plain.object == "text_completion" and plain.choices[0].text
    assert plain.choices[0].finish_reason in ("stop", "length")
    assert plain.usage is not None and 1 <= plain.usage.completion_tokens <= 5 and plain.usage.prompt_tokens > 0
    chunks = list(client.completions.create(model=LLM, prompt="hello", max_tokens=5, temperature=0, stream=True))
    assert "".join(c.choices[0].text for c in chunks if c.choices) == plain.choices[0].text
    reasons = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert reasons == [plain.choices[0].finish_reason]
    usages = [c.usage for c in chunks if c.usage is not None]
    assert len(usages) == 1 and usages[0].completion_tokens == plain.usage.completion_tokens


# --- OpenAI: errors ----------------------------------------------------------------------------------------


def assert_openai_not_found(error: openai.NotFoundError) -> None:
    assert error.status_code == 404
    assert MISSING in error.message
    # OpenAI's shape, which the client unwraps: {"error": {"message", "type", "param", "code"}}
    assert isinstance(error.body, dict) and {"message", "type", "param", "code"} <= set(error.body)
    assert MISSING in error.body["message"] and isinstance(error.type, str)
    assert error.response.headers["x-sie-error-code"] == "MODEL_NOT_FOUND"


def test_unknown_model_embeddings_is_not_found(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        client.embeddings.create(model=MISSING, input="hello")
    assert_openai_not_found(caught.value)


def test_unknown_model_chat_is_not_found(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(model=MISSING, messages=CHAT, max_tokens=4)  # type: ignore[arg-type]
    assert_openai_not_found(caught.value)


def test_unknown_model_retrieve_is_not_found(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        client.models.retrieve(MISSING)
    assert_openai_not_found(caught.value)


# --- Cohere: rerank ----------------------------------------------------------------------------------------


def test_cohere_v1_client_rerank_matches_native_score(base_url: str, cohere_http: httpx.Client) -> None:
    co = cohere.Client(api_key=DUMMY_KEY, base_url=base_url, httpx_client=cohere_http)
    r = co.rerank(model=RERANKER, query=QUERY, documents=DOCUMENTS, return_documents=True)
    assert isinstance(r.id, str) and r.id  # Cohere's shape names each answer
    expected = native_order(base_url)
    assert [res.index for res in r.results] == [i for i, _ in expected]
    scores = [res.relevance_score for res in r.results]
    assert scores == sorted(scores, reverse=True)
    assert all(res.document is not None and res.document.text == DOCUMENTS[res.index] for res in r.results)


def test_cohere_v2_client_rerank_matches_native_score(base_url: str, cohere_http: httpx.Client) -> None:
    co = cohere.ClientV2(api_key=DUMMY_KEY, base_url=base_url, httpx_client=cohere_http)
    r = co.rerank(model=RERANKER, query=QUERY, documents=DOCUMENTS)
    assert isinstance(r.id, str) and r.id
    expected = native_order(base_url)
    assert [res.index for res in r.results] == [i for i, _ in expected]
    scores = [res.relevance_score for res in r.results]
    assert scores == sorted(scores, reverse=True)
    top = co.rerank(model=RERANKER, query=QUERY, documents=DOCUMENTS, top_n=2)
    assert [res.index for res in top.results] == [i for i, _ in expected[:2]]


@pytest.mark.parametrize("client_class", [cohere.Client, cohere.ClientV2], ids=["v1", "v2"])
def test_cohere_unknown_model_is_not_found(base_url: str, cohere_http: httpx.Client, client_class: Any) -> None:
    co = client_class(api_key=DUMMY_KEY, base_url=base_url, httpx_client=cohere_http)
    with pytest.raises(cohere.NotFoundError) as caught:
        co.rerank(model=MISSING, query=QUERY, documents=DOCUMENTS)
    assert caught.value.status_code == 404 and MISSING in str(caught.value.body)
