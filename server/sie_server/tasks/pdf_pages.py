"""A PDF's page count for the tasks' page cap, read from its bytes without parsing it (a gateway has no PDF
library, and the cap must hold before any model runs): the largest page-tree ``/Count``, else the page
objects. PDF 1.5+ may keep the page tree in compressed object streams (``/ObjStm``), where the bytes show
neither; those streams are inflated and scanned too, up to a bound on the inflated bytes, so a deflate bomb
costs at most that bound. A PDF whose pages still cannot be counted is refused (see ``count``)."""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass

MAX_INFLATED = 8 * 1024 * 1024  # all object streams of one file together; real ones are a few hundred KiB
MAX_OBJECT_STREAMS = 4096  # each holds up to a few hundred objects; many tiny ones would cost time, not bytes
PDF_HEAD = 1024  # readers (and the server's own screening) accept the %PDF- header within the first 1024 bytes

_PAGE = re.compile(rb"/Type\s*/Page(?![a-zA-Z])")
_COUNT = re.compile(rb"/Count\s+(\d{1,9})")
_OBJSTM = re.compile(rb"/Type\s*/ObjStm(?![a-zA-Z])")
_STREAM = re.compile(rb"\bstream(?:\r\n|\n|\r)")


@dataclass(frozen=True)
class PageCount:
    pages: int | None  # None: not countable without parsing
    why: str = ""  # why not, for the refusal
    too_large: bool = False  # too many object streams, or they inflate past the bound (413, not 400)


def is_pdf(data: bytes) -> bool:
    return data.find(b"%PDF-", 0, PDF_HEAD) >= 0


def _scan(data: bytes) -> tuple[list[int], int]:
    return [int(n) for n in _COUNT.findall(data)], len(_PAGE.findall(data))


def _object_streams(data: bytes, budget: int) -> list[bytes] | PageCount:
    """Each compressed object stream inflated, all together at most ``budget`` bytes (an uncompressed one is
    in the plain bytes already); or the refusal when one cannot be read or they are too many or too large."""
    found: list[bytes] = []
    total = 0
    for k, match in enumerate(_OBJSTM.finditer(data)):
        if k == MAX_OBJECT_STREAMS:
            return PageCount(None, f"it has more than {MAX_OBJECT_STREAMS:,} object streams", too_large=True)
        start = _STREAM.search(data, match.end())
        if start is None:
            return PageCount(None, "an object stream has no stream data")
        head = data[max(data.rfind(b"obj", 0, match.start()), 0) : start.start()]  # the stream's dictionary
        if b"/Filter" not in head:
            continue
        if b"/FlateDecode" not in head:
            return PageCount(None, "an object stream is compressed with a filter other than Flate, or encrypted")
        end = data.find(b"endstream", start.end())
        raw = data[start.end() : end if end >= 0 else len(data)]
        try:
            # max_length stops inflating just past the budget: a bomb is never expanded further
            out = zlib.decompressobj().decompress(raw, budget - total + 1)
        except zlib.error as exc:
            return PageCount(None, f"an object stream does not inflate ({exc})")
        total += len(out)
        if total > budget:
            return PageCount(None, f"its compressed object streams inflate past {budget:,} bytes", too_large=True)
        found.append(out)
    return found


def count(data: bytes, budget: int = MAX_INFLATED) -> PageCount:
    """Pages from the page tree's ``/Count`` (the largest: a file updated in place keeps older trees), else the
    page objects, in the file's bytes and its inflated object streams together. Object streams are always read
    when present, since a ``/Count`` in the plain bytes may be a decoy (an outline's) beside the real tree.

    A file whose pages cannot be counted so is refused, not let through: then only the document model's own
    page limit (``--max-document-pages``, 1000 by default, ten times the tasks' cap) would hold, after the
    parser's minutes were spent, and on a gateway (no PDF library) nothing would until a worker. One object
    stream that cannot be read refuses the file even when others hold a count, as the unread one may hold the
    real page tree. Producers write object streams Flate-compressed, so a real file rarely meets this."""
    counts, pages = _scan(data)
    if _OBJSTM.search(data) is None:
        return PageCount(max(counts) if counts else pages)
    streams = _object_streams(data, budget)
    if isinstance(streams, PageCount):
        return streams
    for stream in streams:
        more_counts, more_pages = _scan(stream)
        counts += more_counts
        pages += more_pages
    if counts or pages:
        return PageCount(max(counts) if counts else pages)
    return PageCount(None, "no page tree was found in its bytes or its object streams")
