"""Whole documents in through ``extract``: docling on the shared server (its scanned pages read by the
real PP-OCRv6), and every hostile or broken document failing alone with a message naming it."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest

from sie_sdk import SIEClient
from tests.helpers.catalog import DOCLING, MINILM, OCR
from tests.helpers.document_files import (
    BILLION_LAUGHS,
    HEADING_LINE,
    INVOICE_LINE,
    docx_bytes,
    encrypted_pdf,
    pdf_bytes,
    replace_member,
    zip_declaring,
)
from tests.helpers.documents import INVOICE_LINES, joined_pdf, scanned_pdf, text_image


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def extract(base_url: str, model: str, documents: list[tuple[bytes, str | None]]) -> list[dict[str, Any]]:
    body = {
        "items": [{"id": f"doc-{k}", "document": {"data": b64(d), "format": f}} for k, (d, f) in enumerate(documents)]
    }
    r = httpx.post(f"{base_url}/v1/extract/{model}", json=body, timeout=180)
    assert r.status_code == 200, r.text
    items: list[dict[str, Any]] = r.json()["items"]
    assert [i["id"] for i in items] == [f"doc-{k}" for k in range(len(documents))]
    return items


def test_docx_html_and_markdown_become_markdown_text_and_blocks(base_url: str) -> None:
    html = b"<html><body><h1>Price list</h1><p>Widgets cost 4.00 EUR.</p></body></html>"
    docx, page, md = extract(
        base_url, DOCLING, [(docx_bytes(), "docx"), (html, None), (b"# Notes\n\nPay by May.", "md")]
    )
    assert [(e["text"], e["label"]) for e in docx["entities"]] == [
        ("Quarterly report", "heading"),
        ("Revenue grew by 12 percent.", "paragraph"),
    ]
    assert "Quarterly report" in docx["data"]["markdown"] and docx["data"]["markdown"].lstrip().startswith("#")
    assert [(e["text"], e["label"]) for e in page["entities"]] == [
        ("Price list", "heading"),
        ("Widgets cost 4.00 EUR.", "paragraph"),
    ]
    assert all(e["bbox"] is None and e["start"] is None for e in docx["entities"] + page["entities"])
    assert md["data"]["text"].splitlines()[0] == "Notes" and "Pay by May." in md["data"]["text"]


def test_a_pdf_text_layer_is_read_and_its_scanned_page_goes_to_the_ocr_model(base_url: str) -> None:
    # page 1: a text layer; page 2: the invoice as a picture only (a scan)
    text_page = pdf_bytes([HEADING_LINE + b"\n" + INVOICE_LINE])
    (text_only,) = extract(base_url, DOCLING, [(text_page, "pdf")])
    assert [e["text"] for e in text_only["entities"]] == ["ACME Invoice", "Invoice total 42.00"]
    assert text_only["data"]["pages"] == [{"page": 1, "width": 612, "height": 792}]
    x, y, _, h = text_only["entities"][1]["bbox"]
    assert abs(x - 72) <= 2 and abs((y + h) - (792 - 700)) <= 4  # drawn at (72, 700) from the bottom-left
    with SIEClient(base_url, timeout=180) as client:
        scan = client.extract(DOCLING, {"document": scanned_pdf([text_image(INVOICE_LINES, size=48)])})
    assert "error" not in scan, scan
    assert [e["text"] for e in scan["entities"]] == INVOICE_LINES  # read by PP-OCRv6
    assert all(e["page"] == 1 and e["label"] == "line" for e in scan["entities"])
    (size,) = scan["data"]["pages"]
    for entity in scan["entities"]:  # OCR boxes in the page's points, as docling's own
        bx, by, bw, bh = entity["bbox"]
        assert 0 <= bx < bx + bw <= size["width"] + 1 and 0 <= by < by + bh <= size["height"] + 1
    assert scan["data"]["text"] == "\n".join(INVOICE_LINES)


def test_a_scanned_page_between_text_pages_is_read_in_page_order(base_url: str) -> None:
    first = b"BT /F1 12 Tf 72 700 Td (Page one says hello) Tj ET"
    last = b"BT /F1 12 Tf 72 700 Td (Page three says goodbye) Tj ET"
    scan = scanned_pdf([text_image(INVOICE_LINES, size=48)])
    pdf = joined_pdf([pdf_bytes([first]), scan, pdf_bytes([last])])
    (found,) = extract(base_url, DOCLING, [(pdf, "pdf")])
    assert "error" not in found, found
    lines = [(e["text"], e["page"]) for e in found["entities"]]
    assert lines == [("Page one says hello", 1), *[(line, 2) for line in INVOICE_LINES], ("Page three says goodbye", 3)]
    for key in ("markdown", "text"):
        whole = found["data"][key]
        where = [whole.index(part) for part in ("Page one says hello", *INVOICE_LINES, "Page three says goodbye")]
        assert where == sorted(where), (key, whole)  # the scanned page's OCR text sits between the two pages
    assert found["data"]["text"] == "\n\n".join(
        ["Page one says hello", "\n".join(INVOICE_LINES), "Page three says goodbye"]
    )
    assert [p["page"] for p in found["data"]["pages"]] == [1, 2, 3]


BAD = {
    "empty": (b"", "pdf", "empty"),
    "noise": (bytes(range(256)) * 8, "pdf", "not a"),
    "truncated": (pdf_bytes([INVOICE_LINE])[:-200], "pdf", "truncated"),
    "encrypted": (encrypted_pdf(), "pdf", "encrypted with a password"),
    "pages": (pdf_bytes([INVOICE_LINE], kids=[0] * 20_000), "pdf", "20000 pages"),
    "zip-bomb": (zip_declaring(docx_bytes(), "word/document.xml", 4_000_000_000), "docx", "4000000000"),
    "entity-docx": (
        replace_member(docx_bytes(), "word/document.xml", (BILLION_LAUGHS + "<w:document/>").encode()),
        "docx",
        "entity",
    ),
    "entity-html": ((BILLION_LAUGHS + "<html><body>&lol9;</body></html>").encode(), "html", "entit"),
}


@pytest.mark.parametrize("name", list(BAD))
@pytest.mark.parametrize("model", [DOCLING, OCR])
def test_each_hostile_or_broken_document_fails_alone_and_its_neighbours_are_answered(
    base_url: str, model: str, name: str
) -> None:
    data, hint, fragment = BAD[name]
    good = (pdf_bytes([INVOICE_LINE]), "pdf")
    first, bad, last = extract(base_url, model, [good, (data, hint), good])
    for answered in (first, last):
        assert "error" not in answered, answered
        assert "Invoice total 42.00" in answered["data"]["text"].replace("\n", " ")
    if model == OCR and hint != "pdf":
        fragment = ""  # refused as a document, or as a format the OCR model does not read
    assert bad["error"]["code"] == "INVALID_INPUT", bad
    assert bad["error"]["message"].startswith("items[1]"), bad["error"]["message"]
    assert fragment.lower() in bad["error"]["message"].lower(), bad["error"]["message"]
    assert bad["entities"] == [] and bad["data"] == {}


def test_a_body_over_the_limit_is_a_413_and_a_document_on_a_text_model_a_400(base_url: str) -> None:
    huge = {"items": [{"document": {"data": b64(b"%PDF-1.4 " + b"0" * 300_000), "format": "pdf"}}]}
    r = httpx.post(f"{base_url}/v1/extract/{DOCLING}", json=huge, timeout=60)
    assert r.status_code == 413 and r.headers["x-sie-error-code"] == "INVALID_INPUT"
    small = {"items": [{"document": {"data": b64(b"# hi"), "format": "md"}}]}
    r = httpx.post(f"{base_url}/v1/encode/{MINILM}", json=small, timeout=60)
    assert r.status_code == 400
    assert f"items[0] has a document, but model {MINILM} takes text" in r.json()["detail"]["message"]


def test_the_server_still_serves_after_the_hostile_documents(base_url: str) -> None:
    (again,) = extract(base_url, DOCLING, [(b"# Still here", "md")])
    assert again["data"]["text"].strip() == "Still here"


def test_a_document_parser_reads_scans_unless_told_not_to_and_refuses_what_it_cannot_honour(base_url: str) -> None:
    first = b"BT /F1 12 Tf 72 700 Td (Page one says hello) Tj ET"
    pdf = b64(joined_pdf([pdf_bytes([first]), scanned_pdf([text_image(INVOICE_LINES, size=48)])]))
    url = f"{base_url}/v1/extract/{DOCLING}"

    def post(params: dict[str, Any]) -> httpx.Response:
        return httpx.post(url, json={"items": [{"document": {"data": pdf}}], "params": params}, timeout=180)

    unread = post({"options": {"ocr": False}})
    assert unread.status_code == 200, unread.text
    (item,) = unread.json()["items"]
    assert [(e["text"], e["page"]) for e in item["entities"]] == [("Page one says hello", 1)]  # page 2 left unread
    for params, named in (
        ({"options": {"ocr": True, "dpi": 300}}, "'dpi'"),
        ({"options": {"ocr": "yes"}}, "options.ocr"),
        ({"labels": ["company"]}, "params.labels"),
        ({"threshold": 0.5}, "params.threshold"),
    ):
        refused = post(params)
        assert refused.status_code == 400, (params, refused.text)
        detail = refused.json()["detail"]
        assert detail["code"] == "INVALID_INPUT" and named in detail["message"], (params, detail)
