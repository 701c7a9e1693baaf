"""Turning what callers pass (strings, Items, image paths, PIL images) into wire items."""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from .types import DocumentInput, Item

# Leading bytes of the encoded formats we can name without decoding anything.
_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "png"),
    (b"\xff\xd8\xff", "jpeg"),
    (b"GIF87a", "gif"),
    (b"GIF89a", "gif"),
    (b"BM", "bmp"),
)


def normalize_items(items: Item | str | Sequence[Item | str]) -> tuple[list[dict[str, Any]], bool]:
    """Wire items from one item or a sequence; the flag says whether one item was passed."""
    if isinstance(items, str | Mapping):
        return [normalize_item(items)], True
    if isinstance(items, bytes | bytearray):
        raise TypeError("items must be strings or Item dicts, not bytes (put images in Item['images'])")
    return [normalize_item(item) for item in items], False


def normalize_item(item: Item | str) -> dict[str, Any]:
    """One wire item: a bare string becomes ``{"text": ...}``; images are encoded."""
    if isinstance(item, str):
        return {"text": item}
    if not isinstance(item, Mapping):
        raise TypeError(f"an item must be a string or an Item dict, not {type(item).__name__}")
    wire = dict(item)
    images = wire.get("images")
    if images is not None:
        if isinstance(images, str | bytes | os.PathLike) or not isinstance(images, Sequence):
            images = [images]
        wire["images"] = [encode_image(image) for image in images]
    document = wire.get("document")
    if document is not None:
        wire["document"] = encode_document(document)
    return wire


DOCUMENT_SUFFIXES = {"pdf", "docx", "pptx", "xlsx", "html", "htm", "md", "markdown"}
IMAGE_SUFFIXES = {"png", "jpg", "jpeg", "gif", "bmp", "webp", "tif", "tiff"}
AUDIO_SUFFIXES = {"wav", "flac", "mp3", "ogg", "opus", "webm", "m4a"}


def encode_document(document: Any) -> dict[str, Any]:
    """``{"data": <bytes>, "format": ...}`` from bytes, a path or that dict itself (the server sniffs the bytes)."""
    if isinstance(document, Mapping) and "data" in document:
        return dict(document)
    if isinstance(document, bytes | bytearray | memoryview):
        return {"data": bytes(document)}
    if isinstance(document, str | os.PathLike):
        path = Path(document)
        suffix = path.suffix.lower().lstrip(".")
        wire: dict[str, Any] = {"data": path.read_bytes()}
        if suffix in DOCUMENT_SUFFIXES:
            wire["format"] = {"htm": "html", "markdown": "md"}.get(suffix, suffix)
        return wire
    raise TypeError(f"a document must be bytes, a file path or {{'data', 'format'}}, not {type(document).__name__}")


def from_file(path: str | os.PathLike[str], *, id: str | None = None) -> Item:
    """An Item for a file: an image (PNG, JPEG, ...) as ``images``, audio (WAV, FLAC, MP3, Ogg, ...) as
    ``audio``, anything else as ``document``."""
    file = Path(path)
    data = file.read_bytes()
    item: Item = {"id": id} if id is not None else {}
    suffix = file.suffix.lower().lstrip(".")
    if suffix in IMAGE_SUFFIXES:
        item["images"] = [encode_image(data)]
    elif suffix in AUDIO_SUFFIXES:
        item["audio"] = {"data": data, "format": suffix}
    else:
        item["document"] = cast(DocumentInput, encode_document(file))
    return item


def encode_image(image: Any) -> dict[str, Any]:
    """``{"data": <bytes>, "format": ...}`` from bytes, a path, a PIL image or that dict itself."""
    if isinstance(image, Mapping) and "data" in image:
        return dict(image)
    if isinstance(image, bytes | bytearray | memoryview):
        data = bytes(image)
        return {"data": data, "format": sniff_format(data)}
    if isinstance(image, str | os.PathLike):
        data = Path(image).read_bytes()
        return {"data": data, "format": sniff_format(data, hint=str(image))}
    if _is_pil_image(image):
        return {"data": _pil_to_png(image), "format": "png"}
    raise TypeError(
        f"an image must be bytes, a file path, a PIL image or {{'data', 'format'}}, not {type(image).__name__}"
    )


def sniff_format(data: bytes, hint: str | None = None) -> str:
    """The image format named by the leading bytes (or by the file suffix as a fallback)."""
    for magic, name in _MAGIC:
        if data.startswith(magic):
            return name
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    if hint is not None:
        suffix = Path(hint).suffix.lower().lstrip(".")
        if suffix:
            return "jpeg" if suffix == "jpg" else suffix
    raise ValueError("unrecognised image bytes: pass {'data': ..., 'format': ...} to name the format")


def _is_pil_image(obj: Any) -> bool:
    pil = sys.modules.get("PIL.Image")  # never import PIL ourselves: it is optional
    return pil is not None and isinstance(obj, pil.Image)


def _pil_to_png(image: Any) -> bytes:
    buffer = io.BytesIO()
    if image.mode not in ("1", "L", "LA", "I", "P", "RGB", "RGBA"):
        image = image.convert("RGBA" if "A" in image.mode else "RGB")
    image.save(buffer, format="PNG")
    return buffer.getvalue()
