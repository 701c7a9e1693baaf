"""summarize_document, extract_entities and describe_image (tags) on the shared test server (offline):
SmolLM2 summarizes, the tiny random GLiNER finds entities whose offsets index the whole text, the tiny CLIP
ranks tags; each cap refused with a 4xx before work, a model the server lacks named; one call over MCP;
and docs_to_markdown's OCR fallback (the parser finds almost no text, the OCR model reads the page)."""

from __future__ import annotations

import io
import itertools
import zlib
from typing import Any

import httpx
import pytest

from sie_server.tasks.common import chunks
from sie_server.tasks.extract_entities import GENERAL_NER, windows
from tests.helpers.catalog import OCR, SMOLLM
from tests.helpers.documents import INVOICE_LINES, png, png_declaring, text_image
from tests.helpers.invoice import INVOICE_PASSAGES
from tests.server.test_mcp import answer, over_http
from tests.tasks.helpers import INVOICE_TEXT, b64, pdf_source, text_pdf
from tests.tasks.test_tasks_http import ok, task

GLINER, CLIP = "test/tiny-gliner", "test/tiny-clip"
DOCUMENT = "\n\n".join(INVOICE_PASSAGES[name] for name in ("invoice", "contract", "travel", "report", "cafeteria"))
LONG = " ".join([DOCUMENT] * 2)  # about 900 characters: nine windows of the tiny GLiNER's 100


def test_a_long_text_is_summarized_map_reduce(base_url: str) -> None:
    body = {"text": DOCUMENT, "chunk_chars": 200, "max_new_tokens": 32, "models": {"generate": SMOLLM}}
    found = ok(base_url, "summarize_document", body)
    assert found["chunks"] == len(chunks(0, DOCUMENT, 200)) >= 3
    assert found["rounds"] >= 1 and found["characters"] == len(DOCUMENT)
    assert found["pages"] is None and found["source_bytes"] is None
    assert found["models"] == {"generate": SMOLLM}
    summary = found["summary"]
    assert summary.strip() and "Combine these notes" not in summary and len(summary) < len(DOCUMENT)
    assert any(word in summary for word in ("Acme", "nvoice", "travel", "cafeteria")), summary  # about the text


def test_a_pdf_is_parsed_then_summarized_in_one_call(base_url: str) -> None:
    pdf = text_pdf(INVOICE_TEXT)
    body = {"file": {"data": b64(pdf), "format": "pdf"}, "max_new_tokens": 32, "models": {"generate": SMOLLM}}
    found = ok(base_url, "summarize_document", body)
    assert (found["chunks"], found["rounds"], found["pages"], found["source_bytes"]) == (1, 0, 1, len(pdf))
    assert found["models"] == {"generate": SMOLLM, "document": "docling-project/docling"}
    assert found["summary"].strip()


def extract(base_url: str, texts: list[str], labels: list[str], threshold: float) -> list[list[dict[str, Any]]]:
    body = {"items": [{"text": t} for t in texts], "params": {"labels": labels, "threshold": threshold}}
    r = httpx.post(f"{base_url}/v1/extract/{GLINER}", json=body, timeout=120)
    assert r.status_code == 200, r.text
    return [item["entities"] for item in r.json()["items"]]


def test_entities_over_windows_index_the_whole_text_once(base_url: str) -> None:
    labels = ["company", "person", "date"]
    # random weights: at threshold 0 every window holds entities, so the mapping and the merge are exercised
    body = {"text": LONG, "labels": labels, "threshold": 0.0, "models": {"ner": GLINER}}
    found = ok(base_url, "extract_entities", body)
    entities = found["entities"]
    assert entities and found["models"] == {"ner": GLINER} and found["text"] is None
    assert all(LONG[e["start"] : e["end"]] == e["text"] and e["label"] in labels for e in entities)
    assert all(a["end"] <= b["start"] for a, b in itertools.pairwise(entities))  # in order, no overlap
    assert sum(found["counts"].values()) == len(entities)
    assert {label: sum(e["label"] == label for e in entities) for label in found["counts"]} == found["counts"]
    assert len(found["table"].splitlines()) == len(entities) + 2
    # the same windows through the extract primitive: every entity it finds is in the answer or lost to an
    # overlapping one, and the answer holds nothing else
    parts = windows(LONG, 100, 20)  # tiny GLiNER: 64 tokens, 100-character windows overlapping by 20
    assert found["windows"] == len(parts) > 5
    seen = {
        (w.start + e["start"], w.start + e["end"], e["label"])
        for w, found_here in zip(parts, extract(base_url, [w.text for w in parts], labels, 0.0), strict=True)
        for e in found_here
    }
    kept = {(e["start"], e["end"], e["label"]) for e in entities}
    assert kept <= seen
    assert all(any(s < e and a < b for a, b, _ in kept) for s, e, _ in seen)


def test_entities_of_a_short_text_are_the_primitive_s(base_url: str) -> None:
    text = INVOICE_PASSAGES["report"][:95]
    found = ok(
        base_url, "extract_entities", {"text": text, "labels": ["company"], "threshold": 0.0, "models": {"ner": GLINER}}
    )
    (primitive,) = extract(base_url, [text], ["company"], 0.0)
    assert found["windows"] == 1
    assert [(e["start"], e["end"], e["text"]) for e in found["entities"]] == [
        (e["start"], e["end"], e["text"]) for e in primitive
    ]


def test_entities_of_a_pdf_index_the_document_s_text(base_url: str) -> None:
    pdf = text_pdf(INVOICE_TEXT)
    body = {"file": {"data": b64(pdf)}, "labels": ["company"], "threshold": 0.0, "models": {"ner": GLINER}}
    found = ok(base_url, "extract_entities", body)
    text = ok(base_url, "docs_to_markdown", {"file": pdf_source(INVOICE_TEXT)["file"]})["text"]
    assert found["text"] == text and found["pages"] == 1 and found["source_bytes"] == len(pdf)
    assert found["entities"] and all(text[e["start"] : e["end"]] == e["text"] for e in found["entities"])


def test_tags_rank_the_candidate_labels_against_the_image(base_url: str) -> None:
    image = png(text_image(["red"]).resize((48, 48)))
    labels = ["a red square", "a blue square", "a cat", "an invoice", "a tree"]
    body = {"image": {"data": b64(image)}, "caption": "none", "labels": labels, "top_k": 3, "models": {"tags": CLIP}}
    found = ok(base_url, "describe_image", body)
    assert found["caption"] is None and found["models"] == {"tags": CLIP}
    assert (found["width"], found["height"], found["source_bytes"]) == (48, 48, len(image))
    scores = [t["score"] for t in found["tags"]]
    assert len(found["tags"]) == 3 and scores == sorted(scores, reverse=True) and all(-1 <= s <= 1 for s in scores)
    assert len({t["label"] for t in found["tags"]}) == 3 and {t["label"] for t in found["tags"]} <= set(labels)
    everything = ok(base_url, "describe_image", {**body, "top_k": 50})["tags"]  # all five, the same order on top
    assert [t["label"] for t in everything[:3]] == [t["label"] for t in found["tags"]] and len(everything) == 5
    default = ok(base_url, "describe_image", {k: v for k, v in body.items() if k != "labels"})
    assert len(default["tags"]) == 3


BIG = 40_000
SENTENCES = "One sentence. " * 1000
CAPS = {
    "summary characters": ("summarize_document", {"text": "x" * 200_001}, 413, "200001 characters"),
    "summary chunks": (
        "summarize_document",
        {"text": SENTENCES, "chunk_chars": 200},
        400,
        f"{len(chunks(0, SENTENCES, 200))} chunks in one task",
    ),
    "entity characters": ("extract_entities", {"text": "x" * 200_001, "labels": ["a"]}, 413, "200001 characters"),
    "windows": ("extract_entities", {"text": "word " * 12_000, "labels": ["a"]}, 400, "windows in one task"),
    "labels": ("extract_entities", {"text": "Acme", "labels": list("abcdef")}, 400, "at most 5 in one call"),
    "pixels": ("describe_image", {"image": {"data": b64(png_declaring(BIG, BIG))}}, 413, f"{BIG} x {BIG} pixels"),
    "no image": ("describe_image", {"image": {"data": b64(b"%PDF-1.4 ...")}}, 400, "not a PNG, JPEG"),
}


@pytest.mark.parametrize("cap", list(CAPS))
def test_each_cap_of_the_new_tasks_is_refused(base_url: str, cap: str) -> None:
    name, body, status, said = CAPS[cap]
    models = {"summarize_document": {"generate": SMOLLM}, "extract_entities": {"ner": GLINER}}  # a task refuses others
    r = task(base_url, name, {**body, "models": models.get(name, {"tags": CLIP})})
    assert r.status_code == status, r.text
    assert r.json()["detail"]["code"] == "INVALID_INPUT" and said in r.json()["detail"]["message"], r.text


def test_a_default_model_the_server_lacks_is_named(base_url: str) -> None:
    r = task(base_url, "extract_entities", {"text": "Acme Corp", "labels": ["company"]})
    assert r.status_code == 404 and r.json()["detail"]["code"] == "MODEL_NOT_FOUND", r.text
    assert GENERAL_NER in r.json()["detail"]["message"]


async def test_a_new_task_over_mcp_answers_as_the_route(base_url: str) -> None:
    body = {"text": LONG, "labels": ["company", "person"], "threshold": 0.0, "models": {"ner": GLINER}}
    async with over_http(base_url) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        found = answer(await session.call_tool("extract_entities", body))
    assert {"summarize_document", "extract_entities", "describe_image"} <= set(tools)
    assert tools["extract_entities"].input_schema["required"] == ["labels"]
    assert tools["describe_image"].input_schema["required"] == ["image"]
    assert {"summary", "chunks", "pages"} <= set(tools["summarize_document"].output_schema["properties"])
    route = ok(base_url, "extract_entities", body)
    assert [(e["start"], e["end"], e["label"]) for e in found["entities"]] == [
        (e["start"], e["end"], e["label"]) for e in route["entities"]
    ]
    assert found["counts"] == route["counts"] and found["windows"] == route["windows"]


def picture_page_pdf(picture: Any, footer: bytes, box: tuple[int, int, int, int]) -> bytes:
    """One letter page: ``picture`` (a PIL image) drawn in ``box`` (x, y, w, h in points), and a one-line text
    layer ``footer`` at the bottom: a text PDF whose real content is in a picture docling does not read."""
    pixels = zlib.compress(picture.convert("RGB").tobytes())
    width, height = picture.size
    x, y, w, h = box
    content = b"q %d 0 0 %d %d %d cm /Im1 Do Q\nBT /F1 10 Tf 72 40 Td (%s) Tj ET" % (w, h, x, y, footer)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> /XObject << /Im1 6 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(content), content),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /DeviceRGB /BitsPerComponent 8 "
        b"/Filter /FlateDecode /Length %d >>\nstream\n%s\nendstream" % (width, height, len(pixels), pixels),
    ]
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n%s\nendobj\n" % (number, body))
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    out.write(b"".join(b"%010d 00000 n \n" % at for at in offsets))
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref))
    return out.getvalue()


def test_the_ocr_model_reads_a_page_whose_text_layer_is_almost_empty(base_url: str) -> None:
    picture = text_image(INVOICE_LINES, size=48)
    width, height = picture.size
    # the picture covers under a fifth of the page: docling does not count it scanned, and reads only "p. 1"
    pdf = picture_page_pdf(picture, b"p. 1", (72, 450, width // 2, height // 2))
    found = ok(base_url, "docs_to_markdown", {"file": {"data": b64(pdf), "format": "pdf"}})
    assert found["ocr_fallback"] is True and found["models"]["ocr"] == OCR, found
    assert all(line in found["text"] for line in INVOICE_LINES) and found["pages"] == 1
    assert INVOICE_LINES[-1] in found["markdown"]


def test_the_new_tasks_are_in_the_openapi_spec(base_url: str) -> None:
    paths = httpx.get(f"{base_url}/openapi.json", timeout=30).json()["paths"]
    for name, wire in (
        ("summarize_document", "SummarizeDocument"),
        ("extract_entities", "ExtractEntities"),
        ("describe_image", "DescribeImage"),
    ):
        post = paths[f"/v1/tasks/{name}"]["post"]
        assert post["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith(f"{wire}Request")
        assert post["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith(f"{wire}Response")
