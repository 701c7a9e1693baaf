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
import time
from dataclasses import dataclass
from typing import Any, Protocol

from sie_server.adapters.runtime.base import Tokens
from sie_server.adapters.runtime.media import Found, MediaEntity, MediaExtractor, MediaObject, Picture, picture_tokens
from sie_server.adapters.runtime.options import BatchOptions, MediaOptions
from sie_server.catalog.schema import ModelConfig
from sie_server.contract.headers import CallOptions
from sie_server.contract.limits import Limits
from sie_server.engine.media_inputs import open_picture
from sie_server.engine.scheduler import Scheduler, WorkItem
from sie_server.errors import DeadlineExceeded, InvalidInput, SIEError
from sie_server.memory.pool import ModelPool

POINTS_PER_INCH = 72
DEADLINE_MARGIN_S = 0.25  # answer what is done this long before X-SIE-Timeout-Ms runs out
LATE = "not done within X-SIE-Timeout-Ms; this item's work was dropped and the rest answered"


class Queue(Protocol):
    """What extraction from media needs of the service: its pool and scheduler."""

    pool: ModelPool
    scheduler: Scheduler
    load_timeout_s: float


class Timing(Protocol):
    tokenization_ms: float
    queue_ms: float
    inference_ms: float


@dataclass(frozen=True)
class MediaItem:
    """One extract item with media: its images, or its document (bytes and the caller's format hint)."""

    id: str
    images: tuple[bytes, ...] = ()
    document: bytes | None = None
    document_format: str | None = None


@dataclass
class PagePictures:
    """An item's pictures, and for a rendered document the factor from rendered pixels to page points."""

    pictures: list[Picture]
    scale: float = 1.0  # multiply a rendered page's pixel box by this for page points


Outcome = Found | SIEError


async def run_each(
    service: Queue,
    model: ModelConfig,
    tokens: list[Tokens],
    options: BatchOptions,
    call: CallOptions,
    timing: Timing,
) -> list[Any]:
    """Queue each input and await them all: a result, or the SIEError its input got, per input in order."""
    if not tokens:
        return []
    loop = asyncio.get_running_loop()
    items = [WorkItem(model, t, options, loop.create_future(), priority=call.priority) for t in tokens]
    service.scheduler.submit(items)
    try:
        await _settled([i.future for i in items], call)
    except BaseException:
        for item in items:
            item.future.cancel()
        raise
    results: list[Any] = []
    for item in items:
        if not item.future.done():  # past the caller's deadline: dropped (if queued), failed alone
            item.future.cancel()
            results.append(DeadlineExceeded(LATE))
            continue
        result = item.future.exception() or item.future.result()
        if isinstance(result, BaseException) and not isinstance(result, SIEError):
            raise result  # an internal failure: the whole request fails
        results.append(result)
    if all(isinstance(r, DeadlineExceeded) for r in results):
        raise DeadlineExceeded(LATE)
    started = [i.started_at for i in items if i.started_at]
    if started:
        timing.queue_ms += (min(started) - min(i.enqueued_at for i in items)) * 1000
        timing.inference_ms += (max(i.finished_at for i in items) - min(started)) * 1000
    return list(results)


async def _settled(futures: list[asyncio.Future[Any]], call: CallOptions) -> None:
    """Until every future is done, or until shortly before the caller's deadline (so the items done by
    then are answered and the others fail alone, before the request's own deadline ends it all)."""
    left = call.remaining_s()
    timeout = None if left is None else max(left - min(DEADLINE_MARGIN_S, left / 10), 0.0)
    await asyncio.wait(futures, timeout=timeout)


def item_pictures(item: MediaItem, where: str, config: ModelConfig, limits: Limits) -> PagePictures:
    """Decode an item's images, or render its PDF's pages (off the event loop); InvalidInput for this item."""
    if item.document is None:
        return PagePictures(
            [
                open_picture(data, f"{where}.images[{k}]", limits.max_image_pixels, page=k + 1)
                for k, data in enumerate(item.images)
            ]
        )
    from sie_server.engine.document_inputs import render_pages, screen

    document = screen(item.document, item.document_format, max_pages=limits.max_document_pages, index_name=where)
    if document.format != "pdf":
        raise InvalidInput(
            f"{where}.document is {document.format}; model {config.id} reads images and PDF pages "
            "(send other documents to a document parser such as docling-project/docling)"
        )
    dpi = config.tasks.extract.render_dpi if config.tasks.extract else 200
    pages = list(range(1, (document.pages or 0) + 1))
    images = render_pages(document.data, pages, dpi, limits.max_image_pixels)
    return PagePictures(
        [Picture(image, page) for image, page in zip(images, pages, strict=True)], POINTS_PER_INCH / dpi
    )


def scaled(box: list[int] | None, scale: float) -> list[int] | None:
    """A rendered page's pixel box in page points, rounded outwards."""
    if box is None or scale == 1.0:
        return box
    x, y, w, h = box
    left, top = math.floor(x * scale), math.floor(y * scale)
    return [left, top, math.ceil((x + w) * scale) - left, math.ceil((y + h) * scale) - top]


def merge_pictures(found: list[Found], pages: PagePictures) -> Found:
    """One item's answer from its pictures' answers: lists joined in page order, ``data.text`` joined by
    blank lines, ``data.pages`` the size of each picture (in page points for a rendered document)."""
    entities: list[MediaEntity] = []
    objects: list[MediaObject] = []
    merged = Found()
    sizes = []
    for picture, answer in zip(pages.pictures, found, strict=True):
        width, height = picture.size
        sizes.append({"page": picture.page, "width": round(width * pages.scale), "height": round(height * pages.scale)})
        entities += [{**e, "bbox": scaled(e["bbox"], pages.scale)} for e in answer.entities]
        objects += [{**o, "bbox": scaled(o["bbox"], pages.scale) or []} for o in answer.objects]
        merged.classifications += answer.classifications
    merged.entities, merged.objects = entities, objects
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
    adapter = await service.pool.acquire(model, wait=call.wait_for_load, timeout_s=service.load_timeout_s)
    if not isinstance(adapter, MediaExtractor):
        raise InvalidInput(f"model {model.id} does not read images (its adapter is {model.adapter})")
    adapter.check(options)
    started = time.perf_counter()
    prepared = await asyncio.gather(*(_prepare(item, f"items[{k}]", model, limits) for k, item in enumerate(items)))
    timing.tokenization_ms += (time.perf_counter() - started) * 1000
    flat = [(k, picture) for k, p in enumerate(prepared) if not isinstance(p, SIEError) for picture in p.pictures]
    answers = await run_each(service, model, [picture_tokens(p) for _, p in flat], options, call, timing)
    per_item: list[list[Outcome]] = [[] for _ in items]
    for (k, _), answer in zip(flat, answers, strict=True):
        per_item[k].append(answer)
    outcomes: list[Outcome] = []
    for p, answered in zip(prepared, per_item, strict=True):
        if isinstance(p, SIEError):
            outcomes.append(p)
        elif failed := next((a for a in answered if isinstance(a, SIEError)), None):
            outcomes.append(failed)
        else:
            outcomes.append(merge_pictures([a for a in answered if isinstance(a, Found)], p))
    return outcomes


async def _prepare(item: MediaItem, where: str, model: ModelConfig, limits: Limits) -> PagePictures | SIEError:
    try:
        return await asyncio.to_thread(item_pictures, item, where, model, limits)
    except SIEError as exc:
        return exc
