"""TEI's requests translated onto the native encode, score and extract calls and their answers into TEI's
shapes: the model chosen (a ``model`` field, else ``X-SIE-Model``, else ``--default-model``), ``truncate`` and
``prompt_name`` read as the native options, scores and vectors as TEI gives them. The routes (``tei.py``,
``tei_tokens.py``) only parse and answer.
"""

from __future__ import annotations

import math

import numpy as np
from fastapi import Request

from sie_server import __version__
from sie_server.api.context import call, model_for, service
from sie_server.api.deadlines import within
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
    SimilarityParameters,
    SimilarityRequest,
    SimilarityResponse,
    SparseValue,
    TeiRerankRequest,
    TeiRerankResponse,
    TruncationDirection,
)
from sie_server.errors import InvalidInput

NO_MODEL = (
    "no model chosen: this server serves many models where TEI serves one. Name it in the body's "
    '"model" field or the X-SIE-Model header, or start the server with --default-model <catalog id>'
)
QUERY_PROMPTS = frozenset({"query"})
DOCUMENT_PROMPTS = frozenset({"document", "passage", "doc", "corpus"})


def model_id_of(request: Request, named: str | None) -> str:
    model_id = named or request.headers.get(h.MODEL) or getattr(request.app.state, "default_model", None)
    if not model_id:
        raise InvalidInput(NO_MODEL)
    return str(model_id)


def choose(request: Request, named: str | None, task: str) -> ModelConfig:
    return model_for(request, model_id_of(request, named), task)


def texts_of(inputs: str | list[str], field: str = "inputs") -> list[str]:
    texts = [inputs] if isinstance(inputs, str) else inputs
    if not texts:
        raise EmptyBatch(f"`{field}` cannot be empty")
    return texts


def truncation_of(truncate: bool | None, direction: TruncationDirection) -> Truncation | None:
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


async def embed(request: Request, body: EmbedRequest) -> EmbedResponse:
    config = choose(request, body.model, "encode")
    texts = texts_of(body.inputs)
    check_dims(config, body.dimensions, "dimensions")
    own = config.runtime.normalize
    if own and not body.normalize:
        raise InvalidInput(f"normalize false is not served: model {config.id} gives normalised vectors only")
    truncation = truncation_of(body.truncate, body.truncation_direction)
    answer = await _encode(
        request, config, texts, "dense", prompt_name=body.prompt_name, truncation=truncation, dims=body.dimensions
    )
    vectors = _dense(answer)
    if body.normalize and not own:
        vectors = [v / max(float(np.linalg.norm(v)), 1e-12) for v in vectors]
    return EmbedResponse(vectors)


async def embed_sparse(request: Request, body: EmbedSparseRequest) -> EmbedSparseResponse:
    config = choose(request, body.model, "encode")
    check_outputs(config, ["sparse"], "/embed_sparse (sparse output)")
    truncation = truncation_of(body.truncate, body.truncation_direction)
    answer = await _encode(
        request, config, texts_of(body.inputs), "sparse", prompt_name=body.prompt_name, truncation=truncation
    )
    out = []
    for item in answer.items:
        assert item.sparse is not None
        pairs = zip(np.asarray(item.sparse.indices).tolist(), np.asarray(item.sparse.values).tolist(), strict=True)
        out.append([SparseValue(index=int(i), value=float(v)) for i, v in pairs])
    return EmbedSparseResponse(out)


async def rerank(request: Request, body: TeiRerankRequest) -> TeiRerankResponse:
    config = choose(request, body.model, "score")
    svc = service(request)
    truncation_of(body.truncate, body.truncation_direction)  # scorers cut a pair past the model's limit: checked below
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


async def predict(request: Request, body: PredictRequest) -> PredictResponse:
    config = choose(request, body.model, "extract")
    if body.raw_scores:
        raise InvalidInput("raw_scores is not served: this server answers the classifier's probabilities")
    truncation_of(body.truncate, body.truncation_direction)
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


async def similarity(request: Request, body: SimilarityRequest) -> SimilarityResponse:
    config = choose(request, body.model, "encode")
    params = body.parameters or SimilarityParameters()
    sentences = texts_of(body.inputs.sentences, "sentences")
    truncation = truncation_of(params.truncate, params.truncation_direction)
    texts = [body.inputs.source_sentence, *sentences]
    answer = await _encode(request, config, texts, "dense", prompt_name=params.prompt_name, truncation=truncation)
    vectors = [v / max(float(np.linalg.norm(v)), 1e-12) for v in _dense(answer)]
    return SimilarityResponse([float(np.dot(vectors[0], v)) for v in vectors[1:]])


async def embed_all(request: Request, body: EmbedAllRequest) -> EmbedAllResponse:
    config = choose(request, body.model, "encode")
    encode = config.tasks.encode
    if encode is None or encode.multivector is None:
        raise InvalidInput(
            f"model {config.id} gives no token embeddings: /embed_all serves models with multivector output "
            "(ColBERT, BGE-M3)"
        )
    truncation = truncation_of(body.truncate, body.truncation_direction)
    answer = await _encode(
        request, config, texts_of(body.inputs), "multivector", prompt_name=body.prompt_name, truncation=truncation
    )
    out = []
    for item in answer.items:
        assert item.multivector is not None
        mv = item.multivector
        out.append(np.asarray(mv.values, dtype="<f4").reshape(mv.num_tokens, mv.token_dims))
    return EmbedAllResponse(out)


async def info(request: Request, model: str | None) -> Info:
    """TEI's facts about the model."""
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
        model_type = EmbeddingType(embedding=EmbeddingModel(pooling=pooling_of(config)))
    return Info(
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


def pooling_of(config: ModelConfig) -> str:
    encode = config.tasks.encode
    if encode is not None and encode.dense is None and encode.sparse is not None:
        return "splade"
    return config.runtime.pooling
