"""``SIEReader``: a LlamaIndex reader that parses files through an SIE extract model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from llama_index.core.readers.base import BaseReader
from llama_index.core.schema import Document

from sie_integrations_base import DEFAULT_TIMEOUT_S, Mode, ParsedFile, SIEBackend, aparse_file, check_mode, parse_file


class SIEReader(BaseReader):
    """Reads PDFs, DOCX, PPTX, XLSX, HTML, Markdown and images into LlamaIndex documents.

    ``model`` is the SIE parse model (``docling-project/docling`` for documents, an OCR model such as
    ``RapidAI/PP-OCRv6`` for images and scanned PDFs). ``mode="single"``: one document per file (its
    markdown); ``"page"``: one per page (its text, ``metadata["page"]``). Metadata: ``file_path``,
    ``model``, ``pages``, and ``blocks`` (text, label, page, bbox ``[x, y, w, h]``); ``blocks`` is kept
    out of the text the embedder and the LLM see.
    """

    def __init__(
        self,
        model: str = "docling-project/docling",
        *,
        mode: Mode = "single",
        base_url: str | None = None,
        timeout: float | None = DEFAULT_TIMEOUT_S,
        api_key: str | None = None,
    ) -> None:
        check_mode(mode)
        self.mode = mode
        self.backend = SIEBackend(model, base_url=base_url, timeout=timeout, api_key=api_key)

    def _documents(self, parsed: ParsedFile, extra_info: dict[str, Any] | None) -> list[Document]:
        base = {"file_path": parsed.source, "model": parsed.model, "pages": len(parsed.pages) or None}
        hidden = ["blocks"]
        return [
            Document(
                text=text,
                metadata={**base, **(extra_info or {}), **extra},
                excluded_embed_metadata_keys=hidden,
                excluded_llm_metadata_keys=hidden,
            )
            for text, extra in parsed.parts(self.mode)
        ]

    def load_data(self, file: str | Path, extra_info: dict[str, Any] | None = None) -> list[Document]:
        return self._documents(parse_file(self.backend, file), extra_info)

    async def aload_data(self, file: str | Path, extra_info: dict[str, Any] | None = None) -> list[Document]:
        return self._documents(await aparse_file(self.backend, file), extra_info)
