"""Every bad input gets the one error envelope, its code in a header, a 4xx/5xx and a useful message."""

from __future__ import annotations

import httpx
import msgpack
import pytest

from tests.conftest import MAX_BODY_BYTES, MAX_ITEMS, MAX_TEXT_BYTES

TINY = "test/tiny-embedder"
OPENAI_ROUTES = ("/v1/embeddings", "/v1/chat/completions", "/v1/completions")


def assert_error(r: httpx.Response, status: int, code: str, *fragments: str) -> str:
    assert r.status_code == status, r.text
    assert r.headers["x-sie-error-code"] == code
    assert r.headers["content-type"] == "application/json"
    if r.request.url.path in OPENAI_ROUTES:  # OpenAI's clients read {"error": {message, type, param, code}}
        error = r.json()["error"]
        assert set(error) == {"message", "type", "param", "code"}
        assert error["type"] == ("server_error" if status >= 500 else "invalid_request_error")
        detail = {"code": error["code"].upper(), "message": error["message"]}
    else:
        detail = r.json()["detail"]
    assert detail["code"] == code
    for fragment in fragments:
        assert fragment in detail["message"], detail["message"]
    return str(detail["message"])


def encode(base_url: str, body: object, model: str = TINY, **kw: object) -> httpx.Response:
    return httpx.post(f"{base_url}/v1/encode/{model}", json=body, timeout=60, **kw)  # type: ignore[arg-type]


def test_unknown_model_suggests_nearest(base_url: str) -> None:
    r = encode(base_url, {"items": [{"text": "x"}]}, model="sentence-transformers/all-MiniLM-L6-v3")
    assert_error(r, 404, "MODEL_NOT_FOUND", "all-MiniLM-L6-v3", "did you mean sentence-transformers/all-MiniLM-L6-v2")


def test_unknown_model_checked_before_the_body(base_url: str) -> None:
    r = httpx.post(f"{base_url}/v1/score/nobody/nothing", content=b"not json at all")
    assert_error(r, 404, "MODEL_NOT_FOUND", "nobody/nothing")


def test_error_is_json_even_when_msgpack_accepted(base_url: str) -> None:
    r = encode(base_url, {"items": []}, headers={"Accept": "application/msgpack"})
    assert_error(r, 400, "INVALID_INPUT", "items")


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"items": []}, "items: List should have at least 1 item"),
        ({}, "items: Field required"),
        ({"items": [{"text": 5}]}, "items.0.text: Input should be a valid string"),
        ({"items": "hello"}, "items: Input should be a valid list"),
        ({"items": [{"txt": "typo"}]}, "items.0.txt: Extra inputs are not permitted"),
        ({"items": [{"id": "a"}]}, "items[0] has no text"),
        ({"items": [{"text": "x"}], "params": {"output_types": ["sparse"]}}, "has no sparse output"),
        ({"items": [{"text": "x"}], "params": {"output_types": ["rainbow"]}}, "params.output_types.0"),
        (
            {"items": [{"text": "x"}], "params": {"output_dtype": "int4"}},
            "params.output_dtype",
        ),
        (
            {"items": [{"text": "x"}], "params": {"options": {"is_query": "yes"}}},
            "is_query must be true or false",
        ),
        ({"items": [{"text": "x", "images": [{"data": "aGk=", "format": "png"}]}]}, "has images, but model"),
        ([1, 2], "must be an object"),
    ],
)
def test_invalid_encode_bodies(base_url: str, body: object, fragment: str) -> None:
    assert_error(encode(base_url, body), 400, "INVALID_INPUT", fragment)


def test_malformed_json(base_url: str) -> None:
    r = httpx.post(f"{base_url}/v1/encode/{TINY}", content=b'{"items": [', headers={"Content-Type": "application/json"})
    assert_error(r, 400, "INVALID_INPUT", "not valid JSON")


def test_malformed_msgpack(base_url: str) -> None:
    r = httpx.post(
        f"{base_url}/v1/encode/{TINY}",
        content=b"\xc1\xff\x00",
        headers={"Content-Type": "application/msgpack"},
    )
    assert_error(r, 400, "INVALID_INPUT", "not valid msgpack")


def test_empty_body(base_url: str) -> None:
    assert_error(httpx.post(f"{base_url}/v1/encode/{TINY}"), 400, "INVALID_INPUT", "body is empty")


def test_too_many_items(base_url: str) -> None:
    r = encode(base_url, {"items": [{"text": "x"}] * (MAX_ITEMS + 1)})
    assert_error(r, 400, "INVALID_INPUT", f"{MAX_ITEMS + 1} items", f"limit is {MAX_ITEMS}")


def test_text_over_byte_limit_is_413(base_url: str) -> None:
    r = encode(base_url, {"items": [{"text": "ok"}, {"text": "x" * (MAX_TEXT_BYTES + 1)}]})
    assert_error(r, 413, "INVALID_INPUT", "items[1]", f"limit is {MAX_TEXT_BYTES}")


def test_body_over_size_limit_is_413(base_url: str) -> None:
    body = msgpack.packb({"items": [{"text": "x"}], "pad": "y" * MAX_BODY_BYTES})
    r = httpx.post(f"{base_url}/v1/encode/{TINY}", content=body, headers={"Content-Type": "application/msgpack"})
    assert_error(r, 413, "INVALID_INPUT", "limit", str(MAX_BODY_BYTES))


def test_task_the_model_lacks(base_url: str) -> None:
    assert_error(
        encode(base_url, {"items": [{"text": "x"}]}, model="test/tiny-reranker"),
        400,
        "INVALID_INPUT",
        "does not support encode",
    )
    r = httpx.post(f"{base_url}/v1/extract/{TINY}", json={"items": [{"text": "x"}]})
    assert_error(r, 400, "INVALID_INPUT", "does not support extract")


def test_score_errors(base_url: str) -> None:
    r = httpx.post(f"{base_url}/v1/score/{TINY}", json={"items": [{"text": "x"}]})
    assert_error(r, 400, "INVALID_INPUT", "query: Field required")
    r = httpx.post(f"{base_url}/v1/score/{TINY}", json={"query": {"text": "q"}, "items": []})
    assert_error(r, 400, "INVALID_INPUT", "items")


def test_weights_unavailable_offline_is_502_with_instructions(base_url: str) -> None:
    r = encode(base_url, {"items": [{"text": "x"}]}, model="BAAI/bge-small-en-v1.5")
    assert_error(r, 502, "MODEL_LOAD_FAILED", "BAAI/bge-small-en-v1.5", "offline", "hf download BAAI/bge-small-en-v1.5")
    info = httpx.get(f"{base_url}/v1/models/BAAI/bge-small-en-v1.5").json()
    assert info["state"] == "failed" and "offline" in info["last_error"]
    # the failure is remembered, and other models keep serving
    assert_error(encode(base_url, {"items": [{"text": "x"}]}, model="BAAI/bge-small-en-v1.5"), 502, "MODEL_LOAD_FAILED")
    assert encode(base_url, {"items": [{"text": "x"}]}).status_code == 200


def test_missing_local_path_is_502(base_url: str) -> None:
    r = encode(base_url, {"items": [{"text": "x"}]}, model="test/missing-weights")
    assert_error(r, 502, "MODEL_LOAD_FAILED", "test/missing-weights", "no-such-folder")


def test_no_wait_on_cold_model_is_503_with_retry_after(base_url: str) -> None:
    r = encode(
        base_url,
        {"items": [{"text": "x"}]},
        model="test/tiny-cold",
        headers={"X-SIE-Wait-For-Model": "false"},
    )
    assert_error(r, 503, "MODEL_LOADING", "test/tiny-cold", "loading")
    assert int(r.headers["retry-after"]) >= 1


def test_bad_priority_header(base_url: str) -> None:
    r = encode(base_url, {"items": [{"text": "x"}]}, headers={"X-SIE-Priority": "urgent"})
    assert_error(r, 400, "INVALID_INPUT", "X-SIE-Priority")


def test_unknown_route_and_method(base_url: str) -> None:
    assert_error(httpx.get(f"{base_url}/v2/nothing"), 404, "INVALID_INPUT", "no route")
    assert_error(httpx.get(f"{base_url}/v1/encode/{TINY}"), 405, "INVALID_INPUT", "not allowed")


def test_compat_route_errors(base_url: str) -> None:
    r = httpx.post(f"{base_url}/v1/embeddings", json={"model": TINY, "input": "x", "dimensions": 8})
    assert_error(r, 400, "INVALID_INPUT", "dimensions")
    r = httpx.post(f"{base_url}/v1/rerank", json={"model": "nope/nope", "query": "q", "documents": ["a"]})
    assert_error(r, 404, "MODEL_NOT_FOUND")
