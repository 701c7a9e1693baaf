"""``POST /v1/encode/{model}``: dense, sparse and multivector vectors."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from sie_server.api.body import parse, render
from sie_server.api.context import MODEL, call, model_for, service
from sie_server.api.deadlines import within
from sie_server.api.openapi import doc
from sie_server.contract.requests import EncodeParams, EncodeRequest
from sie_server.contract.responses import EncodeResponse
from sie_server.errors import InvalidInput

router = APIRouter(tags=["work"])


def check_params(params: EncodeParams | None) -> None:
    if params is None:
        return
    output_types = list(params.output_types or ["dense"])
    dtype = params.output_dtype or "float32"
    if dtype not in ("float32", "float16") and output_types != ["dense"]:
        raise InvalidInput(f"output_dtype {dtype} applies to dense output only; ask for output_types ['dense']")
    is_query = (params.options or {}).get("is_query", False)
    if not isinstance(is_query, bool):
        raise InvalidInput("params.options.is_query must be true or false")


@router.post("/v1/encode/{model:path}", **doc(EncodeResponse, body=EncodeRequest))
async def encode(request: Request, model: str = MODEL) -> Response:
    config = model_for(request, model, "encode")
    svc = service(request)
    body = await parse(request, EncodeRequest, svc.limits.max_body_bytes)
    svc.limits.items(body.items, config)
    check_params(body.params)
    options = call(request)
    async with within(options):
        answer = await svc.encode(config, body, options)
    return render(request, answer)
