"""The OpenAPI spec documents every route: its request body, its answer, its errors with their
codes; nothing it never sends (FastAPI's 422); model ids with a slash; plain-text health routes."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

WORK = ("/v1/encode/{model}", "/v1/score/{model}", "/v1/extract/{model}", "/v1/generate/{model}")
OPENAI = ("/v1/embeddings", "/v1/chat/completions", "/v1/completions")
RERANK = ("/v1/rerank", "/v2/rerank")


@pytest.fixture(scope="module")
def spec(base_url: str) -> dict[str, Any]:
    r = httpx.get(f"{base_url}/openapi.json", timeout=30)
    assert r.status_code == 200
    return dict(r.json())


def refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [r for value in node.values() for r in refs(value)]
    if isinstance(node, list):
        return [r for value in node for r in refs(value)]
    return []


def test_every_route_documents_its_answer_and_errors(spec: dict[str, Any]) -> None:
    paths = spec["paths"]
    for path in (*WORK, *OPENAI, *RERANK, "/v1/models", "/v1/models/{model}", "/v1/memory"):
        assert path in paths, sorted(paths)
    for path, methods in paths.items():
        if path.startswith(("/docs", "/redoc")):
            continue
        for method, operation in methods.items():
            responses = operation["responses"]
            assert "422" not in responses, (method, path)
            ok = responses["200"]
            assert ok.get("content"), (method, path, "no answer documented")
            schema = next(iter(ok["content"].values()))["schema"]
            assert schema != {}, (method, path, "empty answer schema")
            if path.startswith(("/v1/", "/v2/")):
                errors = [s for s in responses if s[0] in "45"]
                assert errors, (method, path, "no error answers documented")
                for status in errors:
                    assert "X-SIE-Error-Code" in responses[status]["description"] or status == "503"


def test_work_routes_document_json_and_msgpack_bodies(spec: dict[str, Any]) -> None:
    for path in WORK:
        operation = spec["paths"][path]["post"]
        body = operation["requestBody"]["content"]
        assert {"application/json", "application/msgpack"} <= set(body), path
        codes = operation["responses"]["404"]["description"]
        assert "MODEL_NOT_FOUND" in codes
        model = next(p for p in operation["parameters"] if p["name"] == "model")
        assert "slash" in model["description"]
    for path in (*OPENAI, *RERANK):
        assert "application/json" in spec["paths"][path]["post"]["requestBody"]["content"], path
    generate = spec["paths"]["/v1/generate/{model}"]["post"]["responses"]["200"]["content"]
    assert "text/event-stream" in generate


def test_openai_routes_document_openai_errors(spec: dict[str, Any]) -> None:
    for path in OPENAI:
        schema = spec["paths"][path]["post"]["responses"]["400"]["content"]["application/json"]["schema"]
        assert schema["$ref"].endswith("/OpenAIErrorEnvelope"), path


def test_every_reference_resolves(spec: dict[str, Any]) -> None:
    schemas = spec["components"]["schemas"]
    missing = {r for r in refs(spec["paths"]) + refs(schemas) if r.rsplit("/", 1)[-1] not in schemas}
    assert not missing
    assert "HTTPValidationError" not in schemas
    encode = schemas["EncodeResponse"]["properties"]
    assert {"model", "items", "timing", "usage", "truncated_items"} <= set(encode)


def test_health_and_metrics_are_plain_text(spec: dict[str, Any], base_url: str) -> None:
    assert "text/plain" in spec["paths"]["/healthz"]["get"]["responses"]["200"]["content"]
    metrics = spec["paths"]["/metrics"]["get"]["responses"]["200"]["content"]
    assert "application/json" not in metrics and any(t.startswith("text/plain") for t in metrics)
    assert httpx.get(f"{base_url}/healthz").headers["content-type"].startswith("text/plain")
