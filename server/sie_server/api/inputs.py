"""Turning wire items into engine inputs, with the limits every route applies."""

from __future__ import annotations

from sie_server.api.schemas import ItemIn
from sie_server.catalog.schema import ModelConfig
from sie_server.engine.service import TextInput
from sie_server.errors import InvalidInput, PayloadTooLarge
from sie_server.settings import Settings


def check_count(count: int, settings: Settings) -> None:
    if count > settings.max_items_per_request:
        raise InvalidInput(
            f"{count} items in one request; the limit is {settings.max_items_per_request}. Split the request."
        )


def check_text(text: str, where: str, settings: Settings) -> None:
    size = len(text.encode("utf-8"))
    if size > settings.max_text_bytes:
        raise PayloadTooLarge(f"{where} is {size} bytes of text; the limit is {settings.max_text_bytes} per text")


def text_inputs(items: list[ItemIn], model: ModelConfig, settings: Settings, field: str = "items") -> list[TextInput]:
    check_count(len(items), settings)
    return [text_input(item, f"{field}[{i}]", f"item-{i}", model, settings) for i, item in enumerate(items)]


def text_input(item: ItemIn, where: str, default_id: str, model: ModelConfig, settings: Settings) -> TextInput:
    item_id = item.id if item.id is not None else default_id
    if item.images:
        if not model.accepts_images:
            raise InvalidInput(f"{where} has images, but model {model.id} takes text only")
        if len(item.images) != 1:
            raise InvalidInput(f"{where} has {len(item.images)} images; send one image per item")
        return TextInput(id=item_id, text=item.text or "", image=item.images[0].data)
    if item.text is None:
        raise InvalidInput(f"{where} has no text")
    check_text(item.text, where, settings)
    return TextInput(id=item_id, text=item.text)
