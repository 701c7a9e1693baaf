"""Request bodies in (JSON or msgpack, within the size limit) and answers out (JSON unless the
client asks for msgpack)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import msgspec
from fastapi import Request
from fastapi.responses import Response
from pydantic import BaseModel, ValidationError

from sie_server.api import lazy_json
from sie_server.contract import bounds, codec
from sie_server.contract import headers as h
from sie_server.errors import InvalidInput, PayloadTooLarge

M = TypeVar("M", bound=BaseModel)
# a JSON body past this size goes to the precheck field by field (api/lazy_json.py) before its full decode
LAZY_PRECHECK_BYTES = 1 << 20


async def read_body(request: Request, max_bytes: int, precheck: Callable[[Any], None] | None = None) -> Any:
    """The decoded body; 413 past ``max_bytes``, 400 when it does not parse. ``precheck`` sees the decoded
    body before the walk over all of it (``bounds.check``) and its validation: a refusal it can make from a
    few fields costs nothing in proportion to the rest."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > max_bytes:
        raise PayloadTooLarge(f"request body is {int(declared)} bytes; the limit is {max_bytes}")
    raw = bytearray()  # each chunk copied in as it arrives: no join of a large body after its last chunk
    async for chunk in request.stream():
        if len(raw) + len(chunk) > max_bytes:
            raise PayloadTooLarge(f"request body exceeds the limit of {max_bytes} bytes")
        raw += chunk
    if not raw:
        raise InvalidInput("request body is empty; send a JSON (or msgpack) object")
    content_type = request.headers.get(h.CONTENT_TYPE)
    prechecked = precheck is not None and len(raw) > LAZY_PRECHECK_BYTES and _lazily(precheck, raw, content_type)
    body = codec.decode(content_type, raw)
    if precheck is not None and not prechecked and isinstance(body, Mapping):
        precheck(body)
    bounds.check(body)
    return body


def _lazily(precheck: Callable[[Any], None], raw: bytearray, content_type: str | None) -> bool:
    """The precheck on a large JSON body's fields decoded as it reads them; False when the body cannot be read so
    (msgpack, or JSON this reader cannot split: the full decode then says what is wrong)."""
    if codec.is_msgpack(content_type):
        return False
    fields = lazy_json.fields(raw)
    if fields is None:
        return False
    try:
        precheck(fields)
    except msgspec.DecodeError:
        return False
    return True


def describe_validation(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        where = ".".join(str(p) for p in err["loc"]) or "body"
        parts.append(f"{where}: {err['msg']}")
    more = len(exc.errors()) - 5
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


def validate(model: type[M], body: Any) -> M:
    if not isinstance(body, Mapping):
        raise InvalidInput(f"request body must be an object, got {type(body).__name__}")
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        raise InvalidInput(f"invalid request: {describe_validation(exc)}") from None


async def parse(request: Request, model: type[M], max_bytes: int, precheck: Callable[[Any], None] | None = None) -> M:
    return validate(model, await read_body(request, max_bytes, precheck))


def wants_msgpack(request: Request) -> bool:
    return codec.is_msgpack(request.headers.get(h.ACCEPT))


def render(
    request: Request, answer: BaseModel | Mapping[str, Any], status: int = 200, headers: Mapping[str, str] | None = None
) -> Response:
    """An answer as msgpack when the client accepts it, else JSON."""
    if wants_msgpack(request):
        return Response(codec.pack(dump(answer)), status_code=status, media_type=codec.MSGPACK, headers=headers)
    return json_response(answer, status, headers)


def json_response(
    answer: BaseModel | Mapping[str, Any], status: int = 200, headers: Mapping[str, str] | None = None
) -> Response:
    return Response(codec.dumps_json(dump(answer)), status_code=status, media_type=codec.JSON, headers=headers)


def dump(answer: BaseModel | Mapping[str, Any]) -> Any:
    return answer.model_dump() if isinstance(answer, BaseModel) else answer
