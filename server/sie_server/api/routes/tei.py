"""Hugging Face Text Embeddings Inference (TEI)'s routes, thin translations onto the same encode,
score and extract calls as ``/v1/encode``, ``/v1/score`` and ``/v1/extract``: ``POST /embed``,
``/embed_sparse``, ``/embed_all``, ``/rerank``, ``/predict``, ``/similarity``, ``GET /info``, and
``POST /``, which ``huggingface_hub``'s ``InferenceClient`` calls with the server's URL (TEI answers
there what its one model does). Always JSON; errors in TEI's ``{"error", "error_type"}``.

TEI serves one model; this server serves many, so a request names its model in a ``model`` field,
else the ``X-SIE-Model`` header, else the server's ``--default-model``. ``/tokenize`` and ``/decode``
are in ``tei_tokens.py``, on the native tokenize and detokenize calls.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel

from sie_server import __version__
from sie_server.api.body import json_response, parse, read_body, validate
from sie_server.api.context import call, model_for, service
from sie_server.api.deadlines import within
from sie_server.api.openapi import doc
from sie_server.api.refusals import OVER_LIMIT, named
from sie_server.api.routes.classify import _classify, _scores
from sie_server.api.routes.encode import check_dims, check_outputs
from sie_server.catalog.schema import ModelConfig
from sie_server.contract import headers as h
from sie_server.contract.requests import (
    EncodeItemIn,
    EncodeParams,
    EncodeRequest,
    ItemIn,
    OutputType,
    ScoreRequest,
    Truncation,
)
from sie_server.contract.responses import EncodeResponse
from sie_server.contract.tei_wire import (
    ClassifierModel,
    ClassifierType,
    EmbedAllRequest,
    EmbedAllResponse,
    EmbeddingModel,
    EmbeddingType,
    EmbedRequest,
    EmbedResponse,
    EmbedSparseRequest,
    EmbedSparseResponse,
    EmptyBatch,
    Info,
    Prediction,
    PredictRequest,
    PredictResponse,
    Rank,
    RerankerType,
    RootRequest,
    SimilarityInput,
    SimilarityParameters,
    SimilarityRequest,
    SimilarityResponse,
    SparseValue,
    TeiError,
    TeiRerankRequest,
    TeiRerankResponse,
    TruncationDirection,
)
from sie_server.errors import InvalidInput

router = APIRouter(tags=["TEI"])

NO_MODEL = (
    "no model chosen: this server serves many models where TEI serves one. Name it in the body's "
    '"model" field or the X-SIE-Model header, or start the server with --default-model <catalog id>'
)
INFO_MODEL = Query(default=None, description="this server's: the model (else X-SIE-Model, else --default-model)")
QUERY_PROMPTS = frozenset({"query"})
DOCUMENT_PROMPTS = frozenset({"document", "passage", "doc", "corpus"})
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


def model_id_of(request: Request, named: str | None) -> str:
    model_id = named or request.headers.get(h.MODEL) or getattr(request.app.state, "default_model", None)
    if not model_id:
        raise InvalidInput(NO_MODEL)
    return str(model_id)


def _choose(request: Request, named: str | None, task: str) -> ModelConfig:
    return model_for(request, model_id_of(request, named), task)


def texts_of(inputs: str | list[str], field: str = "inputs") -> list[str]:
    texts = [inputs] if isinstance(inputs, str) else inputs
    if not texts:
        raise EmptyBatch(f"`{field}` cannot be empty")
    return texts


def _truncation(truncate: bool | None, direction: TruncationDirection) -> Truncation | None:
    """TEI's ``truncate`` as the native ``truncation``: unset keeps the server's default (cut at the end)."""
    if direction.lower() == "left":
        raise InvalidInput("truncation_direction Left is not served: a text past the model's limit is cut at its end")
    return None if truncate is None else ("end" if truncate else "error")


def is_query(prompt_name: str | None) -> bool:
    """TEI's ``prompt_name`` as the text's role (the model's query or document prefix / instruction)."""
    if prompt_name is None or prompt_name.lower() in DOCUMENT_PROMPTS:
        return False
    if prompt_name.lower() in QUERY_PROMPTS:
        return True
    known = ", ".join(sorted(QUERY_PROMPTS | DOCUMENT_PROMPTS))
    raise InvalidInput(f"prompt_name {prompt_name!r} is not served; use one of {known}")


async def _encode(
    request: Request,
    config: ModelConfig,
    texts: list[str],
    output: OutputType,
    *,
    prompt_name: str | None,
    truncation: Truncation | None,
    dims: int | None = None,
) -> EncodeResponse:
    svc = service(request)
    svc.limits.texts(texts, "inputs")
    native = EncodeRequest(
        items=[EncodeItemIn(id=str(i), text=t) for i, t in enumerate(texts)],
        params=EncodeParams(
            output_types=[output],
            dims=dims,
            truncation=truncation,
            options={"is_query": True} if is_query(prompt_name) else None,
        ),
    )
    options = call(request)
    with named("truncate false", OVER_LIMIT, when=truncation == "error"):
        async with within(options):
            return await svc.encode(config, native, options)


def _dense(answer: EncodeResponse) -> list[np.ndarray]:
    vectors = []
    for item in answer.items:
        assert item.dense is not None
        vectors.append(np.asarray(item.dense.values, dtype="<f4"))
    return vectors


async def _embed(request: Request, body: EmbedRequest) -> EmbedResponse:
    config = _choose(request, body.model, "encode")
    texts = texts_of(body.inputs)
    check_dims(config, body.dimensions, "dimensions")
    own = config.runtime.normalize
    if own and not body.normalize:
        raise InvalidInput(f"normalize false is not served: model {config.id} gives normalised vectors only")
    truncation = _truncation(body.truncate, body.truncation_direction)
    answer = await _encode(
        request, config, texts, "dense", prompt_name=body.prompt_name, truncation=truncation, dims=body.dimensions
    )
    vectors = _dense(answer)
    if body.normalize and not own:
        vectors = [v / max(float(np.linalg.norm(v)), 1e-12) for v in vectors]
    return EmbedResponse(vectors)


async def _embed_sparse(request: Request, body: EmbedSparseRequest) -> EmbedSparseResponse:
    config = _choose(request, body.model, "encode")
    check_outputs(config, ["sparse"], "/embed_sparse (sparse output)")
    truncation = _truncation(body.truncate, body.truncation_direction)
    answer = await _encode(
        request, config, texts_of(body.inputs), "sparse", prompt_name=body.prompt_name, truncation=truncation
    )
    out = []
    for item in answer.items:
        assert item.sparse is not None
        pairs = zip(np.asarray(item.sparse.indices).tolist(), np.asarray(item.sparse.values).tolist(), strict=True)
        out.append([SparseValue(index=int(i), value=float(v)) for i, v in pairs])
    return EmbedSparseResponse(out)


async def _rerank(request: Request, body: TeiRerankRequest) -> TeiRerankResponse:
    config = _choose(request, body.model, "score")
    svc = service(request)
    _truncation(body.truncate, body.truncation_direction)  # scorers cut a pair past the model's limit: checked below
    texts = texts_of(body.texts, "texts")
    svc.limits.text(body.query, "query")
    svc.limits.texts(texts, "texts")
    native = ScoreRequest(
        query=ItemIn(id="query", text=body.query), items=[ItemIn(id=str(i), text=t) for i, t in enumerate(texts)]
    )
    options = call(request)
    async with within(options):
        answer = await svc.score(config, native, options)
    if body.truncate is False and answer.truncated_items:
        cut = ", ".join(f"texts[{i}]" for i in answer.truncated_items if i != "query") or "query"
        raise InvalidInput(f"truncate false: {cut} with the query is past model {config.id}'s token limit")
    ranks = [
        Rank(
            index=int(s.item_id),
            score=_tei_score(config, s.score, body.raw_scores),
            text=texts[int(s.item_id)] if body.return_text else None,
        )
        for s in answer.scores
    ]
    return TeiRerankResponse(sorted(ranks, key=lambda r: -r.score))  # (the native order, kept by a monotone map)


def _tei_score(config: ModelConfig, score: float, raw: bool) -> float:
    """TEI's rerank score: a pair scorer's logit through a sigmoid, or the logit itself with ``raw_scores``.
    A model whose catalog config already applies the sigmoid answers probabilities (inverted for ``raw``);
    bi-encoder, late-interaction and sparse scores are not logits and pass as they are."""
    task = config.tasks.score
    if task is None or task.mode != "cross_encoder":
        return score
    activated = config.runtime.activation == "sigmoid" or (
        config.adapter == "llm_reranker" and config.runtime.no_token is not None
    )
    if raw == (not activated):
        return score
    if raw:
        p = min(max(score, 1e-12), 1.0 - 1e-12)
        return math.log(p / (1.0 - p))
    return 1.0 / (1.0 + math.exp(-score)) if score >= 0 else math.exp(score) / (1.0 + math.exp(score))


async def _predict(request: Request, body: PredictRequest) -> PredictResponse:
    config = _choose(request, body.model, "extract")
    if body.raw_scores:
        raise InvalidInput("raw_scores is not served: this server answers the classifier's probabilities")
    _truncation(body.truncate, body.truncation_direction)
    single = isinstance(body.inputs, str)
    if isinstance(body.inputs, str):
        texts = [body.inputs]
    elif all(isinstance(x, list) for x in body.inputs) and body.inputs:
        texts = [_one_text(x) for x in body.inputs]  # type: ignore[arg-type]
    else:
        raise InvalidInput(
            "inputs must be a text or a batch of one-text lists ([[text], [text]]); TEI's text pairs are not served"
        )
    answer = await _classify(request, config, texts_of(texts), "inputs")
    batch = [
        [Prediction(label=k, score=v) for k, v in sorted(_scores(item).items(), key=lambda kv: -kv[1])]
        for item in answer.items
    ]
    return PredictResponse(batch[0] if single else batch)


def _one_text(entry: list[str]) -> str:
    if len(entry) != 1:
        raise InvalidInput(f"a batch entry holds one text; got {len(entry)} (TEI's text pairs are not served)")
    return entry[0]


async def _similarity(request: Request, body: SimilarityRequest) -> SimilarityResponse:
    config = _choose(request, body.model, "encode")
    params = body.parameters or SimilarityParameters()
    sentences = texts_of(body.inputs.sentences, "sentences")
    truncation = _truncation(params.truncate, params.truncation_direction)
    texts = [body.inputs.source_sentence, *sentences]
    answer = await _encode(request, config, texts, "dense", prompt_name=params.prompt_name, truncation=truncation)
    vectors = [v / max(float(np.linalg.norm(v)), 1e-12) for v in _dense(answer)]
    return SimilarityResponse([float(np.dot(vectors[0], v)) for v in vectors[1:]])


@router.post("/embed", **tei_doc(EmbedResponse, EmbedRequest))
async def embed(request: Request) -> Response:
    """Dense vectors, one per input (TEI's ``normalize``, ``truncate``, ``prompt_name``, ``dimensions``)."""
    return json_response(await _embed(request, await parse(request, EmbedRequest, max_body(request))))


@router.post("/embed_sparse", **tei_doc(EmbedSparseResponse, EmbedSparseRequest))
async def embed_sparse(request: Request) -> Response:
    """Sparse vectors (SPLADE, BGE-M3): each input's non-zero ``{index, value}``."""
    return json_response(await _embed_sparse(request, await parse(request, EmbedSparseRequest, max_body(request))))


@router.post("/embed_all", **tei_doc(EmbedAllResponse, EmbedAllRequest))
async def embed_all(request: Request) -> Response:
    """Token vectors, from a model with multivector output (ColBERT, BGE-M3); others answer 400."""
    body = await parse(request, EmbedAllRequest, max_body(request))
    config = _choose(request, body.model, "encode")
    encode = config.tasks.encode
    if encode is None or encode.multivector is None:
        raise InvalidInput(
            f"model {config.id} gives no token embeddings: /embed_all serves models with multivector output "
            "(ColBERT, BGE-M3)"
        )
    truncation = _truncation(body.truncate, body.truncation_direction)
    answer = await _encode(
        request, config, texts_of(body.inputs), "multivector", prompt_name=body.prompt_name, truncation=truncation
    )
    out = []
    for item in answer.items:
        assert item.multivector is not None
        mv = item.multivector
        out.append(np.asarray(mv.values, dtype="<f4").reshape(mv.num_tokens, mv.token_dims))
    return json_response(EmbedAllResponse(out))


@router.post("/rerank", **tei_doc(TeiRerankResponse, TeiRerankRequest))
async def rerank(request: Request) -> Response:
    """``texts`` ranked against ``query``, best first (a sigmoid over a cross-encoder's logit unless ``raw_scores``)."""
    return json_response(await _rerank(request, await parse(request, TeiRerankRequest, max_body(request))))


@router.post("/predict", **tei_doc(PredictResponse, PredictRequest))
async def predict(request: Request) -> Response:
    """A classifier's labels, best first: a list for one text, a list per text for a batch."""
    return json_response(await _predict(request, await parse(request, PredictRequest, max_body(request))))


@router.post("/similarity", **tei_doc(SimilarityResponse, SimilarityRequest))
async def similarity(request: Request) -> Response:
    """Cosine similarity of each of ``inputs.sentences`` to ``inputs.source_sentence``."""
    return json_response(await _similarity(request, await parse(request, SimilarityRequest, max_body(request))))


ROOT_ANSWERS = (EmbedResponse, EmbedSparseResponse, PredictResponse, TeiRerankResponse, SimilarityResponse)


@router.post("/", **tei_doc(ROOT_ANSWERS, RootRequest))
async def root(request: Request) -> Response:
    """What TEI answers at its root for the model: sentence similarity for ``{"inputs": {source_sentence,
    sentences}}``; else predict for a classifier, rerank for a scorer that does not encode (with ``query``
    and ``texts``), sparse embeddings for a sparse-only encoder, dense embeddings for the rest."""
    raw = await read_body(request, max_body(request))
    head = validate(RootRequest, raw)
    if isinstance(head.inputs, SimilarityInput):
        return json_response(await _similarity(request, validate(SimilarityRequest, raw)))
    config = service(request).resolve(model_id_of(request, head.model))
    tasks = config.tasks
    answer: BaseModel
    if config.classifies:
        answer = await _predict(request, validate(PredictRequest, raw))
    elif tasks.encode is None and tasks.score is not None:
        answer = await _rerank(request, validate(TeiRerankRequest, raw))
    elif tasks.encode is not None and tasks.encode.dense is None and tasks.encode.sparse is not None:
        answer = await _embed_sparse(request, validate(EmbedSparseRequest, raw))
    else:
        answer = await _embed(request, validate(EmbedRequest, raw))
    return json_response(answer)


@router.get("/info", **tei_doc(Info, None))
async def info(request: Request, model: str | None = INFO_MODEL) -> Response:
    """TEI's facts about the model (``?model=``, the ``X-SIE-Model`` header, or ``--default-model``)."""
    svc = service(request)
    config = svc.resolve(model_id_of(request, model))
    live = await svc.model(config)
    profile = live.profile or {}
    model_type: EmbeddingType | ClassifierType | RerankerType
    if config.classifies:  # the labels are the weights' own, known once loaded: see /v1/extract's answers
        model_type = ClassifierType(classifier=ClassifierModel(id2label={}, label2id={}))
    elif config.tasks.encode is None and config.tasks.score is not None:
        model_type = RerankerType(reranker=ClassifierModel(id2label={"0": "LABEL_0"}, label2id={"LABEL_0": 0}))
    else:
        model_type = EmbeddingType(embedding=EmbeddingModel(pooling=_pooling(config)))
    return json_response(
        Info(
            model_id=config.id,
            model_sha=config.source.revision,
            model_dtype=str(live.precision.running or profile.get("dtype", "float32")),
            served_model_name=config.id,
            model_type=model_type,
            max_concurrent_requests=0,  # no cap on requests: admission counts queued items
            max_input_length=config.max_sequence_length or 0,
            max_batch_tokens=int(profile.get("max_batch_tokens", 0)),
            max_client_batch_size=svc.limits.max_items,
            auto_truncate=True,
            tokenization_workers=1,
            version=__version__,
        )
    )


def _pooling(config: ModelConfig) -> str:
    encode = config.tasks.encode
    if encode is not None and encode.dense is None and encode.sparse is not None:
        return "splade"
    return config.runtime.pooling


def max_body(request: Request) -> int:
    return service(request).limits.max_body_bytes
