"""Documents made by the tests: PDFs written by hand (a text layer, scanned pages, page trees, trailers),
DOCX/PPTX/XLSX through python-docx, python-pptx and openpyxl, zips with a member replaced, and the
billion-laughs entity declarations."""

from __future__ import annotations

import io
import zipfile
import zlib

INVOICE_LINE = b"BT /F1 12 Tf 72 700 Td (Invoice total 42.00) Tj ET"
HEADING_LINE = b"BT /F1 18 Tf 72 740 Td (ACME Invoice) Tj ET"
PICTURE = b"q 400 0 0 300 100 300 cm /Im1 Do Q"  # an 8x6 grey image drawn 400x300 points at (100, 300)


def pdf_bytes(
    pages: list[bytes | None],
    *,
    size: tuple[int, int] = (612, 792),
    trailer: bytes = b"",
    kids: list[int] | None = None,
) -> bytes:
    """A valid PDF by hand: one page per content stream with Type1 Helvetica as /F1 and an 8x6 grey image
    as /Im1; None is a page that only shows the image (no text layer). ``kids`` lists page indexes for the
    page tree (a page may repeat); ``trailer`` is added to the trailer dictionary (an /Encrypt entry)."""
    objects: dict[int, bytes] = {3: b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"}
    page_ids: list[int] = []
    number = 4
    for content in pages:
        page, stream = number, number + 1
        number += 2
        resources = b"/Font << /F1 3 0 R >>"
        if content is None or b"/Im1" in content:
            pixels = zlib.compress(bytes([128]) * (8 * 6 * 3))
            objects[number] = (
                b"<< /Type /XObject /Subtype /Image /Width 8 /Height 6 /ColorSpace /DeviceRGB /BitsPerComponent 8 "
                b"/Filter /FlateDecode /Length %d >>\nstream\n%s\nendstream" % (len(pixels), pixels)
            )
            resources += b" /XObject << /Im1 %d 0 R >>" % number
            number += 1
            content = PICTURE if content is None else content
        objects[page] = (
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] /Resources << %s >> /Contents %d 0 R >>"
            % (
                *size,
                resources,
                stream,
            )
        )
        objects[stream] = b"<< /Length %d >>\nstream\n%s\nendstream" % (len(content), content)
        page_ids.append(page)
    tree = [page_ids[i] for i in kids] if kids is not None else page_ids
    objects[1] = b"<< /Type /Catalog /Pages 2 0 R >>"
    objects[2] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(b"%d 0 R" % k for k in tree), len(tree))
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets: dict[int, int] = {}
    for key in sorted(objects):
        offsets[key] = len(out)
        out += b"%d 0 obj\n%s\nendobj\n" % (key, objects[key])
    xref, count = len(out), max(objects) + 1
    out += b"xref\n0 %d\n0000000000 65535 f \n" % count
    out += b"".join(b"%010d 00000 n \n" % offsets[key] for key in range(1, count))
    out += b"trailer\n<< /Size %d /Root 1 0 R %s>>\nstartxref\n%d\n%%%%EOF\n" % (count, trailer, xref)
    return bytes(out)


def invoice_pdf() -> bytes:
    """Page 1: a heading and the invoice line (a text layer); page 2: only a picture (a scan)."""
    return pdf_bytes([HEADING_LINE + b"\n" + INVOICE_LINE, None])


def docx_bytes() -> bytes:
    import docx

    document = docx.Document()
    document.add_heading("Quarterly report", 1)
    document.add_paragraph("Revenue grew by 12 percent.")
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def pptx_bytes() -> bytes:
    import pptx

    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "Roadmap"
    slide.placeholders[1].text = "Ship the parser"
    buffer = io.BytesIO()
    deck.save(buffer)
    return buffer.getvalue()


def xlsx_bytes() -> bytes:
    import openpyxl

    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.title = "Costs"
    sheet.append(["Item", "Cost"])
    sheet.append(["Paper", 3])
    buffer = io.BytesIO()
    book.save(buffer)
    return buffer.getvalue()


def replace_member(archive: bytes, name: str, data: bytes) -> bytes:
    """The zip with one member's content replaced (the others copied as they are)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(archive)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, data if info.filename == name else src.read(info))
    return out.getvalue()


BILLION_LAUGHS = (
    '<?xml version="1.0"?>\n<!DOCTYPE lolz [\n <!ENTITY lol "lol">\n'
    + "".join(f' <!ENTITY lol{i} "{("&lol" + (str(i - 1) if i > 1 else "") + ";") * 10}">\n' for i in range(1, 10))
    + "]>\n"
)


def zip_declaring(archive: bytes, member: str, size: int) -> bytes:
    """The zip with ``member``'s central directory entry declaring ``size`` uncompressed bytes."""
    import struct

    patched = bytearray(archive)
    start = patched.rfind(b"PK\x01\x02", 0, patched.find(b"PK\x05\x06"))
    while start >= 0:
        name_length = struct.unpack_from("<H", patched, start + 28)[0]
        if patched[start + 46 : start + 46 + name_length] == member.encode():
            struct.pack_into("<I", patched, start + 24, size)
            return bytes(patched)
        start = patched.rfind(b"PK\x01\x02", 0, start)
    raise KeyError(f"{member} is not in the zip")


def encrypted_pdf() -> bytes:
    """A PDF whose trailer says it is encrypted with the standard handler (a password is needed)."""
    encrypt = (
        b"/Encrypt << /Filter /Standard /V 1 /R 2 /O <" + b"11" * 32 + b"> /U <" + b"22" * 32 + b"> /P -4 >> "
        b"/ID [<00112233445566778899aabbccddeeff> <00112233445566778899aabbccddeeff>] "
    )
    return pdf_bytes([INVOICE_LINE], trailer=encrypt)
