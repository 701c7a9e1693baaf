"""Files to text through an SIE extract model: what the document loaders and readers share.

A parse model (docling for documents, an OCR model for images and scanned PDFs) answers a file's
markdown, text, page sizes and text blocks with their page and box; ``parse_file`` returns that as a
``ParsedFile``, one per file, and ``ParsedFile.pages`` splits it by page for per-page documents.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from sie_sdk import ExtractResult, from_file
from sie_sdk.errors import InvalidInputError

from ._backend import SIEBackend

PathLike = str | os.PathLike[str]
Mode = Literal["single", "page"]


def check_mode(mode: str) -> None:
    if mode not in ("single", "page"):
        raise ValueError(f"mode must be 'single' or 'page', not {mode!r}")


@dataclass
class ParsedFile:
    """One file as the model read it."""

    source: str
    model: str
    text: str
    markdown: str
    #: each page's size (``page``, ``width``, ``height``) in the boxes' units
    pages: list[dict[str, Any]] = field(default_factory=list)
    #: text blocks or lines: ``text``, ``label``, ``page``, ``bbox`` ([x, y, w, h]; None without a layout)
    blocks: list[dict[str, Any]] = field(default_factory=list)

    def metadata(self) -> dict[str, Any]:
        """What every document made from this file carries."""
        return {"source": self.source, "model": self.model, "pages": len(self.pages) or None}

    def parts(self, mode: Mode) -> list[tuple[str, dict[str, Any]]]:
        """The documents to make: (text, metadata beyond ``metadata()``): one for the file (its markdown)
        or one per page (its text, with ``page``); each with its ``blocks``."""
        if mode == "single":
            return [(self.markdown, {"blocks": self.blocks})]
        return [(text, {"page": page, "blocks": blocks}) for page, text, blocks in self.per_page()]

    def per_page(self) -> list[tuple[int, str, list[dict[str, Any]]]]:
        """(page, its text, its blocks) for each page that has blocks, in page order."""
        pages: dict[int, list[dict[str, Any]]] = {}
        for block in self.blocks:
            pages.setdefault(int(block.get("page") or 1), []).append(block)
        return [(page, "\n".join(str(b["text"]) for b in blocks), blocks) for page, blocks in sorted(pages.items())]


def parse_result(source: str, model: str, result: ExtractResult) -> ParsedFile:
    """A ``ParsedFile`` from one extract answer; the item's own error as ``InvalidInputError``."""
    error = result.get("error")
    if error is not None:
        raise InvalidInputError(f"{source}: {error['message']}", code=error["code"], status_code=400)
    data = result.get("data", {})
    text = str(data.get("text", ""))
    blocks = [
        {"text": e.get("text", ""), "label": e.get("label"), "page": e.get("page"), "bbox": e.get("bbox")}
        for e in result.get("entities", [])
    ]
    return ParsedFile(
        source=source,
        model=model,
        text=text,
        markdown=str(data.get("markdown") or text),
        pages=list(data.get("pages", [])),
        blocks=blocks,
    )


def parse_file(backend: SIEBackend, path: PathLike) -> ParsedFile:
    """Send one file (an image as ``images``, anything else as ``document``) and read the answer."""
    result = backend.client.extract(backend.model, from_file(path, id=Path(path).name))
    return parse_result(str(path), backend.model, result)


async def aparse_file(backend: SIEBackend, path: PathLike) -> ParsedFile:
    async with backend.async_client() as client:
        result = await client.extract(backend.model, from_file(path, id=Path(path).name))
    return parse_result(str(path), backend.model, result)
