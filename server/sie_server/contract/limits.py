"""The limits every request is checked against, wherever it arrives (server or gateway)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sie_server.catalog.schema import ModelConfig
from sie_server.contract.requests import ItemIn
from sie_server.errors import InvalidInput, PayloadTooLarge

DEFAULT_MAX_ITEMS = 8192
DEFAULT_MAX_TEXT_BYTES = 256 * 1024
DEFAULT_MAX_BODY_BYTES = 64 * 2**20
DEFAULT_MAX_IMAGE_PIXELS = 64 * 10**6  # a 600 dpi A4 page is 35 MP
DEFAULT_MAX_DOCUMENT_PAGES = 1000
# an hour: a long meeting or call in one item; decoded for Whisper (16 kHz float32 mono) that is 230 MB, the
# most one item may hold while it is decoded (its WAV is 115 MB: over the 64 MB body limit, send FLAC or MP3)
DEFAULT_MAX_AUDIO_SECONDS = 3600.0


@dataclass(frozen=True)
class Limits:
    max_items: int = DEFAULT_MAX_ITEMS
    max_text_bytes: int = DEFAULT_MAX_TEXT_BYTES
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS
    max_document_pages: int = DEFAULT_MAX_DOCUMENT_PAGES
    max_audio_seconds: float = DEFAULT_MAX_AUDIO_SECONDS

    def count(self, count: int) -> None:
        if count > self.max_items:
            raise InvalidInput(f"{count} items in one request; the limit is {self.max_items}. Split the request.")

    def text(self, text: str, where: str) -> None:
        size = len(text.encode("utf-8"))
        if size > self.max_text_bytes:
            raise PayloadTooLarge(f"{where} is {size} bytes of text; the limit is {self.max_text_bytes} per text")

    def texts(self, texts: Sequence[str], field: str) -> None:
        self.count(len(texts))
        for i, text in enumerate(texts):
            self.text(text, f"{field}[{i}]")

    def items(self, items: Sequence[ItemIn], model: ModelConfig, field: str = "items") -> None:
        """Count, each item, and ids: an id given twice would make the answer ambiguous."""
        self.count(len(items))
        seen: dict[str, int] = {}
        for i, item in enumerate(items):
            self.item(item, f"{field}[{i}]", model)
            if item.id is not None:
                if item.id in seen:
                    first = f"{field}[{seen[item.id]}]"
                    raise InvalidInput(f"{field}[{i}] has id {item.id!r}, as {first} does; ids must be unique")
                seen[item.id] = i

    def item(self, item: ItemIn, where: str, model: ModelConfig) -> None:
        """One item: a text; or, for models that take them, images (one for an image-text encoder) or a document."""
        takes = ", ".join(model.inputs)
        if item.audio is not None:
            if not model.accepts_audio:
                raise InvalidInput(f"{where} has audio, but model {model.id} takes {takes}")
            if item.images or item.document is not None:
                raise InvalidInput(f"{where} has audio and images or a document; send one kind per item")
            return
        if item.document is not None:
            if not model.accepts_documents:
                raise InvalidInput(f"{where} has a document, but model {model.id} takes {takes}")
            if item.images:
                raise InvalidInput(f"{where} has a document and images; send one kind per item")
            return
        if item.images:
            if not model.accepts_images:
                raise InvalidInput(f"{where} has images, but model {model.id} takes {takes}")
            if "text" in model.inputs and len(item.images) != 1:  # an image-text encoder: one vector per item
                raise InvalidInput(f"{where} has {len(item.images)} images; send one image per item")
            return
        if model.inputs == ["audio"]:
            raise InvalidInput(f"{where} has no audio; model {model.id} takes audio")
        if "text" not in model.inputs:
            raise InvalidInput(f"{where} has no image or document; model {model.id} takes {takes}")
        if item.text is None:
            raise InvalidInput(f"{where} has no text")
        self.text(item.text, where)
