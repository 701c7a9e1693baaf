"""Visual document retrieval (adapter colpali) on a real server, with tiny random ColPali and ColQwen2.

What a ColPali user relies on: a page image comes back as one unit vector per token of the model's
visual prompt (ColPali: a fixed number; ColQwen2: it grows with the page), a text query as one per
query token, a page's vectors do not depend on the other pages of its batch, and `score` ranks pages
for a text query by the MaxSim of those same vectors.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from PIL import Image

from tests.helpers.catalog import write_config
from tests.helpers.server import ServerProcess, offline_server
from tests.helpers.tiny_colvision import build_colvision

DIM = 128
MODELS = {"test/tiny-colpali": "colpali", "test/tiny-colqwen2": "colqwen2"}
QUERY = "what is the invoice total"


def page(color: tuple[int, int, int], size: tuple[int, int]) -> dict[str, str]:
    """A page image item (base64 PNG) with a dark band, so pages differ in more than their colour."""
    image = Image.new("RGB", size, color)
    image.paste((20, 20, 20), (0, size[1] // 3, size[0], size[1] // 2))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return {"data": base64.b64encode(buffer.getvalue()).decode(), "format": "png"}


PAGES = {
    "red-wide": page((230, 40, 40), (120, 60)),
    "blue-tall": page((40, 40, 230), (60, 120)),
    "green": page((40, 200, 40), (112, 112)),
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    catalog = tmp_path_factory.mktemp("colpali-catalog")
    for model_id, kind in MODELS.items():
        folder = build_colvision(kind, 32, DIM, tmp_path_factory.mktemp(kind))
        write_config(catalog, config(model_id, kind, folder))
    with offline_server(catalog, tmp_path_factory.mktemp("logs")) as proc:
        yield proc


def config(model_id: str, kind: str, folder: Path) -> dict[str, Any]:
    return {
        "id": model_id,
        "source": {"path": str(folder)},
        "adapter": "colpali",
        "architecture": {"model_type": kind, "hidden_size": 32},
        "tasks": {"encode": {"multivector": {"dim": DIM}}, "score": {"mode": "maxsim"}},
        "max_sequence_length": 512,
        "profiles": {"cpu": {"dtype": "float32", "max_batch_tokens": 4096}},
    }


def encode(server: ServerProcess, model: str, items: list[dict[str, Any]], is_query: bool = False) -> list[np.ndarray]:
    body = {"items": items, "params": {"output_types": ["multivector"], "options": {"is_query": is_query}}}
    r = httpx.post(f"{server.url}/v1/encode/{model}", json=body, timeout=120)
    assert r.status_code == 200, r.text
    out = []
    for item in r.json()["items"]:
        vectors = np.asarray(item["multivector"]["values"], dtype=np.float32)
        assert vectors.shape == (item["multivector"]["num_tokens"], item["multivector"]["token_dims"])
        out.append(vectors)
    return out


def unit_rows(matrix: np.ndarray) -> None:
    assert matrix.ndim == 2 and matrix.shape[0] > 0 and matrix.shape[1] == DIM
    np.testing.assert_allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-4)


@pytest.mark.parametrize("model", sorted(MODELS))
def test_a_page_image_is_one_unit_vector_per_token(server: ServerProcess, model: str) -> None:
    wide, tall, square = encode(server, model, [{"images": [p]} for p in PAGES.values()])
    for matrix in (wide, tall, square):
        unit_rows(matrix)
    if MODELS[model] == "colpali":  # every page resized to the model's square: 16 patches + the prompt
        assert wide.shape == tall.shape == square.shape
        assert wide.shape[0] > 16
    else:  # dynamic resolution, 28x28 px a token: 120x60 and 60x120 are 4x2 tokens, 112x112 is 4x4
        assert wide.shape == tall.shape
        assert square.shape[0] == wide.shape[0] + 8
    assert not np.allclose(wide, tall, atol=1e-3)  # different pages, different vectors


@pytest.mark.parametrize("model", sorted(MODELS))
def test_a_text_query_is_one_unit_vector_per_query_token(server: ServerProcess, model: str) -> None:
    short, long = encode(server, model, [{"text": "invoice"}, {"text": QUERY}], is_query=True)
    unit_rows(short)
    unit_rows(long)
    assert long.shape[0] > short.shape[0]  # one vector per token: a longer query has more


@pytest.mark.parametrize("model", sorted(MODELS))
def test_a_page_does_not_depend_on_its_batch(server: ServerProcess, model: str) -> None:
    together = encode(server, model, [{"images": [p]} for p in PAGES.values()])
    for vectors, picture in zip(together, PAGES.values(), strict=True):
        [alone] = encode(server, model, [{"images": [picture]}])
        np.testing.assert_allclose(vectors, alone, atol=1e-4)


@pytest.mark.parametrize("model", sorted(MODELS))
def test_score_ranks_pages_by_maxsim_of_the_encoded_vectors(server: ServerProcess, model: str) -> None:
    items = [{"id": name, "images": [p]} for name, p in PAGES.items()]
    r = httpx.post(f"{server.url}/v1/score/{model}", json={"query": {"text": QUERY}, "items": items}, timeout=120)
    assert r.status_code == 200, r.text
    scores = r.json()["scores"]
    [query] = encode(server, model, [{"text": QUERY}], is_query=True)
    pages = dict(zip(PAGES, encode(server, model, [{"images": [p]} for p in PAGES.values()]), strict=True))
    expected = {name: float((query @ matrix.T).max(axis=1).sum()) for name, matrix in pages.items()}
    assert [s["item_id"] for s in scores] == sorted(expected, key=lambda name: -expected[name])
    for s in scores:
        assert s["score"] == pytest.approx(expected[s["item_id"]], abs=1e-3)
    assert len({round(v, 3) for v in expected.values()}) == len(expected)  # a real ordering, not a tie


def test_bad_image_bytes_are_a_400(server: ServerProcess) -> None:
    bad = {"data": base64.b64encode(b"%PDF-1.7 not a picture").decode(), "format": "png"}
    body = {"items": [{"images": [PAGES["green"]]}, {"images": [bad]}], "params": {"output_types": ["multivector"]}}
    url = f"{server.url}/v1/encode/test/tiny-colqwen2"
    # the same with the green page in the result cache (only the bad one decoded) and without the cache
    for headers in ({"X-SIE-Cache": "use"}, {"X-SIE-Cache": "bypass"}):
        r = httpx.post(url, json=body, headers=headers, timeout=120)
        assert r.status_code == 400 and r.headers["x-sie-error-code"] == "INVALID_INPUT"
        assert "items[1].images[0] is not a readable image" in r.json()["detail"]["message"]
    # the same page in a score request is refused the same way, and the model still serves afterwards
    query = {"query": {"text": QUERY}, "items": [{"id": "x", "images": [bad]}]}
    assert httpx.post(f"{server.url}/v1/score/test/tiny-colqwen2", json=query, timeout=120).status_code == 400
    [ok] = encode(server, "test/tiny-colqwen2", [{"images": [PAGES["green"]]}])
    unit_rows(ok)
