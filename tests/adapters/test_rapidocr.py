"""The PP-OCRv6 adapter on its own: a batch of several pictures is read side by side by one-thread
lanes, and answers exactly what reading them one at a time answers, in batch order."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from sie_server.adapters import create_adapter
from sie_server.adapters.runtime.media import Picture, picture_tokens
from sie_server.adapters.runtime.options import MediaOptions
from sie_server.catalog.loader import parse_config_file
from tests.helpers.catalog import OCR, real_config_path
from tests.helpers.documents import text_image

LINES = [["INVOICE 1001", "Total 420,00 EUR"], ["ACME Corp"], ["Due 2026-12-31", "Net 30 days", "Page 3"]]


@pytest.fixture(scope="module")
def adapter(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    import rapidocr

    before = torch.get_num_threads()
    torch.set_num_threads(2)  # ONNX Runtime follows torch's threads: two lanes
    try:
        config = parse_config_file(real_config_path(OCR))
        ocr = create_adapter(config, config.profile("cpu"), "cpu")
        ocr.load(Path(rapidocr.__file__).parent / "models")
    finally:
        torch.set_num_threads(before)
    yield ocr
    ocr.unload()


def test_a_batch_is_read_side_by_side_and_answers_as_one_at_a_time_in_order(adapter: Any) -> None:
    options = MediaOptions.of(None, None, {})
    pictures = [Picture(text_image(lines), page=k + 1) for k, lines in enumerate(LINES)]
    assert len(adapter.lanes) == 2
    together = adapter.run([picture_tokens(p) for p in pictures], options)
    alone = [adapter.run([picture_tokens(p)], options)[0] for p in pictures]
    assert [[e["text"] for e in found.entities] for found in together] == LINES
    assert together == alone
    assert [{e["page"] for e in found.entities} for found in together] == [{1}, {2}, {3}]


def test_the_lanes_weights_are_charged_with_the_main_engines(adapter: Any) -> None:
    import rapidocr

    model_bytes = sum(p.stat().st_size for p in (Path(rapidocr.__file__).parent / "models").glob("*.onnx"))
    assert adapter.resident_bytes() == model_bytes * 3  # the main engine and two one-thread lanes


# ----- other people's material: RapidOCR's own test pictures (tests/adapters/data/rapidocr/README.md) ---------------
DATA = Path(__file__).parent / "data" / "rapidocr"


@pytest.fixture(scope="module")
def reference() -> Any:
    """RapidOCR itself, with its own defaults and its own image loader, on the same PP-OCRv6 weights."""
    import rapidocr
    from rapidocr import RapidOCR

    return RapidOCR(
        params={"Global.log_level": "warning", "Global.model_root_dir": str(Path(rapidocr.__file__).parent / "models")}
    )


def served(adapter: Any, data: bytes) -> list[dict[str, Any]]:
    """What the server answers for a picture: decoded as the service decodes it, read by the adapter."""
    from sie_server.engine.media_inputs import open_picture

    picture = open_picture(data, "image 0", 10**8)
    return list(adapter.run([picture_tokens(picture)], MediaOptions.of(None, None, {}))[0].entities)


def characters(lines: list[str]) -> list[str]:
    """The letters and digits read, however the engine cut them into lines."""
    return sorted(c for line in lines for c in line if c.isalnum())


def test_a_small_dense_photo_reads_every_line_rapidocr_reads(adapter: Any, reference: Any) -> None:
    """323 x 430 pixels: enlarged for the detector as RapidOCR does (bounded at 960 instead it read 12 lines)."""
    data = (DATA / "ch_en_num.jpg").read_bytes()
    theirs = list(reference(data).txts)
    ours = [e["text"] for e in served(adapter, data)]
    assert len(theirs) == 18  # what RapidOCR's own tests expect of this picture
    assert sorted(ours) == sorted(theirs)


@pytest.mark.parametrize("name", ["black_font_color_transparent.png", "white_font_color_transparent.png"])
def test_text_on_a_transparent_background_reads_as_rapidocr_reads_it(adapter: Any, reference: Any, name: str) -> None:
    data = (DATA / name).read_bytes()
    theirs = characters(list(reference(data).txts))
    ours = characters([e["text"] for e in served(adapter, data)])
    assert ours and ours == theirs  # dark text on transparent read as "_" before the alpha was composited


def _turned(box: list[int], turns: int, width: int, height: int) -> list[int]:
    """Where an upright box lies once the picture is turned ``turns`` quarter turns counter-clockwise."""
    x, y, w, h = box
    for _ in range(turns):  # one counter-clockwise quarter turn of a width x height picture
        x, y, w, h = y, width - x - w, h, w
        width, height = height, width
    return [x, y, w, h]


@pytest.mark.parametrize("name", ["en.jpg", "ch_en_num.jpg"])
@pytest.mark.parametrize("turns", [1, 2, 3])
def test_a_picture_turned_any_quarter_reads_as_upright_with_boxes_where_the_text_is(
    adapter: Any, name: str, turns: int
) -> None:
    """The same lines in the same order as the upright picture, each box around where that line now is."""
    import io

    from PIL import Image

    upright_image = Image.open(DATA / name).convert("RGB")
    width, height = upright_image.size
    buffer = io.BytesIO()
    upright_image.transpose(
        [Image.Transpose.ROTATE_90, Image.Transpose.ROTATE_180, Image.Transpose.ROTATE_270][turns - 1]
    ).save(buffer, "PNG")
    upright = served(adapter, (DATA / name).read_bytes())
    turned = served(adapter, buffer.getvalue())
    assert [e["text"] for e in turned] == [e["text"] for e in upright]
    for ours, straight in zip(turned, upright, strict=True):
        expected = _turned(straight["bbox"], turns, width, height)
        assert all(abs(a - b) <= 4 for a, b in zip(ours["bbox"], expected, strict=True)), (ours, expected)
