"""How a picture reaches RapidOCR's engine: the size its detector sees, and which way up the page is read.

**Size.** RapidOCR's own default enlarges a picture whose shorter side is under 736 px to 736 (a 323 x 430
product photo: 18 lines read; bounded at 960 on the longer side instead, 12). PaddleOCR's document default bounds
the longer side at 960 (a Letter page at 150-200 dpi with one 12 pt line: read; at RapidOCR's default, nothing).
``FitDetector`` does both: small pictures are enlarged as RapidOCR does, large ones bounded, nothing past 2,000 px.

**Orientation.** PP-OCR's line classifier tells a line read upright ("0") from one upside down ("180"), and
RapidOCR turns a crop that is much taller than wide a quarter turn before it. Turned lines that the classifier is
not sure of (score under 0.9) are read as they are, so a page scanned upside down or a quarter turn
counter-clockwise lost about half its words, and its lines came out in reverse order. ``page_turns`` takes the
lines' votes (each weighted by its length): when most of the text says the page is turned, the picture is turned
upright and read again, and the boxes are mapped back to the picture as sent.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

#: RapidOCR's own default: a shorter side under this is enlarged to it
SMALL_SIDE = 736
#: PaddleOCR's document default: a longer side over this is brought down to it
LARGE_SIDE = 960
#: RapidOCR's own upper bound on any side it reads (``Global.max_side_len``)
MAX_SIDE = 2000
#: RapidOCR turns a crop this much taller than wide a quarter turn counter-clockwise before reading it
TALL = 1.5


def detector_ratio(height: int, width: int) -> float:
    """The scale the detector reads a ``height`` x ``width`` picture at."""
    short, long = min(height, width), max(height, width)
    if short < SMALL_SIDE:
        ratio = SMALL_SIDE / short
    elif long > LARGE_SIDE:
        ratio = LARGE_SIDE / long
    else:
        ratio = 1.0
    return min(ratio, MAX_SIDE / long)


def fit_detector(stage: Any) -> None:
    """Make RapidOCR's text detector size each picture by ``detector_ratio`` (its config takes one rule only)."""
    from rapidocr.ch_ppocr_det.utils import DetPreProcess

    class FitDetector(DetPreProcess):
        def resize(self, img: np.ndarray) -> np.ndarray | None:
            import cv2

            height, width = img.shape[:2]
            ratio = detector_ratio(height, width)
            # the network wants sides in multiples of 32
            new_h, new_w = (max(32, round(side * ratio / 32) * 32) for side in (height, width))
            return np.asarray(cv2.resize(img, (new_w, new_h)))

    stage.get_preprocess = lambda: FitDetector(stage.limit_side_len, stage.limit_type, stage.mean, stage.std)


class Recorder:
    """What the detector found and the classifier said on this thread's last call (for ``page_turns``)."""

    def __init__(self, engine: Any):
        self._last = threading.local()
        detect, classify = engine.text_det, engine.text_cls
        recorder = self

        class Detect:
            def __getattr__(self, name: str) -> Any:
                return getattr(detect, name)

            def __call__(self, img: Any) -> Any:
                out = detect(img)
                recorder._last.boxes = out.boxes
                return out

        class Classify:
            def __getattr__(self, name: str) -> Any:
                return getattr(classify, name)

            def __call__(self, crops: Any) -> Any:
                out = classify(crops)
                recorder._last.labels = out.cls_res
                return out

        engine.text_det, engine.text_cls = Detect(), Classify()

    def reset(self) -> None:
        self._last.boxes, self._last.labels = None, None

    def votes(self) -> tuple[Any, Any]:
        return getattr(self._last, "boxes", None), getattr(self._last, "labels", None)


def page_turns(boxes: Any, labels: Any) -> int:
    """Counter-clockwise quarter turns that bring the page upright (0 to 3), from the detector's quadrilaterals and
    the line classifier's labels, one per box, each weighted by the line's length; 0 unless most text agrees."""
    if boxes is None or labels is None or len(boxes) != len(labels) or len(boxes) == 0:
        return 0
    weight = np.zeros(4)
    for quad, (label, _score) in zip(np.asarray(boxes, dtype=np.float64), labels, strict=True):
        width = max(np.linalg.norm(quad[0] - quad[1]), np.linalg.norm(quad[2] - quad[3]))
        height = max(np.linalg.norm(quad[0] - quad[3]), np.linalg.norm(quad[1] - quad[2]))
        flipped = "180" in str(label)
        if height >= TALL * width:  # read after a quarter turn: upright if the page was turned clockwise
            weight[3 if flipped else 1] += height
        else:
            weight[2 if flipped else 0] += width
    turns = int(np.argmax(weight))
    return turns if turns and weight[turns] > weight.sum() / 2 else 0


def unturn_box(box: list[int], turns: int, width: int, height: int) -> list[int]:
    """``[x, y, w, h]`` found in the picture turned ``turns`` quarter turns counter-clockwise (``np.rot90``), as a
    box in the picture as sent (``width`` x ``height``)."""
    x, y, w, h = box
    if turns == 1:
        return [width - y - h, x, h, w]
    if turns == 2:
        return [width - x - w, height - y - h, w, h]
    if turns == 3:
        return [y, height - x - w, h, w]
    return list(box)
