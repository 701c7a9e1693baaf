"""Extract from images and document pages: pictures on the shared queue, one error per failed item.

Each item's pictures (its images, or a PDF's pages rendered at the config's ``render_dpi``) are
queued items of their own, costed by pixels, batched with every other caller's pictures for the
same model and options. An item whose image cannot be read, or whose document cannot be opened,
gets its own ``error`` and its neighbours are answered (SIE 0.10.1's per-item errors). Boxes of a
rendered page are given in the page's own units: pixels at 72 dpi (PDF points), as ``data.pages``
gives the page sizes; boxes of an image are in that image's pixels.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass

from sie_server.adapters.runtime.media import Found, MediaExtractor, Picture, picture_tokens
from sie_server.adapters.runtime.options import MediaOptions
from sie_server.catalog.schema import ModelConfig
from sie_server.contract.headers import CallOptions
from sie_server.contract.limits import Limits
from sie_server.contract.requests import ExtractRequest, ItemIn
from sie_server.engine.extract.protocol import ExtractEngine, Outcome, PerItem, media_options
from sie_server.engine.extract.queue import Queue, adapter_of, decode_all, run
from sie_server.engine.media_inputs import open_picture
from sie_server.engine.outcomes import Timing
from sie_server.errors import InvalidInput, SIEError

POINTS_PER_INCH = 72
RENDER_GROUP = 8  # pages of one document rendered at a time: memory holds these, not the whole PDF


@dataclass(frozen=True)
class MediaItem:
    """One extract item with media: its images, or its document (bytes and the caller's format hint)."""

    id: str
    images: tuple[bytes, ...] = ()
    document: bytes | None = None
    document_format: str | None = None


def media_item(item: ItemIn, item_id: str) -> MediaItem:
    document = item.document
    return MediaItem(
        id=item_id,
        images=tuple(image.data for image in item.images or ()),
        document=document.data if document is not None else None,
        document_format=document.format if document is not None else None,
    )


@dataclass(frozen=True)
class DocumentPages:
    """A screened PDF whose pages are to be rendered (a group at a time) and read."""

    data: bytes
    pages: list[int]
    dpi: int

    @property
    def scale(self) -> float:
        """What a rendered page's pixel box is multiplied by for page points."""
        return POINTS_PER_INCH / self.dpi


#: what reading one picture left: its page, its size (pixels), and its answer or its error
Read = tuple[int | None, tuple[int, int], "Found | SIEError"]


def item_pictures(item: MediaItem, where: str, config: ModelConfig, limits: Limits) -> list[Picture] | DocumentPages:
    """An item's images decoded, or its PDF screened (off the event loop); InvalidInput for this item."""
    if item.document is None:
        return [
            open_picture(data, f"{where}.images[{k}]", limits.max_image_pixels, page=k + 1)
            for k, data in enumerate(item.images)
        ]
    from sie_server.engine.document_inputs import screen

    document = screen(item.document, item.document_format, max_pages=limits.max_document_pages, index_name=where)
    if document.format != "pdf":
        raise InvalidInput(
            f"{where}.document is {document.format}; model {config.id} reads images and PDF pages "
            "(send other documents to a document parser such as docling-project/docling)"
        )
    dpi = config.tasks.extract.render_dpi if config.tasks.extract else 200
    return DocumentPages(document.data, list(range(1, (document.pages or 0) + 1)), dpi)


async def read_pages(
    service: Queue,
    model: ModelConfig,
    document: DocumentPages,
    options: MediaOptions,
    call: CallOptions,
    limits: Limits,
    timing: Timing,
) -> list[Read] | SIEError:
    """Each page rendered and read, ``RENDER_GROUP`` pages at a time, its pixels dropped once read;
    the first page that cannot be rendered or read ends it with that error."""
    from sie_server.engine.document_inputs import render_pages

    read: list[Read] = []
    for start in range(0, len(document.pages), RENDER_GROUP):
        group = document.pages[start : start + RENDER_GROUP]
        try:
            images = await asyncio.to_thread(render_pages, document.data, group, document.dpi, limits.max_image_pixels)
        except SIEError as exc:
            return exc
        pictures = [Picture(image, page) for image, page in zip(images, group, strict=True)]
        answers = await run(service, model, [picture_tokens(p) for p in pictures], options, call, timing, each=True)
        for picture, answer in zip(pictures, answers, strict=True):
            if isinstance(answer, SIEError):
                return answer
            read.append((picture.page, picture.size, answer))
    return read


def scaled(box: list[int] | None, scale: float) -> list[int] | None:
    """A rendered page's pixel box in page points, rounded outwards."""
    if box is None or scale == 1.0:
        return box
    x, y, w, h = box
    left, top = math.floor(x * scale), math.floor(y * scale)
    return [left, top, math.ceil((x + w) * scale) - left, math.ceil((y + h) * scale) - top]


def merge_pictures(read: list[Read], scale: float = 1.0) -> Found:
    """One item's answer from its pictures' answers: lists joined in page order, ``data.text`` joined by
    blank lines, ``data.pages`` the size of each picture (``scale``: page points per rendered pixel)."""
    merged = Found()
    found = [answer for _, _, answer in read if isinstance(answer, Found)]
    sizes = []
    for (page, (width, height), _), answer in zip(read, found, strict=True):
        sizes.append({"page": page, "width": round(width * scale), "height": round(height * scale)})
        merged.entities += [{**e, "bbox": scaled(e["bbox"], scale)} for e in answer.entities]
        merged.objects += [{**o, "bbox": scaled(o["bbox"], scale) or []} for o in answer.objects]
        merged.classifications += answer.classifications
    texts = [a.data["text"] for a in found if isinstance(a.data.get("text"), str)]
    if len(found) == 1:
        merged.data = dict(found[0].data)
    elif found:
        merged.data = {"per_page": [a.data for a in found]}
    if texts:
        merged.data["text"] = "\n\n".join(texts)
    merged.data["pages"] = sizes
    return merged


async def extract_pictures(
    service: Queue,
    model: ModelConfig,
    items: list[MediaItem],
    options: MediaOptions,
    call: CallOptions,
    limits: Limits,
    timing: Timing,
) -> list[Outcome]:
    """Each item's answer, or its own error."""
    adapter = await adapter_of(service, model, call, (MediaExtractor,), "read images")
    adapter.check(options)
    prepared = await decode_all(timing, (_prepare(item, f"items[{k}]", model, limits) for k, item in enumerate(items)))
    images = [(k, picture) for k, p in enumerate(prepared) if isinstance(p, list) for picture in p]
    documents = [(k, p) for k, p in enumerate(prepared) if isinstance(p, DocumentPages)]
    answers, pages = await asyncio.gather(
        run(service, model, [picture_tokens(p) for _, p in images], options, call, timing, each=True),
        asyncio.gather(*(read_pages(service, model, d, options, call, limits, timing) for _, d in documents)),
    )
    outcomes: list[Outcome] = [p if isinstance(p, SIEError) else Found() for p in prepared]
    per_item: dict[int, list[Read]] = {k: [] for k, p in enumerate(prepared) if isinstance(p, list)}
    for (k, picture), answer in zip(images, answers, strict=True):
        per_item[k].append((picture.page, picture.size, answer))
    for k, read in per_item.items():
        failed = next((a for _, _, a in read if isinstance(a, SIEError)), None)
        outcomes[k] = failed or merge_pictures(read)
    for (k, document), read_or_error in zip(documents, pages, strict=True):
        outcomes[k] = (
            read_or_error if isinstance(read_or_error, SIEError) else merge_pictures(read_or_error, document.scale)
        )
    return outcomes


async def _prepare(
    item: MediaItem, where: str, model: ModelConfig, limits: Limits
) -> list[Picture] | DocumentPages | SIEError:
    try:
        return await asyncio.to_thread(item_pictures, item, where, model, limits)
    except SIEError as exc:
        return exc


@dataclass(frozen=True)
class PictureRequest:
    """A picture reader's request: its items' media and the request's own options."""

    items: list[MediaItem]
    options: MediaOptions

    @property
    def ids(self) -> list[str]:
        return [item.id for item in self.items]


class Pictures(PerItem[PictureRequest]):
    """The picture kind: OCR, detectors and captioners on images and rendered PDF pages."""

    def decode(self, model: ModelConfig, request: ExtractRequest) -> PictureRequest:
        items = [media_item(item, item.id_at(k)) for k, item in enumerate(request.items)]
        return PictureRequest(items, media_options(request))

    async def queue(
        self, engine: ExtractEngine, model: ModelConfig, decoded: PictureRequest, call: CallOptions, timing: Timing
    ) -> list[Outcome]:
        return await extract_pictures(
            engine.inference, model, decoded.items, decoded.options, call, engine.limits, timing
        )


HANDLER = Pictures()
