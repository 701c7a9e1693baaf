"""Extract from whole documents: screened, parsed by a document parser on the shared queue, and the
pages without a text layer rendered and read by the OCR model the parser's config names.

An answer's ``data`` holds ``markdown``, ``text`` and ``pages`` (each page's size); its ``entities``
are the document's text blocks (and, for scanned pages, the OCR model's lines) with ``page`` and
``bbox`` in the page's pixels at 72 dpi (PDF points), or no ``bbox`` for formats without a layout.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from sie_server.adapters.documents.parser import Document, ParsedDocument, document_tokens
from sie_server.adapters.runtime.media import Found, MediaExtractor
from sie_server.adapters.runtime.options import DocumentOptions, MediaOptions
from sie_server.catalog.loader import Catalog
from sie_server.catalog.schema import ModelConfig
from sie_server.contract.headers import CallOptions
from sie_server.contract.limits import Limits
from sie_server.contract.requests import ExtractParams, ExtractRequest
from sie_server.engine.extract.pictures import DocumentPages, MediaItem, media_item, read_pages, scaled
from sie_server.engine.extract.protocol import ExtractEngine, Outcome, PerItem
from sie_server.engine.extract.queue import Queue, decode_all, run
from sie_server.engine.outcomes import Timing
from sie_server.errors import InvalidInput, ModelNotFound, SIEError


async def extract_documents(
    service: Queue,
    catalog: Catalog,
    model: ModelConfig,
    items: list[MediaItem],
    call: CallOptions,
    limits: Limits,
    timing: Timing,
    ocr: bool = True,
) -> list[Outcome]:
    """Each item's parsed document, or its own error; with ``ocr`` false, scanned pages are left unread."""
    screened = await decode_all(timing, (_screen(item, f"items[{k}]", limits) for k, item in enumerate(items)))
    documents = [(k, d) for k, d in enumerate(screened) if isinstance(d, Document)]
    options = DocumentOptions(max_pages=limits.max_document_pages)
    parsed = await run(service, model, [document_tokens(d) for _, d in documents], options, call, timing, each=True)
    outcomes: list[Outcome] = [d if isinstance(d, SIEError) else Found() for d in screened]
    scans: list[tuple[int, Document, ParsedDocument]] = []
    for (k, document), answer in zip(documents, parsed, strict=True):
        if isinstance(answer, SIEError):
            outcomes[k] = answer
            continue
        outcomes[k] = _found(answer)
        if answer.scanned:
            scans.append((k, document, answer))
    if scans and ocr:
        reader = _ocr_model(catalog, model)
        read = await asyncio.gather(
            *(_read_scans(service, reader, document, answer, call, limits, timing) for _, document, answer in scans)
        )
        for (k, _, answer), pages in zip(scans, read, strict=True):
            outcomes[k] = pages if isinstance(pages, SIEError) else _found(answer, pages)
    return outcomes


def wants_ocr(model: ModelConfig, params: ExtractParams | None) -> bool:
    """Whether scanned pages are to be read (``options.ocr``, default true); what a document parser cannot
    honour (labels, a threshold, a schema, another option) is refused by name."""
    if params is None:
        return True
    for name in ("labels", "threshold", "schema_"):
        if getattr(params, name) is not None:
            raise InvalidInput(
                f"params.{name.rstrip('_')} does not apply to document parser {model.id}: it returns the "
                "document's markdown, text and blocks (extract entities from its text with a text model)"
            )
    options = dict(params.options or {})
    ocr = options.pop("ocr", True)
    if options:
        raise InvalidInput(f"unknown option {sorted(options)[0]!r} for document parser {model.id}; it takes ['ocr']")
    if not isinstance(ocr, bool):
        raise InvalidInput("params.options.ocr must be true or false (read pages without a text layer, default true)")
    return ocr


async def _screen(item: MediaItem, where: str, limits: Limits) -> Document | SIEError:
    from sie_server.engine.document_inputs import screen

    if item.document is None:
        return InvalidInput(f"{where} has no document")
    try:
        return await asyncio.to_thread(
            screen, item.document, item.document_format, max_pages=limits.max_document_pages, index_name=where
        )
    except SIEError as exc:
        return exc


def _ocr_model(catalog: Catalog, model: ModelConfig) -> ModelConfig:
    name = model.tasks.extract.ocr_model if model.tasks.extract else None
    if name is None:
        raise InvalidInput(f"model {model.id} names no OCR model (tasks.extract.ocr_model) for pages without text")
    ocr = catalog.get(name)
    if ocr is None:
        raise ModelNotFound(f"model {model.id} reads scanned pages with {name}, which is not in the catalog")
    return ocr


async def _read_scans(
    service: Queue,
    ocr: ModelConfig,
    document: Document,
    parsed: ParsedDocument,
    call: CallOptions,
    limits: Limits,
    timing: Timing,
) -> dict[int, Found] | SIEError:
    """The OCR model's answer for each scanned page, its boxes in page points."""
    adapter = await service.pool.acquire(ocr, wait=call.wait_for_load, timeout_s=service.load_timeout_s)
    if not isinstance(adapter, MediaExtractor):
        raise InvalidInput(f"OCR model {ocr.id} does not read images (its adapter is {ocr.adapter})")
    dpi = ocr.tasks.extract.render_dpi if ocr.tasks.extract else 200
    pages = DocumentPages(document.data, parsed.scanned, dpi)
    read = await read_pages(service, ocr, pages, MediaOptions.of(None, None, None), call, limits, timing)
    if isinstance(read, SIEError):
        return read
    found: dict[int, Found] = {}
    for page, _, answer in read:
        assert isinstance(answer, Found)  # read_pages returns the first error instead
        for entity in answer.entities:
            entity["bbox"] = scaled(entity["bbox"], pages.scale)
        found[page or 0] = answer
    return found


def _found(parsed: ParsedDocument, scans: dict[int, Found] | None = None) -> Found:
    """The parser's answer, each scanned page's OCR text at its page: in the markdown and the text, it takes
    the place of what the parser found on that page (a picture, a stamped page number), in page order."""
    entities = list(parsed.entities)
    markdown, text = parsed.markdown, parsed.text
    if scans:
        read = {page: str(found.data.get("text", "")).strip() for page, found in scans.items()}
        markdown = _by_page(parsed.page_markdown, read)
        text = _by_page(parsed.page_text, read)
        for _, found in sorted(scans.items()):
            entities += found.entities
    entities.sort(key=lambda e: e["page"] or 0)  # stable: each page's blocks keep their reading order
    pages = [{"page": p.page, "width": p.width, "height": p.height} for p in parsed.pages]
    return Found(entities=entities, data={"markdown": markdown, "text": text, "pages": pages})


def _by_page(parsed: dict[int, str], read: dict[int, str]) -> str:
    """The pages' parts in page order, a page's OCR text in place of the parser's part where there is any."""
    parts = (read.get(page) or parsed.get(page, "") for page in sorted({*parsed, *read}))
    return "\n\n".join(part.strip() for part in parts if part.strip())


@dataclass(frozen=True)
class DocumentRequest:
    """A document parser's request: its items' documents and whether scanned pages are read."""

    items: list[MediaItem]
    ocr: bool

    @property
    def ids(self) -> list[str]:
        return [item.id for item in self.items]


class Documents(PerItem[DocumentRequest]):
    """The document kind: whole documents parsed on the queue, scanned pages read by the config's OCR model."""

    def decode(self, model: ModelConfig, request: ExtractRequest) -> DocumentRequest:
        items = [media_item(item, item.id_at(k)) for k, item in enumerate(request.items)]
        return DocumentRequest(items, wants_ocr(model, request.params))

    async def queue(
        self, engine: ExtractEngine, model: ModelConfig, decoded: DocumentRequest, call: CallOptions, timing: Timing
    ) -> list[Outcome]:
        return await extract_documents(
            engine.inference, engine.catalog, model, decoded.items, call, engine.limits, timing, ocr=decoded.ocr
        )


HANDLER = Documents()
