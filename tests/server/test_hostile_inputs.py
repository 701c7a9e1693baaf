"""Inputs an attacker or a careless client sends: each gets its 4xx, code and message (never a
500), and the server keeps serving afterwards. Runs against the server and the gateway alike."""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httpx
import msgpack
import pytest

from tests.conftest import MAX_BODY_BYTES

TINY = "test/tiny-embedder"
RERANKER = "test/tiny-reranker"
LLM = "test/tiny-llm"
ENCODE = f"/v1/encode/{TINY}"
GENERATE = f"/v1/generate/{LLM}"
OPENAI = ("/v1/embeddings", "/v1/chat/completions", "/v1/completions")


def nested(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


@dataclass
class Case:
    name: str
    path: str
    body: bytes
    status: int
    code: str
    fragment: str
    headers: dict[str, str] = field(default_factory=dict)


def js(value: object) -> bytes:
    return json.dumps(value).encode()


CASES = [
    Case("nested 50,000 deep", ENCODE, ("[" * 50_000 + "]" * 50_000).encode(), 400, "INVALID_INPUT", "nest"),
    Case("nested 40 deep in metadata", ENCODE,
         f'{{"items": [{{"text": "x", "metadata": {nested(40)}}}]}}'.encode(), 400, "INVALID_INPUT", "deeper than"),
    Case("lone surrogate in a text", ENCODE, b'{"items": [{"text": "a\\ud800b"}]}', 400, "INVALID_INPUT",
         "items[0].text"),
    Case("lone surrogate in a score query", f"/v1/score/{RERANKER}",
         b'{"query": {"text": "\\udfff"}, "items": [{"text": "a"}]}', 400, "INVALID_INPUT", "query.text"),
    Case("lone surrogate in OpenAI input", "/v1/embeddings", b'{"model": "test/tiny-embedder", "input": "\\ud800"}',
         400, "INVALID_INPUT", "input"),
    Case("lone surrogate in a prompt", GENERATE, b'{"prompt": "\\ud834"}', 400, "INVALID_INPUT", "prompt"),
    Case("an integer of 5,000 digits", ENCODE,
         b'{"items": [{"text": "x"}], "params": {"options": {"k": ' + b"9" * 5000 + b"}}}", 400, "INVALID_INPUT",
         "not valid JSON"),
    Case("an integer past 64 bits", ENCODE, b'{"items": [{"text": "x", "metadata": {"n": ' + b"9" * 30 + b"}}]}",
         400, "INVALID_INPUT", "64 bits"),
    Case("seed 2**70", GENERATE, js({"prompt": "hi", "seed": 2**70}), 400, "INVALID_INPUT", "64 bits"),
    Case("seed 2**64", GENERATE, js({"prompt": "hi", "seed": 2**64}), 400, "INVALID_INPUT", "seed"),
    Case("temperature 1e-300", GENERATE, js({"prompt": "hi", "temperature": 1e-300}), 400, "INVALID_INPUT",
         "temperature"),
    Case("temperature 5e-324", "/v1/chat/completions",
         js({"model": LLM, "messages": [{"role": "user", "content": "hi"}], "temperature": 5e-324}), 400,
         "INVALID_INPUT", "temperature"),
    Case("NaN", ENCODE, b'{"items": [{"text": "x", "metadata": {"v": NaN}}]}', 400, "INVALID_INPUT", "NaN"),
    Case("Infinity", GENERATE, b'{"prompt": "hi", "temperature": Infinity}', 400, "INVALID_INPUT", "Infinity"),
    Case("an empty stop string", GENERATE, js({"prompt": "hi", "stop": [""]}), 400, "INVALID_INPUT", "stop"),
    Case("duplicate item ids", ENCODE, js({"items": [{"id": "a", "text": "x"}, {"id": "a", "text": "y"}]}), 400,
         "INVALID_INPUT", "unique"),
    Case("return_documents: 0", "/v1/rerank", js({"model": RERANKER, "query": "q", "documents": ["a"],
                                                   "return_documents": 0}), 400, "INVALID_INPUT", "return_documents"),
    Case("stream: 1", GENERATE, js({"prompt": "hi", "stream": 1}), 400, "INVALID_INPUT", "stream"),
    Case("invalid UTF-8", ENCODE, b'{"items": [{"text": "\xff\xfe"}]}', 400, "INVALID_INPUT", "not valid JSON"),
    Case("a body of 10 MB", ENCODE, js({"items": [{"text": "a" * 10_000_000}]}), 413, "INVALID_INPUT", "limit"),
    Case("100,000 items", ENCODE, js({"items": [{"text": "a"}] * 100_000}), 413, "INVALID_INPUT", "limit"),
    Case("a model id climbing out", "/v1/encode/..%2F..%2Fetc%2Fpasswd", js({"items": [{"text": "x"}]}), 404,
         "MODEL_NOT_FOUND", "not in this server's catalog"),
    Case("X-SIE-Wait-For-Model: maybe", ENCODE, js({"items": [{"text": "x"}]}), 400, "INVALID_INPUT",
         "X-SIE-Wait-For-Model", {"X-SIE-Wait-For-Model": "maybe"}),
    Case("an 8 kB priority header", ENCODE, js({"items": [{"text": "x"}]}), 400, "INVALID_INPUT", "X-SIE-Priority",
         {"X-SIE-Priority": "p" * 8192}),
    Case("a msgpack extension type", ENCODE, msgpack.packb({"items": [{"text": msgpack.ExtType(5, b"x")}]}), 400,
         "INVALID_INPUT", "extension", {"Content-Type": "application/msgpack"}),
    Case("a JSON array body", ENCODE, b"[1, 2]", 400, "INVALID_INPUT", "object"),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hostile_input_gets_its_4xx(base_url: str, case: Case) -> None:
    headers = {"Content-Type": "application/json", **case.headers}
    r = httpx.post(f"{base_url}{case.path}", content=case.body, headers=headers, timeout=60)
    assert r.status_code == case.status, r.text[:500]
    assert r.headers["x-sie-error-code"] == case.code
    body = r.json()
    detail = body["error"] if case.path in OPENAI else body["detail"]
    assert detail["code"].upper() == case.code
    assert case.fragment in detail["message"], detail["message"]


def test_null_bytes_in_a_text_are_text(base_url: str) -> None:
    r = httpx.post(f"{base_url}{ENCODE}", json={"items": [{"text": "a\x00b"}]}, timeout=60)
    assert r.status_code == 200, r.text


def test_a_declared_length_far_above_the_limit_is_refused_before_reading(base_url: str) -> None:
    url = urlsplit(base_url)
    with socket.create_connection((url.hostname, url.port), timeout=30) as conn:
        head = (
            f"POST {ENCODE} HTTP/1.1\r\nHost: {url.hostname}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {MAX_BODY_BYTES * 100}\r\n\r\n"
        )
        conn.sendall(head.encode() + b'{"items": [')
        answer = conn.recv(65536).decode("latin-1")
    assert answer.startswith("HTTP/1.1 413"), answer[:200]
    assert "x-sie-error-code: INVALID_INPUT" in answer.lower().replace("invalid_input", "INVALID_INPUT")


def test_head_works_wherever_get_does(base_url: str) -> None:
    for path in ("/healthz", "/readyz", "/metrics", "/v1/models", f"/v1/models/{TINY}", "/openapi.json", "/docs"):
        get, head = httpx.get(f"{base_url}{path}"), httpx.head(f"{base_url}{path}")
        assert head.status_code == get.status_code, path
        assert head.content == b"", path
        assert head.headers["content-type"] == get.headers["content-type"], path


def test_a_rerank_score_stays_within_0_and_1(base_url: str) -> None:
    texts = ["same text", "same text", "other"]
    r = httpx.post(f"{base_url}/v1/rerank", json={"model": TINY, "query": "same text", "documents": texts}, timeout=60)
    if r.status_code == 400:  # the tiny embedder may not score; the reranker's sigmoid cannot pass 1
        r = httpx.post(f"{base_url}/v1/rerank", json={"model": RERANKER, "query": "q", "documents": texts}, timeout=60)
    assert r.status_code == 200, r.text
    assert all(0.0 <= x["relevance_score"] <= 1.0 for x in r.json()["results"])


def test_still_serving_after_the_hostile_inputs(base_url: str) -> None:
    r = httpx.post(f"{base_url}{ENCODE}", json={"items": [{"text": "still here"}]}, timeout=60)
    assert r.status_code == 200 and len(r.json()["items"][0]["dense"]["values"]) == 32
