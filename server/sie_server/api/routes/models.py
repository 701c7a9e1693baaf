"""``GET /v1/models`` (OpenAI's list shape and SIE's), one model, its load, evict and reload, and ``/v1/memory``.

The ``POST`` routes are management routes (``api/keys.py``): an admin key when admin keys are set."""

from __future__ import annotations

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from sie_server.api.body import json_response
from sie_server.api.context import MODEL, service
from sie_server.api.openapi import doc
from sie_server.contract.model_filter import OUTPUTS, TASKS, ModelFilter
from sie_server.contract.state_wire import GatewayModelInfo, MemoryReport, ModelInfo, ModelList, OpenAIModel

router = APIRouter(tags=["models"])
ONE_MODEL = (ModelInfo, GatewayModelInfo)  # a gateway adds where the model runs
NO_MEMORY = {404: "INVALID_INPUT (a gateway holds no models: ask a worker)"}
LOAD_ERRORS = (404, 502, 503, 504)
NO_WORKER = {504: "INFERENCE_ERROR (on a gateway: no worker of the model's pool answered in time)"}
EVICT_CODES = {409: "INVALID_INPUT (the model is busy or pinned)"}
TASK = Query(None, description=f"only models that do this task: one of {', '.join(TASKS)}")
OUTPUT = Query(None, description=f"only models that give this encode output type: one of {', '.join(OUTPUTS)}")


@router.get("/v1/models", **doc(ModelList, errors=(400,), msgpack=False))
async def list_models(request: Request, task: str | None = TASK, output: str | None = OUTPUT) -> Response:
    """Every served model, or those that do ``task`` and give ``output`` (an unknown value: a 400 naming the known)."""
    wanted = ModelFilter.parse(task, output)
    infos, cpu = await service(request).models()
    infos = wanted.apply(infos)
    data = [OpenAIModel(id=i.id, created=i.created, owned_by=i.owned_by) for i in infos]
    return json_response(ModelList(data=data, models=infos, cpu=cpu))


@router.get("/v1/memory", **doc(MemoryReport, errors=(404,), msgpack=False, codes=NO_MEMORY))
async def memory(request: Request) -> Response:
    return json_response(await service(request).memory())


@router.post("/v1/models/{model:path}/reload", **doc(ONE_MODEL, errors=LOAD_ERRORS, msgpack=False, codes=NO_WORKER))
async def reload(request: Request, model: str = MODEL) -> Response:
    """Clear a failed load and load again (after fixing the weights, say)."""
    svc = service(request)
    return json_response(await svc.reload(svc.resolve(model)))


@router.post("/v1/models/{model:path}/load", **doc(ONE_MODEL, errors=LOAD_ERRORS, msgpack=False, codes=NO_WORKER))
async def load(request: Request, model: str = MODEL) -> Response:
    """Load (preload) the model now and answer once it is loaded (a failed one: its MODEL_LOAD_FAILED)."""
    svc = service(request)
    return json_response(await svc.load(svc.resolve(model)))


@router.post("/v1/models/{model:path}/evict", **doc(ONE_MODEL, errors=(404, 409), msgpack=False, codes=EVICT_CODES))
async def evict(request: Request, model: str = MODEL) -> Response:
    """Unload the model and free its memory (a model that is not loaded: unchanged). 409 while it has
    work queued or running, or is pinned."""
    svc = service(request)
    return json_response(await svc.evict(svc.resolve(model)))


@router.get("/v1/models/{model:path}", **doc(ONE_MODEL, errors=(404,), msgpack=False))
async def get_model(request: Request, model: str = MODEL) -> Response:
    svc = service(request)
    return json_response(await svc.model(svc.resolve(model)))
