"""Docling's model-free pipelines: PDF, DOCX, PPTX, XLSX, HTML and Markdown in, text and layout out.

Nothing is loaded and nothing is downloaded: DOCX, PPTX, XLSX, HTML and Markdown go through docling's
``SimplePipeline`` (its declarative backends build the document straight from the markup), PDFs
through ``NativePdfPipeline`` (docling 2.143's model-free PDF pipeline over docling-parse): every
text line of the PDF's text layer becomes one block with its box; no layout, table or OCR model runs,
so a PDF has no headings or tables and its blocks come in the order the PDF draws them. Remote and
local resource fetching (HTML and Markdown images) is off, as are docling's remote services and
plugins. A PDF page with no text layer (a scan), or one that pictures mostly cover with under 100
characters of text on it (a scan with a stamped page number), is listed in ``scanned``: the service
renders it and reads it with the config's ``tasks.extract.ocr_model``.

Coordinates: a PDF's page sizes and boxes are in PDF points with the origin at the page's top-left
corner; a point is a pixel of the page rendered at 72 dpi (multiply by ``dpi / 72`` for a rendering
at another resolution). PPTX slides are measured the same way (EMU / 12700 = points). DOCX, HTML and
Markdown have no layout: their blocks have no page and no box. XLSX blocks carry the sheet number as
their page and no box; an XLSX's markdown has each visible sheet's name as a ``## <sheet>`` heading
above its tables (docling's Excel serializer); hidden sheets are left out, as docling leaves them.
Labels: ``heading`` (titles and section headers), ``paragraph``, ``list_item``, ``table_cell`` (one per
cell), docling's own label for the rest (``caption``, ``code``, ``formula``, ...), and ``line`` for a
PDF text line.

For DOCX, PPTX, XLSX, HTML and Markdown the markdown and text are what docling itself gives for the same
bytes, except for the options ``build_converter`` lists (tests/server/test_docling_parity.py).
"""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sie_server.adapters.documents.parser import Document, DocumentParser, PageSize, ParsedDocument, document_tokens
from sie_server.adapters.runtime.base import Tokens
from sie_server.adapters.runtime.media import MediaEntity, line_entity, pixel_box
from sie_server.adapters.runtime.options import DocumentOptions
from sie_server.errors import InvalidInput

EMU_PER_POINT = 12700
DOCUMENT_TIMEOUT_S = 300.0  # a PDF still parsing after this long is refused
MAX_PARSER_THREADS = 4
LABELS = {"title": "heading", "section_header": "heading", "text": "paragraph"}
#: a PDF page is scanned when it has no text, or when pictures cover this much of it and its text is
#: shorter than SCANNED_TEXT_CHARS (a scan with a stamped page number or a fax header)
SCANNED_COVER = 0.5
SCANNED_TEXT_CHARS = 100
WARMUP = b"# Warm-up\n\nA paragraph and a list:\n\n- one\n- two\n"


class DoclingAdapter(DocumentParser):
    backend = "docling"
    #: a PDF's blocks are its text layer's lines (no layout model names them)
    pdf_lines = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.converter: Any = None
        self._lock = threading.Lock()

    def load(self, weights: Path) -> None:
        """Build the converter (there are no weights: ``weights`` is only where the catalog found docling)."""
        self.converter = build_converter()

    def unload(self) -> None:
        self.converter = None

    def resident_bytes(self) -> int:
        return 0  # no weights; parsing memory is the profile's activation reserve

    def warmup(self) -> None:
        self.run([document_tokens(Document(WARMUP, "md"))], DocumentOptions())

    def run(self, batch: list[Tokens], options: DocumentOptions) -> list[ParsedDocument]:
        return [self.parse(tokens.data, options) for tokens in batch]

    def parse(self, document: Document, options: DocumentOptions) -> ParsedDocument:
        from docling.datamodel.base_models import ConversionStatus, DocumentStream

        if document.pages is not None and document.pages > options.max_pages:
            raise InvalidInput(f"the PDF has {document.pages} pages, more than the limit of {options.max_pages}")
        stream = DocumentStream(name=f"document.{document.format}", stream=io.BytesIO(document.data))
        try:
            with self._lock:  # one conversion at a time: the converter's pipelines are shared
                result = self.converter.convert(stream, raises_on_error=False, max_num_pages=options.max_pages)
        except Exception as exc:  # docling's backends raise many kinds for a broken file
            raise InvalidInput(f"the {document.format} document could not be parsed: {exc}") from exc
        errors = "; ".join(e.error_message for e in result.errors)
        if result.status not in (ConversionStatus.SUCCESS, ConversionStatus.PARTIAL_SUCCESS):
            raise InvalidInput(f"the {document.format} document could not be parsed: {errors or result.status.value}")
        if result.has_timeout_errors():
            raise InvalidInput(f"the {document.format} document took longer than {DOCUMENT_TIMEOUT_S:.0f}s to parse")
        return answer(result.document, document, self.pdf_lines)


def build_converter(pdf: Any = None) -> Any:
    """A converter for the six formats, offline: PDFs through ``pdf`` (a docling PDF format option) or the
    model-free native pipeline, the others through the model-free pipelines."""
    from docling.datamodel.backend_options import HTMLBackendOptions, MarkdownBackendOptions
    from docling.datamodel.base_models import InputFormat
    from docling.datamodel.pipeline_options import (
        ConvertPipelineOptions,
        NativePdfPipelineOptions,
        default_parser_threads,
    )
    from docling.document_converter import (
        DocumentConverter,
        ExcelFormatOption,
        HTMLFormatOption,
        MarkdownFormatOption,
        NativePdfFormatOption,
        PowerpointFormatOption,
        WordFormatOption,
    )

    # Options chosen here, against ``DocumentConverter()``'s defaults for DOCX, PPTX, XLSX, HTML and Markdown
    # (tests/server/test_docling_parity.py holds the server to docling with exactly these):
    # - no remote services, no external plugins, no fetching of linked or local resources: docling's
    #   defaults too, spelled out so that a docling release changing them changes nothing here;
    # - ``document_timeout``: a document still parsing after DOCUMENT_TIMEOUT_S is refused (docling's
    #   default is no limit); it never changes what a document that finishes gives;
    # - HTML ``infer_furniture=False``: the one option that changes docling's output, see below;
    # - XLSX markdown from docling's Excel serializer (``answer``), not the generic export;
    # - Markdown reaches docling as UTF-8 decoded by the service's screening (engine/document_inputs.py):
    #   the same text docling reads from a byte-order mark or UTF-8, but unmarked bytes that are not UTF-8
    #   have what UTF-8 cannot decode replaced, where docling would decode them as cp1252 (or refuse
    #   damaged UTF-8).
    offline: dict[str, Any] = {"enable_remote_services": False, "allow_external_plugins": False}
    simple = ConvertPipelineOptions(**offline, document_timeout=DOCUMENT_TIMEOUT_S)
    native = NativePdfPipelineOptions(
        **offline,
        document_timeout=DOCUMENT_TIMEOUT_S,
        generate_page_images=False,
        generate_picture_images=False,
        parser_threads=min(MAX_PARSER_THREADS, default_parser_threads()),
    )
    formats = (InputFormat.PDF, InputFormat.DOCX, InputFormat.PPTX, InputFormat.XLSX, InputFormat.HTML, InputFormat.MD)
    no_fetch: dict[str, Any] = {"enable_remote_fetch": False, "enable_local_fetch": False, "fetch_images": False}
    # on purpose unlike docling's default: the text (and pictures) before an HTML page's first heading are
    # its content, not furniture; docling's default moves them to the furniture layer, out of the markdown,
    # the text and the blocks, and a page without headings (a fragment, an e-mail body) would be empty
    html = no_fetch | {"infer_furniture": False}
    return DocumentConverter(
        allowed_formats=list(formats),
        format_options={
            InputFormat.PDF: pdf or NativePdfFormatOption(pipeline_options=native),
            InputFormat.DOCX: WordFormatOption(pipeline_options=simple),
            InputFormat.PPTX: PowerpointFormatOption(pipeline_options=simple),
            InputFormat.XLSX: ExcelFormatOption(pipeline_options=simple),
            InputFormat.HTML: HTMLFormatOption(pipeline_options=simple, backend_options=HTMLBackendOptions(**html)),
            InputFormat.MD: MarkdownFormatOption(
                pipeline_options=simple, backend_options=MarkdownBackendOptions(**no_fetch)
            ),
        },
    )


def answer(doc: Any, document: Document, pdf_lines: bool = True) -> ParsedDocument:
    """Markdown, text, page sizes, blocks and the pages without a text layer of a converted document
    (a PDF's blocks labelled ``line`` when ``pdf_lines``, else by the layout model's labels)."""
    scale = 1 / EMU_PER_POINT if document.format == "pptx" else 1.0
    pages: list[PageSize] = []
    if document.format in ("pdf", "pptx"):
        pages = [
            PageSize(number, round(page.size.width * scale), round(page.size.height * scale))
            for number, page in sorted(doc.pages.items())
        ]
    sizes = {p.page: (p, doc.pages[p.page].size.height) for p in pages}
    entities = list(blocks(doc, document.format, sizes, scale, pdf_lines))
    count = document.pages or len(pages)
    scanned = scanned_pages(doc, count, entities) if document.format == "pdf" else []
    numbers = range(1, count + 1) if scanned else range(0)  # by page only where OCR text will join them
    return ParsedDocument(
        markdown=markdown(doc, document.format),
        text=doc.export_to_text(),
        pages=pages,
        entities=entities,
        scanned=scanned,
        page_markdown={n: str(doc.export_to_markdown(page_no=n)) for n in numbers},
        page_text={n: str(doc.export_to_text(page_no=n)) for n in numbers},
    )


def markdown(doc: Any, fmt: str) -> str:
    """Docling's markdown export with its default parameters; for a workbook, through docling's Excel
    serializer, which puts each visible sheet's name as a ``## <sheet>`` heading above its tables (as
    docling's own expected outputs do: the generic export drops the names, so a reader cannot tell which
    sheet a table came from). The text export has no such serializer in docling and stays docling's own."""
    if fmt != "xlsx":
        return str(doc.export_to_markdown())
    from docling_core.transforms.serializer.markdown_excel import MsExcelMarkdownDocSerializer

    return str(MsExcelMarkdownDocSerializer(doc=doc).serialize().text)


def scanned_pages(doc: Any, count: int, entities: list[MediaEntity]) -> list[int]:
    """The PDF's pages without a text layer, and those a picture covers with little text on it."""
    chars: dict[int, int] = {}
    for entity in entities:
        if entity["page"] is not None:
            chars[entity["page"]] = chars.get(entity["page"], 0) + len(entity["text"])
    cover: dict[int, float] = {}
    for picture in doc.pictures:
        for prov in picture.prov:
            page = doc.pages.get(prov.page_no)
            if page is not None and page.size.width * page.size.height > 0:
                share = prov.bbox.area() / (page.size.width * page.size.height)
                cover[prov.page_no] = cover.get(prov.page_no, 0.0) + share
    return [
        n
        for n in range(1, count + 1)
        if n not in chars or (cover.get(n, 0.0) >= SCANNED_COVER and chars[n] < SCANNED_TEXT_CHARS)
    ]


Sizes = dict[int, tuple[PageSize, float]]  # page -> (its size in pixels, its height in docling's units)


def blocks(doc: Any, fmt: str, sizes: Sizes, scale: float, pdf_lines: bool = True) -> Iterator[MediaEntity]:
    """One entity per text block of the document's body, in document order (an explicit stack:
    deeply nested markup must not exhaust the interpreter's recursion)."""
    from docling_core.types.doc.common.content_layer import ContentLayer
    from docling_core.types.doc.items.group import GroupItem
    from docling_core.types.doc.items.picture.picture import PictureItem
    from docling_core.types.doc.items.table.table import TableItem
    from docling_core.types.doc.items.text import TextItem
    from docling_core.types.doc.labels import GroupLabel

    stack: list[Any] = [doc.body]
    while stack:
        node = stack.pop()
        if node.content_layer != ContentLayer.BODY:  # furniture: page headers and footers, an HTML <title>
            continue
        if isinstance(node, GroupItem) and node.label == GroupLabel.INLINE:
            parts = [t.text for t in _descendants(doc, node) if isinstance(t, TextItem) and t.text.strip()]
            if parts:
                first = next(t for t in _descendants(doc, node) if isinstance(t, TextItem) and t.text.strip())
                yield _entity(" ".join(parts), "paragraph", first, fmt, sizes, scale)
            continue
        # what is inside a picture is not a block (a chart's data table is in the markdown and text, not here)
        if isinstance(node, PictureItem):
            continue
        if isinstance(node, TableItem):
            for cell in node.data.table_cells:
                if cell.text.strip():
                    yield _entity(cell.text.strip(), "table_cell", node, fmt, sizes, scale)
            continue
        if isinstance(node, TextItem) and node.text.strip():
            label = "line" if fmt == "pdf" and pdf_lines else LABELS.get(str(node.label), str(node.label))
            yield _entity(node.text.strip(), label, node, fmt, sizes, scale)
        stack.extend(reversed([child.resolve(doc) for child in node.children]))


def _descendants(doc: Any, node: Any) -> Iterator[Any]:
    stack = list(reversed(node.children))
    while stack:
        item = stack.pop().resolve(doc)
        yield item
        stack.extend(reversed(item.children))


def _entity(text: str, label: str, item: Any, fmt: str, sizes: Sizes, scale: float) -> MediaEntity:
    """The block as an entity: its page for paged formats, its top-left-origin pixel box where there is layout."""
    prov = item.prov[0] if getattr(item, "prov", None) else None
    if prov is None or fmt not in ("pdf", "pptx", "xlsx"):
        return line_entity(text, 1.0, None, None, label)
    if prov.page_no not in sizes:  # XLSX: a sheet has no size in pixels
        return line_entity(text, 1.0, None, prov.page_no, label)
    size, height = sizes[prov.page_no]
    box = prov.bbox.to_top_left_origin(page_height=height)
    bbox = pixel_box(box.l * scale, box.t * scale, box.r * scale, box.b * scale, size.width, size.height)
    return line_entity(text, 1.0, bbox, prov.page_no, label)
