"""Turning decoded response bodies into result dicts (no I/O).

msgpack answers already carry numpy arrays; JSON answers carry lists, converted here with
the sibling ``dtype`` field so that results look the same whichever wire carried them.
"""

from __future__ import annotations

import json
from typing import Any, cast

import numpy as np

from .errors import ProtocolError, SIEConnectionError, api_error
from .types import (
    Array,
    EncodeResult,
    ExtractResult,
    GenerateChunk,
    GenerateResult,
    ModelInfo,
    SchemaLabel,
    SchemaRelation,
    SchemaResult,
    SchemaSpan,
    ScoreResult,
    SparseVector,
)

# Wire dtype names the server may use for which numpy has no (or a different) spelling.
_DTYPE_ALIASES: dict[str, type[np.generic]] = {
    "bfloat16": np.float32,  # numpy has no bfloat16: such values travel widened
    "binary": np.uint8,  # packed bits
    "ubinary": np.uint8,
}
_SPARSE_INDEX_DTYPE = np.int64


def parse_encode(body: Any) -> list[EncodeResult]:
    answer = _expect_dict(body, "encode")
    model, timing = answer.get("model"), answer.get("timing")
    results: list[EncodeResult] = []
    for raw in _expect_items(answer, "encode"):
        result: EncodeResult = {}
        if raw.get("id") is not None:
            result["id"] = raw["id"]
        if raw.get("dense") is not None:
            result["dense"] = _dense(raw["dense"])
        if raw.get("sparse") is not None:
            result["sparse"] = _sparse(raw["sparse"])
        if raw.get("multivector") is not None:
            result["multivector"] = _multivector(raw["multivector"])
        if raw.get("muvera") is not None:  # shaped like dense: {dims, dtype, values}
            result["muvera"] = _dense(raw["muvera"])
        if raw.get("chunks") is not None:
            result["chunks"] = [
                {"start": int(c["start"]), "end": int(c["end"]), "dense": _dense(c["dense"])} for c in raw["chunks"]
            ]
        if timing is not None:
            result["timing"] = timing
        if model is not None:
            result["model"] = model
        results.append(result)
    return results


def parse_score(body: Any) -> ScoreResult:
    answer = _expect_dict(body, "score")
    scores = answer.get("scores")
    if not isinstance(scores, list):
        raise ProtocolError("score answer has no 'scores' list")
    return {"model": answer.get("model", ""), "query_id": answer.get("query_id"), "scores": scores}


def parse_extract(body: Any) -> list[ExtractResult]:
    answer = _expect_dict(body, "extract")
    model = answer.get("model")
    results: list[ExtractResult] = []
    for raw in _expect_items(answer, "extract"):
        result = cast(
            ExtractResult, {"entities": [], "relations": [], "classifications": [], "objects": [], "data": {}, **raw}
        )
        schema_result = raw.get("schema_result")
        result["schema_result"] = None if schema_result is None else _schema_result(schema_result)
        if model is not None:
            result["model"] = model
        results.append(result)
    return results


def _schema_result(raw: Any) -> SchemaResult:
    """``items[].schema_result``; a part the server left out is empty."""
    out = _expect_dict(raw, "schema_result")

    def part(name: str) -> dict[str, list[Any]]:
        return _named_lists(out.get(name, {}), f"schema_result.{name}")

    return {
        "entities": {name: [_schema_span(v) for v in values] for name, values in part("entities").items()},
        "classifications": {
            name: [_schema_label(v) for v in values] for name, values in part("classifications").items()
        },
        "structures": {
            name: [_schema_instance(instance, name) for instance in instances]
            for name, instances in part("structures").items()
        },
        "relations": {name: [_schema_relation(v) for v in values] for name, values in part("relations").items()},
    }


def _named_lists(value: Any, what: str) -> dict[str, list[Any]]:
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, list) for k, v in value.items()):
        raise ProtocolError(f"{what} is not a map of names to lists")
    return value


def _schema_instance(raw: Any, name: str) -> dict[str, list[SchemaSpan]]:
    fields = _named_lists(raw, f"schema_result.structures.{name}[]")
    return {field: [_schema_span(v) for v in values] for field, values in fields.items()}


def _schema_span(raw: Any) -> SchemaSpan:
    out = _expect_dict(raw, "schema_result value")
    start, end = out.get("start"), out.get("end")
    return {
        "text": str(out.get("text", "")),
        "score": float(out.get("score", 0.0)),
        "start": None if start is None else int(start),
        "end": None if end is None else int(end),
    }


def _schema_label(raw: Any) -> SchemaLabel:
    out = _expect_dict(raw, "schema_result label")
    return {"label": str(out.get("label", "")), "score": float(out.get("score", 0.0))}


def _schema_relation(raw: Any) -> SchemaRelation:
    out = _expect_dict(raw, "schema_result relation")
    return {"head": _schema_span(out.get("head")), "tail": _schema_span(out.get("tail"))}


def parse_generate(body: Any) -> GenerateResult:
    return cast(GenerateResult, _expect_dict(body, "generate"))


def parse_chat(body: Any) -> dict[str, Any]:
    return _expect_dict(body, "chat completion")


def parse_model_list(body: Any) -> list[ModelInfo]:
    models = _expect_dict(body, "models").get("models")
    if not isinstance(models, list):
        raise ProtocolError("models answer has no 'models' list")
    return models


def parse_model(body: Any) -> ModelInfo:
    return cast(ModelInfo, _expect_dict(body, "model"))


class SSEDecoder:
    """Reads ``data: {json}`` lines of a streaming answer until ``data: [DONE]``.

    Each ``data:`` line is one chunk (the server never splits JSON over lines). A chunk
    shaped like the error envelope (``{"detail": {"code", "message"}}``) raises its error.
    """

    def __init__(self) -> None:
        self.done = False

    def feed(self, line: str) -> GenerateChunk | None:
        if self.done or not line.startswith("data:"):
            return None  # blank separators, comments, event/id/retry fields
        data = line[5:].strip()
        if data == "[DONE]":
            self.done = True
            return None
        if not data:
            return None
        try:
            chunk = json.loads(data)
        except ValueError as exc:
            raise ProtocolError(f"bad server-sent event data: {data[:200]!r}") from exc
        if not isinstance(chunk, dict):
            raise ProtocolError(f"server-sent event is not an object: {data[:200]!r}")
        detail = chunk.get("detail")
        if isinstance(detail, dict) and "code" in detail:
            raise api_error(None, str(detail["code"]), str(detail.get("message", "")))
        return cast(GenerateChunk, chunk)

    def finish(self) -> None:
        """Called at end of stream: a stream that stopped before ``[DONE]`` was cut off."""
        if not self.done:
            raise SIEConnectionError("the generate stream ended before [DONE]")


def numpy_dtype(name: Any) -> np.dtype[Any]:
    """The numpy dtype for a wire dtype name (float32 when absent or unknown)."""
    if not isinstance(name, str) or not name:
        return np.dtype(np.float32)
    if name in _DTYPE_ALIASES:
        return np.dtype(_DTYPE_ALIASES[name])
    try:
        dtype = np.dtype(name)
    except (TypeError, ValueError):
        return np.dtype(np.float32)
    return dtype if dtype.kind in "biuf" else np.dtype(np.float32)


def _as_array(values: Any, dtype_name: Any) -> Array:
    if isinstance(values, np.ndarray):
        return values
    return np.asarray(values, dtype=numpy_dtype(dtype_name))


def _dense(raw: Any) -> Array:
    if isinstance(raw, np.ndarray | list):  # a bare vector
        return _as_array(raw, None).reshape(-1)
    out = _expect_dict(raw, "dense")
    return _as_array(out.get("values"), out.get("dtype")).reshape(-1)


def _sparse(raw: Any) -> SparseVector:
    out = _expect_dict(raw, "sparse")
    indices = out.get("indices")
    index_array = np.asarray(indices if indices is not None else [], dtype=_SPARSE_INDEX_DTYPE)
    return {
        "indices": index_array.reshape(-1),
        "values": _as_array(out.get("values"), out.get("dtype")).reshape(-1),
    }


def _multivector(raw: Any) -> Array:
    out = _expect_dict(raw, "multivector")
    values = _as_array(out.get("values"), out.get("dtype"))
    token_dims = out.get("token_dims")
    if values.ndim != 2 and isinstance(token_dims, int) and token_dims > 0:
        values = values.reshape(-1, token_dims)
    return values


def _expect_dict(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ProtocolError(f"{what} answer is not an object: {type(value).__name__}")
    return value


def _expect_items(answer: dict[str, Any], what: str) -> list[dict[str, Any]]:
    items = answer.get("items")
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise ProtocolError(f"{what} answer has no 'items' list of objects")
    return items
