"""The large-body reader (api/lazy_json.py): a JSON body's fields and array items, decoded only when read, and
read as the full decode would; the server-level refusals it serves are in test_prompt_bounds.py."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Any

import pytest

from sie_server.api import lazy_json


def test_the_lazy_reader_decodes_a_field_when_it_is_read() -> None:
    body = lazy_json.fields(b'{"model": "m", "messages": [{"role": "user", "content": "hi"}, 3, [1, 2]], "n": 1.5}')
    assert body is not None
    assert sorted(body) == ["messages", "model", "n"] and body["model"] == "m" and body.get("n") == 1.5
    messages = body["messages"]
    assert isinstance(messages, Sequence) and not isinstance(messages, list) and len(messages) == 3
    assert messages[0] == {"role": "user", "content": "hi"} and messages[1] == 3 and list(messages[2]) == [1, 2]
    assert [type(m).__name__ for m in messages[1:]] == ["int", "LazyArray"]
    for bad in (b"[1, 2]", b'{"a": 1', b'{"a": NaN}', b"", b'{"a": 1} trailing'):
        assert lazy_json.fields(bad) is None, bad


def _plain(value: Any) -> Any:
    if isinstance(value, lazy_json.LazyArray):
        return [_plain(item) for item in value]
    return {k: _plain(v) for k, v in value.items()} if isinstance(value, dict) else value


@pytest.mark.parametrize("scan_bytes", [lazy_json.SCAN_BYTES, 300])
def test_the_lazy_reader_reads_every_item_as_the_full_decode_does(
    scan_bytes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Items are matched one at a time (flat objects) and the rest split at once (anything else, or past
    SCAN_BYTES): read either way, in any JSON layout, they are the full decode's items, in order."""
    monkeypatch.setattr(lazy_json, "SCAN_BYTES", scan_bytes)
    rng = random.Random(24)
    strings = ["", "hi", 'q"uo\\te', "}]{[,:", "\n\t\u00e9\u4e2d", "w" * 70]

    def value(depth: int) -> Any:
        kind = rng.random()
        if depth < 2 and kind < 0.15:
            return [value(depth + 1) for _ in range(rng.randint(0, 3))]
        if depth < 2 and kind < 0.3:
            return {f"k{i}": value(depth + 1) for i in range(rng.randint(0, 3))}
        return rng.choice([*strings, 1, -2.5e3, True, None])

    for _ in range(300):
        turns = [
            {
                "role": rng.choice(["user", "assistant"]),
                "content": rng.choice([*strings, [{"type": "text", "text": rng.choice(strings)}, ["a", 1]]]),
                "n": rng.choice([1, None]),
            }
            if rng.random() < 0.8
            else value(0)
            for _ in range(rng.randint(0, 12))
        ]
        layout = rng.choice([{}, {"indent": 1}, {"separators": (" , ", " : ")}, {"ensure_ascii": False}])
        raw = json.dumps({"model": "m", "messages": turns}, **layout).encode()  # type: ignore[arg-type]
        body = lazy_json.fields(raw)
        assert body is not None
        assert _plain(body["messages"]) == turns, raw
        assert len(body["messages"]) == len(turns)
