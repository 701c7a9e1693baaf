"""The document parsers' contract: one document per queued item, its text and layout out.

A ``DocumentParser`` gets documents the service has already screened (format sniffed, size, page
count, zip and XML bombs refused: ``engine/document_inputs.py``) and answers a ``ParsedDocument`` each.
Pages that have no text layer (scans) are not read here: the parser lists them in ``scanned`` and the
service renders them and reads them with the OCR model the config names, on the same queue.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass, field
from typing import Literal

from sie_server.adapters.runtime.base import Tokens
from sie_server.adapters.runtime.encoder import Encoder
from sie_server.adapters.runtime.media import MediaEntity
from sie_server.adapters.runtime.options import DocumentOptions

DocumentFormat = Literal["pdf", "docx", "pptx", "xlsx", "html", "md"]
BYTES_PER_COST = 4096  # a document's queue cost before it is parsed: its size in 4 KiB units


@dataclass(frozen=True, slots=True)
class Document:
    """A screened document: its bytes and its format (sniffed, not only the caller's hint)."""

    data: bytes
    format: DocumentFormat
    #: pages, for a PDF (counted while screening); None for other formats
    pages: int | None = None


@dataclass(frozen=True, slots=True)
class PageSize:
    page: int  # 1-based
    width: int  # pixels of the page as entities' boxes measure it (PDF points at 72 dpi for a PDF)
    height: int


@dataclass
class ParsedDocument:
    markdown: str = ""
    text: str = ""
    pages: list[PageSize] = field(default_factory=list)
    #: one per text block (paragraph, heading, table cell, list item), in reading order, with ``page``
    #: and ``bbox`` where the format has a layout (PDF), else None
    entities: list[MediaEntity] = field(default_factory=list)
    #: 1-based pages with no text layer, to be rendered and read by the OCR model
    scanned: list[int] = field(default_factory=list)
    #: when pages are scanned: each page's own markdown and text (1-based), so that each scanned page's OCR
    #: text takes its page's place in the whole; empty otherwise
    page_markdown: dict[int, str] = field(default_factory=dict)
    page_text: dict[int, str] = field(default_factory=dict)


def document_tokens(document: Document) -> Tokens:
    return Tokens([0] * max(1, len(document.data) // BYTES_PER_COST), None, False, document)


class DocumentParser(Encoder[DocumentOptions]):
    """Documents in (``Tokens.data`` is a ``Document``), one ``ParsedDocument`` each out."""

    options_type = DocumentOptions

    @abstractmethod
    def run(self, batch: list[Tokens], options: DocumentOptions) -> list[ParsedDocument]:
        """Each document parsed, in batch order; a document that cannot be parsed raises InvalidInput alone."""
