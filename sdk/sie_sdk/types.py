"""The shapes the SDK accepts and returns, as TypedDicts (plain dicts at run time)."""

from __future__ import annotations

import os
from typing import Any, Literal, TypeAlias, TypedDict

import numpy as np
import numpy.typing as npt

Priority: TypeAlias = Literal["interactive", "batch"]
Truncation: TypeAlias = Literal["end", "error", "chunk"]
Wire: TypeAlias = Literal["msgpack", "json"]

# An image in an Item: raw encoded bytes, a file path, a PIL image (when PIL is installed),
# or an already encoded ``{"data": bytes, "format": "png" | "jpeg"}``.
ImageInput: TypeAlias = bytes | str | os.PathLike[str] | Any

Array: TypeAlias = npt.NDArray[np.generic]


class Item(TypedDict, total=False):
    """One input: text, images, or both. ``id`` is echoed back in results."""

    id: str
    text: str
    images: list[ImageInput]
    metadata: dict[str, Any]
    #: encode only, late chunking: ``[start, end)`` character spans of ``text``, one vector each
    spans: list[tuple[int, int]]


class Message(TypedDict):
    """One chat turn for ``generate(messages=...)``."""

    role: str
    content: str


class Timing(TypedDict, total=False):
    total_ms: float
    queue_ms: float
    tokenization_ms: float
    inference_ms: float


class SparseVector(TypedDict):
    indices: Array
    values: Array


class EncodeResult(TypedDict, total=False):
    """One encoded item; only the outputs the server returned are present.

    ``dense`` has shape ``(dims,)``; ``multivector`` has shape ``(num_tokens, token_dims)``; ``muvera``
    (output type ``muvera`` of a multivector model) is one fixed-size vector ``(dims,)`` for a plain
    vector index; ``chunks`` (late chunking) holds one dense vector per requested span.
    """

    id: str
    dense: Array
    sparse: SparseVector
    multivector: Array
    muvera: Array
    chunks: list[SpanChunk]
    timing: Timing
    model: str


class SpanChunk(TypedDict):
    """Late chunking: one requested span of the item's text and its dense vector."""

    start: int
    end: int
    dense: Array


class ScoreEntry(TypedDict):
    item_id: str
    score: float
    rank: int


class ScoreResult(TypedDict):
    """Scores sorted best first (``rank`` 0 is best)."""

    model: str
    query_id: str | None
    scores: list[ScoreEntry]


class Entity(TypedDict, total=False):
    text: str
    label: str
    score: float
    start: int
    end: int
    bbox: list[float] | None


class ExtractResult(TypedDict, total=False):
    id: str
    entities: list[Entity]
    model: str


class Usage(TypedDict, total=False):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class GenerateResult(TypedDict, total=False):
    model: str
    text: str
    finish_reason: str | None
    usage: Usage


class GenerateChunk(TypedDict, total=False):
    """One server-sent event of a streaming ``generate``; ``text`` is the new delta."""

    model: str
    text: str
    finish_reason: str | None
    usage: Usage


class ModelInfo(TypedDict, total=False):
    """What the server reports about a model; servers may add keys."""

    id: str
    name: str
    tasks: list[str]
    dims: dict[str, int] | int | None
    state: str
    loaded: bool
    resident_bytes: int | None
    weights_source: str | None
    last_error: str | None
