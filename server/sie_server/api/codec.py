"""Request bodies in (JSON or msgpack) and responses out (JSON unless the client asks for msgpack)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypeVar

import msgpack
import numpy as np
import orjson
from fastapi import Request
from fastapi.responses import Response
from pydantic import BaseModel, ValidationError

from sie_server.errors import InvalidInput, PayloadTooLarge

MSGPACK = "application/msgpack"
_MSGPACK_TYPES = (MSGPACK, "application/x-msgpack")
_NUMERIC_KINDS = frozenset("fiub")

M = TypeVar("M", bound=BaseModel)


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


def _is_msgpack(content_type: str | None) -> bool:
    return bool(content_type) and any(t in content_type for t in _MSGPACK_TYPES)  # type: ignore[operator]


async def read_body(request: Request, max_bytes: int) -> Any:
    """The decoded body; 413 past ``max_bytes``, 400 when it does not parse."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > max_bytes:
        raise PayloadTooLarge(f"request body is {int(declared)} bytes; the limit is {max_bytes}")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise PayloadTooLarge(f"request body exceeds the limit of {max_bytes} bytes")
        chunks.append(chunk)
    raw = b"".join(chunks)
    if not raw:
        raise InvalidInput("request body is empty; send a JSON (or msgpack) object")
    if _is_msgpack(request.headers.get("content-type")):
        try:
            return msgpack.unpackb(raw, raw=False, object_hook=_msgpack_to_ndarray, strict_map_key=False)
        except Exception as exc:  # msgpack raises several unrelated types for bad input
            raise InvalidInput(f"request body is not valid msgpack ({type(exc).__name__})") from None
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"request body is not valid JSON: {exc}") from None


def describe_validation(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        where = ".".join(str(p) for p in err["loc"]) or "body"
        parts.append(f"{where}: {err['msg']}")
    more = len(exc.errors()) - 5
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


async def parse(request: Request, model: type[M], max_bytes: int) -> M:
    body = await read_body(request, max_bytes)
    if not isinstance(body, Mapping):
        raise InvalidInput(f"request body must be an object, got {type(body).__name__}")
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        raise InvalidInput(f"invalid request: {describe_validation(exc)}") from None


def wants_msgpack(request: Request) -> bool:
    return _is_msgpack(request.headers.get("accept"))


def render(request: Request, payload: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    if wants_msgpack(request):
        body = msgpack.packb(payload, default=_ndarray_to_msgpack, use_bin_type=True)
        return Response(body, status_code=status, media_type=MSGPACK, headers=headers)
    return json_response(payload, status, headers)


def json_response(payload: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    body = orjson.dumps(payload, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS)
    return Response(body, status_code=status, media_type="application/json", headers=headers)
