"""The media extractors' contract: images and rendered document pages in, what is read or seen in them out.

A ``MediaExtractor`` (OCR engines, Florence-2, open-vocabulary detectors) runs batches of pictures
the scheduler forms on the shared queue like any other: each picture is one queued item whose cost
is its pixel count in tiles of ``PIXELS_PER_COST`` pixels (as a text's cost is its tokens), so a
profile's ``max_batch_tokens`` bounds the pixels of one batch. Decoding and the pixel limit are the
service's job (``engine/media_inputs.py``); an adapter gets RGB pictures and answers one ``Found``
per picture.

Boxes are ``[x, y, w, h]`` in integer pixels of the picture they were found in: ``x, y`` the top-left
corner (0, 0 is the picture's top-left pixel), ``w, h`` the width and height, rounded outwards from
the model's own coordinates so the box covers what was found. ``page`` is the 1-based page of a
document the picture was rendered from; None for an image sent as one.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from sie_server.adapters.runtime.base import Tokens
from sie_server.adapters.runtime.encoder import Encoder
from sie_server.adapters.runtime.options import MediaOptions

PIXELS_PER_COST = 32 * 32  # one unit of queue cost per 32 x 32 tile, rounded up


@dataclass(frozen=True, slots=True)
class Picture:
    """One image to read: a PIL RGB image, and the document page it shows (1-based) if it is one."""

    image: Any
    page: int | None = None

    @property
    def size(self) -> tuple[int, int]:
        width, height = self.image.size
        return int(width), int(height)


def picture_cost(width: int, height: int) -> int:
    return max(1, math.ceil(width * height / PIXELS_PER_COST))


def picture_tokens(picture: Picture) -> Tokens:
    """The picture as a queued item: its cost in tiles, the picture itself as the payload."""
    width, height = picture.size
    return Tokens([0] * picture_cost(width, height), None, False, picture)


def pixel_box(x0: float, y0: float, x1: float, y1: float, width: int, height: int) -> list[int]:
    """``[x, y, w, h]`` in integer pixels from corner coordinates in pixels: outward-rounded, inside the picture."""
    left = min(max(math.floor(x0), 0), width)
    top = min(max(math.floor(y0), 0), height)
    right = min(max(math.ceil(x1), left), width)
    bottom = min(max(math.ceil(y1), top), height)
    return [left, top, right - left, bottom - top]


def polygon_box(points: Sequence[Sequence[float]], width: int, height: int) -> list[int]:
    """The pixel box around a polygon's points (an OCR engine's quadrilateral)."""
    xs, ys = [float(p[0]) for p in points], [float(p[1]) for p in points]
    return pixel_box(min(xs), min(ys), max(xs), max(ys), width, height)


class MediaEntity(TypedDict):
    """Text read in a picture (an OCR line, a region): where it is, no character offsets."""

    text: str
    label: str
    score: float
    start: None
    end: None
    bbox: list[int] | None  # None: a block of a document format without layout (DOCX, HTML)
    page: int | None


class MediaObject(TypedDict):
    """Something detected in a picture: its label, score and box."""

    label: str
    score: float
    bbox: list[int]
    page: int | None


class MediaLabel(TypedDict):
    label: str
    score: float


@dataclass
class Found:
    """What a media extractor found in one picture (lists empty when unused)."""

    entities: list[MediaEntity] = field(default_factory=list)
    objects: list[MediaObject] = field(default_factory=list)
    classifications: list[MediaLabel] = field(default_factory=list)
    #: task answers that are no list of spans or boxes: ``text`` (reading order), a caption
    data: dict[str, Any] = field(default_factory=dict)


def line_entity(text: str, score: float, bbox: list[int] | None, page: int | None, label: str = "line") -> MediaEntity:
    return MediaEntity(text=text, label=label, score=float(score), start=None, end=None, bbox=bbox, page=page)


def reading_order(entities: list[MediaEntity]) -> list[MediaEntity]:
    """Lines top to bottom, and left to right within a line: boxes whose vertical centres lie within
    half a line height of each other are one line."""
    boxed = [(e, e["bbox"]) for e in entities if e["bbox"] is not None]
    ordered = sorted(boxed, key=lambda eb: (eb[1][1] + eb[1][3] / 2, eb[1][0]))
    rows: list[list[tuple[MediaEntity, list[int]]]] = []
    for entity, box in ordered:
        centre = box[1] + box[3] / 2
        if rows:
            last = rows[-1][-1][1]
            if abs(centre - (last[1] + last[3] / 2)) <= max(min(last[3], box[3]) / 2, 1):
                rows[-1].append((entity, box))
                continue
        rows.append([(entity, box)])
    return [e for row in rows for e, _ in sorted(row, key=lambda eb: eb[1][0])]


class MediaExtractor(Encoder[MediaOptions]):
    """Pictures in (``Tokens.data`` is a ``Picture``), one ``Found`` per picture out."""

    options_type = MediaOptions
    #: the option names ``params.options`` may set for this family (others are refused with a 400)
    option_names: frozenset[str] = frozenset()

    def check(self, options: MediaOptions) -> None:
        """Raise InvalidInput for a request this model cannot serve (an unknown task, missing labels)."""

    @abstractmethod
    def run(self, batch: list[Tokens], options: MediaOptions) -> list[Found]:
        """What each picture shows, in batch order."""

    def warmup(self) -> None:
        from PIL import Image

        blank = Picture(Image.new("RGB", (64, 32), "white"))
        self.run([picture_tokens(blank)], MediaOptions.of(labels=["text"], threshold=None, options={}))
