"""Images and scanned pages in through ``extract``: the real PP-OCRv6 (the rapidocr package) on the
shared server, through the SDK; per-item errors, limits and the wire's box convention."""

from __future__ import annotations

import base64
import time

import httpx
import pytest

from sie_sdk import SIEClient, from_file
from tests.helpers.catalog import MINILM, OCR, TESSERACT
from tests.helpers.documents import INVOICE_LINES, png, png_declaring, scanned_pdf, text_image
from tests.helpers.fault_adapters import SLOW_PICTURE_S

EXTRACT = f"/v1/extract/{OCR}"
OWL = "/v1/extract/test/tiny-owlv2"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def post(base_url: str, body: object, path: str = EXTRACT) -> httpx.Response:
    return httpx.post(f"{base_url}{path}", json=body, timeout=120)


def test_the_real_ocr_reads_a_rendered_invoice_to_the_exact_text(base_url: str) -> None:
    image = text_image(INVOICE_LINES)
    with SIEClient(base_url, timeout=120) as client:
        (result,) = client.extract(OCR, [{"id": "invoice", "images": [png(image)]}])
    assert result["id"] == "invoice" and "error" not in result
    assert [e["text"] for e in result["entities"]] == INVOICE_LINES  # one line each, in reading order
    assert result["data"]["text"] == "\n".join(INVOICE_LINES)
    assert result["data"]["pages"] == [{"page": 1, "width": image.width, "height": image.height}]
    assert result["objects"] == [] and result["relations"] == [] and result["classifications"] == []
    tops = []
    for entity in result["entities"]:
        assert entity["label"] == "line" and entity["score"] > 0.9 and entity["page"] == 1
        assert entity["start"] is None and entity["end"] is None
        x, y, w, h = entity["bbox"]
        assert all(isinstance(v, int) for v in entity["bbox"])
        assert 0 <= x < x + w <= image.width and 0 <= y < y + h <= image.height
        tops.append(y)
    # each line was drawn 66 px under the last, from y = 40: the boxes sit where the text is
    assert tops == sorted(tops)
    for k, top in enumerate(tops):
        assert abs(top - (40 + 66 * k)) <= 12


def test_a_scanned_pdf_page_is_rendered_and_read_with_boxes_in_page_points(base_url: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    page = text_image(INVOICE_LINES, size=48)
    path = tmp_path / "scan.pdf"
    path.write_bytes(scanned_pdf([page], dpi=200.0))
    with SIEClient(base_url, timeout=120) as client:
        result = client.extract(OCR, from_file(path, id="scan"))
    assert "error" not in result, result
    assert [e["text"] for e in result["entities"]] == INVOICE_LINES
    (size,) = result["data"]["pages"]
    # the page is the picture at 200 dpi: in points (1/72 inch) it is 72/200 of the pixels
    assert size["page"] == 1
    assert abs(size["width"] - page.width * 72 / 200) <= 1 and abs(size["height"] - page.height * 72 / 200) <= 1
    for entity in result["entities"]:
        x, y, w, h = entity["bbox"]
        assert entity["page"] == 1 and 0 <= x < x + w <= size["width"] + 1 and 0 <= y < y + h <= size["height"] + 1


def test_one_bad_image_fails_alone_and_its_neighbours_are_answered(base_url: str) -> None:
    good = b64(png(text_image(["ACME Corp"])))
    body = {
        "items": [
            {"id": "good", "images": [{"data": good, "format": "png"}]},
            {"id": "noise", "images": [{"data": b64(b"not an image at all"), "format": "png"}]},
            {"id": "bomb", "images": [{"data": b64(png_declaring(40_000, 40_000)), "format": "png"}]},
            {"id": "also-good", "images": [{"data": good, "format": "png"}]},
        ]
    }
    r = post(base_url, body)
    assert r.status_code == 200, r.text
    items = {i["id"]: i for i in r.json()["items"]}
    assert [i["id"] for i in r.json()["items"]] == ["good", "noise", "bomb", "also-good"]
    for ok in ("good", "also-good"):
        assert items[ok]["data"]["text"] == "ACME Corp" and "error" not in items[ok]
    assert items["noise"]["error"]["code"] == "INVALID_INPUT"
    assert "items[1].images[0] is not a readable image" in items["noise"]["error"]["message"]
    assert items["bomb"]["error"]["code"] == "INVALID_INPUT"
    assert "items[2].images[0]" in items["bomb"]["error"]["message"]
    for failed in ("noise", "bomb"):  # every list is still there, empty
        assert {k: items[failed][k] for k in ("entities", "relations", "classifications", "objects", "data")} == {
            "entities": [],
            "relations": [],
            "classifications": [],
            "objects": [],
            "data": {},
        }


def test_a_declared_size_over_the_pixel_limit_is_refused_before_decoding(base_url: str) -> None:
    # 10,000 x 10,000 passes Pillow's own bomb check, not the server's 64 MP default limit
    body = {"items": [{"images": [{"data": b64(png_declaring(10_000, 10_000)), "format": "png"}]}]}
    (item,) = post(base_url, body).json()["items"]
    assert item["error"]["code"] == "INVALID_INPUT"
    assert "declares 10000 x 10000 pixels; the limit is 64,000,000 (--max-image-pixels)" in item["error"]["message"]


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"items": [{"text": "read me"}]}, f"items[0] has no image or document; model {OCR} takes image, document"),
        ({"items": [{"images": [{"data": "%%%", "format": "png"}]}]}, "image data must be base64"),
        ({"items": [{"document": {"data": "%%%", "format": "pdf"}}]}, "document data must be base64"),
        ({"items": [{"images": [{"data": "aGk="}]}], "params": {"options": {"colour": 1}}}, "unknown option 'colour'"),
    ],
)
def test_bad_requests_are_a_400_naming_the_problem(base_url: str, body: object, fragment: str) -> None:
    r = post(base_url, body)
    assert r.status_code == 400, r.text
    assert r.headers["x-sie-error-code"] == "INVALID_INPUT"
    assert fragment in r.json()["detail"]["message"]


def test_an_image_sent_to_a_text_model_is_a_400_naming_its_inputs(base_url: str) -> None:
    body = {"items": [{"images": [{"data": b64(png(text_image(["x"]))), "format": "png"}]}]}
    r = post(base_url, body, f"/v1/encode/{MINILM}")
    assert r.status_code == 400
    assert f"items[0] has images, but model {MINILM} takes text" in r.json()["detail"]["message"]


def test_models_list_exactly_the_inputs_each_takes(base_url: str) -> None:
    models = {m["id"]: m for m in httpx.get(f"{base_url}/v1/models", timeout=30).json()["models"]}
    assert models[OCR]["inputs"] == ["image", "document"]
    assert models[MINILM]["inputs"] == ["text"]
    assert models["test/tiny-clip"]["inputs"] == ["text", "image"]


def test_tesseract_reads_the_same_invoice_and_takes_its_language_option(base_url: str) -> None:
    image = png(text_image(INVOICE_LINES))
    with SIEClient(base_url, timeout=120) as client:
        result = client.extract(TESSERACT, {"images": [image]}, options={"lang": "eng", "psm": 3})
        assert [e["text"] for e in result["entities"]] == INVOICE_LINES
        assert all(e["label"] == "line" and 0 < e["score"] <= 1 and len(e["bbox"]) == 4 for e in result["entities"])
        r = httpx.post(
            f"{base_url}/v1/extract/{TESSERACT}",
            json={"items": [{"images": [{"data": b64(image)}]}], "params": {"options": {"lang": "klingon"}}},
            timeout=60,
        )
    assert r.status_code == 400
    assert "no trained data for 'klingon' here" in r.json()["detail"]["message"]


def test_a_detector_answers_objects_with_pixel_boxes_and_thresholds_decide_how_many(base_url: str) -> None:
    image = text_image(["cat"], size=30)  # not square: boxes come back in this picture's pixels
    body = {"items": [{"images": [{"data": b64(png(image))}]}], "params": {"labels": ["cat", "dog"]}}
    kept_all = post(base_url, {**body, "params": {**body["params"], "options": {"score_threshold": 0.0}}}, OWL)
    kept_none = post(base_url, {**body, "params": {**body["params"], "options": {"score_threshold": 1.0}}}, OWL)
    (every,) = kept_all.json()["items"]
    assert every["objects"] and kept_none.json()["items"][0]["objects"] == []
    for found in every["objects"]:
        assert found["label"] in {"cat", "dog"} and found["page"] == 1
        x, y, w, h = found["bbox"]
        assert all(isinstance(v, int) for v in found["bbox"])
        assert 0 <= x <= x + w <= image.width and 0 <= y <= y + h <= image.height
    r = post(base_url, {"items": body["items"]}, OWL)  # no labels: nothing to look for
    assert r.status_code == 400 and "params.labels" in r.json()["detail"]["message"]


def test_a_picture_still_running_at_the_deadline_fails_alone_and_the_others_are_answered(base_url: str) -> None:
    small, big = (
        b64(png(text_image([text], size=size, margin=4))) for text, size in (("x", 8), ("a wide picture here", 60))
    )
    body = {"items": [{"id": "small", "images": [{"data": small}]}, {"id": "big", "images": [{"data": big}]}]}
    started = time.perf_counter()
    r = httpx.post(f"{base_url}/v1/extract/test/slow-pictures", json=body, headers={"X-SIE-Timeout-Ms": "2000"},
                   timeout=30)  # fmt: skip
    assert r.status_code == 200, r.text
    assert time.perf_counter() - started < SLOW_PICTURE_S  # answered at the deadline, not after the slow picture
    small_item, big_item = r.json()["items"]
    assert small_item["id"] == "small" and "error" not in small_item and "x" in small_item["data"]["text"]
    assert big_item["error"]["code"] == "DEADLINE_EXCEEDED"
    assert "X-SIE-Timeout-Ms" in big_item["error"]["message"]


def test_a_pdf_longer_than_one_render_group_is_read_page_by_page_in_order(base_url: str) -> None:
    from sie_server.engine.extract.pictures import RENDER_GROUP

    count = RENDER_GROUP + 2  # pages are rendered a group at a time: this crosses a group's end
    pdf = scanned_pdf([text_image([f"Page {k + 1}"]) for k in range(count)], dpi=100.0)
    with SIEClient(base_url, timeout=180) as client:
        result = client.extract(OCR, {"document": {"data": pdf, "format": "pdf"}})
    assert "error" not in result, result
    assert [(e["page"], e["text"]) for e in result["entities"]] == [(k + 1, f"Page {k + 1}") for k in range(count)]
    assert [p["page"] for p in result["data"]["pages"]] == list(range(1, count + 1))
