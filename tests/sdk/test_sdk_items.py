"""Items and images as callers pass them, and as they travel."""

from __future__ import annotations

import base64
import io
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sdk_fakes import MODEL, Api, FakeServer

from sie_sdk._items import encode_image, normalize_items, sniff_format

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16
JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 16


def test_single_vs_list() -> None:
    assert normalize_items("a") == ([{"text": "a"}], True)
    assert normalize_items({"text": "a", "id": "1"}) == ([{"text": "a", "id": "1"}], True)
    assert normalize_items(["a", {"text": "b"}]) == ([{"text": "a"}, {"text": "b"}], False)
    assert normalize_items(("a",)) == ([{"text": "a"}], False)
    assert normalize_items([]) == ([], False)


@pytest.mark.parametrize("bad", [b"bytes", 3, [3], [None]])
def test_bad_items_are_refused(bad: Any) -> None:
    with pytest.raises(TypeError):
        normalize_items(bad)


def test_caller_items_are_not_mutated() -> None:
    item = {"text": "t", "images": [PNG]}
    normalize_items(item)
    assert item == {"text": "t", "images": [PNG]}


@pytest.mark.parametrize(
    ("data", "name"),
    [(PNG, "png"), (JPEG, "jpeg"), (b"GIF89a...", "gif"), (b"RIFF\x00\x00\x00\x00WEBPVP8 ", "webp")],
)
def test_sniff_format(data: bytes, name: str) -> None:
    assert sniff_format(data) == name


def test_unknown_bytes_need_a_format() -> None:
    with pytest.raises(ValueError):
        encode_image(b"????")
    assert encode_image({"data": b"????", "format": "tiff"}) == {"data": b"????", "format": "tiff"}


def test_paths_are_read(tmp_path: Path) -> None:
    path = tmp_path / "photo.jpg"
    path.write_bytes(JPEG)
    assert encode_image(path) == {"data": JPEG, "format": "jpeg"}
    assert encode_image(str(path)) == {"data": JPEG, "format": "jpeg"}
    odd = tmp_path / "scan.JPG"
    odd.write_bytes(b"????")
    assert encode_image(odd)["format"] == "jpeg"  # named by the suffix when the bytes say nothing


def test_pil_images_are_sent_as_png(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stand-in ``PIL.Image`` module: the SDK never imports PIL, it recognises its images."""

    class Image:
        def __init__(self, mode: str) -> None:
            self.mode = mode

        def convert(self, mode: str) -> Image:
            return Image(mode)

        def save(self, buffer: io.BytesIO, format: str) -> None:
            buffer.write(PNG if self.mode in ("RGB", "RGBA") else b"")

    fake = types.ModuleType("PIL.Image")
    fake.Image = Image  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "PIL.Image", fake)
    assert encode_image(Image("RGB")) == {"data": PNG, "format": "png"}
    assert encode_image(Image("CMYK")) == {"data": PNG, "format": "png"}  # converted first


def test_pil_like_objects_without_pil_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "PIL.Image", raising=False)
    with pytest.raises(TypeError):
        encode_image(object())


@pytest.mark.parametrize("wire", ["msgpack", "json"])
async def test_images_on_the_wire(make_api: Callable[..., Api], fake_server: FakeServer, wire: str) -> None:
    await make_api(wire=wire).encode(MODEL, {"id": "i", "images": [PNG, JPEG]})
    images = fake_server.requests[-1].body["items"][0]["images"]
    if wire == "msgpack":
        assert images == [{"data": PNG, "format": "png"}, {"data": JPEG, "format": "jpeg"}]
    else:
        assert images == [
            {"data": base64.b64encode(PNG).decode(), "format": "png"},
            {"data": base64.b64encode(JPEG).decode(), "format": "jpeg"},
        ]


async def test_one_image_need_not_be_in_a_list(api: Api, fake_server: FakeServer) -> None:
    await api.encode(MODEL, {"images": PNG})
    assert fake_server.requests[-1].body["items"][0]["images"] == [{"data": PNG, "format": "png"}]
