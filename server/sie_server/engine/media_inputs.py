"""Images from a request, screened and decoded for a media extractor (off the event loop).

An image's declared size is read from its header and checked against ``--max-image-pixels``
before a single pixel is decoded, so a PNG that declares 40,000 x 40,000 pixels costs its header,
not 4.8 GB. Unreadable bytes, and images over the limit, are that item's error alone.
"""

from __future__ import annotations

import io
import warnings
from typing import Any

from sie_server.adapters.runtime.images import flatten
from sie_server.adapters.runtime.media import Picture
from sie_server.errors import InvalidInput, PayloadTooLarge


def open_picture(data: bytes, where: str, max_pixels: int, page: int | None = None) -> Picture:
    """The image in ``data`` decoded to RGB (transparency composited: ``flatten``); InvalidInput naming ``where``
    when it is no image or too large."""
    from PIL import Image, UnidentifiedImageError

    if not data:
        raise InvalidInput(f"{where} is empty; send PNG, JPEG, WebP, TIFF or BMP bytes")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)  # the limit below decides
            image: Any = Image.open(io.BytesIO(data))
        width, height = image.size
        if width * height > max_pixels:
            raise PayloadTooLarge(
                f"{where} declares {width} x {height} pixels; the limit is {max_pixels:,} (--max-image-pixels)"
            )
        with image:
            image.draft("RGB", image.size)  # JPEG: decode at the declared size, no upscaled buffers
            rgb = flatten(image)
    except Image.DecompressionBombError:  # Pillow's own bound, checked as it reads the header
        pillow = 2 * (Image.MAX_IMAGE_PIXELS or 0)
        raise PayloadTooLarge(
            f"{where} declares more than {pillow:,} pixels; the limit is {max_pixels:,} (--max-image-pixels)"
        ) from None
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
        raise InvalidInput(
            f"{where} is not a readable image ({type(exc).__name__}); send PNG, JPEG, WebP, TIFF or BMP bytes"
        ) from None
    return Picture(rgb, page)
