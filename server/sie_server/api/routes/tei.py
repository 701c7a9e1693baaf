"""Hugging Face Text Embeddings Inference (TEI)'s routes, thin translations onto the same encode,
score and extract calls as ``/v1/encode``, ``/v1/score`` and ``/v1/extract``: ``POST /embed``,
``/embed_sparse``, ``/embed_all``, ``/rerank``, ``/predict``, ``/similarity``, ``GET /info``, and
``POST /``, which ``huggingface_hub``'s ``InferenceClient`` calls with the server's URL (TEI answers
there what its one model does). Always JSON; errors in TEI's ``{"error", "error_type"}``.

TEI serves one model; this server serves many, so a request names its model in a ``model`` field,
else the ``X-SIE-Model`` header, else the server's ``--default-model``. ``/tokenize`` and ``/decode``
are in ``tei_tokens.py``, on the native tokenize and detokenize calls. The translation is in
``tei_serving.py``; this module only parses, answers and documents.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel

from sie_server.api.body import json_response, parse, read_body, validate
from sie_server.api.context import service
from sie_server.api.openapi import doc
from sie_server.api.routes import tei_serving as serving
from sie_server.contract.tei_wire import (
    EmbedAllRequest,
    EmbedAllResponse,
    EmbedRequest,
    EmbedResponse,
    EmbedSparseRequest,
    EmbedSparseResponse,
    Info,
    PredictRequest,
    PredictResponse,
    RootRequest,
    SimilarityInput,
    SimilarityRequest,
    SimilarityResponse,
    TeiError,
    TeiRerankRequest,
    TeiRerankResponse,
)

router = APIRouter(tags=["TEI"])

INFO_MODEL = Query(default=None, description="this server's: the model (else X-SIE-Model, else --default-model)")
# a TEI status and the codes this server answers with it (the OpenAPI spec lists them)
TEI_ERRORS: dict[int, str] = {
    400: "INVALID_INPUT, no model chosen included (error_type Validation; Empty for an empty batch)",
    404: "MODEL_NOT_FOUND (error_type Validation)",
    413: "INVALID_INPUT: the body or a text is too large (error_type Validation)",
    424: "INFERENCE_ERROR, MODEL_LOAD_FAILED, INVALID_OUTPUT (error_type Backend)",
    429: "QUEUE_FULL, RESOURCE_EXHAUSTED, RATE_LIMITED (error_type Overloaded)",
    503: "MODEL_LOADING (error_type Unhealthy)",
    504: "DEADLINE_EXCEEDED (error_type Backend)",
}


def tei_doc(
    answer: type[BaseModel] | tuple[type[BaseModel], ...] | None, body: type[BaseModel] | None
) -> dict[str, Any]:
    return doc(answer, body=body, errors=tuple(TEI_ERRORS), msgpack=False, codes=TEI_ERRORS, error_model=TeiError)


@router.post("/embed", **tei_doc(EmbedResponse, EmbedRequest))
async def embed(request: Request) -> Response:
    """Dense vectors, one per input (TEI's ``normalize``, ``truncate``, ``prompt_name``, ``dimensions``)."""
    return json_response(await serving.embed(request, await parse(request, EmbedRequest, max_body(request))))


@router.post("/embed_sparse", **tei_doc(EmbedSparseResponse, EmbedSparseRequest))
async def embed_sparse(request: Request) -> Response:
    """Sparse vectors (SPLADE, BGE-M3): each input's non-zero ``{index, value}``."""
    return json_response(
        await serving.embed_sparse(request, await parse(request, EmbedSparseRequest, max_body(request)))
    )


@router.post("/embed_all", **tei_doc(EmbedAllResponse, EmbedAllRequest))
async def embed_all(request: Request) -> Response:
    """Token vectors, from a model with multivector output (ColBERT, BGE-M3); others answer 400."""
    return json_response(await serving.embed_all(request, await parse(request, EmbedAllRequest, max_body(request))))


@router.post("/rerank", **tei_doc(TeiRerankResponse, TeiRerankRequest))
async def rerank(request: Request) -> Response:
    """``texts`` ranked against ``query``, best first (a sigmoid over a cross-encoder's logit unless ``raw_scores``)."""
    return json_response(await serving.rerank(request, await parse(request, TeiRerankRequest, max_body(request))))


@router.post("/predict", **tei_doc(PredictResponse, PredictRequest))
async def predict(request: Request) -> Response:
    """A classifier's labels, best first: a list for one text, a list per text for a batch."""
    return json_response(await serving.predict(request, await parse(request, PredictRequest, max_body(request))))


@router.post("/similarity", **tei_doc(SimilarityResponse, SimilarityRequest))
async def similarity(request: Request) -> Response:
    """Cosine similarity of each of ``inputs.sentences`` to ``inputs.source_sentence``."""
    return json_response(await serving.similarity(request, await parse(request, SimilarityRequest, max_body(request))))


ROOT_ANSWERS = (EmbedResponse, EmbedSparseResponse, PredictResponse, TeiRerankResponse, SimilarityResponse)


@router.post("/", **tei_doc(ROOT_ANSWERS, RootRequest))
async def root(request: Request) -> Response:
    """What TEI answers at its root for the model: sentence similarity for ``{"inputs": {source_sentence,
    sentences}}``; else predict for a classifier, rerank for a scorer that does not encode (with ``query``
    and ``texts``), sparse embeddings for a sparse-only encoder, dense embeddings for the rest."""
    raw = await read_body(request, max_body(request))
    head = validate(RootRequest, raw)
    if isinstance(head.inputs, SimilarityInput):
        return json_response(await serving.similarity(request, validate(SimilarityRequest, raw)))
    config = service(request).resolve(serving.model_id_of(request, head.model))
    tasks = config.tasks
    answer: BaseModel
    if config.classifies:
        answer = await serving.predict(request, validate(PredictRequest, raw))
    elif tasks.encode is None and tasks.score is not None:
        answer = await serving.rerank(request, validate(TeiRerankRequest, raw))
    elif tasks.encode is not None and tasks.encode.dense is None and tasks.encode.sparse is not None:
        answer = await serving.embed_sparse(request, validate(EmbedSparseRequest, raw))
    else:
        answer = await serving.embed(request, validate(EmbedRequest, raw))
    return json_response(answer)


@router.get("/info", **tei_doc(Info, None))
async def info(request: Request, model: str | None = INFO_MODEL) -> Response:
    """TEI's facts about the model (``?model=``, the ``X-SIE-Model`` header, or ``--default-model``)."""
    return json_response(await serving.info(request, model))


def max_body(request: Request) -> int:
    return service(request).limits.max_body_bytes
