"""Image bytes from a request, decoded to RGB for any family that takes pictures; unreadable bytes are the
caller's error.

Transparency is composited, not dropped: ``convert("RGB")`` keeps whatever colour the transparent pixels hold,
usually black, so dark text on a transparent background became black on black (PP-OCRv6 read "_"). The
background is white, or black when what is visible is light (light text on a transparent background), as
RapidOCR's own loader chooses, so the picture keeps its contrast either way.
"""

from __future__ import annotations

import io
from typing import Any

from sie_server.errors import InvalidInput

#: a visible mean luminance (0-255) at or above this is light content: it goes on black, else on white
LIGHT = 128


def flatten(image: Any) -> Any:
    """``image`` (a PIL image, any mode) as RGB, its transparency composited onto a contrasting background."""
    from PIL import Image

    if image.mode not in ("RGBA", "LA", "PA") and "transparency" not in image.info:
        return image.convert("RGB")
    import numpy as np

    rgba = np.asarray(image.convert("RGBA"), dtype=np.float32)
    rgb, alpha = rgba[..., :3], rgba[..., 3:] / 255.0
    visible = alpha[..., 0] > 0
    luminance = rgb[visible] @ np.array([0.299, 0.587, 0.114], dtype=np.float32) if visible.any() else None
    background = 0.0 if luminance is not None and float(luminance.mean()) >= LIGHT else 255.0
    blended = rgb * alpha + background * (1.0 - alpha)
    return Image.fromarray(np.clip(np.rint(blended), 0, 255).astype(np.uint8), "RGB")


class PlacedImage(bytes):
    """Image bytes that know where they stand in the request (``items[3].images[0]``), so an adapter that
    decodes a sublist of a request's images (the others answered by the result cache) names the right one."""

    where: str

    def __new__(cls, data: bytes, where: str) -> PlacedImage:
        placed = super().__new__(cls, data)
        placed.where = where
        return placed


def open_rgb(data: bytes, index: int) -> Any:
    """The image in ``data`` as an RGB PIL image; InvalidInput naming the image (its place in the request,
    else ``image {index}`` of the list decoded) when it is not one."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as image:
            return flatten(image)
    except (UnidentifiedImageError, Image.DecompressionBombError, OSError, ValueError) as exc:
        where = data.where if isinstance(data, PlacedImage) else f"image {index}"
        raise InvalidInput(f"{where} is not a readable image ({type(exc).__name__}); send PNG or JPEG bytes") from None
