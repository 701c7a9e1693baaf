"""Test documents and images made on the spot: text drawn with Pillow's own font (no system fonts),
a scanned page as an image-only PDF, hostile images."""

from __future__ import annotations

import io
import struct
import zlib
from typing import Any

INVOICE_LINES = ["INVOICE 2024-017", "ACME Corp", "Total due: 1,234.56 EUR"]


def text_image(lines: list[str], size: int = 36, margin: int = 40, gap: int = 30) -> Any:
    """White picture with each line drawn in black, one under the other."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default(size=size)
    height = margin * 2 + len(lines) * (size + gap)
    width = margin * 2 + max(int(font.getlength(line)) for line in lines)
    image = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(image)
    for k, line in enumerate(lines):
        draw.text((margin, margin + k * (size + gap)), line, fill="black", font=font)
    return image


def png(image: Any) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def scanned_pdf(images: list[Any], dpi: float = 200.0) -> bytes:
    """A PDF whose pages are only pictures (no text layer), as a scanner writes them."""
    buffer = io.BytesIO()
    images[0].save(buffer, format="PDF", resolution=dpi, save_all=True, append_images=images[1:])
    return buffer.getvalue()


def png_declaring(width: int, height: int) -> bytes:
    """A tiny PNG whose header declares ``width`` x ``height`` pixels (one compressed row of data)."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")
    )


def with_attachment(pdf: bytes, size: int) -> bytes:
    """The same PDF carrying ``size`` random bytes as an embedded file: as large as wanted, pages unchanged."""
    import ctypes
    import os

    import pypdfium2 as pdfium
    import pypdfium2.raw as raw

    document = pdfium.PdfDocument(pdf)
    name = "filler.bin"
    wide = (ctypes.c_ushort * (len(name) + 1))(*[ord(c) for c in name], 0)  # FPDF_WIDESTRING: UTF-16
    attachment = raw.FPDFDoc_AddAttachment(document.raw, wide)
    filler = ctypes.create_string_buffer(os.urandom(size), size)
    if not raw.FPDFAttachment_SetFile(attachment, document.raw, filler, size):
        raise RuntimeError("pdfium refused the attachment")
    out = io.BytesIO()
    document.save(out)
    document.close()
    return out.getvalue()


def joined_pdf(parts: list[bytes]) -> bytes:
    """One PDF of the given PDFs' pages, in order (text pages and scanned pages mixed, say)."""
    import pypdfium2 as pdfium

    joined = pdfium.PdfDocument.new()
    try:
        for part in parts:
            source = pdfium.PdfDocument(part)
            try:
                joined.import_pages(source)
            finally:
                source.close()
        buffer = io.BytesIO()
        joined.save(buffer)
        return buffer.getvalue()
    finally:
        joined.close()
