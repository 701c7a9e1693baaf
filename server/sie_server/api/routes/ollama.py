"""Ollama's API (``/api/...``) as its clients call it: embeddings onto the same ``encode`` service call as
``/v1/encode``, the catalog as Ollama lists models (``tags``, ``show``, ``ps``) and ``version``; chat and
generate are in ``ollama_chat.py`` (its router is included in this one). Model names are catalog ids
(``:latest``, Ollama's default tag, is accepted after one); errors are Ollama's ``{"error": "<message>"}``
with the native status codes."""

from __future__ import annotations

import hashlib
import time
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from sie_server.api.body import json_response, parse
from sie_server.api.context import call, model_for, service
from sie_server.api.deadlines import within
from sie_server.api.refusals import OVER_LIMIT, named
from sie_server.api.routes import ollama_chat
from sie_server.api.routes.encode import check_dims
from sie_server.api.routes.ollama_chat import ollama_doc
from sie_server.catalog.schema import ModelConfig
from sie_server.contract.ollama_wire import (
    OLLAMA_API_VERSION,
    OllamaEmbeddingsRequest,
    OllamaEmbeddingsResponse,
    OllamaEmbedRequest,
    OllamaEmbedResponse,
    OllamaModel,
    OllamaModelDetails,
    OllamaRunning,
    OllamaRunningList,
    OllamaShow,
    OllamaShowRequest,
    OllamaTags,
    OllamaVersion,
    bare,
    now,
)
from sie_server.contract.requests import EncodeItemIn, EncodeParams, EncodeRequest, Truncation
from sie_server.contract.state_wire import ModelInfo

router = APIRouter(tags=["ollama"])
router.include_router(ollama_chat.router)
STARTED = now()  # ``modified_at``: catalog models have no date
NEVER = "9999-12-31T23:59:59Z"  # ``expires_at``: a loaded model stays until it is evicted
PRECISIONS = {"float32": "F32", "float16": "F16", "bfloat16": "BF16"}


def nanos_since(started: int) -> int:
    return time.perf_counter_ns() - started


async def _embed(
    request: Request, config: ModelConfig, texts: list[str], dims: int | None, truncation: Truncation
) -> tuple[list[list[float]], int]:
    """The same encode call as ``/v1/encode``'s dense output: the vectors and the prompt's tokens."""
    svc = service(request)
    native = EncodeRequest(
        items=[EncodeItemIn(id=str(i), text=t) for i, t in enumerate(texts)],
        params=EncodeParams(output_types=["dense"], dims=dims, truncation=truncation),
    )
    options = call(request)
    with named("truncate false", OVER_LIMIT, when=truncation == "error"):
        async with within(options):
            answer = await svc.encode(config, native, options)
    vectors = []
    for item in answer.items:
        assert item.dense is not None
        vectors.append([float(v) for v in item.dense.values])
    return vectors, answer.usage.prompt_tokens


@router.post("/api/embed", **ollama_doc(OllamaEmbedResponse, body=OllamaEmbedRequest))
async def embed(request: Request) -> Response:
    """Ollama's ``embed``: one vector per input, as ``/v1/encode`` gives them; ``truncate: false`` refuses
    an input past the model's limit (400) instead of cutting it."""
    started = time.perf_counter_ns()
    svc = service(request)
    body = await parse(request, OllamaEmbedRequest, svc.limits.max_body_bytes)
    config = model_for(request, bare(body.model), "encode")
    texts = [body.input] if isinstance(body.input, str) else body.input
    svc.limits.texts(texts, "input")
    check_dims(config, body.dimensions, "dimensions")
    vectors, tokens = await _embed(request, config, texts, body.dimensions, "end" if body.truncate else "error")
    answer = OllamaEmbedResponse(
        model=body.model,
        embeddings=vectors,
        total_duration=nanos_since(started),
        load_duration=0,  # a load is part of the wait, not measured apart
        prompt_eval_count=tokens,
    )
    return json_response(answer)


@router.post("/api/embeddings", **ollama_doc(OllamaEmbeddingsResponse, body=OllamaEmbeddingsRequest))
async def embeddings(request: Request) -> Response:
    """Ollama's older ``embeddings``: one prompt's vector (an empty prompt: an empty vector, as Ollama does)."""
    svc = service(request)
    body = await parse(request, OllamaEmbeddingsRequest, svc.limits.max_body_bytes)
    config = model_for(request, bare(body.model), "encode")
    if not body.prompt:
        return json_response(OllamaEmbeddingsResponse(embedding=[]))
    svc.limits.text(body.prompt, "prompt")
    vectors, _ = await _embed(request, config, [body.prompt], None, "end")
    return json_response(OllamaEmbeddingsResponse(embedding=vectors[0]))


def capabilities(config: ModelConfig) -> list[str]:
    """What Ollama's ``show`` says a model can do: ``completion`` and ``tools`` for generators,
    ``embedding`` for encoders, ``vision`` for models that take images."""
    found = []
    if config.tasks.generate is not None:
        found += ["completion", "tools"]
    if config.tasks.encode is not None:
        found.append("embedding")
    if "image" in config.inputs:
        found.append("vision")
    return found


def details(config: ModelConfig, info: ModelInfo) -> OllamaModelDetails:
    family = config.architecture.model_type if config.architecture is not None else config.adapter
    running = str(info.precision.running or (info.profile or {}).get("dtype") or config.profiles["cpu"].dtype)
    gguf = info.backend == "llamacpp" or config.source.gguf_file is not None
    return OllamaModelDetails(
        format="gguf" if gguf else "safetensors",
        family=family,
        families=[family],
        parameter_size="",  # not in the catalog
        quantization_level=PRECISIONS.get(running, running.upper()),
    )


def listed(config: ModelConfig, info: ModelInfo) -> OllamaModel:
    """A model as ``/api/tags`` lists it: its id as the name, the bytes it holds in memory as its size,
    and a digest of its id and weights revision."""
    digest = hashlib.sha256(f"{config.id}@{config.source.revision or ''}".encode()).hexdigest()
    return OllamaModel(
        name=config.id,
        model=config.id,
        modified_at=STARTED,
        size=info.resident_bytes,
        digest=digest,
        details=details(config, info),
    )


async def _catalog(request: Request) -> list[tuple[ModelConfig, ModelInfo]]:
    svc = service(request)
    infos, _ = await svc.models()
    return [(svc.resolve(info.id), info) for info in infos]


@router.get("/api/tags", **ollama_doc(OllamaTags, errors=(400,)))
async def tags(request: Request) -> Response:
    """Every served model, as Ollama's ``list`` reads them."""
    return json_response(OllamaTags(models=[listed(c, i) for c, i in await _catalog(request)]))


@router.get("/api/ps", **ollama_doc(OllamaRunningList, errors=(400,)))
async def ps(request: Request) -> Response:
    """The models loaded now; ``size`` and ``size_vram`` are the bytes each holds (``size_vram`` on an
    accelerator only)."""
    running = []
    for config, info in await _catalog(request):
        if not info.loaded:
            continue
        on_device = (info.profile or {}).get("device", "cpu") != "cpu"
        running.append(
            OllamaRunning(
                **listed(config, info).model_dump(),
                expires_at=NEVER,
                size_vram=info.resident_bytes if on_device else 0,
                context_length=info.max_sequence_length,
            )
        )
    return json_response(OllamaRunningList(models=running))


@router.post("/api/show", **ollama_doc(OllamaShow, body=OllamaShowRequest, errors=(400, 404, 413)))
async def show(request: Request) -> Response:
    """One model's details, capabilities and architecture facts (``model_info`` with Ollama's keys)."""
    svc = service(request)
    body = await parse(request, OllamaShowRequest, svc.limits.max_body_bytes)
    config = svc.resolve(bare(body.model))
    info = await svc.model(config)
    family = details(config, info).family
    model_info: dict[str, Any] = {"general.architecture": family, "general.basename": config.id}
    model_info[f"{family}.context_length"] = config.max_sequence_length
    if config.architecture is not None:
        model_info[f"{family}.embedding_length"] = config.architecture.hidden_size
    if config.tasks.encode is not None and config.tasks.encode.dense is not None:
        model_info[f"{family}.embedding_length"] = config.tasks.encode.dense.dim
    answer = OllamaShow(
        modelfile=f"FROM {config.id}\n",
        parameters="",
        template="",  # the model's own chat template applies
        license="",
        details=details(config, info),
        model_info=model_info,
        capabilities=capabilities(config),
        modified_at=STARTED,
    )
    return json_response(answer)


@router.get("/api/version", **ollama_doc(OllamaVersion, errors=()))
async def version() -> Response:
    """The Ollama API version these routes follow."""
    return json_response(OllamaVersion(version=OLLAMA_API_VERSION))
