"""``docs_to_markdown``: a file (PDF, DOCX, PPTX, XLSX, HTML) to markdown through the document model, and
through the OCR model instead when the parser finds almost no text (a scan without a text layer)."""

from __future__ import annotations

from sie_server.api.service import Service
from sie_server.contract.headers import CallOptions
from sie_server.contract.tasks_wire import DocsToMarkdownRequest, DocsToMarkdownResponse
from sie_server.tasks.common import check_file, models_for, parse, used

NAME = "docs_to_markdown"
TITLE = "Document to markdown"
DESCRIPTION = (
    "Convert a document (PDF, DOCX, PPTX, XLSX, HTML; base64) to markdown with the document model (docling), "
    "falling back to the OCR model when it finds almost no text. Answers markdown, plain text, pages and "
    "the file's size."
)
STEPS = ("document", "ocr")
MIN_CHARS_PER_PAGE = 20  # below this the parser "found almost no text"


async def run(svc: Service, request: DocsToMarkdownRequest, call: CallOptions) -> DocsToMarkdownResponse:
    check_file(request.file, "file")
    configs = await models_for(NAME, svc, STEPS, request.models, uses=STEPS)
    parsed = await parse(svc, configs["document"], request.file, call)
    fallback = len(parsed.text.strip()) < MIN_CHARS_PER_PAGE * max(parsed.pages, 1)
    steps = used({"document": configs["document"]})
    if fallback:
        ocr = await parse(svc, configs["ocr"], request.file, call)
        if len(ocr.text.strip()) > len(parsed.text.strip()):
            parsed = ocr if ocr.pages else type(ocr)(ocr.text, ocr.markdown, parsed.pages)
            steps["ocr"] = configs["ocr"].id
        else:
            fallback = False
    return DocsToMarkdownResponse(
        markdown=parsed.markdown,
        text=parsed.text,
        pages=parsed.pages,
        source_bytes=len(request.file.data),
        ocr_fallback=fallback,
        models=steps,
    )
