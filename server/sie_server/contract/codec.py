"""Bytes on the wire: JSON, and msgpack with numpy arrays as msgpack-numpy maps."""

from __future__ import annotations

import json
from typing import Any

import msgpack
import numpy as np
import orjson

from sie_server.errors import InvalidInput

MSGPACK = "application/msgpack"
JSON = "application/json"
SSE = "text/event-stream"
_MSGPACK_TYPES = (MSGPACK, "application/x-msgpack")
_NUMERIC_KINDS = frozenset("fiub")


def is_msgpack(content_type: str | None) -> bool:
    return bool(content_type) and any(t in content_type for t in _MSGPACK_TYPES)  # type: ignore[operator]


def _ndarray_to_msgpack(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        array = np.ascontiguousarray(value)
        return {
            b"nd": True,
            b"type": array.dtype.str,
            b"kind": b"",
            b"shape": list(array.shape),
            b"data": array.tobytes(),
        }
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"cannot serialize {type(value).__name__}")


def _msgpack_to_ndarray(value: dict[Any, Any]) -> Any:
    if b"nd" not in value:
        return value
    dtype = np.dtype(value[b"type"])
    if value.get(b"kind", b"") not in (b"", "") or dtype.kind not in _NUMERIC_KINDS:
        raise ValueError("only numeric msgpack-numpy arrays are accepted")
    if not value[b"nd"]:
        return np.frombuffer(value[b"data"], dtype=dtype)[0]
    return np.frombuffer(value[b"data"], dtype=dtype).reshape(value[b"shape"])


def pack(payload: Any) -> bytes:
    packed: bytes = msgpack.packb(payload, default=_ndarray_to_msgpack, use_bin_type=True)
    return packed


def _no_ext(code: int, data: bytes) -> Any:
    raise ValueError(f"msgpack extension type {code} is not accepted")


def unpack(raw: bytes | bytearray) -> Any:
    """msgpack bytes, numpy maps decoded into arrays; INVALID_INPUT when they do not parse (extension
    types are refused)."""
    try:
        return msgpack.unpackb(raw, raw=False, object_hook=_msgpack_to_ndarray, strict_map_key=False, ext_hook=_no_ext)
    except Exception as exc:  # msgpack raises several unrelated types for bad input
        detail = str(exc) if isinstance(exc, ValueError) and "extension" in str(exc) else type(exc).__name__
        raise InvalidInput(f"request body is not valid msgpack ({detail})") from None


def dumps_json(payload: Any) -> bytes:
    return orjson.dumps(payload, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def loads_json(raw: bytes | bytearray) -> Any:
    """JSON (strict: no NaN or Infinity); INVALID_INPUT when it does not parse, nests too deep for the
    parser, or holds an integer too long to convert."""
    try:
        return json.loads(raw, parse_constant=_no_constant)
    except RecursionError:
        raise InvalidInput("request body nests too deeply") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, the int digit limit, NaN
        raise InvalidInput(f"request body is not valid JSON: {exc}") from None


def decode(content_type: str | None, raw: bytes | bytearray) -> Any:
    return unpack(raw) if is_msgpack(content_type) else loads_json(raw)


def encode(payload: Any, as_msgpack: bool) -> bytes:
    return pack(payload) if as_msgpack else dumps_json(payload)
