"""``POST /v1/extract/{model}``: entity spans for the labels the caller names."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from sie_server.api.codec import parse, render
from sie_server.api.inputs import text_inputs
from sie_server.api.schemas import ExtractRequest
from sie_server.api.state import call_options, resolve

router = APIRouter()


@router.post("/v1/extract/{model:path}")
async def extract(model: str, request: Request) -> Response:
    state, config = resolve(request, model, "extract")
    body = await parse(request, ExtractRequest, state.settings.max_body_bytes)
    outcome = await state.service.extract(
        config,
        text_inputs(body.items, config, state.settings),
        labels=body.params.labels if body.params else None,
        threshold=body.params.threshold if body.params else None,
        call=call_options(request),
    )
    items = [{"id": i, "entities": e} for i, e in zip(outcome.ids, outcome.entities, strict=True)]
    return render(request, {"model": outcome.model, "items": items, "timing": outcome.timing.as_dict()})
