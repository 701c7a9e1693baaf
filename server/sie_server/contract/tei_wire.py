"""Wire models of Hugging Face Text Embeddings Inference (TEI): its request bodies, answers and error
body, with TEI's field names (its ``docs/openapi.json``). ``api/routes/tei_serving.py`` translates them
onto the native encode, score and extract calls.

TEI ignores fields it does not know (clients such as ``huggingface_hub`` send a ``parameters``
object beside ``inputs``), so these models ignore them too; the fields they do read are typed
strictly. ``model`` is this server's own: TEI serves one model, this server many (see ``tei_serving.py``).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import ConfigDict, Field, PlainValidator, RootModel
from pydantic.json_schema import WithJsonSchema

from sie_server.contract.ignored import Compatible, list_ignored
from sie_server.contract.wire import Array, KeepNone, ShownSparse
from sie_server.errors import ErrorCode, InvalidInput, SIEError

#: the paths TEI's clients call (``POST /`` too: ``huggingface_hub``'s ``InferenceClient`` posts to the
#: server's URL itself; ``GET /`` stays the status page)
TEI_PATHS = frozenset(
    {"/embed", "/embed_sparse", "/embed_all", "/rerank", "/predict", "/similarity", "/tokenize", "/decode", "/info"}
)
ROOT = "/"
MODEL_FIELD = Field(
    default=None,
    description="this server's: the catalog model to use; else the `X-SIE-Model` header, else `--default-model`",
)


def is_tei_path(method: str, path: str) -> bool:
    return path in TEI_PATHS or (path == ROOT and method == "POST")


class ErrorType(StrEnum):
    """TEI's ``error_type`` values, as it writes them."""

    UNHEALTHY = "Unhealthy"
    BACKEND = "Backend"
    OVERLOADED = "Overloaded"
    VALIDATION = "Validation"
    TOKENIZER = "Tokenizer"
    EMPTY = "Empty"


class TeiError(KeepNone):
    """TEI's error body (with this server's code in ``X-SIE-Error-Code`` as on every route)."""

    error: str
    error_type: ErrorType


#: TEI's status and error type for each of this server's codes (TEI: Empty 400, Overloaded 429, Backend
#: 424, Unhealthy 503). A bad request is 400 here, where TEI answers 422 for a Validation error: on this
#: server a request it cannot serve is a 400 everywhere (and the spec documents no 422)
TEI_ERRORS: dict[ErrorCode, tuple[int, ErrorType]] = {
    ErrorCode.INVALID_INPUT: (400, ErrorType.VALIDATION),
    ErrorCode.MODEL_NOT_FOUND: (404, ErrorType.VALIDATION),
    ErrorCode.MODEL_LOADING: (503, ErrorType.UNHEALTHY),
    ErrorCode.MODEL_LOAD_FAILED: (424, ErrorType.BACKEND),
    ErrorCode.RESOURCE_EXHAUSTED: (429, ErrorType.OVERLOADED),
    ErrorCode.QUEUE_FULL: (429, ErrorType.OVERLOADED),
    ErrorCode.RATE_LIMITED: (429, ErrorType.OVERLOADED),
    ErrorCode.INFERENCE_ERROR: (424, ErrorType.BACKEND),
    ErrorCode.INVALID_OUTPUT: (424, ErrorType.BACKEND),
    ErrorCode.NON_FINITE_OUTPUT: (424, ErrorType.BACKEND),
    ErrorCode.DEADLINE_EXCEEDED: (504, ErrorType.BACKEND),
    ErrorCode.UNAUTHENTICATED: (401, ErrorType.VALIDATION),
    ErrorCode.FORBIDDEN: (403, ErrorType.VALIDATION),
    ErrorCode.NOT_FOUND: (404, ErrorType.VALIDATION),
}


class EmptyBatch(InvalidInput):
    """Nothing to work on: TEI's ``Empty`` (400)."""


def tei_error(exc: SIEError) -> tuple[int, TeiError]:
    """The status and body TEI's clients read for ``exc``. An invalid input with a status of its own
    (413, or 404 / 405 for a path or method not served) keeps it."""
    status, kind = TEI_ERRORS.get(exc.code, (exc.status, ErrorType.BACKEND))
    if exc.code is ErrorCode.INVALID_INPUT:
        status = exc.status
    return status, TeiError(error=exc.message, error_type=ErrorType.EMPTY if isinstance(exc, EmptyBatch) else kind)


class TeiWire(Compatible):
    model_config = ConfigDict(extra="ignore", strict=True, protected_namespaces=(), json_schema_extra=list_ignored)


TruncationDirection = Literal["Left", "Right", "left", "right"]
Texts = str | list[str]


class Truncating(TeiWire):
    truncate: bool | None = Field(
        default=None, description="cut a text past the model's limit (unset: cut, as with TEI's --auto-truncate)"
    )
    truncation_direction: TruncationDirection = Field(default="Right", description="only Right is served")
    model: str | None = MODEL_FIELD


class EmbedSparseRequest(Truncating):
    IGNORED = ("parameters",)  # huggingface_hub sends it beside inputs
    inputs: Texts
    prompt_name: str | None = Field(default=None, description="query, or document / passage: the text's role")


class EmbedAllRequest(EmbedSparseRequest):
    pass


class EmbedRequest(EmbedSparseRequest):
    normalize: bool = True
    dimensions: Annotated[int, Field(ge=1)] | None = None


class TeiRerankRequest(Truncating):
    query: str
    texts: list[str]
    raw_scores: bool = False
    return_text: bool = False


class PredictRequest(Truncating):
    IGNORED = ("parameters",)  # huggingface_hub sends it beside inputs
    inputs: str | list[str] | list[list[str]] = Field(
        description="a text, or a batch of one-text lists (`[[text], [text]]`); TEI's text pairs are not served"
    )
    raw_scores: bool = False


class SimilarityInput(TeiWire):
    source_sentence: str
    sentences: list[str]


class SimilarityParameters(TeiWire):
    prompt_name: str | None = None
    truncate: bool | None = None
    truncation_direction: TruncationDirection = "Right"


class SimilarityRequest(TeiWire):
    inputs: SimilarityInput
    parameters: SimilarityParameters | None = None
    model: str | None = MODEL_FIELD


class RootRequest(TeiWire):
    """``POST /``: what TEI does there for the model: sentence similarity when ``inputs`` is
    ``{source_sentence, sentences}``, else classification for a classifier, rerank for a reranker
    (with ``query`` and ``texts``), sparse embeddings for a sparse-only model, dense embeddings for
    the others; the rest of the body is that route's."""

    inputs: str | list[str] | list[list[str]] | SimilarityInput | None = None
    model: str | None = MODEL_FIELD


class SparseValue(KeepNone):
    index: int
    value: float


class Rank(ShownSparse):
    index: int
    score: float
    text: str | None = None


class Prediction(KeepNone):
    label: str
    score: float


class EmbedResponse(RootModel[list[Array]]):
    """One vector per input, in input order."""


class EmbedSparseResponse(RootModel[list[list[SparseValue]]]):
    """One list of non-zero ``{index, value}`` per input."""


def _matrix(value: Any) -> np.ndarray:
    if isinstance(value, np.ndarray) and value.ndim == 2:
        return value
    raise ValueError("expected a 2-d array of numbers")


#: one input's token vectors (rows x dims), a list of lists in JSON
Matrix = Annotated[
    Any,
    PlainValidator(_matrix),
    WithJsonSchema({"type": "array", "items": {"type": "array", "items": {"type": "number"}}}),
]


class EmbedAllResponse(RootModel[list[Matrix]]):
    """Per input, one vector per token (``[[[float]]]``)."""


class TeiRerankResponse(RootModel[list[Rank]]):
    """The texts best first: ``index`` into ``texts``; ``text`` with ``return_text``."""


class PredictResponse(RootModel[list[Prediction] | list[list[Prediction]]]):
    """A text's labels best first; a batch's, one list per text."""


class SimilarityResponse(RootModel[list[float]]):
    """Cosine similarity of each sentence to the source sentence."""


class EmbeddingModel(KeepNone):
    pooling: str


class ClassifierModel(KeepNone):
    id2label: dict[str, str]
    label2id: dict[str, int]


class EmbeddingType(KeepNone):
    embedding: EmbeddingModel


class ClassifierType(KeepNone):
    classifier: ClassifierModel


class RerankerType(KeepNone):
    reranker: ClassifierModel


class Info(KeepNone):
    """``GET /info``: TEI's fields for the chosen model and this server's limits."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())
    model_id: str
    model_sha: str | None
    model_dtype: str
    served_model_name: str
    model_type: EmbeddingType | ClassifierType | RerankerType
    max_concurrent_requests: int
    max_input_length: int
    max_batch_tokens: int
    max_batch_requests: int | None = None
    max_client_batch_size: int
    auto_truncate: bool
    tokenization_workers: int
    version: str
    sha: str | None = None
    docker_label: str | None = None


class TeiTokenizeRequest(TeiWire):
    IGNORED = ("parameters",)  # huggingface_hub sends it beside inputs
    inputs: Texts
    add_special_tokens: bool = True
    prompt_name: str | None = Field(
        default=None, description="query, or document / passage: the model's prefix for that role is prepended"
    )
    model: str | None = MODEL_FIELD


class SimpleToken(KeepNone):
    """TEI's token: ``start`` / ``stop`` are byte offsets into the (prompted) text, null for a special token,
    whose ``text`` is its own string."""

    id: int
    text: str
    special: bool
    start: int | None
    stop: int | None


class TeiTokenizeResponse(RootModel[list[list[SimpleToken]]]):
    """One list of tokens per input."""


class DecodeRequest(TeiWire):
    ids: list[Annotated[int, Field(ge=0, le=2**32 - 1)]] | list[list[Annotated[int, Field(ge=0, le=2**32 - 1)]]]
    skip_special_tokens: bool = True
    model: str | None = MODEL_FIELD


class DecodeResponse(RootModel[list[str]]):
    """One text per list of ids."""
