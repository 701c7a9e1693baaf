"""The published `sie-mcp` 0.10.1 (Superlinked's MCP edge: document jobs over `sie-sdk`) works against this
server unchanged, run as its users run it (`sie-mcp serve`, its tools called through the official `mcp` client
over streamable HTTP), with its model settings (`SIE_MCP_*_MODEL`) overridden to models of this server's catalog:
docs_to_markdown (docling, with its ocr flag, and its VL-OCR engine on PP-OCRv6), extract_entities, answer_questions and
generate_structured.

It needs Python 3.12 and runs from `.venv-compat`, which `make test` creates; without sie-mcp there the test is
skipped and says why.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.compat.test_published_integrations import COMPAT_PYTHON, _installed
from tests.helpers.catalog import DOCLING, MINILM, OCR, SMOLLM
from tests.helpers.document_files import pdf_bytes
from tests.helpers.documents import INVOICE_LINES, joined_pdf, scanned_pdf, text_image

SCRIPT = Path(__file__).with_name("published_mcp_check.py")
RERANKER, GLINER = "test/tiny-reranker", "test/tiny-gliner"
FIRST, LAST = "Page one says hello", "Page three says goodbye"


@pytest.mark.skipif(not _installed("sie-mcp"), reason="no sie-mcp 0.10.1 in .venv-compat (make test installs it)")
def test_published_sie_mcp_0_10_1(base_url: str, tmp_path: Path) -> None:
    scan = scanned_pdf([text_image(INVOICE_LINES, size=48)])
    mixed, scanned = tmp_path / "mixed.pdf", tmp_path / "scan.pdf"
    first, last = (b"BT /F1 12 Tf 72 700 Td (%s) Tj ET" % line.encode() for line in (FIRST, LAST))
    mixed.write_bytes(joined_pdf([pdf_bytes([first]), scan, pdf_bytes([last])]))
    scanned.write_bytes(scan)
    models = [DOCLING, OCR, MINILM, RERANKER, SMOLLM, GLINER]
    run = subprocess.run(
        [str(COMPAT_PYTHON), str(SCRIPT), base_url, str(mixed), str(scanned), *models],
        capture_output=True,
        text=True,
        timeout=420,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert {"docs_to_markdown", "extract_entities", "answer_questions", "generate_structured"} <= set(report["tools"])
    # docling's markdown, the scanned middle page read by the OCR model at its page
    markdown = report["docs_to_markdown"]
    assert markdown["markdown"] == "\n\n".join([FIRST, "\n".join(INVOICE_LINES), LAST]), markdown
    assert markdown["metadata"]["engine"] == "docling"
    # its docling engine with ocr on sends options {"ocr": true}: the same answer (scanned pages are read anyway)
    assert report["docs_to_markdown_docling_ocr"]["markdown"] == markdown["markdown"], report[
        "docs_to_markdown_docling_ocr"
    ]
    # its VL-OCR engine renders the pages itself and reads each with the OCR model's lines (its entities)
    ocr = report["docs_to_markdown_vl_ocr"]
    assert ocr["markdown"] == "\n\n".join(INVOICE_LINES), ocr
    assert ocr["metadata"]["engine"] == "vl-ocr" and ocr["metadata"]["source_pages"] == 1
    # GLiNER spans (a tiny random model: which spans is not the point, their shape is)
    entities = report["extract_entities"]
    assert "error" not in entities, entities
    content = "ACME Corp owes 1,234.56 EUR."
    for entity in entities["entities"]:
        assert content[entity["start"] : entity["end"]] == entity["text"] and entity["label"] in ("company", "amount")
    assert entities["metadata"]["entity_count"] == len(entities["entities"])
    # encode, score and chat completions in one grounded answer
    answers = report["answer_questions"]
    assert "error" not in answers, answers
    (answer,) = answers["answers"]
    assert answer["question"] == "What is the invoice total?" and answer["answer"].strip()
    assert any("1,234.56" in passage["text"] for passage in answer["passages"]), answer
    # chat completions under response_format json_schema, validated by sie-mcp itself
    structured = report["generate_structured"]
    assert json.loads(structured["content"])["colour"] in ("red", "green", "blue"), structured
