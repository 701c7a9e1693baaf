"""The picture's way to RapidOCR (adapters/vision/rapidocr_page.py): the detector's scale, the page's turn voted
by its lines, boxes mapped back; and transparency composited onto a contrasting background
(adapters/runtime/images.py) for every family that takes pictures."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from sie_server.adapters.runtime.images import flatten
from sie_server.adapters.vision.rapidocr_page import detector_ratio, page_turns, unturn_box


@pytest.mark.parametrize(
    ("height", "width", "ratio"),
    [
        (430, 323, 736 / 323),  # small: enlarged to a 736 shorter side, as RapidOCR's default does
        (800, 900, 1.0),  # neither small nor over 960: as it is
        (2200, 1700, 960 / 2200),  # a page: bounded at 960, as PaddleOCR's document default does
        (3000, 200, 2000 / 3000),  # a thin strip: enlarged, but no side past 2,000
    ],
)
def test_the_detector_scale(height: int, width: int, ratio: float) -> None:
    assert detector_ratio(height, width) == pytest.approx(ratio)


def quad(x: float, y: float, w: float, h: float) -> list[list[float]]:
    return [[x, y], [x + w, y], [x + w, y + h], [x, y + h]]


LINE, TALL_LINE = quad(0, 0, 300, 20), quad(0, 0, 20, 300)


@pytest.mark.parametrize(
    ("boxes", "labels", "turns"),
    [
        ([LINE, LINE], [("0", 0.99), ("0", 0.6)], 0),
        ([LINE, LINE, LINE], [("180", 0.7), ("180", 0.95), ("0", 0.6)], 2),  # upside down
        ([TALL_LINE, TALL_LINE], [("0", 0.8), ("0", 0.9)], 1),  # turned clockwise: turn it back
        ([TALL_LINE, TALL_LINE], [("180", 0.8), ("180", 0.5)], 3),  # turned counter-clockwise
        ([LINE, quad(0, 0, 30, 20)], [("0", 0.9), ("180", 0.9)], 0),  # a long line outweighs a short one
        ([LINE, LINE], [("180", 0.9), ("0", 0.9)], 0),  # a tie is no majority: read as it is
        ([], [], 0),
        (None, None, 0),
    ],
)
def test_the_page_turn_is_what_most_of_its_text_says(boxes: object, labels: object, turns: int) -> None:
    assert page_turns(boxes, labels) == turns


def test_boxes_found_in_the_turned_picture_map_back_onto_the_picture_as_sent() -> None:
    width, height = 40, 30
    picture = np.zeros((height, width), dtype=np.uint8)
    picture[5:9, 10:25] = 1  # a 15 x 4 mark at x 10, y 5
    for turns in range(4):
        turned = np.rot90(picture, turns)
        ys, xs = np.nonzero(turned)
        found = [int(xs.min()), int(ys.min()), int(xs.max() - xs.min() + 1), int(ys.max() - ys.min() + 1)]
        assert unturn_box(found, turns, width, height) == [10, 5, 15, 4]


def rgba(text_colour: tuple[int, int, int]) -> Image.Image:
    image = Image.new("RGBA", (20, 10), (0, 0, 0, 0))  # transparent black, as most editors save it
    image.paste(Image.new("RGBA", (8, 4), (*text_colour, 255)), (2, 3))
    return image


def test_dark_content_on_transparency_goes_on_white_and_light_content_on_black() -> None:
    dark = np.asarray(flatten(rgba((20, 20, 20))))
    assert dark.shape == (10, 20, 3) and tuple(dark[0, 0]) == (255, 255, 255) and tuple(dark[4, 4]) == (20, 20, 20)
    light = np.asarray(flatten(rgba((250, 250, 250))))
    assert tuple(light[0, 0]) == (0, 0, 0) and tuple(light[4, 4]) == (250, 250, 250)


def test_half_transparent_pixels_blend_and_opaque_pictures_stay_as_they_are() -> None:
    half = Image.new("RGBA", (2, 2), (0, 0, 0, 128))
    assert tuple(np.asarray(flatten(half))[0, 0]) == (127, 127, 127)  # black at half over white
    opaque = Image.new("RGB", (2, 2), (10, 200, 30))
    assert np.array_equal(np.asarray(flatten(opaque)), np.asarray(opaque))
    palette = Image.new("P", (2, 2), 0)
    palette.putpalette([0, 0, 0] * 256)
    palette.info["transparency"] = 0  # a GIF-style transparent index
    assert tuple(np.asarray(flatten(palette))[0, 0]) == (255, 255, 255)
