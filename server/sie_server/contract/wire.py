"""What every wire model is built from: ``Array`` for vectors (numpy arrays: msgpack carries them as
msgpack-numpy maps, JSON as lists) and the bases that say what becomes of ``None`` fields: ``KeepNone`` keeps
them, ``Sparse`` leaves them out of an answer, ``ShownSparse`` leaves them out and shows its fields in the
OpenAPI spec."""

from __future__ import annotations

from typing import Annotated, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, PlainValidator, SerializerFunctionWrapHandler, model_serializer
from pydantic.json_schema import WithJsonSchema


def _array(value: Any) -> np.ndarray:
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, list):
        return np.asarray(value)
    raise ValueError("expected an array of numbers")


Array = Annotated[Any, PlainValidator(_array), WithJsonSchema({"type": "array", "items": {"type": "number"}})]


class KeepNone(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Sparse(KeepNone):
    @model_serializer(mode="wrap")
    def _drop_none(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        dumped: dict[str, Any] = handler(self)
        return {k: v for k, v in dumped.items() if v is not None}


class ShownSparse(KeepNone):
    """A ``Sparse`` model whose fields the OpenAPI spec shows: its serializer has no return
    annotation, so pydantic documents the model's fields (annotated, a ``Sparse`` model's answer
    schema is a bare "object"; the streamed chunks keep that, as the spec's event schema needs)."""

    @model_serializer(mode="wrap")
    def _drop_none(self, handler: SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]
        dumped: dict[str, Any] = handler(self)
        return {k: v for k, v in dumped.items() if v is not None}
