"""No parameter is dropped in silence (issue 46, item 4). On every route, native and compatible (OpenAI,
Cohere, Jina, TEI, Ollama), a parameter the route knows but the model cannot honour is a 400 that names
the parameter; a parameter a native route does not know is a 400 naming it; one a compatible route does
not know is accepted (the original clients send such fields), and the fields those clients send that
this server does not use are listed in the OpenAPI spec. Ollama's ``keep_alive`` takes its real types
and refuses anything else by name. Real models: the packaged MiniLM and SmolLM2; tiny ones beside them.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.helpers.catalog import MINILM, SMOLLM

RERANKER = "test/tiny-reranker"  # a cross-encoder with a 64-token limit
SPLADE = "test/tiny-splade"
GLINER = "test/tiny-gliner"
LLM = "test/tiny-llm"  # its tokenizer has no byte-level decoder: the grammar engine cannot constrain it
LONG = "word " * 400  # past MiniLM's 256-token limit (2,000 bytes: under the test server's text limit)
PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
HI = [{"role": "user", "content": "hi"}]
#: a JSON schema the grammar engine refuses under strict mode (Ollama's ``format`` is best effort: it passes)
UNUSABLE_SCHEMA = {"type": "object", "properties": {"a": {"type": "string", "format": "no-such-format"}}}
JSON_OBJECT = {"type": "json_object"}
UNUSABLE_FORMAT = {"type": "json_schema", "json_schema": {"name": "x", "schema": UNUSABLE_SCHEMA, "strict": True}}

KNOWN_BUT_UNSERVED: list[tuple[str, dict[str, Any], str]] = [
    # native
    (f"/v1/encode/{MINILM}", {"items": [{"text": "hi"}], "params": {"dims": 100}}, "params.dims"),
    (f"/v1/encode/{MINILM}", {"items": [{"images": [{"data": PIXEL}]}]}, "images"),
    (f"/v1/encode/{MINILM}", {"items": [{"text": "hi"}], "params": {"output_types": ["sparse"]}}, "output_types"),
    (f"/v1/encode/{MINILM}", {"items": [{"text": LONG}], "params": {"truncation": "error"}}, "params.truncation"),
    (f"/v1/encode/{SPLADE}", {"items": [{"text": "hi"}], "params": {"output_types": ["sparse"], "instruction": "find"}},
     "params.instruction"),
    (f"/v1/score/{RERANKER}", {"query": {"text": "q"}, "items": [{"text": "a"}], "instruction": "rank"}, "instruction"),
    (f"/v1/score/{MINILM}", {"query": {"images": [{"data": PIXEL}]}, "items": [{"text": "a"}]}, "images"),
    (f"/v1/extract/{GLINER}", {"items": [{"text": "Acme"}], "params": {"schema": {"entities": ["co"]}}}, "schema"),
    (f"/v1/extract/{GLINER}", {"items": [{"images": [{"data": PIXEL}]}], "params": {"labels": ["co"]}}, "images"),
    (f"/v1/generate/{SMOLLM}", {"prompt": "hi", "max_new_tokens": 4, "grammar": {"json_schema": UNUSABLE_SCHEMA}},
     "grammar"),
    (f"/v1/generate/{LLM}", {"prompt": "hi", "max_new_tokens": 4, "grammar": {"regex": "[ab]+"}}, "grammar"),
    # OpenAI
    ("/v1/embeddings", {"model": MINILM, "input": "hi", "dimensions": 100}, "dimensions"),
    ("/v1/chat/completions", {"model": SMOLLM, "messages": HI, "max_tokens": 4, "response_format": UNUSABLE_FORMAT},
     "response_format"),
    ("/v1/chat/completions", {"model": LLM, "messages": HI, "max_tokens": 4, "response_format": JSON_OBJECT},
     "response_format"),
    ("/v1/chat/completions", {"model": SMOLLM, "messages": HI, "max_tokens": 4, "logprobs": True}, "logprobs"),
    ("/v1/chat/completions", {"model": SMOLLM, "messages": HI, "max_tokens": 4, "top_logprobs": 3}, "top_logprobs"),
    ("/v1/chat/completions", {"model": SMOLLM, "messages": HI, "max_tokens": 4, "logit_bias": {"1": 5}},
     "logit_bias"),
    ("/v1/chat/completions", {"model": SMOLLM, "messages": HI, "max_tokens": 4, "n": 2}, "n"),
    ("/v1/chat/completions",
     {"model": SMOLLM, "max_tokens": 4,
      "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
     "image_url"),
    ("/v1/completions", {"model": SMOLLM, "prompt": "hi", "max_tokens": 4, "response_format": UNUSABLE_FORMAT},
     "response_format"),
    ("/v1/completions", {"model": LLM, "prompt": "hi", "max_tokens": 4, "response_format": JSON_OBJECT},
     "response_format"),
    ("/v1/completions", {"model": SMOLLM, "prompt": "hi", "max_tokens": 4, "echo": True}, "echo"),
    ("/v1/completions", {"model": SMOLLM, "prompt": "hi", "max_tokens": 4, "suffix": "end"}, "suffix"),
    ("/v1/completions", {"model": SMOLLM, "prompt": "hi", "max_tokens": 4, "best_of": 2}, "best_of"),
    ("/v1/completions", {"model": SMOLLM, "prompt": "hi", "max_tokens": 4, "logprobs": 2}, "logprobs"),
    ("/v1/responses",
     {"model": SMOLLM, "input": "hi", "max_output_tokens": 4,
      "text": {"format": {"type": "json_schema", "name": "x", "schema": UNUSABLE_SCHEMA, "strict": True}}},
     "text.format"),
    ("/v1/responses", {"model": LLM, "input": "hi", "max_output_tokens": 4, "text": {"format": JSON_OBJECT}},
     "text.format"),
    # Jina (OpenAI's embeddings shape with Jina's fields)
    ("/v1/embeddings", {"model": MINILM, "input": "hi", "normalized": False}, "normalized"),
    ("/v1/embeddings", {"model": MINILM, "input": LONG, "truncate": False}, "truncate"),
    ("/v1/embeddings", {"model": MINILM, "input": "hi", "late_chunking": True}, "late_chunking"),
    ("/v1/embeddings", {"model": MINILM, "input": "hi", "task": "classification"}, "task"),
    ("/v1/embeddings", {"model": MINILM, "input": "hi", "embedding_type": "binary"}, "embedding_type"),
    # Cohere and Jina rerank
    ("/v1/rerank", {"model": MINILM, "query": "q", "documents": ["a"], "max_chunks_per_doc": 4}, "max_chunks_per_doc"),
    ("/v2/rerank", {"model": MINILM, "query": "q", "documents": ["a"], "max_tokens_per_doc": 16}, "max_tokens_per_doc"),
    ("/v2/rerank", {"model": MINILM, "query": "q", "documents": ["a"], "rank_fields": ["title"]}, "rank_fields"),
    # TEI
    ("/embed", {"model": MINILM, "inputs": "hi", "normalize": False}, "normalize"),
    ("/embed", {"model": MINILM, "inputs": "hi", "dimensions": 100}, "dimensions"),
    ("/embed", {"model": MINILM, "inputs": LONG, "truncate": False}, "truncate"),
    ("/embed", {"model": MINILM, "inputs": "hi", "truncation_direction": "Left"}, "truncation_direction"),
    ("/embed", {"model": MINILM, "inputs": "hi", "prompt_name": "summary"}, "prompt_name"),
    ("/embed_sparse", {"model": MINILM, "inputs": "hi"}, "sparse"),
    ("/embed_all", {"model": MINILM, "inputs": "hi"}, "/embed_all"),
    ("/rerank", {"model": RERANKER, "query": "q", "texts": ["word " * 100], "truncate": False}, "truncate"),
    ("/similarity",
     {"model": MINILM, "inputs": {"source_sentence": LONG, "sentences": ["a"]}, "parameters": {"truncate": False}},
     "truncate"),
    # Ollama
    ("/api/embed", {"model": MINILM, "input": "hi", "dimensions": 100}, "dimensions"),
    ("/api/embed", {"model": MINILM, "input": LONG, "truncate": False}, "truncate"),
    ("/api/generate", {"model": LLM, "prompt": "hi", "stream": False, "format": "json"}, "format"),
    ("/api/chat", {"model": LLM, "messages": HI, "stream": False, "format": {"type": "object"}}, "format"),
    ("/api/chat", {"model": SMOLLM, "stream": False, "messages": [{"role": "user", "content": "hi", "images": ["x"]}]},
     "images"),
    ("/api/generate", {"model": SMOLLM, "prompt": "hi", "stream": False, "images": ["x"]}, "images"),
    ("/api/generate", {"model": SMOLLM, "prompt": "hi", "stream": False, "suffix": "end"}, "suffix"),
    ("/api/generate", {"model": SMOLLM, "prompt": "hi", "stream": False, "think": True}, "think"),
    ("/api/chat", {"model": SMOLLM, "messages": HI, "stream": False, "options": {"top_k": 40}}, "top_k"),
    ("/api/chat", {"model": SMOLLM, "messages": HI, "stream": False, "options": {"mirostat": 2}}, "mirostat"),
    ("/api/generate", {"model": SMOLLM, "prompt": "hi", "stream": False, "options": {"repeat_penalty": 1.3}},
     "repeat_penalty"),
]  # fmt: skip

NATIVE_UNKNOWN: list[tuple[str, dict[str, Any], str]] = [
    (f"/v1/encode/{MINILM}", {"items": [{"text": "hi"}], "normalize": False}, "normalize"),
    (f"/v1/encode/{MINILM}", {"items": [{"text": "hi"}], "params": {"options": {"normalize": False}}}, "normalize"),
    (f"/v1/encode/{MINILM}", {"items": [{"text": "hi", "lang": "en"}]}, "lang"),
    (f"/v1/score/{MINILM}", {"query": {"text": "q"}, "items": [{"text": "a"}], "options": {"top_k": 1}}, "top_k"),
    (f"/v1/score/{MINILM}", {"query": {"text": "q"}, "items": [{"text": "a"}], "top_n": 1}, "top_n"),
    (f"/v1/extract/{GLINER}", {"items": [{"text": "Acme"}], "params": {"labels": ["co"], "flat_ner": True}},
     "flat_ner"),
    (f"/v1/generate/{LLM}", {"prompt": "hi", "max_new_tokens": 2, "logprobs": True}, "logprobs"),
]  # fmt: skip

#: compatible routes with fields their clients send that this server ignores, and an unknown one beside them
COMPATIBLE_EXTRA: list[tuple[str, dict[str, Any]]] = [
    ("/v1/embeddings", {"model": MINILM, "input": "hi", "user": "u-1", "service_tier": "auto"}),
    ("/v1/embeddings", {"model": MINILM, "input": "hi", "task": "retrieval.query", "normalized": True}),
    ("/v1/rerank", {"model": MINILM, "query": "q", "documents": ["a"], "rank_fields": ["text"], "x_trace": 1}),
    ("/v2/rerank", {"model": MINILM, "query": "q", "documents": ["a"], "max_tokens_per_doc": 4096, "x_trace": 1}),
    ("/v1/chat/completions", {"model": LLM, "messages": HI, "max_tokens": 1, "user": "u", "store": False,
                              "stream_options": {"include_usage": True}, "logprobs": False, "x_trace": 1}),
    ("/v1/completions", {"model": LLM, "prompt": "hi", "max_tokens": 1, "echo": False, "best_of": 1, "x_trace": 1}),
    ("/embed", {"model": MINILM, "inputs": "hi", "parameters": {}, "x_trace": 1}),
    ("/api/embed", {"model": MINILM, "input": "hi", "options": {"num_ctx": 2048}, "keep_alive": "5m", "x": 1}),
    ("/api/chat", {"model": LLM, "messages": HI, "stream": False, "keep_alive": -1, "x_trace": 1,
                   "options": {"num_predict": 1, "num_ctx": 2048, "top_k": 0, "repeat_penalty": 1.0}}),
]  # fmt: skip

#: request schemas in the OpenAPI spec and fields each lists as accepted and ignored
LISTED_IGNORED = {
    "OpenAIEmbeddingsRequest": "user",
    "ChatCompletionRequest": "user",
    "CompletionRequest": "stream_options",
    "ResponsesRequest": "store",
    "EmbedRequest": "parameters",
    "OllamaEmbedRequest": "keep_alive",
    "OllamaChatRequest": "keep_alive",
    "OllamaOptions": "num_ctx",
    "RerankRequest": None,  # nothing ignored: every Cohere field is served or refused; unknown ones pass
}


def message(r: httpx.Response) -> str:
    """The error message, whatever the route's envelope (SIE's, OpenAI's, TEI's, Ollama's)."""
    body = r.json()
    detail = body.get("detail") or body.get("error")
    if isinstance(detail, dict):
        return str(detail.get("message"))
    return str(detail)


def post(base_url: str, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{base_url}{path}", json=body, timeout=120)


@pytest.mark.parametrize(
    ("path", "body", "parameter"),
    KNOWN_BUT_UNSERVED,
    ids=[f"{path} {parameter}" for path, _, parameter in KNOWN_BUT_UNSERVED],
)
def test_a_parameter_the_model_cannot_honour_is_a_400_naming_it(
    base_url: str, path: str, body: dict[str, Any], parameter: str
) -> None:
    r = post(base_url, path, body)
    assert r.status_code == 400, r.text
    assert r.headers["x-sie-error-code"] == "INVALID_INPUT"
    assert parameter in message(r), r.text


@pytest.mark.parametrize(
    ("path", "body", "parameter"), NATIVE_UNKNOWN, ids=[f"{p} {name}" for p, _, name in NATIVE_UNKNOWN]
)
def test_a_native_route_refuses_a_parameter_it_does_not_know(
    base_url: str, path: str, body: dict[str, Any], parameter: str
) -> None:
    r = post(base_url, path, body)
    assert r.status_code == 400, r.text
    assert parameter in message(r), r.text


@pytest.mark.parametrize(("path", "body"), COMPATIBLE_EXTRA, ids=[p for p, _ in COMPATIBLE_EXTRA])
def test_a_compatible_route_accepts_the_fields_its_clients_send(base_url: str, path: str, body: dict[str, Any]) -> None:
    r = post(base_url, path, body)
    assert r.status_code == 200, r.text


def test_the_spec_lists_the_ignored_fields_and_keeps_native_bodies_closed(base_url: str) -> None:
    schemas = httpx.get(f"{base_url}/openapi.json", timeout=30).json()["components"]["schemas"]
    for name, field in LISTED_IGNORED.items():
        schema = schemas[name]
        assert schema["additionalProperties"] is True, name
        listed = schema["x-ignored-parameters"]
        assert field is None or field in listed, (name, listed)
        assert "accepted and ignored" in schema["description"], name
    for name in ("EncodeRequest", "ScoreRequest", "ExtractRequest", "GenerateRequest", "EncodeParams"):
        assert schemas[name]["additionalProperties"] is False, name
        assert "x-ignored-parameters" not in schemas[name], name


@pytest.mark.parametrize("keep_alive", ["5m", "1h30m", "-1m", "0", "300ms", 300, 2.5, -1, 0])
def test_ollama_keep_alive_takes_its_real_types(base_url: str, keep_alive: object) -> None:
    r = post(base_url, "/api/embed", {"model": MINILM, "input": "hi", "keep_alive": keep_alive})
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("keep_alive", ["forever", "5", "5 minutes", "", True, [1], {"m": 5}])
def test_ollama_keep_alive_refuses_anything_else_by_name(base_url: str, keep_alive: object) -> None:
    for path, body in (
        ("/api/embed", {"model": MINILM, "input": "hi"}),
        ("/api/generate", {"model": LLM, "prompt": "hi", "stream": False, "options": {"num_predict": 1}}),
    ):
        r = post(base_url, path, {**body, "keep_alive": keep_alive})
        assert r.status_code == 400, (path, r.text)
        assert "keep_alive" in message(r), r.text
