"""``POST /v1/score/{model}``."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from sie_server.api.codec import parse, render
from sie_server.api.inputs import text_input, text_inputs
from sie_server.api.schemas import ScoreRequest
from sie_server.api.state import call_options, resolve

router = APIRouter()


@router.post("/v1/score/{model:path}")
async def score(model: str, request: Request) -> Response:
    state, config = resolve(request, model, "score")
    body = await parse(request, ScoreRequest, state.settings.max_body_bytes)
    query = text_input(body.query, "query", "query", config, state.settings)
    outcome = await state.service.score(
        config,
        query,
        text_inputs(body.items, config, state.settings),
        instruction=body.instruction,
        call=call_options(request),
    )
    payload = {
        "model": outcome.model,
        "query_id": outcome.query_id,
        "scores": [
            {"item_id": item_id, "score": value, "rank": rank} for rank, (item_id, value) in enumerate(outcome.scores)
        ],
        "timing": outcome.timing.as_dict(),
        "usage": {"prompt_tokens": outcome.prompt_tokens},
        "truncated_items": outcome.truncated,
    }
    return render(request, payload)
