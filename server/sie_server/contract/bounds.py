"""Structural bounds on a decoded request body, checked before any model sees it: how deep it
nests, that every string is encodable text, that integers fit in 64 bits and floats are finite.
Each refusal is a 400 naming where in the body it is."""

from __future__ import annotations

import math
from typing import Any

from sie_server.errors import InvalidInput

MAX_DEPTH = 32
INT_BOUND = 2**64


def _where(path: str) -> str:
    return path or "the body"


def _text(value: str, path: str) -> None:
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidInput(f"{_where(path)} is not valid Unicode text (it holds a lone surrogate)") from None


def check(body: Any) -> None:
    stack: list[tuple[Any, str, int]] = [(body, "", 0)]
    while stack:
        value, path, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise InvalidInput(f"the body nests deeper than {MAX_DEPTH} levels (at {path})")
        if isinstance(value, str):
            _text(value, path)
        elif isinstance(value, bool) or value is None:
            continue
        elif isinstance(value, int):
            if not -INT_BOUND < value < INT_BOUND:
                raise InvalidInput(f"{_where(path)} is out of range: integers must fit in 64 bits")
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise InvalidInput(f"{_where(path)} must be a finite number, got {value}")
        elif isinstance(value, dict):
            for key, item in value.items():
                name = str(key)
                _text(name, path)
                stack.append((item, f"{path}.{name}" if path else name, depth + 1))
        elif isinstance(value, list):
            stack.extend((item, f"{path}[{i}]", depth + 1) for i, item in enumerate(value))
