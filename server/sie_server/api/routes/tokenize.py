"""``POST /v1/tokenize/{model}`` and ``POST /v1/detokenize/{model}``: a model's own text tokenizer.

Tokenize answers each text's tokens with their character offsets into it, the whole text (no cut at
the model's limit); detokenize answers each list of ids as text. Every model that reads text with a
tokenizer serves them (encoders, scorers, classifiers, causal LMs on transformers or llama.cpp); a
model that takes no text is refused before it loads, one without a tokenizer (GLiNER) once loaded.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from sie_server.api.body import parse, render
from sie_server.api.context import MODEL, call, service
from sie_server.api.deadlines import within
from sie_server.api.openapi import doc
from sie_server.catalog.schema import ModelConfig
from sie_server.contract.tokenize_wire import (
    DetokenizeRequest,
    DetokenizeResponse,
    TokenizeRequest,
    TokenizeResponse,
    check_reads_text,
)
from sie_server.errors import InvalidInput
from sie_server.observability.logging import REQUEST_MODEL

router = APIRouter(tags=["work"])


def tokenizer_model(request: Request, model_id: str, task: str) -> ModelConfig:
    """The served model for tokenize / detokenize (``task``), one that reads text; tags the request."""
    config = service(request).resolve(model_id)
    check_reads_text(config)
    request.state.sie_model = config.id
    request.state.sie_task = task
    REQUEST_MODEL.set(config.id)
    return config


def check_id_counts(request: DetokenizeRequest, max_ids: int) -> None:
    """At most ``max_ids`` ids an item (as many as a text may have bytes: a text's worth of tokens)."""
    for k, item in enumerate(request.items):
        if len(item.ids) > max_ids:
            raise InvalidInput(f"items[{k}] has {len(item.ids)} ids; the limit is {max_ids} per item")


@router.post("/v1/tokenize/{model:path}", **doc(TokenizeResponse, body=TokenizeRequest))
async def tokenize(request: Request, model: str = MODEL) -> Response:
    """Each text's tokens: ``id``, ``text``, ``special``, ``start`` / ``stop`` (character offsets)."""
    config = tokenizer_model(request, model, "tokenize")
    svc = service(request)
    body = await parse(request, TokenizeRequest, svc.limits.max_body_bytes)
    svc.limits.texts([item.text for item in body.items], "items")
    options = call(request)
    async with within(options):
        answer = await svc.tokenize(config, body, options)
    return render(request, answer)


@router.post("/v1/detokenize/{model:path}", **doc(DetokenizeResponse, body=DetokenizeRequest))
async def detokenize(request: Request, model: str = MODEL) -> Response:
    """Each list of token ids as text (INVALID_INPUT for an id outside the model's vocabulary)."""
    config = tokenizer_model(request, model, "detokenize")
    svc = service(request)
    body = await parse(request, DetokenizeRequest, svc.limits.max_body_bytes)
    svc.limits.count(len(body.items))
    check_id_counts(body, svc.limits.max_text_bytes)
    options = call(request)
    async with within(options):
        answer = await svc.detokenize(config, body, options)
    return render(request, answer)
