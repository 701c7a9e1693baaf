"""Screening a document before any parser sees it, and rendering PDF pages for the OCR model.

``screen`` is where a hostile or broken file is refused (``InvalidInput``, naming the item and the
problem) before it costs memory or minutes: the format is sniffed from the bytes (the caller's hint
is used only when the sniff agrees or cannot tell: Markdown and HTML are both text), then

- a PDF must open in PDFium without a password, end with ``%%EOF`` (else it is truncated) and have
  at most ``max_pages`` pages (counted from the page tree, nothing rendered or parsed);
- a DOCX/PPTX/XLSX is checked from its zip central directory before anything is extracted: the
  number of members, the sum of their declared uncompressed sizes and each large member's
  compression ratio; then its XML members are read in bounded chunks and one that declares a
  DOCTYPE or an entity (the "billion laughs" bomb) is refused;
- HTML that declares entities in a DOCTYPE is refused (Markdown is not checked: docling reads the
  raw HTML in it with ``html.parser``, which expands no declared entity, and a Markdown page about
  XML may well show a DTD); HTML goes on as it was sent (its parser reads its ``<meta charset>``),
  Markdown is decoded by its byte-order mark (UTF-8, UTF-16 or UTF-32, as docling reads them), else as
  UTF-8 with undecodable bytes replaced, and passed on as UTF-8. The replacement is the server's own
  choice: docling 2.143 decodes unmarked Markdown that is not UTF-8 as cp1252 and refuses damaged UTF-8.

``render_pages`` renders PDF pages as RGB pictures, refusing a page whose pixels would exceed the
limit before rendering it. PDFium is not thread-safe: every call into it here holds ``PDFIUM_LOCK``.
"""

from __future__ import annotations

import codecs
import io
import math
import re
import threading
import zipfile
from typing import Any

from sie_server.adapters.documents.parser import Document, DocumentFormat
from sie_server.errors import InvalidInput

PDFIUM_LOCK = threading.Lock()
MAX_ZIP_BYTES = 256 * 2**20  # the sum of an archive's declared uncompressed member sizes
MAX_ZIP_MEMBERS = 10_000
MAX_RATIO = 200  # uncompressed / compressed, for members above RATIO_FROM bytes
RATIO_FROM = 2**20
CHUNK = 2**20
PDF_HEAD = 1024  # readers accept the %PDF- header within the first 1024 bytes
PDF_TAIL = 1024  # ... and the %%EOF marker within the last 1024
OFFICE: dict[str, DocumentFormat] = {"word/": "docx", "ppt/": "pptx", "xl/": "xlsx"}
XML_MEMBER = re.compile(r"\.(xml|rels|vml|svg)$", re.IGNORECASE)
HTML_START = re.compile(
    rb"^(?:<\?xml[^>]*>\s*)?(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html|head|body)[\s>]", re.I | re.S
)
ALIASES: dict[str, DocumentFormat] = {
    "pdf": "pdf",
    "application/pdf": "pdf",
    "docx": "docx",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "pptx": "pptx",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": "pptx",
    "xlsx": "xlsx",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
    "html": "html",
    "htm": "html",
    "xhtml": "html",
    "text/html": "html",
    "application/xhtml+xml": "html",
    "md": "md",
    "markdown": "md",
    "text/markdown": "md",
    "txt": "md",
    "text": "md",
    "text/plain": "md",
}
TEXT_FORMATS = frozenset({"html", "md"})
#: byte-order marks and their encodings, in the order docling's text decoding tries them (UTF-32 LE's mark
#: starts with UTF-16 LE's)
BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def normalize_hint(hint: str | None, index_name: str) -> DocumentFormat | None:
    """The caller's format name (``pdf``, ``.docx``, a MIME type) as a format; None when not given."""
    if hint is None or not hint.strip():
        return None
    key = hint.strip().lower().removeprefix(".").split(";")[0].strip()
    if key not in ALIASES:
        raise InvalidInput(
            f"{index_name}: document format {hint!r} is not supported; send one of pdf, docx, pptx, xlsx, html, md"
        )
    return ALIASES[key]


def screen(data: bytes, hint: str | None, *, max_pages: int, index_name: str) -> Document:
    """The document, its format sniffed and its hostile constructions refused (InvalidInput)."""
    if not data.strip():
        raise InvalidInput(f"{index_name}: the document is empty")
    if data.startswith(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"):
        raise InvalidInput(
            f"{index_name}: legacy Office documents (.doc, .xls, .ppt) are not supported; save it as DOCX, XLSX or PPTX"
        )
    wanted = normalize_hint(hint, index_name)
    sniffed = sniff(data)
    if sniffed == "pdf":
        return Document(data, "pdf", pdf_pages(data, max_pages=max_pages, index_name=index_name))
    if sniffed == "zip":
        return Document(data, office_format(data, index_name))
    if wanted is not None and wanted not in TEXT_FORMATS:
        what = "no %PDF- header" if wanted == "pdf" else "not a zip archive"
        raise InvalidInput(f"{index_name}: labelled {wanted} but it is not a {wanted.upper()} file ({what})")
    text = decode_text(data)
    if wanted is None and not looks_like_text(text):
        raise InvalidInput(f"{index_name}: binary data that is not a PDF, DOCX, PPTX or XLSX document")
    if not text.strip():
        raise InvalidInput(f"{index_name}: the document has no text")
    encoded = text.encode("utf-8")
    if wanted is None:
        wanted = "html" if HTML_START.match(encoded[:65536].lstrip()) else "md"
    if wanted == "html":
        if declares_entities(encoded) or declares_entities(data):
            raise InvalidInput(f"{index_name}: the HTML declares XML entities in a DOCTYPE (an entity bomb?); refused")
        return Document(data, "html")  # as sent: the parser reads its <meta charset>
    return Document(encoded, "md")


def sniff(data: bytes) -> str | None:
    """``pdf`` or ``zip`` from the magic bytes; None for anything else (text, or unknown binary).

    A PDF's header may follow some junk bytes (readers look in the first 1024), but not text: a
    Markdown note that mentions ``%PDF-`` on its first lines is a note."""
    at = data.find(b"%PDF-", 0, PDF_HEAD)
    if at >= 0 and (not data[:at].strip() or not looks_like_text(data[:at].decode("latin-1"))):
        return "pdf"
    if data.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return "zip"
    return None


def decode_text(data: bytes) -> str:
    """Text by its byte-order mark (UTF-8 without one), undecodable bytes replaced."""
    for mark, encoding in BOMS:
        if data.startswith(mark):
            return data.decode(encoding, errors="replace")
    return data.decode("utf-8", errors="replace")


def looks_like_text(text: str) -> bool:
    """Not binary: no NUL characters and few other control characters (text in a legacy encoding,
    invalid UTF-8 but text all the same, is not told apart by its replacement characters)."""
    sample = text[:65536]
    if "\x00" in sample:
        return False
    odd = sum(1 for c in sample if ord(c) < 32 and c not in "\t\n\r\f\x1b")
    return odd <= len(sample) // 100


def declares_entities(data: bytes) -> bool:
    """Whether markup declares entities (``<!ENTITY`` inside a ``<!DOCTYPE``), in any letter case."""
    lowered = data.lower()
    start = lowered.find(b"<!doctype")
    return start >= 0 and b"<!entity" in lowered[start:]


# ----- PDF -------------------------------------------------------------------------------------
def open_pdf(data: bytes, index_name: str) -> Any:
    """The document opened in PDFium (caller holds ``PDFIUM_LOCK``); password-protected or broken: InvalidInput."""
    import pypdfium2 as pdfium

    try:
        return pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        if "password" in str(exc).lower():
            raise InvalidInput(f"{index_name}: the PDF is encrypted with a password; send it unencrypted") from exc
        raise InvalidInput(f"{index_name}: the PDF cannot be read: it is damaged or not a PDF ({exc})") from exc


def pdf_pages(data: bytes, *, max_pages: int, index_name: str) -> int:
    """The page count of a PDF that opens, is complete and is within ``max_pages``."""
    if b"%%EOF" not in data[-PDF_TAIL:]:
        raise InvalidInput(f"{index_name}: the PDF is truncated (no %%EOF marker at its end)")
    with PDFIUM_LOCK:
        pdf = open_pdf(data, index_name)
        try:
            pages = len(pdf)
        finally:
            pdf.close()
    if pages < 1:
        raise InvalidInput(f"{index_name}: the PDF has no pages")
    if pages > max_pages:
        raise InvalidInput(f"{index_name}: the PDF has {pages} pages, more than the limit of {max_pages}")
    return pages


def render_pages(
    data: bytes, pages: list[int], dpi: int, max_pixels: int, *, index_name: str = "document"
) -> list[Any]:
    """The listed 1-based pages rendered at ``dpi`` as RGB PIL images, in the order given."""
    scale = dpi / 72
    images: list[Any] = []
    with PDFIUM_LOCK:
        pdf = open_pdf(data, index_name)
        try:
            count = len(pdf)
            for number in pages:
                if not 1 <= number <= count:
                    raise InvalidInput(f"{index_name}: page {number} is not in the PDF (it has {count})")
                page = pdf[number - 1]
                try:
                    width, height = page.get_size()
                    w, h = math.ceil(width * scale), math.ceil(height * scale)
                    if w * h > max_pixels:
                        raise InvalidInput(
                            f"{index_name}: page {number} would render to {w}x{h} pixels at {dpi} dpi, "
                            f"more than the limit of {max_pixels}"
                        )
                    images.append(page.render(scale=scale).to_pil().convert("RGB"))
                finally:
                    page.close()
        finally:
            pdf.close()
    return images


# ----- zip containers (DOCX, PPTX, XLSX) -------------------------------------------------------
def office_format(data: bytes, index_name: str) -> DocumentFormat:
    """The OOXML format of a zip, checked for bombs from its central directory, then its XML members."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise InvalidInput(f"{index_name}: the zip archive is damaged ({exc})") from exc
    with archive:
        members = archive.infolist()
        if len(members) > MAX_ZIP_MEMBERS:
            raise InvalidInput(f"{index_name}: the archive has {len(members)} members, more than {MAX_ZIP_MEMBERS}")
        declared = sum(m.file_size for m in members)
        if declared > MAX_ZIP_BYTES:
            largest = max(members, key=lambda m: m.file_size)
            raise InvalidInput(
                f"{index_name}: the archive's members declare {declared} bytes uncompressed ({largest.filename!r} "
                f"alone {largest.file_size}), more than the limit of {MAX_ZIP_BYTES} (a zip bomb?)"
            )
        for member in members:
            if member.file_size > RATIO_FROM and member.file_size > MAX_RATIO * max(member.compress_size, 1):
                ratio = member.file_size // max(member.compress_size, 1)
                raise InvalidInput(
                    f"{index_name}: archive member {member.filename!r} is compressed {ratio}x, more than {MAX_RATIO}x "
                    "(a zip bomb?)"
                )
        names = {m.filename for m in members}
        found = [fmt for prefix, fmt in OFFICE.items() if any(n.startswith(prefix) for n in names)]
        if "[Content_Types].xml" not in names or len(found) != 1:
            raise InvalidInput(f"{index_name}: a zip archive that is not a DOCX, PPTX or XLSX document")
        for member in members:
            if XML_MEMBER.search(member.filename) and not member.is_dir():
                _check_xml_member(archive, member, index_name)
    return found[0]


def _check_xml_member(archive: zipfile.ZipFile, member: zipfile.ZipInfo, index_name: str) -> None:
    """Refuse a DOCTYPE (OOXML parts never have one; an embedded SVG may) or an entity declaration.

    Read in bounded chunks (zipfile stops at the declared size, which the caller has bounded), the
    declarations looked for in UTF-8 and UTF-16 spellings, across chunk boundaries."""
    marks = ("<!ENTITY",) if member.filename.lower().endswith(".svg") else ("<!DOCTYPE", "<!ENTITY")
    needles = [s.encode(enc) for s in marks for enc in ("utf-8", "utf-16-le", "utf-16-be")]
    keep = max(len(n) for n in needles)
    carry = b""
    try:
        with archive.open(member) as stream:
            while chunk := stream.read(CHUNK):
                window = carry + chunk
                if any(n in window for n in needles):
                    raise InvalidInput(
                        f"{index_name}: archive member {member.filename!r} declares a DOCTYPE or XML entities "
                        "(an entity bomb?); refused"
                    )
                carry = window[-keep:]
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise InvalidInput(f"{index_name}: archive member {member.filename!r} is damaged ({exc})") from exc
    except (NotImplementedError, RuntimeError) as exc:  # a compression method zipfile lacks; an encrypted member
        raise InvalidInput(f"{index_name}: archive member {member.filename!r} cannot be read ({exc})") from exc
