"""``POST /v1/encode/{model}``."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from sie_server.api.codec import parse, render
from sie_server.api.inputs import text_inputs
from sie_server.api.outputs import check_dtype, encode_item
from sie_server.api.schemas import EncodeRequest
from sie_server.api.state import call_options, resolve
from sie_server.errors import InvalidInput

router = APIRouter()


@router.post("/v1/encode/{model:path}")
async def encode(model: str, request: Request) -> Response:
    state, config = resolve(request, model, "encode")
    body = await parse(request, EncodeRequest, state.settings.max_body_bytes)
    params = body.params
    output_types: list[str] = list(params.output_types) if params and params.output_types else ["dense"]
    dtype = (params.output_dtype if params else None) or "float32"
    check_dtype(dtype, output_types)
    options = (params.options if params else None) or {}
    is_query = options.get("is_query", False)
    if not isinstance(is_query, bool):
        raise InvalidInput("params.options.is_query must be true or false")
    outcome = await state.service.encode(
        config,
        text_inputs(body.items, config, state.settings),
        output_types=output_types,
        is_query=is_query,
        instruction=params.instruction if params else None,
        call=call_options(request),
    )
    encode_task = config.tasks.encode
    dims = {k: getattr(encode_task, k).dim for k in encode_task.output_types()} if encode_task else {}
    payload = {
        "model": outcome.model,
        "items": [encode_item(i, o, dtype, dims) for i, o in zip(outcome.ids, outcome.outputs, strict=True)],
        "timing": outcome.timing.as_dict(),
        "usage": {"prompt_tokens": outcome.prompt_tokens},
        "truncated_items": outcome.truncated,
    }
    return render(request, payload)
