"""Compatibility shapes: OpenAI ``/v1/embeddings`` and Cohere/Jina-style ``/v1/rerank`` (always JSON)."""

from __future__ import annotations

import base64
from typing import Any

import numpy as np
from fastapi import APIRouter, Request
from fastapi.responses import Response

from sie_server.api.codec import json_response, parse
from sie_server.api.inputs import check_count, check_text
from sie_server.api.schemas import OpenAIEmbeddingsRequest, RerankDocument, RerankRequest
from sie_server.api.state import call_options, resolve, server
from sie_server.engine.service import TextInput
from sie_server.errors import InvalidInput

router = APIRouter()


@router.post("/v1/embeddings")
async def embeddings(request: Request) -> Response:
    body = await parse(request, OpenAIEmbeddingsRequest, server(request).settings.max_body_bytes)
    state, config = resolve(request, body.model, "encode")
    texts = [body.input] if isinstance(body.input, str) else body.input
    check_count(len(texts), state.settings)
    for i, text in enumerate(texts):
        check_text(text, f"input[{i}]", state.settings)
    encode = config.tasks.encode
    dim = encode.dense.dim if encode and encode.dense else None
    if body.dimensions is not None and body.dimensions != dim:
        raise InvalidInput(f"model {config.id} returns {dim} dimensions; `dimensions` must be {dim} or absent")
    outcome = await state.service.encode(
        config,
        [TextInput(id=str(i), text=t) for i, t in enumerate(texts)],
        output_types=["dense"],
        is_query=False,
        instruction=None,
        call=call_options(request),
    )
    data: list[dict[str, Any]] = []
    for index, outputs in enumerate(outcome.outputs):
        vector = np.asarray(outputs["dense"], dtype="<f4")
        embedding: Any = base64.b64encode(vector.tobytes()).decode() if body.encoding_format == "base64" else vector
        data.append({"object": "embedding", "index": index, "embedding": embedding})
    usage = {"prompt_tokens": outcome.prompt_tokens, "total_tokens": outcome.prompt_tokens}
    return json_response({"object": "list", "data": data, "model": outcome.model, "usage": usage})


@router.post("/v1/rerank")
async def rerank(request: Request) -> Response:
    body = await parse(request, RerankRequest, server(request).settings.max_body_bytes)
    state, config = resolve(request, body.model, "score")
    texts = [d.text if isinstance(d, RerankDocument) else d for d in body.documents]
    check_count(len(texts), state.settings)
    check_text(body.query, "query", state.settings)
    for i, text in enumerate(texts):
        check_text(text, f"documents[{i}]", state.settings)
    outcome = await state.service.score(
        config,
        TextInput(id="query", text=body.query),
        [TextInput(id=str(i), text=t) for i, t in enumerate(texts)],
        instruction=None,
        call=call_options(request),
    )
    ranked = outcome.scores[: body.top_n] if body.top_n else outcome.scores
    results: list[dict[str, Any]] = []
    for item_id, value in ranked:
        result: dict[str, Any] = {"index": int(item_id), "relevance_score": value}
        if body.return_documents:
            result["document"] = {"text": texts[int(item_id)]}
        results.append(result)
    usage = {"prompt_tokens": outcome.prompt_tokens, "total_tokens": outcome.prompt_tokens}
    return json_response({"model": outcome.model, "results": results, "usage": usage})
