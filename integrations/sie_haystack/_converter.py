"""``SIEDocumentConverter``: files (PDF, DOCX, PPTX, XLSX, HTML, Markdown, images) into Haystack documents
through an SIE parse model, which parses them on the server (docling for documents, an OCR model such as
``RapidAI/PP-OCRv6`` for images and scanned pages)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from haystack import Document, component
from haystack.dataclasses import ByteStream
from haystack.utils import Secret

from sie_integrations_base import DEFAULT_TIMEOUT_S, Mode, ParsedFile, check_mode, parse_file, parse_result
from sie_sdk.types import Item

from ._common import SIEComponent


def _item(stream: ByteStream, name: str) -> Item:
    if (stream.mime_type or "").startswith("image/"):
        return {"id": name, "images": [{"data": stream.data}]}
    return {"id": name, "document": {"data": stream.data}}


@component
class SIEDocumentConverter(SIEComponent):
    """``run(sources=[path | ByteStream, ...], meta=None)`` gives ``{"documents": [...]}``.

    ``mode="single"``: one document per file, its markdown; ``"page"``: one per page, its text, with
    ``meta["page"]``. Each document's meta: ``file_path`` (a ByteStream's own ``file_path`` meta), ``source``,
    ``model``, ``pages``, ``blocks`` (each text block's ``text``, ``label``, ``page`` and ``bbox``
    ``[x, y, w, h]``), and ``meta`` (one dict for all sources, or one per source). A file the server
    cannot read raises ``sie_sdk.InvalidInputError`` naming it.
    """

    def __init__(
        self,
        model: str = "docling-project/docling",
        *,
        mode: Mode = "single",
        base_url: str | None = None,
        timeout: float | None = DEFAULT_TIMEOUT_S,
        api_key: Secret | None = None,
    ) -> None:
        check_mode(mode)
        SIEComponent.__init__(self, model, base_url=base_url, timeout=timeout, api_key=api_key)
        self.mode: Mode = mode

    def _init_parameters(self) -> dict[str, Any]:
        return {"mode": self.mode}

    def _parse(self, source: str | Path | ByteStream) -> tuple[ParsedFile, dict[str, Any]]:
        if isinstance(source, ByteStream):
            name = str(source.meta.get("file_path") or "bytestream")
            result = self.backend.client.extract(self.model, _item(source, Path(name).name))
            return parse_result(name, self.model, result), {**source.meta, "file_path": name}
        return parse_file(self.backend, source), {"file_path": str(source)}

    @component.output_types(documents=list[Document])
    def run(
        self,
        sources: list[str | Path | ByteStream],
        meta: dict[str, Any] | list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        metas = meta if isinstance(meta, list) else [meta or {}] * len(sources)
        if len(metas) != len(sources):
            raise ValueError(f"meta has {len(metas)} entries for {len(sources)} sources: give one per source")
        documents = []
        for source, extra in zip(sources, metas, strict=True):
            parsed, origin = self._parse(source)
            for text, part in parsed.parts(self.mode):
                documents.append(Document(content=text, meta={**origin, **parsed.metadata(), **part, **extra}))
        return {"documents": documents}
