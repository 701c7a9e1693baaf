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
