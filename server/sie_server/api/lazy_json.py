"""A large JSON body's fields, each decoded only when it is read, for a precheck that can refuse a request from a
few of them (``body.read_body``): a chat too long for its model's context is refused after reading the turns that
prove it, not after parsing the whole body. The 63 MB chat of 1.6 million one-word turns that
benchmarks/prompt_bounds.py sends took 0.97-1.08 s to decode in full (``codec.loads_json``) on 2 Zen 4 cores, and
0.23-0.24 s to split into its top-level fields and the raw text of each turn (msgspec, which validates the JSON as
it goes but builds no objects for the parts it keeps raw), side by side.

Nothing here says why a body is bad: a body these readers cannot split (not an object, not valid JSON, too
deep) gives ``None``, and the full decode after the precheck answers it with its own error.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import msgspec

_FIELDS = msgspec.json.Decoder(dict[str, msgspec.Raw])
_ITEMS = msgspec.json.Decoder(list[msgspec.Raw])
_VALUE = msgspec.json.Decoder()


def _value(raw: msgspec.Raw) -> Any:
    """A field or item: an array stays lazy (its items decoded when read), anything else is decoded now."""
    if bytes(memoryview(raw)[:1]) == b"[":
        return LazyArray(_ITEMS.decode(raw))
    return _VALUE.decode(raw)


class LazyArray(Sequence[Any]):
    """A JSON array whose items are decoded when read."""

    def __init__(self, items: list[msgspec.Raw]):
        self._items = items

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return LazyArray(self._items[index])
        return _value(self._items[index])

    def __iter__(self) -> Iterator[Any]:
        return (_value(item) for item in self._items)


class LazyObject(Mapping[str, Any]):
    """A JSON object whose fields are decoded when read."""

    def __init__(self, fields: dict[str, msgspec.Raw]):
        self._fields = fields

    def __getitem__(self, key: str) -> Any:
        return _value(self._fields[key])

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields)

    def __len__(self) -> int:
        return len(self._fields)


def fields(raw: bytes) -> LazyObject | None:
    """The body's top-level fields, read lazily; None when it is not a JSON object this reader can split."""
    try:
        return LazyObject(_FIELDS.decode(raw))
    except (msgspec.DecodeError, RecursionError, ValueError):
        return None
