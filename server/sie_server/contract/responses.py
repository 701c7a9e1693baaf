"""Wire models of every answer to the native routes (errors, encode, score, extract, generate): the routes build
them, the gateway reads workers' answers into them and merges them, and the OpenAPI spec documents them. What a
server says of its models, memory and readiness is in ``contract/state_wire.py``; the bases (``Array``,
``KeepNone``, ``Sparse``) in ``contract/wire.py``.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from sie_server.contract.wire import Array, KeepNone, ShownSparse, Sparse


class ErrorDetail(KeepNone):
    code: str
    message: str


class OpenAIErrorDetail(KeepNone):
    message: str
    type: str
    param: str | None = None
    code: str


class ErrorEnvelope(Sparse):
    """Every error answer outside the OpenAI routes (and ``X-SIE-Error-Code: <code>``); on
    ``/v1/models...``, which OpenAI's clients also call, OpenAI's ``error`` beside it."""

    detail: ErrorDetail
    error: OpenAIErrorDetail | None = None


class OpenAIErrorEnvelope(KeepNone):
    """Error answers on ``/v1/embeddings``, ``/v1/chat/completions`` and ``/v1/completions``."""

    error: OpenAIErrorDetail


class Timing(KeepNone):
    total_ms: float
    queue_ms: float
    tokenization_ms: float
    inference_ms: float


class CachedTiming(Timing):
    """An encode or score answer's timing: ``cache_hits`` items came from the exact result cache
    (``X-SIE-Cache``, ``--encode-cache``) instead of a forward pass."""

    cache_hits: int = 0


class PromptUsage(KeepNone):
    prompt_tokens: int


class Dense(KeepNone):
    dims: int
    dtype: str
    values: Array


class SparseVector(KeepNone):
    dims: int
    dtype: str
    indices: Array
    values: Array


class Multivector(KeepNone):
    token_dims: int
    num_tokens: int
    dtype: str
    values: Array


class SpanVector(KeepNone):
    """Late chunking: one requested ``[start, end)`` character span of the item and its vector."""

    start: int
    end: int
    dense: Dense


class EncodedItem(ShownSparse):
    id: str
    dense: Dense | None = None
    sparse: SparseVector | None = None
    multivector: Multivector | None = None
    muvera: Dense | None = None  # MUVERA: a fixed-size dense vector from the multivector (engine/muvera.py)
    chunks: list[SpanVector] | None = None


class EncodeResponse(KeepNone):
    model: str
    items: list[EncodedItem]
    timing: CachedTiming
    usage: PromptUsage
    truncated_items: list[str]


class ItemScore(KeepNone):
    item_id: str
    score: float
    rank: int


class ScoreResponse(KeepNone):
    model: str
    query_id: str
    scores: list[ItemScore]
    timing: CachedTiming
    usage: PromptUsage
    truncated_items: list[str]


BBOX_DOC = (
    "[x, y, w, h] in integer pixels: x, y the top-left corner (0, 0 is the top-left pixel), w, h the width "
    "and height, rounded outwards. Of the image it was found in; for a document page, of the page at 72 dpi "
    "(PDF points), as data.pages gives each page's size. Null for text input and layout-free formats."
)


class Entity(KeepNone):
    text: str
    label: str
    score: float
    start: int | None = Field(description="character offset into the item's text; null for image and page input")
    end: int | None = Field(description="character offset just past the entity; null for image and page input")
    bbox: list[int] | None = Field(default=None, description=BBOX_DOC)
    page: int | None = Field(
        default=None, description="1-based page of the document, or 1-based image of the item, it was found in"
    )


class Relation(KeepNone):
    head: str
    tail: str
    relation: str
    score: float


class Classification(KeepNone):
    label: str
    score: float


class DetectedObject(KeepNone):
    label: str
    score: float
    bbox: list[int] = Field(description=BBOX_DOC)
    page: int | None = Field(default=None, description="1-based page, or image of the item, it was found in")


class ItemError(KeepNone):
    code: str
    message: str


class SchemaSpan(KeepNone):
    """A value GLiNER2 found: a span of the item's text (``start``/``end``: character offsets), or for a
    structure field with ``choices`` the chosen value (``start``/``end`` null)."""

    text: str
    score: float
    start: int | None
    end: int | None


class SchemaLabel(KeepNone):
    label: str
    score: float


class SchemaRelation(KeepNone):
    head: SchemaSpan
    tail: SchemaSpan


class SchemaResult(KeepNone):
    """One item's answer to ``params.schema``, keyed by the schema's own names: each entity type's spans,
    each classification's labels (one unless multi_label), each structure's instances (field -> values;
    a ``str`` field has at most one) and each relation type's (head, tail) pairs."""

    entities: dict[str, list[SchemaSpan]]
    classifications: dict[str, list[SchemaLabel]]
    structures: dict[str, list[dict[str, list[SchemaSpan]]]]
    relations: dict[str, list[SchemaRelation]]


class ExtractedItem(Sparse):
    """One item's answer: every list is always present (empty when unused); ``error`` only when this
    item failed (its neighbours are answered)."""

    id: str
    entities: list[Entity]
    relations: list[Relation] = Field(default_factory=list)
    classifications: list[Classification] = Field(default_factory=list)
    objects: list[DetectedObject] = Field(default_factory=list)
    data: dict[str, Any] = Field(
        default_factory=dict,
        description="documents: markdown, text, pages (each page's size); OCR: text in reading order, pages; "
        "captions: caption; GLiNER2 schemas: structures and classifications by name",
    )
    error: ItemError | None = None
    #: only for a request with params.schema (absent otherwise); its parts are also in relations,
    #: classifications and data: an alias kept for one release
    schema_result: SchemaResult | None = Field(
        default=None,
        description="deprecated alias (one release): the same answer is in relations, classifications, data",
    )


class ExtractResponse(KeepNone):
    model: str
    items: list[ExtractedItem]
    timing: Timing


class Usage(KeepNone):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class GenerateResponse(KeepNone):
    model: str
    text: str
    finish_reason: str | None
    usage: Usage


class GenerateChunk(Sparse):
    """One server-sent event of a streamed ``/v1/generate``; the last carries ``usage`` and ``done``."""

    model: str
    text: str
    text_delta: str | None = Field(default=None, description="the same as text: sie-sdk 0.10.1's name for it")
    done: bool | None = Field(default=None, description="true on the last event (sie-sdk 0.10.1 reads it)")
    finish_reason: str | None = None
    usage: Usage | None = None
    tool_format: str | None = Field(
        default=None, description="the last event, when tools were offered: the tool format the text is in"
    )
