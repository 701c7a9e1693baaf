"""MUVERA over HTTP: a multivector model's fixed-size vector comes back typed with its dims, equal to
the encoding of the multivector it answers beside it (as a query or as a document); a model without a
multivector output refuses it with a 400 naming what it offers."""

from __future__ import annotations

from typing import Any

import httpx
import numpy as np

from sie_server.catalog.schema import MuveraSpec
from sie_server.engine.muvera import MuveraParams, fde

COLBERT, EMBEDDER = "test/tiny-colbert", "test/tiny-embedder"
TEXTS = ["Invoice INV-2024-0117 from Acme Corp, total due 4,250.00 EUR", "lunch at the cafeteria"]
SPEC = MuveraSpec()  # tiny-colbert (multivector dim 16) declares no muvera block: the defaults
PARAMS = MuveraParams(SPEC.repetitions, SPEC.k_sim, SPEC.d_proj, SPEC.seed)


def encode(base_url: str, model: str, output_types: list[str], *, is_query: bool = False) -> httpx.Response:
    body = {
        "items": [{"text": t} for t in TEXTS],
        "params": {"output_types": output_types, "options": {"is_query": is_query}},
    }
    return httpx.post(f"{base_url}/v1/encode/{model}", json=body, timeout=120)


def items(answer: httpx.Response) -> list[dict[str, Any]]:
    assert answer.status_code == 200, answer.text
    found: list[dict[str, Any]] = answer.json()["items"]
    return found


def test_muvera_has_the_declared_dims_and_is_the_fde_of_the_multivector(base_url: str) -> None:
    info = httpx.get(f"{base_url}/v1/models/{COLBERT}", timeout=30).json()
    assert "muvera" in info["outputs"] and info["dims"]["muvera"] == SPEC.dim == 2048
    for is_query in (False, True):
        for item in items(encode(base_url, COLBERT, ["multivector", "muvera"], is_query=is_query)):
            muvera = item["muvera"]
            assert muvera["dims"] == 2048 and muvera["dtype"] == "float32" and len(muvera["values"]) == 2048
            expected = fde(np.array(item["multivector"]["values"], np.float32), PARAMS, is_query=is_query)
            np.testing.assert_allclose(muvera["values"], expected, atol=1e-5)


def test_muvera_alone_leaves_the_multivector_out_and_queries_differ_from_documents(base_url: str) -> None:
    alone = items(encode(base_url, COLBERT, ["muvera"]))
    assert all(set(item) == {"id", "muvera"} for item in alone)
    beside = items(encode(base_url, COLBERT, ["multivector", "muvera"]))
    np.testing.assert_allclose(alone[0]["muvera"]["values"], beside[0]["muvera"]["values"], atol=1e-6)
    query = items(encode(base_url, COLBERT, ["muvera"], is_query=True))
    assert not np.allclose(query[0]["muvera"]["values"], alone[0]["muvera"]["values"])


def test_a_model_without_multivector_output_refuses_muvera_naming_its_outputs(base_url: str) -> None:
    answer = encode(base_url, EMBEDDER, ["muvera"])
    assert answer.status_code == 400, answer.text
    detail = answer.json()["detail"]
    assert detail["code"] == "INVALID_INPUT"
    assert "muvera" in detail["message"] and "['dense']" in detail["message"]


def test_the_openapi_spec_shows_the_muvera_vector(base_url: str) -> None:
    spec = httpx.get(f"{base_url}/openapi.json", timeout=30).json()
    schemas = spec["components"]["schemas"]
    assert schemas["EncodedItem"]["properties"]["muvera"]["anyOf"][0] == {"$ref": "#/components/schemas/Dense"}
    assert "muvera" in schemas["EncodeParams"]["properties"]["output_types"]["anyOf"][0]["items"]["enum"]
