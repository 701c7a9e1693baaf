"""What the OpenAPI spec says of each route: its request body, its answers, its errors.

The routes read their bodies themselves (JSON or msgpack), so FastAPI would document none;
``doc()`` describes them, and ``install()`` puts the body models in the spec's components and
drops the 422 FastAPI adds, which this server never sends (a bad request is a 400).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from sie_server.contract.responses import ErrorEnvelope, OpenAIErrorEnvelope
from sie_server.errors import ERROR_STATUS

REF = "#/components/schemas/{model}"
MODEL_ID = (
    "A catalog model id, e.g. `BAAI/bge-m3`. Ids contain a slash: send it as it is, not escaped "
    "(the route takes the rest of the path)."
)
KEY_ERRORS = (401, 403)  # with API keys set (api/keys.py)
PER_KEY_LIMIT = 429  # with --max-queued-per-key (api/quota.py)
ACCESS_NOTES = {
    401: "the server requires `Authorization: Bearer <API key>` and none was sent",
    403: "the key is not accepted (management routes take an admin key when one is set)",
    429: "this key has `--max-queued-per-key` items in flight; `Retry-After` says when to try again",
}
NDJSON = "application/x-ndjson"  # Ollama's streamed answers (api/routes/ollama_chat.py)
_documented: dict[str, tuple[type[BaseModel], str]] = {}  # schema name -> (model, json schema mode)


def _ref(model: type[BaseModel], mode: str) -> dict[str, str]:
    """The spec's reference to ``model``; a second model of the same name is refused (one would shadow the
    other in the spec's components: a TEI and a Cohere rerank body were once both ``RerankRequest``)."""
    held = _documented.get(model.__name__)
    if held is not None and held[0] is not model:
        raise TypeError(f"two documented models are named {model.__name__}: {held[0].__module__}, {model.__module__}")
    _documented[model.__name__] = (model, mode)
    return {"$ref": REF.format(model=model.__name__)}


def _codes(status: int) -> str:
    codes = [code.value for code, s in ERROR_STATUS.items() if s == status]
    return ", ".join(codes) if codes else "INVALID_INPUT"


def _answer(answer: type[BaseModel] | tuple[type[BaseModel], ...]) -> dict[str, Any]:
    if isinstance(answer, tuple):  # one of several shapes (a server's and a gateway's)
        return {"anyOf": [_ref(model, "serialization") for model in answer]}
    return _ref(answer, "serialization")


def doc(
    answer: type[BaseModel] | tuple[type[BaseModel], ...] | None = None,
    *,
    body: type[BaseModel] | None = None,
    errors: tuple[int, ...] = (400, 404, 413, 502, 503, 504),
    stream: type[BaseModel] | None = None,
    openai: bool = False,
    msgpack: bool = True,
    codes: dict[int, str] | None = None,
    error_model: type[BaseModel] | None = None,
    ndjson: bool = False,
) -> dict[str, Any]:
    """Keyword arguments for a route decorator that document it; ``codes`` names a status's error
    codes where they are not those ``ERROR_STATUS`` gives it; ``error_model`` is the error shape where
    it is neither SIE's nor OpenAI's; ``ndjson``: the stream is JSON lines, not server-sent events."""
    responses: dict[int | str, dict[str, Any]] = {}
    if answer is not None:
        content: dict[str, Any] = {"application/json": {"schema": _answer(answer)}}
        if msgpack:
            content["application/msgpack"] = {"schema": _answer(answer)}
        if stream is not None:
            content[NDJSON if ndjson else "text/event-stream"] = {"schema": _ref(stream, "serialization")}
        streamed = (
            "; streamed (`stream: true`): one JSON object a line, the last with `done: true`"
            if ndjson
            else "; with `stream: true`, server-sent events (`data: <chunk>`), the last followed by `data: [DONE]`"
        )
        description = "the answer" + (streamed if stream is not None else "")
        responses[200] = {"description": description, "content": content}
    envelope = error_model or (OpenAIErrorEnvelope if openai else ErrorEnvelope)
    access = (*KEY_ERRORS, *((PER_KEY_LIMIT,) if body is not None else ()))  # work routes have a body
    for status in (*errors, *access, 500):
        when = f"; {ACCESS_NOTES[status]}" if status in ACCESS_NOTES else ""
        responses[status] = {
            "description": f"error codes: {(codes or {}).get(status) or _codes(status)} "
            f"(also in the `X-SIE-Error-Code` header){when}",
            "content": {"application/json": {"schema": _ref(envelope, "serialization")}},
        }
    extra: dict[str, Any] = {}
    if body is not None:
        schema = _ref(body, "validation")
        types = ("application/json", "application/msgpack") if msgpack else ("application/json",)
        extra["requestBody"] = {"required": True, "content": {t: {"schema": schema} for t in types}}
    return {"responses": responses, "openapi_extra": extra}


def text_doc(description: str, media_type: str = "text/plain") -> dict[str, Any]:
    return {"responses": {200: {"description": description, "content": {media_type: {"schema": {"type": "string"}}}}}}


def install(app: FastAPI) -> None:
    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        spec = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
        for methods in spec.get("paths", {}).values():
            for operation in methods.values():
                operation.get("responses", {}).pop("422", None)
        schemas = spec.setdefault("components", {}).setdefault("schemas", {})
        for name in ("HTTPValidationError", "ValidationError"):
            schemas.pop(name, None)
        pairs = [(model, mode) for model, mode in _documented.values()]
        _, defs = models_json_schema(pairs, ref_template=REF)  # type: ignore[arg-type]
        schemas.update(defs.get("$defs", {}))
        app.openapi_schema = spec
        return spec

    app.openapi = openapi  # type: ignore[method-assign]
