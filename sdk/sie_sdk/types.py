"""The shapes the SDK accepts and returns, as TypedDicts (plain dicts at run time)."""

from __future__ import annotations

import os
from typing import Any, Literal, NotRequired, TypeAlias, TypedDict

import numpy as np
import numpy.typing as npt

Priority: TypeAlias = Literal["interactive", "batch"]
Truncation: TypeAlias = Literal["end", "error", "chunk"]
Wire: TypeAlias = Literal["msgpack", "json"]

# An image in an Item: raw encoded bytes, a file path, a PIL image (when PIL is installed),
# or an already encoded ``{"data": bytes, "format": "png" | "jpeg"}``.
ImageInput: TypeAlias = bytes | str | os.PathLike[str] | Any

Array: TypeAlias = npt.NDArray[np.generic]


class DocumentInput(TypedDict, total=False):
    """A whole document: its bytes and a format hint (pdf, docx, pptx, xlsx, html, md); the server sniffs
    the bytes. An Item's ``document`` may also be raw bytes or a file path (the SDK reads it)."""

    data: bytes
    format: str


class AudioInput(TypedDict, total=False):
    """Audio: its bytes, a format hint (wav, flac, mp3, ogg; ``pcm`` for raw 16-bit mono) and, for raw
    ``pcm``, its sample rate; the server sniffs the bytes."""

    data: bytes
    format: str
    sample_rate: int


class Item(TypedDict, total=False):
    """One input: text, images, or both; or a whole document (``from_file`` makes one from a path).
    ``id`` is echoed back in results."""

    id: str
    text: str
    images: list[ImageInput]
    document: DocumentInput | bytes | str | os.PathLike[str]
    audio: AudioInput
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
    cache_hits: int  # encode and score: items the server's result cache answered


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
    """A span of the item's text (``start``/``end`` character offsets), or text read in an image or page
    (``bbox`` ``[x, y, w, h]`` integer pixels, top-left origin; ``page`` 1-based; offsets None)."""

    text: str
    label: str
    score: float
    start: int | None
    end: int | None
    bbox: list[int] | None
    page: int | None


class Relation(TypedDict):
    head: str
    tail: str
    relation: str
    score: float


class Classification(TypedDict):
    label: str
    score: float


class DetectedObject(TypedDict, total=False):
    """Something a detector found: ``bbox`` ``[x, y, w, h]`` in integer pixels, ``page`` 1-based."""

    label: str
    score: float
    bbox: list[int]
    page: int | None


class ItemError(TypedDict):
    """Why this item failed (its neighbours were answered): an error code and a message."""

    code: str
    message: str


class SchemaField(TypedDict, total=False):
    """One field of a structure in ``extract(schema=...)``. ``dtype`` "list" (the default): every value
    found; "str": the best one. With ``choices`` the field is classified among those values."""

    dtype: Literal["str", "list"]
    description: str
    choices: list[str]


class SchemaClassification(TypedDict):
    """A classification of the whole text among ``labels`` (at least two); ``multi_label``: any number."""

    labels: list[str]
    multi_label: NotRequired[bool]


class ExtractSchema(TypedDict, total=False):
    """GLiNER2 schema extraction (``extract(schema=...)``, sent as ``params.schema``): entity types,
    classifications and structures (records of named fields) by name, and relation types. Set at
    least one; a classification and a structure may not share a name."""

    entities: list[str]
    classifications: dict[str, SchemaClassification]
    structures: dict[str, dict[str, SchemaField]]
    relations: list[str]


class SchemaSpan(TypedDict):
    """A value GLiNER2 found: ``text[start:end]`` of the item, or for a structure field with
    ``choices`` the chosen value (``start`` and ``end`` None)."""

    text: str
    score: float
    start: int | None
    end: int | None


class SchemaLabel(TypedDict):
    label: str
    score: float


class SchemaRelation(TypedDict):
    head: SchemaSpan
    tail: SchemaSpan


class SchemaResult(TypedDict):
    """One item's answer to a schema, keyed by the schema's own names: each entity type's spans, each
    classification's labels (one unless multi_label), each structure's instances (field -> values; a
    "str" field has at most one) and each relation type's (head, tail) pairs."""

    entities: dict[str, list[SchemaSpan]]
    classifications: dict[str, list[SchemaLabel]]
    structures: dict[str, list[dict[str, list[SchemaSpan]]]]
    relations: dict[str, list[SchemaRelation]]


class ExtractResult(TypedDict, total=False):
    """One item's answer: every list is present (empty when unused); ``data`` holds a document's
    ``markdown``/``text``/``pages``, OCR text, captions; ``error`` is set when this item alone failed.
    ``schema_result`` answers ``extract(schema=...)`` (None for ``labels=``; its parts are also in
    ``relations``, ``classifications`` and ``data``)."""

    id: str
    entities: list[Entity]
    relations: list[Relation]
    classifications: list[Classification]
    objects: list[DetectedObject]
    data: dict[str, Any]
    error: ItemError
    schema_result: SchemaResult | None
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
