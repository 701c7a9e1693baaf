"""The GPU check's media checks: PP-OCRv6 beside the GPU models, a tiny OWLv2 in float16 on CUDA."""

from __future__ import annotations

import base64

import httpx

from benchmarks import _gpu_catalog as cat


def check_ocr(client: httpx.Client) -> tuple[bool, str]:
    """PP-OCRv6 on a server whose device is the GPU reads a rendered invoice to the exact lines."""
    from tests.helpers.documents import INVOICE_LINES, png, text_image

    data = base64.b64encode(png(text_image(INVOICE_LINES))).decode()
    response = client.post(f"/v1/extract/{cat.OCR}", json={"items": [{"images": [{"data": data}]}]})
    response.raise_for_status()
    lines = [e["text"] for e in response.json()["items"][0]["entities"]]
    return lines == INVOICE_LINES, f"read {lines}"


def check_detector(client: httpx.Client) -> tuple[bool, str]:
    """A tiny OWLv2 in float16 on CUDA answers objects with integer pixel boxes inside the picture."""
    from tests.helpers.documents import png, text_image

    image = text_image(["cat"], size=30)
    data = base64.b64encode(png(image)).decode()
    body = {"items": [{"images": [{"data": data}]}], "params": {"labels": ["cat"], "options": {"score_threshold": 0}}}
    response = client.post(f"/v1/extract/{cat.DETECTOR}", json=body)
    response.raise_for_status()
    objects = response.json()["items"][0]["objects"]
    inside = all(
        all(isinstance(v, int) for v in o["bbox"])
        and 0 <= o["bbox"][0] <= o["bbox"][0] + o["bbox"][2] <= image.width
        and 0 <= o["bbox"][1] <= o["bbox"][1] + o["bbox"][3] <= image.height
        for o in objects
    )
    return bool(objects) and inside, f"{len(objects)} objects, boxes inside {image.size}: {inside}"
