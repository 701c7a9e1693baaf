"""``POST /v1/extract/{model}``: entity spans for the labels the caller names."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from sie_server.api.body import parse, render
from sie_server.api.context import MODEL, call, model_for, service
from sie_server.api.deadlines import within
from sie_server.api.openapi import doc
from sie_server.contract.requests import ExtractRequest
from sie_server.contract.responses import ExtractResponse

router = APIRouter(tags=["work"])


@router.post("/v1/extract/{model:path}", **doc(ExtractResponse, body=ExtractRequest))
async def extract(request: Request, model: str = MODEL) -> Response:
    config = model_for(request, model, "extract")
    svc = service(request)
    body = await parse(request, ExtractRequest, svc.limits.max_body_bytes)
    svc.limits.items(body.items, config)
    options = call(request)
    async with within(options):
        answer = await svc.extract(config, body, options)
    return render(request, answer)
