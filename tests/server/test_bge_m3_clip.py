"""BGE-M3 (dense + sparse + multivector in one pass) and CLIP (text and images in one space)."""

from __future__ import annotations

import base64
import io

import httpx
import msgpack
import numpy as np
from PIL import Image

from tests.conftest import TINY_VOCAB

M3, CLIP = "test/tiny-bge-m3", "test/tiny-clip"


def png(color: tuple[int, int, int], size: int = 48) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (size, size), color).save(buffer, format="PNG")
    return buffer.getvalue()


def test_bge_m3_three_outputs_in_one_request(base_url: str) -> None:
    body = {"items": [{"text": "invoice total due"}], "params": {"output_types": ["dense", "sparse", "multivector"]}}
    item = httpx.post(f"{base_url}/v1/encode/{M3}", json=body, timeout=120).json()["items"][0]
    assert item["dense"]["dims"] == 32 and abs(np.linalg.norm(item["dense"]["values"]) - 1) < 1e-5
    assert item["sparse"]["dims"] == TINY_VOCAB
    assert set(item["sparse"]["indices"]) <= set(range(5, TINY_VOCAB))  # special tokens carry no weight
    # [CLS] invoice total due [SEP]: one vector per token after [CLS]
    assert item["multivector"]["num_tokens"] == 4 and item["multivector"]["token_dims"] == 32


def test_clip_text_and_image_share_one_space(base_url: str) -> None:
    items = [{"id": "t", "text": "a red square"}, {"id": "i", "images": [{"data": png((255, 0, 0)), "format": "png"}]}]
    r = httpx.post(
        f"{base_url}/v1/encode/{CLIP}",
        content=msgpack.packb({"items": items}, use_bin_type=True),
        headers={"Content-Type": "application/msgpack"},
        timeout=120,
    )
    assert r.status_code == 200, r.text
    vectors = {i["id"]: np.array(i["dense"]["values"]) for i in r.json()["items"]}
    assert vectors["t"].shape == vectors["i"].shape == (16,)
    assert abs(np.linalg.norm(vectors["i"]) - 1) < 1e-5
    # JSON carries the same image as base64 and gets the same vector
    b64 = {"items": [{"images": [{"data": base64.b64encode(png((255, 0, 0))).decode(), "format": "png"}]}]}
    again = httpx.post(f"{base_url}/v1/encode/{CLIP}", json=b64, timeout=120).json()["items"][0]["dense"]["values"]
    np.testing.assert_allclose(again, vectors["i"], atol=1e-5)


def test_clip_scores_images_against_a_text_query(base_url: str) -> None:
    items = [
        {"id": c, "images": [{"data": base64.b64encode(png(rgb)).decode()}]}
        for c, rgb in (("red", (255, 0, 0)), ("blue", (0, 0, 255)))
    ]
    r = httpx.post(f"{base_url}/v1/score/{CLIP}", json={"query": {"text": "red"}, "items": items}, timeout=120)
    assert r.status_code == 200
    assert sorted(s["item_id"] for s in r.json()["scores"]) == ["blue", "red"]


def test_bad_image_bytes_are_a_400(base_url: str) -> None:
    body = {"items": [{"images": [{"data": base64.b64encode(b"not an image").decode(), "format": "png"}]}]}
    r = httpx.post(f"{base_url}/v1/encode/{CLIP}", json=body, timeout=120)
    assert r.status_code == 400 and r.headers["x-sie-error-code"] == "INVALID_INPUT"
    assert "items[0].images[0] is not a readable image" in r.json()["detail"]["message"]
    bad_b64 = {"items": [{"images": [{"data": "***", "format": "png"}]}]}
    assert httpx.post(f"{base_url}/v1/encode/{CLIP}", json=bad_b64).status_code == 400
    two = {"items": [{"images": [{"data": base64.b64encode(png((1, 2, 3))).decode()}] * 2}]}
    assert "one image per item" in httpx.post(f"{base_url}/v1/encode/{CLIP}", json=two).json()["detail"]["message"]
