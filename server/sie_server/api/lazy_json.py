"""A large JSON body's fields, each decoded only when it is read, for a precheck that can refuse a request from a
few of them (``body.read_body``): a chat too long for its model's context is refused after reading the turns that
prove it, not after parsing the whole body. The 63 MB chat of 1.6 million one-word turns that
benchmarks/prompt_bounds.py sends took 0.97-1.08 s to decode in full (``codec.loads_json``) on 2 Zen 4 cores, and
0.23-0.24 s to split into its top-level fields and the raw text of each turn (msgspec, which validates the JSON as
it goes but builds no objects for the parts it keeps raw), side by side.

An array is split into its items only as far as it is read: objects of strings, scalars and arrays of those or of
flat objects (a chat turn, with its content as a string or as text parts) are matched one at a time from its start,
up to ``SCAN_BYTES`` of it; past that, or at the first item nested deeper, the rest is split at once (msgspec).
Splitting that chat's 1.6 million turns took 0.13-0.14 s, matching the 8,185 turns a refusal reads 0.008-0.015 s
(same machine). The body has passed the top-level split, which validates all of it, before any item is matched,
so the matcher only has to find where valid items end.

Nothing here says why a body is bad: a body these readers cannot split (not an object, not valid JSON, too
deep) gives ``None``, and the full decode after the precheck answers it with its own error.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import msgspec

_FIELDS = msgspec.json.Decoder(dict[str, msgspec.Raw])
_ITEMS = msgspec.json.Decoder(list[msgspec.Raw])
_VALUE = msgspec.json.Decoder()
# one item and what follows it: "," (more items) or "]" (the end). An item here is an object of strings, scalars and
# arrays of those or of flat objects (a chat turn, its content parts); possessive, so a match never backtracks.
# JSON whitespace is a subset of \s.
_STRING = rb'"(?:[^"\\]++|\\.)*+"'
_FLAT = rb'\{(?:[^{}\[\]"]++|' + _STRING + rb")*+\}"
_ARRAY = rb'\[(?:[^{}\[\]"]++|' + _STRING + rb"|" + _FLAT + rb")*+\]"
_ITEM = re.compile(rb'\s*(\{(?:[^{}\[\]"]++|' + _STRING + rb"|" + _ARRAY + rb")*+\})\s*([,\]])")
# how much of an array the matcher reads before splitting the rest at once: the regex engine reads escaped strings
# at ~15 ns a byte, msgspec far faster, so a body of long turns costs at most this much more than a split
SCAN_BYTES = 4 << 20


def _value(raw: Any) -> Any:
    """A field or item: an array stays lazy (its items decoded when read), anything else is decoded now."""
    view = memoryview(raw)
    if bytes(view[:1]) == b"[":
        return LazyArray(view)
    return _VALUE.decode(view)


class LazyArray(Sequence[Any]):
    """A JSON array (valid, as the top-level split found it) whose items are found and decoded when read."""

    def __init__(self, raw: memoryview):
        self._raw = raw
        self._items: list[msgspec.Raw] | None = None  # all of them, once indexing or len() needed them

    def _all(self) -> list[msgspec.Raw]:
        if self._items is None:
            self._items = _ITEMS.decode(self._raw)
        return self._items

    def __len__(self) -> int:
        return len(self._all())

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [_value(item) for item in self._all()[index]]
        return _value(self._all()[index])

    def __iter__(self) -> Iterator[Any]:
        if self._items is not None:
            yield from (_value(item) for item in self._items)
            return
        raw, at = self._raw, 1  # past the "["
        end = min(len(raw), SCAN_BYTES)
        while (item := _ITEM.match(raw, at, end)) is not None:
            yield _value(item.group(1))
            if item.group(2) == b"]":
                return
            at = item.end()
        rest = raw if at == 1 else b"[" + bytes(raw[at:])  # at is just past a ",": the rest is an array too
        yield from (_value(item) for item in _ITEMS.decode(rest))


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


def fields(raw: bytes | bytearray) -> LazyObject | None:
    """The body's top-level fields, read lazily; None when it is not a JSON object this reader can split."""
    try:
        return LazyObject(_FIELDS.decode(raw))
    except (msgspec.DecodeError, RecursionError, ValueError):
        return None
