"""Every OpenAI-compatible and TEI-compatible answer this server gives, raw off the wire, validated against
the schemas of the products' own published OpenAPI specs (tests/compat/data: OpenAI's openai-openapi,
TEI's docs/openapi.json; tests/helpers/openapi_schemas.py reads them). Official clients parse leniently,
so a missing required field (``message.refusal``) or a wrong type (``"words": null``) passes them; these
tests do not. Run against the gateway too (the shared server fixture)."""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import httpx
import numpy as np
import pytest

from tests.helpers.catalog import MINILM, MODERATION, SMOLLM, TINY_SENTIMENT, WHISPER_TINY
from tests.helpers.openapi_schemas import OPENAI, TEI, spec
from tests.helpers.speech import SENTENCE, espeak_available, speak
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.allow_hosts(["127.0.0.1", "::1"])

EMBEDDER = "test/tiny-embedder"
RERANKER = "test/tiny-reranker"
SPLADE = "test/tiny-splade"
COLBERT = "test/tiny-colbert"
LLM = "test/tiny-llm"
TEXTS = ["the invoice total is due on Friday", "a cat sleeps on the warm windowsill"]
ASK = [{"role": "user", "content": "What is the weather in Paris, in celsius?"}]
CITY: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"enum": ["Paris", "Rome"]}, "unit": {"enum": ["celsius", "fahrenheit"]}},
    "required": ["city", "unit"],
    "additionalProperties": False,
}
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "The weather.", "parameters": CITY}}


def post(base_url: str, path: str, body: dict[str, Any], model: str | None = None) -> httpx.Response:
    headers = {"X-SIE-Model": model} if model else {}
    return httpx.post(f"{base_url}{path}", json=body, headers=headers, timeout=300)


def ok(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    return response.json()


def events(base_url: str, path: str, body: dict[str, Any], **headers: str) -> list[tuple[str | None, Any]]:
    """A streamed answer's server-sent events as (``event:`` name or None, parsed ``data:``), without
    the closing ``[DONE]``."""
    found: list[tuple[str | None, Any]] = []
    with httpx.stream("POST", f"{base_url}{path}", json={**body, "stream": True}, headers=headers, timeout=300) as r:
        assert r.status_code == 200, r.read()
        for block in r.read().decode().split("\n\n"):
            lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
            if "data" in lines and lines["data"] != "[DONE]":
                found.append((lines.get("event"), json.loads(lines["data"])))
    assert found
    return found


# --- OpenAI: embeddings, models ------------------------------------------------------------------------------


def test_embeddings_are_create_embedding_responses(base_url: str) -> None:
    floats = ok(post(base_url, "/v1/embeddings", {"model": EMBEDDER, "input": TEXTS, "encoding_format": "float"}))
    spec(OPENAI).check("CreateEmbeddingResponse", floats)
    packed = ok(post(base_url, "/v1/embeddings", {"model": EMBEDDER, "input": TEXTS, "encoding_format": "base64"}))
    # the spec's Embedding describes the float form only, though OpenAI itself answers encoding_format=base64
    # with a string (which its clients decode): the rest of the answer is checked with each string decoded
    for item in packed["data"]:
        assert isinstance(item["embedding"], str)
        item["embedding"] = np.frombuffer(base64.b64decode(item["embedding"]), dtype="<f4").tolist()
    spec(OPENAI).check("CreateEmbeddingResponse", packed)
    assert packed["data"][0]["embedding"] == pytest.approx(floats["data"][0]["embedding"], abs=1e-6)


def test_the_model_list_and_one_model_are_openai_models(base_url: str) -> None:
    listed = ok(httpx.get(f"{base_url}/v1/models", timeout=60))
    spec(OPENAI).check("ListModelsResponse", listed)
    one = ok(httpx.get(f"{base_url}/v1/models/{EMBEDDER}", timeout=60))
    spec(OPENAI).check("Model", one)
    assert one["id"] == EMBEDDER and one["object"] == "model"


# --- OpenAI: chat completions ----------------------------------------------------------------------------------


def chat(base_url: str, **body: Any) -> Any:
    return ok(post(base_url, "/v1/chat/completions", {"model": LLM, "messages": ASK, "max_tokens": 8, **body}))


def test_a_chat_completion_message_has_its_refusal_null(base_url: str) -> None:
    answer = chat(base_url, temperature=0)
    spec(OPENAI).check("CreateChatCompletionResponse", answer)
    message = answer["choices"][0]["message"]
    assert "refusal" in message and message["refusal"] is None and "tool_calls" not in message


def test_a_json_schema_chat_completion_is_valid(base_url: str) -> None:
    response_format = {"type": "json_schema", "json_schema": {"name": "weather", "schema": CITY, "strict": True}}
    answer = chat(base_url, model=SMOLLM, response_format=response_format, max_tokens=40, temperature=0)
    spec(OPENAI).check("CreateChatCompletionResponse", answer)
    message = answer["choices"][0]["message"]
    assert message["refusal"] is None and set(json.loads(message["content"])) == {"city", "unit"}


def test_tool_calls_are_valid_whole_and_streamed(base_url: str) -> None:
    body = {"model": SMOLLM, "tools": [WEATHER], "tool_choice": "required", "max_tokens": 60, "temperature": 0}
    answer = chat(base_url, **body)
    spec(OPENAI).check("CreateChatCompletionResponse", answer)
    (choice,) = answer["choices"]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
    assert choice["message"]["refusal"] is None and choice["message"]["tool_calls"][0]["type"] == "function"
    chunks = events(base_url, "/v1/chat/completions", {"messages": ASK, **body})
    for _, chunk in chunks:
        spec(OPENAI).check("CreateChatCompletionStreamResponse", chunk)
    assert chunks[-1][1]["choices"][0]["finish_reason"] == "tool_calls"


def test_every_streamed_chat_chunk_is_valid(base_url: str) -> None:
    body = {"model": LLM, "messages": ASK, "max_tokens": 8, "temperature": 0, "stream_options": {"include_usage": True}}
    chunks = [chunk for _, chunk in events(base_url, "/v1/chat/completions", body)]
    for chunk in chunks:
        spec(OPENAI).check("CreateChatCompletionStreamResponse", chunk)
    # as OpenAI streams it: the first delta opens the assistant's message, its refusal null; the others carry text
    opening = chunks[0]["choices"][0]["delta"]
    assert opening["role"] == "assistant" and "refusal" in opening and opening["refusal"] is None
    assert all(set(c["choices"][0]["delta"]) <= {"content"} for c in chunks[1:])
    assert chunks[-1]["choices"][0]["finish_reason"] in ("stop", "length") and chunks[-1]["usage"]["total_tokens"] > 0


# --- OpenAI: completions, moderations -----------------------------------------------------------------------


def test_completions_are_create_completion_responses(base_url: str) -> None:
    body = {"model": LLM, "prompt": "The invoice total is", "max_tokens": 6, "temperature": 0}
    spec(OPENAI).check("CreateCompletionResponse", ok(post(base_url, "/v1/completions", body)))
    chunks = [chunk for _, chunk in events(base_url, "/v1/completions", body)]
    # the spec gives /completions no event-stream schema; OpenAI streams CreateCompletionResponse objects whose
    # finish_reason is null until the last chunk (the schema's finish_reason is a string), so the last one, a
    # whole answer, is what the schema describes
    spec(OPENAI).check("CreateCompletionResponse", chunks[-1])
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1])


def test_moderations_differ_from_the_spec_only_in_the_category_names(base_url: str) -> None:
    answer = ok(post(base_url, "/v1/moderations", {"model": "omni-moderation-latest", "input": TEXTS}))
    assert answer["model"] == MODERATION and len(answer["results"]) == 2
    # Known, and kept: OpenAI's schema requires its own 13 categories (hate, harassment, self-harm, ...) in
    # categories, category_scores and category_applied_input_types; this server answers with its classifier's
    # own labels (unitary/toxic-bert's toxic, severe_toxic, obscene, threat, insult, identity_hate): filling
    # OpenAI's 13 would claim judgements the model never made. Every other part of the answer must be OpenAI's.
    missing = re.compile(
        r"\$\.results\[\d+\]\.(categories|category_scores|category_applied_input_types): "
        r"'(hate|hate/threatening|harassment|harassment/threatening|illicit|illicit/violent|self-harm|"
        r"self-harm/intent|self-harm/instructions|sexual|sexual/minors|violence|violence/graphic)' is a required"
    )
    errors = spec(OPENAI).errors("CreateModerationResponse", answer)
    assert errors and [e for e in errors if not missing.match(e)] == []
    for result in answer["results"]:
        applied = result["category_applied_input_types"]
        assert set(result["categories"]) == set(result["category_scores"]) == set(applied)
        assert all(kinds == ["text"] for kinds in applied.values())


# --- OpenAI: audio transcriptions ---------------------------------------------------------------------------


@pytest.mark.skipif(not espeak_available(), reason="espeak-ng is not installed (make test installs it)")
def test_transcriptions_json_and_verbose_json(base_url: str) -> None:
    wav = speak(SENTENCE)

    def transcribe(**fields: Any) -> Any:
        data = {"model": WHISPER_TINY, "language": "en", **fields}
        files = {"file": ("note.wav", wav, "audio/wav")}
        return ok(httpx.post(f"{base_url}/v1/audio/transcriptions", data=data, files=files, timeout=300))

    # the path's answer is a oneOf of the json, diarized and verbose_json shapes, but every verbose answer is a
    # valid json answer too (that one requires only text), so the oneOf fails on OpenAI's own verbose answers:
    # each answer is checked against the member its response_format names
    spec(OPENAI).check("CreateTranscriptionResponseJson", transcribe())
    verbose = transcribe(response_format="verbose_json")
    spec(OPENAI).check("CreateTranscriptionResponseVerboseJson", verbose)
    assert "words" not in verbose and verbose["segments"] and verbose["language"] == "en"
    worded = transcribe(response_format="verbose_json", **{"timestamp_granularities[]": ["word", "segment"]})
    spec(OPENAI).check("CreateTranscriptionResponseVerboseJson", worded)
    assert worded["words"] and worded["segments"]


# --- OpenAI: responses ----------------------------------------------------------------------------------------


def check_stream(base_url: str, body: dict[str, Any], **headers: str) -> list[Any]:
    """Each event against the member of ResponseStreamEvent its ``type`` names (the union is an anyOf of 50-odd
    events: one failing member names the fault, the union would not), and its ``event:`` line that type."""
    found = events(base_url, "/v1/responses", body, **headers)
    for name, event in found:
        assert name == event["type"]
        spec(OPENAI).check(spec(OPENAI).member("ResponseStreamEvent", event["type"]), event)
    return [event for _, event in found]


def test_responses_and_their_stream_events_are_valid(base_url: str) -> None:
    body = {"model": LLM, "input": "Say hello.", "instructions": "Be brief.", "max_output_tokens": 6}
    answer = ok(post(base_url, "/v1/responses", body))
    spec(OPENAI).check("Response", answer)
    streamed = check_stream(base_url, body)
    assert streamed[0]["type"] == "response.created" and streamed[-1]["type"] in ("response.completed",
                                                                                  "response.incomplete")  # fmt: skip


def test_responses_with_a_function_tool_or_a_json_schema_are_valid(base_url: str) -> None:
    tool = {"type": "function", "name": "get_weather", "description": "The weather now.", "parameters": CITY}
    body = {"model": SMOLLM, "input": ASK, "tools": [tool], "tool_choice": "required", "max_output_tokens": 60,
            "temperature": 0}  # fmt: skip
    called = ok(post(base_url, "/v1/responses", body))
    spec(OPENAI).check("Response", called)
    assert called["output"][0]["type"] == "function_call"
    check_stream(base_url, body)
    text = {"format": {"type": "json_schema", "name": "weather", "schema": CITY, "strict": True}}
    shaped = ok(post(base_url, "/v1/responses", {"model": SMOLLM, "input": ASK, "text": text, "max_output_tokens": 40}))
    spec(OPENAI).check("Response", shaped)


#: JSON that cannot end before some 1,800 tokens: a stream that outlasts its deadline on any CPU
LONG: dict[str, Any] = {
    "type": "object",
    "properties": {"numbers": {"type": "array", "items": {"type": "integer"}, "minItems": 900}},
    "required": ["numbers"],
}


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/responses"])
def test_a_stream_cut_by_its_deadline_ends_in_a_valid_error(base_url: str, path: str) -> None:
    """X-SIE-Timeout-Ms passing mid-stream: a chat stream's last event is an ErrorResponse (OpenAI's streams
    send one, and its clients raise it), a Responses stream's is its ``error`` event."""
    ok(post(base_url, "/v1/completions", {"model": SMOLLM, "prompt": "1,", "max_tokens": 1}))  # loaded before
    count, timeout = [{"role": "user", "content": "Count from 1 to 1000."}], {"X-SIE-Timeout-Ms": "1500"}
    if path == "/v1/responses":
        text = {"format": {"type": "json_schema", "name": "count", "schema": LONG}}
        body = {"model": SMOLLM, "input": count, "text": text, "max_output_tokens": 2000, "temperature": 0}
        last = check_stream(base_url, body, **timeout)[-1]
        assert last["type"] == "error" and last["code"] == "deadline_exceeded"
        return
    response_format = {"type": "json_schema", "json_schema": {"name": "count", "schema": LONG}}
    body = {"model": SMOLLM, "messages": count, "response_format": response_format, "max_tokens": 2000}
    _, last = events(base_url, path, body, **timeout)[-1]
    spec(OPENAI).check("ErrorResponse", last)
    assert last["error"]["code"] == "deadline_exceeded"


# --- OpenAI: errors ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body", "status"),
    [
        ("/v1/chat/completions", {"model": "nope/no-such-model", "messages": ASK}, 404),
        ("/v1/embeddings", {"model": EMBEDDER, "input": []}, 400),
        ("/v1/completions", {"model": LLM, "prompt": "x", "max_tokens": 0}, 400),
        ("/v1/responses", {"model": LLM, "input": "x", "previous_response_id": "resp_1"}, 400),
    ],
)
def test_openai_errors_are_error_responses(base_url: str, path: str, body: dict[str, Any], status: int) -> None:
    r = post(base_url, path, body)
    assert r.status_code == status, r.text
    spec(OPENAI).check("ErrorResponse", r.json())


# --- OpenAI: the Batch API ------------------------------------------------------------------------------------


def test_batch_and_file_answers_are_openais(base_url: str) -> None:
    line = {"custom_id": "a", "method": "POST", "url": "/v1/embeddings", "body": {"model": EMBEDDER, "input": "x"}}
    upload = {"file": ("in.jsonl", (json.dumps(line) + "\n").encode())}
    with httpx.Client(base_url=base_url, timeout=300) as client:
        made = ok(client.post("/v1/files", data={"purpose": "batch"}, files=upload))
        spec(OPENAI).check("OpenAIFile", made)
        spec(OPENAI).check("OpenAIFile", ok(client.get(f"/v1/files/{made['id']}")))
        spec(OPENAI).check("ListFilesResponse", ok(client.get("/v1/files")))
        create = {"input_file_id": made["id"], "endpoint": "/v1/embeddings", "completion_window": "24h"}
        batch = ok(client.post("/v1/batches", json=create))
        spec(OPENAI).check("Batch", batch)

        def completed() -> Any:
            found = ok(client.get(f"/v1/batches/{batch['id']}"))
            return found if found["status"] == "completed" else None

        done = wait_until(completed, timeout=120, interval=0.1, message="the batch never completed")
        spec(OPENAI).check("Batch", done)
        spec(OPENAI).check("ListBatchesResponse", ok(client.get("/v1/batches", params={"limit": 2})))
        spec(OPENAI).check("OpenAIFile", ok(client.get(f"/v1/files/{done['output_file_id']}")))
        row = json.loads(client.get(f"/v1/files/{done['output_file_id']}/content").text)
        assert row["custom_id"] == "a" and row["error"] is None
        spec(OPENAI).check("CreateEmbeddingResponse", row["response"]["body"])
        missing = client.get("/v1/batches/batch_nope")
        assert missing.status_code == 404
        spec(OPENAI).check("ErrorResponse", missing.json())
        spec(OPENAI).check("DeleteFileResponse", ok(client.delete(f"/v1/files/{made['id']}")))


# --- TEI -------------------------------------------------------------------------------------------------------

SIMILAR = {"source_sentence": TEXTS[0], "sentences": TEXTS}
RANK = {"query": TEXTS[0], "texts": TEXTS}
TEI_CASES = [
    ("/embed", {"inputs": TEXTS}, EMBEDDER, "EmbedResponse"),
    ("/embed", {"inputs": TEXTS[0], "truncate": True}, MINILM, "EmbedResponse"),
    ("/embed_sparse", {"inputs": TEXTS}, SPLADE, "EmbedSparseResponse"),
    ("/embed_all", {"inputs": TEXTS}, COLBERT, "EmbedAllResponse"),
    ("/rerank", RANK, RERANKER, "RerankResponse"),
    ("/rerank", {**RANK, "raw_scores": True, "return_text": True}, RERANKER, "RerankResponse"),
    ("/predict", {"inputs": TEXTS[0]}, TINY_SENTIMENT, "PredictResponse"),
    ("/predict", {"inputs": [[TEXTS[0]], [TEXTS[1]]]}, TINY_SENTIMENT, "PredictResponse"),
    ("/similarity", {"inputs": SIMILAR}, EMBEDDER, "SimilarityResponse"),
    ("/tokenize", {"inputs": TEXTS}, MINILM, "TokenizeResponse"),
    ("/tokenize", {"inputs": TEXTS[0], "add_special_tokens": False}, MINILM, "TokenizeResponse"),
    ("/decode", {"ids": [[101, 7953, 102], [101, 102]]}, MINILM, "DecodeResponse"),
    ("/decode", {"ids": [101, 7953, 102], "skip_special_tokens": False}, MINILM, "DecodeResponse"),
    ("/", {"inputs": TEXTS}, EMBEDDER, "EmbedResponse"),
    ("/", {"inputs": SIMILAR}, EMBEDDER, "SimilarityResponse"),
    ("/", {"inputs": TEXTS[0]}, TINY_SENTIMENT, "PredictResponse"),
    ("/", RANK, RERANKER, "RerankResponse"),
    ("/", {"inputs": TEXTS}, SPLADE, "EmbedSparseResponse"),
]


@pytest.mark.parametrize(("path", "body", "model", "schema"), TEI_CASES, ids=[f"{c[0]}-{c[3]}" for c in TEI_CASES])
def test_tei_answers_are_teis(base_url: str, path: str, body: dict[str, Any], model: str, schema: str) -> None:
    spec(TEI).check(schema, ok(post(base_url, path, body, model)))


@pytest.mark.parametrize("model", [EMBEDDER, RERANKER, TINY_SENTIMENT, SPLADE])
def test_tei_info_is_teis(base_url: str, model: str) -> None:
    info = ok(httpx.get(f"{base_url}/info", headers={"X-SIE-Model": model}, timeout=60))
    spec(TEI).check("Info", info)


@pytest.mark.parametrize(
    ("path", "body", "model", "status"),
    [
        ("/embed", {"inputs": []}, EMBEDDER, 400),
        ("/embed", {"inputs": "x"}, None, 400),
        ("/rerank", {"query": "q", "texts": ["a"]}, "no/such-model", 404),
        ("/predict", {"inputs": "x"}, EMBEDDER, 400),
        ("/tokenize", {"inputs": ""}, MINILM, 400),
        ("/decode", {"ids": [1, 99999]}, MINILM, 400),
    ],
)
def test_tei_errors_are_error_responses(base_url: str, path: str, body: dict[str, Any], model: str | None,
                                        status: int) -> None:  # fmt: skip
    r = post(base_url, path, body, model)
    assert r.status_code == status, r.text
    spec(TEI).check("ErrorResponse", r.json())


def test_tei_health_answers_as_teis(base_url: str) -> None:
    """TEI's spec: ``GET /health`` is 200 ("Everything is working fine") or 503 with an ErrorResponse."""
    r = httpx.get(f"{base_url}/health", timeout=30)
    assert r.status_code == 200 and r.text == ""
