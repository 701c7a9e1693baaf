"""``POST /v1/score/{model}``: items ranked by relevance to a query."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from sie_server.api.body import parse, render
from sie_server.api.context import MODEL, call, model_for, service
from sie_server.api.deadlines import within
from sie_server.api.openapi import doc
from sie_server.api.routes.encode import check_instruction
from sie_server.contract.requests import ScoreRequest
from sie_server.contract.responses import ScoreResponse
from sie_server.errors import InvalidInput

router = APIRouter(tags=["work"])


@router.post("/v1/score/{model:path}", **doc(ScoreResponse, body=ScoreRequest))
async def score(request: Request, model: str = MODEL) -> Response:
    config = model_for(request, model, "score")
    svc = service(request)
    body = await parse(request, ScoreRequest, svc.limits.max_body_bytes)
    svc.limits.item(body.query, "query", config)
    svc.limits.items(body.items, config)
    if body.options:  # accepted for SIE 0.10.1's wire; a score reads none, so one given is refused, not ignored
        raise InvalidInput(f"options {sorted(body.options)} are not score options: a score takes none")
    check_instruction(config, body.instruction, "instruction")
    options = call(request)
    async with within(options):
        answer = await svc.score(config, body, options)
    return render(request, answer)
