"""Ollama's API (``/api/...``) through the official ``ollama`` client and ``langchain-ollama``, unmodified, on
the packaged MiniLM (embeddings equal to ``/v1/encode``'s) and SmolLM2 (chat and generate, streamed and whole,
``format`` as JSON and as a schema, tools), the catalog as Ollama lists it, and Ollama's errors."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import jsonschema
import numpy as np
import ollama
import pytest
from langchain_ollama import ChatOllama, OllamaEmbeddings
from pydantic import BaseModel, Field

from tests.conftest import TARGET
from tests.helpers.catalog import MINILM, SMOLLM

GATEWAY = TARGET == "gateway"

TEXTS = ["The invoice from Acme Corp is due on 3 May.", "Paris is the capital of France."]
QUESTION = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]
GREEDY: dict[str, Any] = {"temperature": 0, "num_predict": 8}
WEATHER: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city now.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 30}},
            "required": ["city"],
        },
    },
}


class Capital(BaseModel):
    country: str = Field(max_length=30)
    capital: str = Field(max_length=30)


@pytest.fixture(scope="module")
def client(base_url: str) -> Iterator[ollama.Client]:
    with ollama.Client(host=base_url, timeout=300) as opened:
        yield opened


def close(model: OllamaEmbeddings | ChatOllama) -> None:
    """LangChain's Ollama classes never close their ``ollama`` client's connections: close them here."""
    if model._client is not None:
        model._client.close()  # type: ignore[no-untyped-call]


def native_vectors(base_url: str, texts: list[str]) -> np.ndarray:
    r = httpx.post(f"{base_url}/v1/encode/{MINILM}", json={"items": [{"text": t} for t in texts]}, timeout=120)
    assert r.status_code == 200, r.text
    return np.asarray([item["dense"]["values"] for item in r.json()["items"]])


def test_embed_gives_the_vectors_of_native_encode(client: ollama.Client, base_url: str) -> None:
    expected = native_vectors(base_url, TEXTS)
    answer = client.embed(model=MINILM, input=TEXTS)
    assert np.asarray(answer.embeddings).shape == (2, 384)
    np.testing.assert_allclose(answer.embeddings, expected, atol=1e-5)
    assert answer.model == MINILM and answer.prompt_eval_count and answer.prompt_eval_count > 10
    assert answer.total_duration and answer.total_duration > 0
    one = client.embed(model=f"{MINILM}:latest", input=TEXTS[1])  # Ollama's default tag
    np.testing.assert_allclose(one.embeddings[0], expected[1], atol=1e-5)
    legacy = client.embeddings(model=MINILM, prompt=TEXTS[0])
    np.testing.assert_allclose(legacy.embedding, expected[0], atol=1e-5)
    with pytest.raises(ollama.ResponseError) as refused:  # truncate false: an input past 256 tokens is refused
        client.embed(model=MINILM, input="word " * 400, truncate=False)
    assert refused.value.status_code == 400


def test_langchain_ollama_embeddings(base_url: str) -> None:
    embedder = OllamaEmbeddings(model=MINILM, base_url=base_url)
    expected = native_vectors(base_url, TEXTS)
    try:
        np.testing.assert_allclose(embedder.embed_documents(TEXTS), expected, atol=1e-5)
        np.testing.assert_allclose(embedder.embed_query(TEXTS[1]), expected[1], atol=1e-5)
    finally:
        close(embedder)


def test_chat_whole_and_streamed_give_the_same_answer(client: ollama.Client) -> None:
    whole = client.chat(model=SMOLLM, messages=QUESTION, options=GREEDY)
    assert whole.message.role == "assistant" and "Paris" in (whole.message.content or "")
    assert whole.done and whole.done_reason in ("stop", "length")
    assert whole.eval_count and 1 <= whole.eval_count <= 8
    assert whole.prompt_eval_count and whole.prompt_eval_count > 10 and whole.total_duration
    parts = list(client.chat(model=SMOLLM, messages=QUESTION, options=GREEDY, stream=True))
    assert len(parts) >= 2 and [p.done for p in parts] == [False] * (len(parts) - 1) + [True]
    assert "".join(p.message.content or "" for p in parts) == whole.message.content
    last = parts[-1]
    assert last.done_reason == whole.done_reason and last.eval_count == whole.eval_count
    assert last.eval_duration and last.eval_duration > 0 and last.prompt_eval_duration
    assert last.total_duration and last.total_duration >= last.eval_duration


def test_generate_and_streaming_by_default(client: ollama.Client, base_url: str) -> None:
    answer = client.generate(model=SMOLLM, prompt=QUESTION[0]["content"], options=GREEDY)
    text = answer.response or ""
    assert "Paris" in text and answer.done
    # without `stream`, Ollama's API streams: one JSON object a line
    body = {"model": SMOLLM, "prompt": QUESTION[0]["content"], "options": GREEDY}
    r = httpx.post(f"{base_url}/api/generate", json=body, timeout=120)
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/x-ndjson")
    lines = [json.loads(line) for line in r.text.splitlines()]
    assert lines[-1]["done"] is True and "".join(line["response"] for line in lines) == text


def test_format_json_and_a_schema(client: ollama.Client) -> None:
    ask = [{"role": "user", "content": "Give the country France and its capital as JSON."}]
    free = client.chat(model=SMOLLM, messages=ask, format="json", options={"temperature": 0, "num_predict": 64})
    assert free.done_reason == "stop"
    assert isinstance(json.loads(free.message.content or ""), dict)
    schema = Capital.model_json_schema()  # as Ollama's docs pass a pydantic model (titles and all)
    shaped = client.generate(
        model=SMOLLM, prompt=ask[0]["content"], format=schema, options={"temperature": 0, "num_predict": 64}
    )
    assert shaped.done_reason == "stop"
    found = Capital.model_validate_json(shaped.response or "")
    jsonschema.validate(found.model_dump(), schema)


@pytest.mark.skipif(
    GATEWAY, reason="the gateway relays the same generation; test_tool_calls.py reads its tool calls there"
)
def test_tools_give_a_call_with_object_arguments_and_a_result_goes_back(client: ollama.Client) -> None:
    ask = [{"role": "user", "content": "What is the weather in Paris? Use the get_weather tool."}]
    first = client.chat(model=SMOLLM, messages=ask, tools=[WEATHER], options={"temperature": 0, "num_predict": 80})
    calls = first.message.tool_calls or []
    assert len(calls) == 1 and calls[0].function.name == "get_weather"
    jsonschema.validate(dict(calls[0].function.arguments), WEATHER["function"]["parameters"])
    result = {"role": "tool", "content": '{"sky": "clear", "celsius": 21}', "tool_name": "get_weather"}
    history: list[Any] = [*ask, first.message, result]
    follow = client.chat(model=SMOLLM, messages=history, options={"temperature": 0, "num_predict": 12})
    assert follow.message.content and not follow.message.tool_calls


def test_langchain_chat_ollama(base_url: str) -> None:
    chat = ChatOllama(model=SMOLLM, base_url=base_url, temperature=0, num_predict=8)
    try:  # ChatOllama reads every answer as a stream (NDJSON), joined
        answer = chat.invoke("What is the capital of France? Answer in one word.")
    finally:
        close(chat)
    assert "Paris" in str(answer.content)
    assert answer.response_metadata["done_reason"] in ("stop", "length") and answer.usage_metadata
    assert 1 <= answer.usage_metadata["output_tokens"] <= 8


def test_catalog_as_ollama_lists_it(client: ollama.Client, base_url: str) -> None:
    assert client.generate(model=SMOLLM).done_reason == "load"  # an empty prompt loads the model
    listed = {m.model: m for m in client.list().models}
    assert {MINILM, SMOLLM} <= set(listed)
    smol = listed[SMOLLM]
    assert smol.details and smol.details.format == "gguf" and smol.details.family == "llama"
    assert smol.digest and len(smol.digest) == 64 and smol.modified_at is not None
    shown = client.show(SMOLLM)
    assert shown.capabilities and "completion" in shown.capabilities and "embedding" not in shown.capabilities
    assert shown.modelinfo and shown.modelinfo["llama.context_length"] == 8192
    minilm = client.show(f"{MINILM}:latest")
    assert (
        minilm.capabilities == ["embedding"] and minilm.modelinfo and minilm.modelinfo["bert.embedding_length"] == 384
    )
    running = {m.model: m for m in client.ps().models}
    size = running[SMOLLM].size if SMOLLM in running else None
    assert size is not None and size > 10_000_000
    version = httpx.get(f"{base_url}/api/version", timeout=30).json()["version"]
    assert [int(p) for p in version.split(".")] >= [0, 6, 0]


def test_errors_as_the_client_raises_them(client: ollama.Client, base_url: str) -> None:
    with pytest.raises(ollama.ResponseError) as missing:
        client.chat(model="no/such-model", messages=QUESTION)
    assert missing.value.status_code == 404 and "no/such-model" in missing.value.error
    with pytest.raises(ollama.ResponseError) as streamed:
        list(client.chat(model="no/such-model", messages=QUESTION, stream=True))
    assert streamed.value.status_code == 404
    with pytest.raises(ollama.ResponseError) as wrong:  # a generator does not embed
        client.embed(model=SMOLLM, input="hello")
    assert wrong.value.status_code == 400
    with pytest.raises(ollama.ResponseError) as unknown:
        client.show("no/such-model")
    assert unknown.value.status_code == 404
    r = httpx.post(f"{base_url}/api/embed", json={"model": MINILM, "input": []}, timeout=30)
    assert r.status_code == 400 and set(r.json()) == {"error"} and r.headers["x-sie-error-code"] == "INVALID_INPUT"


def test_the_spec_documents_ollama_errors_and_ndjson(base_url: str) -> None:
    paths = httpx.get(f"{base_url}/openapi.json", timeout=30).json()["paths"]
    chat = paths["/api/chat"]["post"]["responses"]
    assert {"application/json", "application/x-ndjson"} == set(chat["200"]["content"])
    for path, method in (("/api/chat", "post"), ("/api/embed", "post"), ("/api/show", "post"), ("/api/tags", "get")):
        schema = paths[path][method]["responses"]["400"]["content"]["application/json"]["schema"]
        assert schema["$ref"].endswith("/OllamaError"), path
