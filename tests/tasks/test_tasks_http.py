"""The tasks on ``POST /v1/tasks/{task}`` of the shared test server (offline): grounded QA over the invoice
PDF and two distractors, redaction, a scanned PDF to markdown, each cap refused before work, and a model
the server cannot load named with the command that fetches it."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.helpers.catalog import MINILM, SMOLLM
from tests.helpers.documents import INVOICE_LINES, scanned_pdf, text_image
from tests.tasks.helpers import INVOICE_TEXT, MODELS, QUESTION, b64, pdf_source, text_pdf, three_documents

RERANK_MISSING = "cross-encoder/ms-marco-MiniLM-L-6-v2"  # in the test catalog, never cached: offline it cannot load


def task(base_url: str, name: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{base_url}/v1/tasks/{name}", json=body, timeout=300)


def ok(base_url: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
    r = task(base_url, name, body)
    assert r.status_code == 200, r.text
    found: dict[str, Any] = r.json()
    return found


def test_qa_over_the_invoice_and_two_distractors_cites_the_invoice_passage_with_its_offset(base_url: str) -> None:
    absent = "What is the name of the company's cat?"
    body = {"documents": three_documents(), "questions": [QUESTION, absent], "models": MODELS, "max_new_tokens": 24}
    answer = ok(base_url, "answer_questions", body)
    assert answer["models"] == {**MODELS, "document": "docling-project/docling"}
    invoice, missing = answer["answers"]
    first = invoice["passages"][0]
    assert invoice["found"] and first["document"] == 0 and "4,250.00 EUR" in first["text"]
    assert [p["score"] for p in invoice["passages"]] == sorted((p["score"] for p in invoice["passages"]), reverse=True)
    # the offset is into the document's own text, as docs_to_markdown gives it
    text = ok(base_url, "docs_to_markdown", {"file": pdf_source(INVOICE_TEXT)["file"]})["text"]
    assert text[first["start"] : first["end"]] == first["text"]
    assert missing == {"question": absent, "answer": "not in the documents", "found": False, "passages": []}


def test_redaction_gives_consistent_placeholders_and_no_original_value(base_url: str) -> None:
    text = (
        "Alice Martin met Bob Jones in Paris. Alice Martin then wrote to bob.jones@example.com, "
        "and Bob Jones answered the same day."
    )
    body = {
        "text": text,
        "known": {"person": ["Alice Martin", "Bob Jones"]},
        "labels": ["person"],
        # the test catalog's GLiNER has random weights: at threshold 1 it finds nothing, so the answer is exact
        "threshold": 1.0,
        "models": {"ner": "test/tiny-gliner"},
    }
    r = task(base_url, "redact_pii", body)
    assert r.status_code == 200, r.text
    assert r.json() == {
        "redacted_text": "[PERSON_1] met [PERSON_2] in Paris. [PERSON_1] then wrote to [EMAIL_1], "
        "and [PERSON_2] answered the same day.",
        "counts": {"PERSON": 2, "EMAIL": 1},
        "models": {"ner": "test/tiny-gliner"},
    }
    for value in ("Alice", "Martin", "Bob", "Jones", "bob.jones", "example.com"):
        assert value not in r.text


def test_a_scanned_pdf_becomes_its_text(base_url: str) -> None:
    scan = scanned_pdf([text_image(INVOICE_LINES, size=48)])
    answer = ok(base_url, "docs_to_markdown", {"file": {"data": b64(scan), "format": "pdf"}})
    assert answer["text"] == "\n".join(INVOICE_LINES)  # docling's scanned page, read by PP-OCRv6
    assert answer["pages"] == 1 and answer["source_bytes"] == len(scan)
    assert all(line in answer["markdown"] for line in INVOICE_LINES)


TEXT = {"text": "Acme Corp sells widgets."}
CAPS = {
    "questions": ("answer_questions", {"documents": [TEXT], "questions": ["q?"] * 9}, 400, "9 questions"),
    "documents": ("answer_questions", {"documents": [TEXT] * 17, "questions": ["q?"]}, 400, "17 documents"),
    "characters": ("redact_pii", {"text": "x" * 200_001}, 413, "200001 characters"),
    "chunks": (
        "answer_questions",
        {"documents": [{"text": "A short sentence here. " * 3000}], "questions": ["q?"], "chunk_chars": 100},
        400,
        "passages in one task",
    ),
    "pages": (
        "docs_to_markdown",
        {"file": {"data": b64(text_pdf(["one"]).replace(b"/Count 1", b"/Count 150")), "format": "pdf"}},
        413,
        "150 pages",
    ),
}


@pytest.mark.parametrize("cap", list(CAPS))
def test_each_cap_is_refused_before_any_work(base_url: str, cap: str) -> None:
    name, body, status, said = CAPS[cap]
    models = {"answer_questions": MODELS, "redact_pii": {"ner": "test/tiny-gliner"}}  # a task refuses others
    r = task(base_url, name, {**body, "models": models[name]} if name in models else body)
    assert r.status_code == status, r.text
    assert r.json()["detail"]["code"] == "INVALID_INPUT" and said in r.json()["detail"]["message"]


def test_a_model_that_cannot_load_is_named_with_the_command_that_fetches_it(base_url: str) -> None:
    body = {"documents": [TEXT], "questions": ["Who sells widgets?"], "models": {"embed": MINILM}}
    r = task(base_url, "answer_questions", body)  # the default reranker: not cached, and the server is offline
    assert r.status_code == 502, r.text
    error = r.json()["detail"]
    assert error["code"] == "MODEL_LOAD_FAILED"
    assert RERANK_MISSING in error["message"] and f"sie-server models pull {RERANK_MISSING}" in error["message"]


def test_the_tasks_are_in_the_openapi_spec(base_url: str) -> None:
    paths = httpx.get(f"{base_url}/openapi.json", timeout=30).json()["paths"]
    for name in ("docs_to_markdown", "answer_questions", "redact_pii"):
        post = paths[f"/v1/tasks/{name}"]["post"]
        assert post["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("Request")
        assert "$ref" in post["responses"]["200"]["content"]["application/json"]["schema"]


INVOICE_SCHEMA = {
    "type": "object",
    "properties": {"vendor": {"type": "string", "maxLength": 40}, "total": {"type": "number"}},
    "required": ["vendor", "total"],
    "additionalProperties": False,
}
INVOICE_SENTENCE = "Invoice INV-2024-0117 from Acme Corp: total due 4,250.00 EUR by 31 March 2024."


def test_structured_extraction_answers_an_object_valid_under_the_schema_or_a_clear_error(base_url: str) -> None:
    body = {"text": INVOICE_SENTENCE, "schema": INVOICE_SCHEMA, "models": {"generate": SMOLLM}}
    found = ok(base_url, "extract_structured", body)
    assert set(found["data"]) == {"vendor", "total"} and isinstance(found["data"]["total"], int | float)
    assert isinstance(found["data"]["vendor"], str) and found["models"] == {"generate": SMOLLM}
    cut = task(base_url, "extract_structured", {**body, "max_new_tokens": 3})  # stopped inside the object
    assert cut.status_code == 502 and cut.json()["detail"]["code"] == "INVALID_OUTPUT", cut.text
    assert "not JSON" in cut.json()["detail"]["message"]
    bad = task(base_url, "extract_structured", {**body, "schema": {"type": "object", "properties": {"a": {"type": 5}}}})
    assert bad.status_code == 400 and "not a valid JSON schema" in bad.json()["detail"]["message"]
