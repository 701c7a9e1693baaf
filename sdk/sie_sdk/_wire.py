"""Body codecs: msgpack (numpy arrays as msgpack-numpy maps) and JSON.

msgpack-numpy maps have BYTES keys:
``{b"nd": True, b"type": "<f4", b"kind": b"", b"shape": [384], b"data": <little-endian bytes>}``.
Only plain numeric dtypes are accepted in either direction; nothing is ever unpickled.
"""

from __future__ import annotations

import base64
import json
import math
from typing import Any

import msgpack
import numpy as np

from .errors import ProtocolError
from .types import Wire

MSGPACK_TYPE = "application/msgpack"
JSON_TYPE = "application/json"
CONTENT_TYPES: dict[Wire, str] = {"msgpack": MSGPACK_TYPE, "json": JSON_TYPE}

_NUMERIC_KINDS = frozenset("biufc")


def encode_body(obj: Any, wire: Wire) -> bytes:
    """Serialise a request body for ``wire``."""
    if wire == "msgpack":
        packed: bytes = msgpack.packb(obj, default=_msgpack_default, use_bin_type=True)
        return packed
    return json.dumps(obj, default=_json_default, separators=(",", ":")).encode()


def decode_body(content: bytes, content_type: str | None) -> Any:
    """Deserialise a response body, choosing the codec from its Content-Type."""
    if not content:
        return None
    try:
        if content_type and "msgpack" in content_type.lower():
            return msgpack.unpackb(content, raw=False, object_hook=_msgpack_object_hook)
        return json.loads(content)
    except ProtocolError:
        raise
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise ProtocolError(f"could not decode the response body ({content_type}): {exc}") from exc


def array_to_msgpack_map(array: np.ndarray[Any, Any]) -> dict[bytes, Any]:
    """A numeric array as a msgpack-numpy map (C order, little-endian)."""
    if array.dtype.kind not in _NUMERIC_KINDS:
        raise TypeError(f"only numeric arrays can be sent, not dtype {array.dtype}")
    little = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))
    return {
        b"nd": True,
        b"type": little.dtype.str,
        b"kind": b"",
        b"shape": list(little.shape),
        b"data": little.tobytes(),
    }


def msgpack_map_to_array(obj: dict[Any, Any]) -> np.ndarray[Any, Any]:
    """Rebuild a numeric array from a msgpack-numpy map, refusing anything but plain numbers."""
    kind = _field(obj, "kind")
    if kind not in (b"", "", None):
        raise ProtocolError(f"refusing msgpack-numpy array of kind {kind!r} (only plain numeric arrays)")
    type_name = _field(obj, "type")
    if isinstance(type_name, bytes):
        type_name = type_name.decode("ascii", "replace")
    if not isinstance(type_name, str):
        raise ProtocolError(f"msgpack-numpy array without a dtype string: {type_name!r}")
    try:
        dtype = np.dtype(type_name)
    except (TypeError, ValueError) as exc:
        raise ProtocolError(f"unknown array dtype {type_name!r}") from exc
    if dtype.kind not in _NUMERIC_KINDS or dtype.fields is not None or dtype.subdtype is not None:
        raise ProtocolError(f"refusing non-numeric array dtype {type_name!r}")
    shape = _field(obj, "shape")
    if not isinstance(shape, list | tuple) or not all(isinstance(d, int) and d >= 0 for d in shape):
        raise ProtocolError(f"bad msgpack-numpy shape {shape!r}")
    data = _field(obj, "data")
    if not isinstance(data, bytes):
        raise ProtocolError("msgpack-numpy array without a bytes payload")
    if len(data) != math.prod(shape) * dtype.itemsize:
        raise ProtocolError(
            f"msgpack-numpy payload is {len(data)} bytes, shape {list(shape)} of {type_name} needs "
            f"{math.prod(shape) * dtype.itemsize}"
        )
    flat = np.frombuffer(data, dtype=dtype)
    # A native-order, writable copy: arrays look the same whichever wire carried them.
    return flat.reshape(tuple(shape)).astype(dtype.newbyteorder("="), copy=True)


def _field(obj: dict[Any, Any], name: str) -> Any:
    if name.encode() in obj:
        return obj[name.encode()]
    return obj.get(name)


def _is_ndarray_map(obj: dict[Any, Any]) -> bool:
    return _field(obj, "nd") is True and _field(obj, "data") is not None and _field(obj, "shape") is not None


def _msgpack_object_hook(obj: dict[Any, Any]) -> Any:
    if _is_ndarray_map(obj):
        return msgpack_map_to_array(obj)
    if any(isinstance(key, bytes) for key in obj):
        return {(key.decode("utf-8", "replace") if isinstance(key, bytes) else key): v for key, v in obj.items()}
    return obj


def _msgpack_default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        return array_to_msgpack_map(obj)
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, bytearray | memoryview):
        return bytes(obj)
    raise TypeError(f"cannot send a {type(obj).__name__} in a msgpack body")


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind not in _NUMERIC_KINDS:
            raise TypeError(f"only numeric arrays can be sent, not dtype {obj.dtype}")
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(obj)).decode("ascii")
    raise TypeError(f"cannot send a {type(obj).__name__} in a JSON body")
