"""``SIEDocumentLoader``: a LangChain document loader that parses files through an SIE extract model."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence

from langchain_core.document_loaders import BaseLoader
from langchain_core.documents import Document

from sie_integrations_base import DEFAULT_TIMEOUT_S, Mode, ParsedFile, SIEBackend, aparse_file, check_mode, parse_file
from sie_integrations_base._documents import PathLike


class SIEDocumentLoader(BaseLoader):
    """Loads PDFs, DOCX, PPTX, XLSX, HTML, Markdown and images as LangChain documents.

    ``model`` is the SIE parse model: ``docling-project/docling`` for documents (its scanned pages are
    read by OCR on the server), an OCR model such as ``RapidAI/PP-OCRv6`` for images and scanned PDFs.
    ``mode="single"`` gives one document per file (its markdown); ``"page"`` one per page (its text,
    with ``metadata["page"]``). Metadata: ``source``, ``model``, ``pages`` and ``blocks`` (each text
    block's ``text``, ``label``, ``page`` and ``bbox`` ``[x, y, w, h]`` in the page's pixels).
    """

    def __init__(
        self,
        file_path: PathLike | Sequence[PathLike],
        *,
        model: str = "docling-project/docling",
        mode: Mode = "single",
        base_url: str | None = None,
        timeout: float | None = DEFAULT_TIMEOUT_S,
        api_key: str | None = None,
    ) -> None:
        check_mode(mode)
        self.paths = (
            [file_path] if isinstance(file_path, str) or not isinstance(file_path, Sequence) else list(file_path)
        )
        self.mode = mode
        self.backend = SIEBackend(model, base_url=base_url, timeout=timeout, api_key=api_key)

    def _documents(self, parsed: ParsedFile) -> Iterator[Document]:
        for text, extra in parsed.parts(self.mode):
            yield Document(page_content=text, metadata={**parsed.metadata(), **extra})

    def lazy_load(self) -> Iterator[Document]:
        for path in self.paths:
            yield from self._documents(parse_file(self.backend, path))

    async def alazy_load(self) -> AsyncIterator[Document]:
        for path in self.paths:
            for document in self._documents(await aparse_file(self.backend, path)):
                yield document
