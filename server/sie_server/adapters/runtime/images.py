"""Image bytes from a request, decoded for an image encoder; unreadable bytes are the caller's error."""

from __future__ import annotations

import io
from typing import Any

from sie_server.errors import InvalidInput


def open_rgb(data: bytes, index: int) -> Any:
    """The image in ``data`` as an RGB PIL image; InvalidInput naming image ``index`` when it is not one."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as image:
            return image.convert("RGB")
    except (UnidentifiedImageError, Image.DecompressionBombError, OSError, ValueError) as exc:
        raise InvalidInput(
            f"image {index} is not a readable image ({type(exc).__name__}); send PNG or JPEG bytes"
        ) from None
