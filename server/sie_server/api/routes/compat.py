"""Other APIs' shapes over the same engine: OpenAI ``/v1/embeddings``, and rerank as Cohere's
clients (``/v1/rerank``, ``/v2/rerank``) and Jina's call it. Always JSON."""

from __future__ import annotations

import base64
import uuid

import numpy as np
from fastapi import APIRouter, Request
from fastapi.responses import Response

from sie_server.api.body import json_response, parse
from sie_server.api.context import call, model_for, service
from sie_server.api.deadlines import within
from sie_server.api.openapi import doc
from sie_server.api.refusals import OVER_LIMIT, named
from sie_server.api.routes.encode import check_dims
from sie_server.catalog.schema import ModelConfig
from sie_server.contract.compat_responses import (
    ApiVersion,
    BilledUnits,
    EmbeddingUsage,
    OpenAIEmbedding,
    OpenAIEmbeddingsResponse,
    RerankedDocument,
    RerankMeta,
    RerankResponse,
    RerankResult,
    RerankUsage,
)
from sie_server.contract.requests import (
    EncodeItemIn,
    EncodeParams,
    EncodeRequest,
    ItemIn,
    OpenAIEmbeddingsRequest,
    RerankDocument,
    RerankRequest,
    ScoreRequest,
)
from sie_server.errors import InvalidInput

router = APIRouter(tags=["compatible"])
JINA_QUERY, JINA_PASSAGE = "retrieval.query", "retrieval.passage"


@router.post(
    "/v1/embeddings",
    **doc(OpenAIEmbeddingsResponse, body=OpenAIEmbeddingsRequest, openai=True, msgpack=False),
)
async def embeddings(request: Request) -> Response:
    svc = service(request)
    body = await parse(request, OpenAIEmbeddingsRequest, svc.limits.max_body_bytes)
    config = model_for(request, body.model, "encode")
    texts = [body.input] if isinstance(body.input, str) else body.input
    svc.limits.texts(texts, "input")
    check_dims(config, body.dimensions, "dimensions")
    own = config.runtime.normalize
    if own and body.normalized is False:
        raise InvalidInput(f"normalized false is not served: model {config.id} gives normalised vectors only")
    native = EncodeRequest(
        items=[EncodeItemIn(id=str(i), text=t) for i, t in enumerate(texts)],
        params=EncodeParams(
            output_types=["dense"],
            dims=body.dimensions,
            truncation="error" if body.truncate is False else None,
            options=jina_task(config, body.task),
        ),
    )
    options = call(request)
    with named("truncate false", OVER_LIMIT, when=body.truncate is False):
        async with within(options):
            answer = await svc.encode(config, native, options)
    data = []
    base64_wanted = (body.embedding_type or body.encoding_format) == "base64"
    for index, item in enumerate(answer.items):
        assert item.dense is not None
        vector = np.asarray(item.dense.values, dtype="<f4")
        if body.normalized and not own:
            vector = vector / max(float(np.linalg.norm(vector)), 1e-12)
        value = base64.b64encode(vector.tobytes()).decode() if base64_wanted else vector
        data.append(OpenAIEmbedding(index=index, embedding=value))
    tokens = answer.usage.prompt_tokens
    usage = EmbeddingUsage(prompt_tokens=tokens, total_tokens=tokens)
    return json_response(OpenAIEmbeddingsResponse(data=data, model=answer.model, usage=usage))


def jina_task(config: ModelConfig, task: str | None) -> dict[str, object] | None:
    """Jina's ``task`` as the native options: the model's task adapter when it has them (the engine refuses one
    it lacks, naming it), else the text's role (retrieval.query or retrieval.passage); another is refused."""
    if task is None:
        return None
    is_query = task == JINA_QUERY
    if config.runtime.lora_tasks:
        return {"task": task, "is_query": is_query}
    if task not in (JINA_QUERY, JINA_PASSAGE):
        raise InvalidInput(f"task {task!r}: model {config.id} has no task adapters; use {JINA_QUERY} or {JINA_PASSAGE}")
    return {"is_query": is_query}


async def _rerank(request: Request, version: str) -> Response:
    svc = service(request)
    body = await parse(request, RerankRequest, svc.limits.max_body_bytes)
    config = model_for(request, body.model, "score")
    texts = [d.text if isinstance(d, RerankDocument) else d for d in body.documents]
    svc.limits.text(body.query, "query")
    svc.limits.texts(texts, "documents")
    limit = config.max_sequence_length
    if body.max_tokens_per_doc is not None and limit is not None and body.max_tokens_per_doc < limit:
        raise InvalidInput(
            f"max_tokens_per_doc {body.max_tokens_per_doc} is not served: model {config.id} reads each "
            f"query-document pair up to {limit} tokens; send at least {limit} or leave it out"
        )
    native = ScoreRequest(
        query=ItemIn(id="query", text=body.query), items=[ItemIn(id=str(i), text=t) for i, t in enumerate(texts)]
    )
    options = call(request)
    async with within(options):
        answer = await svc.score(config, native, options)
    ranked = answer.scores[: body.top_n] if body.top_n else answer.scores
    results = [
        RerankResult(
            index=int(s.item_id),
            relevance_score=s.score,
            document=RerankedDocument(text=texts[int(s.item_id)]) if body.return_documents else None,
        )
        for s in ranked
    ]
    tokens = answer.usage.prompt_tokens
    return json_response(
        RerankResponse(
            id=str(uuid.uuid4()),
            model=answer.model,
            results=results,
            usage=RerankUsage(prompt_tokens=tokens, total_tokens=tokens),
            meta=RerankMeta(api_version=ApiVersion(version=version), billed_units=BilledUnits(search_units=1)),
        )
    )


@router.post("/v1/rerank", **doc(RerankResponse, body=RerankRequest, msgpack=False))
async def rerank_v1(request: Request) -> Response:
    """Cohere's ``Client.rerank`` and Jina's rerank API."""
    return await _rerank(request, "1")


@router.post("/v2/rerank", **doc(RerankResponse, body=RerankRequest, msgpack=False))
async def rerank_v2(request: Request) -> Response:
    """Cohere's ``ClientV2.rerank``."""
    return await _rerank(request, "2")
