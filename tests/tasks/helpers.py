"""The tasks' test documents: the invoice as a PDF with a text layer, two distractor PDFs, and the models
the tests pick for each step (all offline: MiniLM as embedder and bi-encoder reranker, SmolLM2)."""

from __future__ import annotations

import base64

from tests.helpers.catalog import MINILM, SMOLLM
from tests.helpers.document_files import pdf_bytes

INVOICE_TEXT = [
    "Invoice INV-2024-0117 from Acme Corp.",
    "12 hours of consulting, total due 4,250.00 EUR by 31 March 2024.",
]
TRAVEL_TEXT = ["Our travel policy reimburses economy-class flights", "for trips shorter than six hours."]
CAFETERIA_TEXT = ["The cafeteria on the second floor serves lunch", "from 12:00 to 14:00 on weekdays."]
QUESTION = "How much do we owe Acme Corp, and when is it due?"
MODELS = {"embed": MINILM, "rerank": MINILM, "generate": SMOLLM}


def text_pdf(lines: list[str]) -> bytes:
    """One page, one line of Helvetica per string."""
    shown = b"\n".join(b"BT /F1 12 Tf 72 %d Td (%s) Tj ET" % (700 - 20 * k, s.encode()) for k, s in enumerate(lines))
    return pdf_bytes([shown])


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def pdf_source(lines: list[str]) -> dict[str, object]:
    return {"file": {"data": b64(text_pdf(lines)), "format": "pdf"}}


def three_documents() -> list[dict[str, object]]:
    """The invoice PDF between two distractor PDFs' indexes: invoice first, as the README's upload."""
    return [pdf_source(INVOICE_TEXT), pdf_source(TRAVEL_TEXT), pdf_source(CAFETERIA_TEXT)]
