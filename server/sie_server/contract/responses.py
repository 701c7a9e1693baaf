"""Wire models of every answer: the routes build them, the gateway reads workers' answers into
them and merges them, and the OpenAPI spec documents them.

Vectors are numpy arrays (``Array``): msgpack carries them as msgpack-numpy maps, JSON as lists.
Fields that are ``None`` are left out of an answer (``Sparse``), except where the model says
``None`` means something (``KeepNone``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    SerializeAsAny,
    SerializerFunctionWrapHandler,
    model_serializer,
)
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


# Models, memory, readiness


class GateTrial(KeepNone):
    precision: str
    outcome: str
    detail: str | None = None
    min_cosine: float | None = None
    mean_cosine: float | None = None
    threshold: float | None = None
    top1_agreement: float | None = None
    kl: float | None = None
    speedup: float | None = None


class Precision(KeepNone):
    running: str | None
    allowed: list[str]
    reason: str | None
    gate: list[GateTrial]


class LoadProgress(BaseModel):
    """Where a load in progress is: its stage (resolving weights, planning memory, reading weights,
    warming up), seconds since the load and the stage began, and the stage's fraction where known."""

    model_config = ConfigDict(extra="forbid")
    stage: str
    detail: str | None = None
    elapsed_s: float
    stage_elapsed_s: float
    fraction: float | None = None


def owner(model_id: str) -> str:
    """OpenAI's ``owned_by`` for a model id: its organisation (``BAAI`` of ``BAAI/bge-small-en-v1.5``), else sie."""
    return model_id.split("/", 1)[0] if "/" in model_id else "sie"


class ModelInfo(BaseModel):
    """A model's catalog facts and its live state where it is served; with OpenAI's Model fields (``object``,
    ``created``, ``owned_by``) as ``GET /v1/models/{model}`` is the openai clients' ``models.retrieve`` too."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())
    id: str
    object: Literal["model"] = "model"
    created: int = 0
    owned_by: str = "sie"
    name: str
    adapter: str
    tasks: list[str]
    inputs: list[str]
    outputs: list[str]
    dims: dict[str, int]
    score_mode: str | None
    max_sequence_length: int | None
    revision: str | None
    state: str
    loaded: bool
    resident_bytes: int
    charge_bytes: int
    pinned: bool
    weights_source: str | None
    available_offline: bool
    last_error: str | None
    load_seconds: float | None
    precision: Precision
    profile: dict[str, Any] | None = None
    backend: str | None = None
    load_progress: LoadProgress | None = Field(default=None, description="while state is loading: how far it is")


class GatewayModelInfo(ModelInfo):
    """What a gateway says of a model: the most useful worker report, and where it runs."""

    pool: str
    workers: int
    loaded_on: int


class OpenAIModel(KeepNone):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str


class ModelList(Sparse):
    """OpenAI's list shape (``object``, ``data``) beside SIE's (``models``, ``cpu``)."""

    object: Literal["list"] = "list"
    data: list[OpenAIModel]
    models: list[SerializeAsAny[ModelInfo]]
    cpu: dict[str, Any] | None = None


class ModelMemory(KeepNone):
    id: str
    state: str
    charge_bytes: int
    resident_bytes: int
    reserve_bytes: int
    pinned: bool


class MemoryReport(KeepNone):
    """``used_bytes`` = ``charged_bytes`` (the models' charges) + ``untracked_bytes`` (what the process
    holds beyond its start, ``runtime_bytes``, and the charges); ``process_bytes``: its holding now
    (resident set on CPU, the CUDA allocator's reservation on a GPU)."""

    device: str
    budget_bytes: int
    used_bytes: int
    free_bytes: int
    charged_bytes: int
    untracked_bytes: int
    process_bytes: int
    runtime_bytes: int
    models: list[ModelMemory]
    cache_bytes: int = 0  # the result cache's part of charged_bytes


class ModelProblem(KeepNone):
    """Why a model cannot serve now (``/readyz``, ``engine/model_health.py``): ``load_failed`` (its last load
    failed), ``stalled`` (a batch of it has run past ``--stall-after-s``), ``stopped`` (the batch loop ended;
    named ``*``, every model). ``required``: pinned or preloaded, so its problem makes ``/readyz`` 503."""

    problem: Literal["load_failed", "stalled", "stopped"]
    message: str
    required: bool


class Readiness(Sparse):
    # disconnected: a queue worker without NATS; failing: a required model failed to load, or a batch stalled
    status: Literal["ready", "starting", "draining", "disconnected", "failing"]
    queued_items: int | None = None
    inflight_requests: int | None = None
    preload_errors: dict[str, str] | None = None
    models: dict[str, ModelProblem] | None = None  # the models that cannot serve now, and why


class NoWorkerYet(KeepNone):
    """202 from a gateway asked not to wait (``X-SIE-Wait-For-Worker: false``) when its pool has no worker."""

    status: Literal["no worker yet"] = "no worker yet"
    pool: str
