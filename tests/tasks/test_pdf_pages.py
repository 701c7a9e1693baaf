"""The tasks' page cap on PDFs whose page tree is in compressed object streams (PDF 1.5+, ``/ObjStm``): counted
from the inflated streams as PDFium counts the file, a decoy ``/Count`` in the plain bytes not trusted, a
deflate bomb refused at the bound on inflated bytes, and a stream that cannot be read refused by name."""

from __future__ import annotations

import zlib

import pypdfium2 as pdfium
import pytest

from sie_server.contract.tasks_wire import FileIn
from sie_server.errors import InvalidInput, PayloadTooLarge
from sie_server.tasks.common import check_file
from sie_server.tasks.pdf_pages import MAX_INFLATED, MAX_OBJECT_STREAMS, count
from tests.tasks.helpers import b64

OUTLINE = b"9 0 obj\n<< /Type /Outlines /Count 1 >>\nendobj\n"  # a /Count in the plain bytes that is no page tree's


def packed_pdf(pages: int, *, plain: bytes = b"") -> bytes:
    """A PDF 1.5 as ``qpdf --object-streams=generate`` writes one: the catalog, the page tree and the pages in
    one Flate object stream, found through a cross-reference stream; its bytes show no /Count and no page."""
    kids = range(3, 3 + pages)
    objects = {
        1: b"<< /Type /Catalog /Pages 2 0 R >>",
        2: b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(b"%d 0 R" % k for k in kids), pages),
    }
    objects |= {k: b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>" for k in kids}
    offsets, body = [], b""
    for number, value in objects.items():
        offsets.append(b"%d %d" % (number, len(body)))
        body += value + b"\n"
    head = b" ".join(offsets) + b"\n"
    packed = zlib.compress(head + body)
    stream_no, xref_no = 3 + pages, 4 + pages
    out = bytearray(b"%PDF-1.5\n%\xe2\xe3\xcf\xd3\n" + plain)
    stream_at = len(out)
    out += b"%d 0 obj\n<< /Type /ObjStm /N %d /First %d /Filter /FlateDecode /Length %d >>\nstream\n" % (
        stream_no,
        len(objects),
        len(head),
        len(packed),
    )
    out += packed + b"\nendstream\nendobj\n"
    xref_at = len(out)
    rows = [b"\x00" + bytes(4) + b"\xff\xff"]  # object 0: free
    rows += [b"\x02" + stream_no.to_bytes(4, "big") + i.to_bytes(2, "big") for i in range(len(objects))]
    rows += [b"\x01" + at.to_bytes(4, "big") + bytes(2) for at in (stream_at, xref_at)]
    table = zlib.compress(b"".join(rows))
    out += b"%d 0 obj\n<< /Type /XRef /Size %d /W [1 4 2] /Root 1 0 R /Filter /FlateDecode /Length %d >>\nstream\n" % (
        xref_no,
        xref_no + 1,
        len(table),
    )
    out += table + b"\nendstream\nendobj\nstartxref\n%d\n%%%%EOF\n" % xref_at
    return bytes(out)


def with_object_stream(data: bytes, filters: bytes = b"/Filter /FlateDecode") -> bytes:
    """Bytes shaped as a PDF with one object stream holding ``data`` as it is (already compressed or not)."""
    stream = b"5 0 obj\n<< /Type /ObjStm /N 1 /First 4 %s /Length %d >>\nstream\n" % (filters, len(data))
    return b"%PDF-1.5\n" + stream + data + b"\nendstream\nendobj\n%%EOF\n"


def bomb(mib: int) -> bytes:
    """A deflate stream of ``mib`` MiB of zeros in about 1 KiB a MiB, built without compressing them all: after
    a full flush a block needs nothing before it, so the same block repeats."""
    packer = zlib.compressobj(9)
    zeros = bytes(2**20)
    first = packer.compress(zeros) + packer.flush(zlib.Z_FULL_FLUSH)  # with the zlib header
    again = packer.compress(zeros) + packer.flush(zlib.Z_FULL_FLUSH)
    return first + again * (mib - 1)


def as_file(data: bytes) -> FileIn:
    return FileIn.model_validate({"data": b64(data), "format": "pdf"})


def refusal(data: bytes) -> InvalidInput:
    with pytest.raises(InvalidInput) as refused:
        check_file(as_file(data), "file")
    return refused.value


def test_the_page_tree_in_an_object_stream_is_counted_as_pdfium_counts_it() -> None:
    data = packed_pdf(150)
    assert b"/Count" not in data and b"/Type /Page" not in data
    document = pdfium.PdfDocument(data)
    try:
        assert len(document) == 150  # a real PDF, as the document model's screening reads it
    finally:
        document.close()
    assert count(data).pages == 150
    error = refusal(data)
    assert isinstance(error, PayloadTooLarge) and "file has 150 pages; a task takes at most 100" in str(error)
    assert count(packed_pdf(3)).pages == 3
    check_file(as_file(packed_pdf(3)), "file")  # under the cap: no refusal


def test_a_decoy_count_in_the_plain_bytes_does_not_hide_the_object_stream() -> None:
    data = packed_pdf(150, plain=OUTLINE)
    assert count(data).pages == 150
    assert isinstance(refusal(data), PayloadTooLarge)


def test_a_header_after_leading_bytes_is_still_a_pdf() -> None:
    """Readers (and the server's screening) find %PDF- within the first 1024 bytes."""
    assert isinstance(refusal(b"\r\n" + packed_pdf(150)), PayloadTooLarge)


def test_a_deflate_bomb_is_refused_at_the_bound_without_inflating_it() -> None:
    data = with_object_stream(bomb(1024))  # 1 GiB of zeros in about a megabyte
    assert len(data) < 2 * 2**20
    found = count(data)
    assert found.pages is None and found.too_large
    error = refusal(data)
    assert isinstance(error, PayloadTooLarge) and f"inflate past {MAX_INFLATED:,} bytes" in str(error)
    single = with_object_stream(bomb(1))
    assert not count(single, budget=3 * 2**19).too_large  # 1 MiB under a bound of 1.5 MiB
    assert count(single + single[len(b"%PDF-1.5\n") :], budget=3 * 2**19).too_large  # the bound is on all streams
    one = with_object_stream(b"1 0 << /Type /Pages /Count 1 >>", b"")
    many = count(one + one[len(b"%PDF-1.5\n") :] * MAX_OBJECT_STREAMS)  # each one cheap, but too many of them
    assert many.too_large and f"more than {MAX_OBJECT_STREAMS:,} object streams" in many.why


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (with_object_stream(b"<< /Count 1 >>", b"/Filter /LZWDecode"), "a filter other than Flate"),
        (with_object_stream(b"not deflate at all"), "does not inflate"),
        (with_object_stream(zlib.compress(b"1 0 << /Type /Catalog >>")), "no page tree was found"),
    ],
)
def test_object_streams_that_cannot_be_counted_are_refused_by_name(data: bytes, said: str) -> None:
    error = refusal(data)
    assert not isinstance(error, PayloadTooLarge) and said in str(error) and "file: a task counts" in str(error)


def test_an_uncompressed_object_stream_is_read_in_the_plain_bytes() -> None:
    plain = with_object_stream(b"1 0 << /Type /Pages /Kids [] /Count 150 >>", b"")
    assert count(plain).pages == 150
