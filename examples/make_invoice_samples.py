"""Write the invoice pipeline's sample inputs: a scanned invoice (PNG) and the same page as a scanned PDF.

    .venv/bin/python examples/make_invoice_samples.py [FOLDER]     (default: examples/data)

The page is drawn with Pillow's own font, so every machine makes the same files; the PDF holds the
page as a picture only (no text layer), as a scanner writes it.
"""

from __future__ import annotations

import sys
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

LINES = [
    "ACME CORP",
    "Invoice INV-2024-0117",
    "12 hours of consulting",
    "Total due 4,250.00 EUR",
    "Due by 31 March 2024",
]
DPI = 200


def page() -> Image.Image:
    font = ImageFont.load_default(size=44)
    width, margin, step = 1100, 80, 90
    image = Image.new("RGB", (width, margin * 2 + step * len(LINES)), "white")
    draw = ImageDraw.Draw(image)
    for k, line in enumerate(LINES):
        draw.text((margin, margin + k * step), line, fill="black", font=font)
    return image


def main(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    image = page()
    image.save(folder / "invoice_scan.png")
    image.save(folder / "invoice_scan.pdf", resolution=DPI)
    print(f"wrote {folder / 'invoice_scan.png'} and {folder / 'invoice_scan.pdf'}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("data"))
