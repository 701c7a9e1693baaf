"""``POST /v1/encode/{model}``: dense, sparse and multivector vectors."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from sie_server.api.body import parse, render
from sie_server.api.context import MODEL, call, model_for, service
from sie_server.api.deadlines import within
from sie_server.api.openapi import doc
from sie_server.api.refusals import OVER_LIMIT, named
from sie_server.catalog.schema import ModelConfig
from sie_server.contract.requests import EncodeItemIn, EncodeParams, EncodeRequest
from sie_server.contract.responses import EncodeResponse
from sie_server.errors import InvalidInput

router = APIRouter(tags=["work"])
#: the ``params.options`` an encode reads (engine/frontdoor.py); any other is refused, not ignored
ENCODE_OPTIONS = frozenset({"is_query", "task"})
#: adapters whose prompt has no place for an instruction (their text formatting leaves it out): one asked for
#: is refused, not dropped (adapters/encoders/*.py ``format_text``, the cross-encoder's ``tokenize_pairs``)
NO_INSTRUCTION = frozenset({"bge_m3", "clip", "colpali", "cross_encoder", "splade"})


def check_params(params: EncodeParams | None) -> None:
    if params is None:
        return
    output_types = list(params.output_types or ["dense"])
    dtype = params.output_dtype or "float32"
    if dtype not in ("float32", "float16") and output_types != ["dense"]:
        raise InvalidInput(f"output_dtype {dtype} applies to dense output only; ask for output_types ['dense']")
    unknown = sorted(set(params.options or {}) - ENCODE_OPTIONS)
    if unknown:
        raise InvalidInput(f"params.options {unknown} are not encode options (it takes: {sorted(ENCODE_OPTIONS)})")
    is_query = (params.options or {}).get("is_query", False)
    if not isinstance(is_query, bool):
        raise InvalidInput("params.options.is_query must be true or false")
    if params.truncation == "chunk" and output_types != ["dense"]:
        raise InvalidInput("params.truncation chunk applies to dense output only; ask for output_types ['dense']")
    if params.dims is not None and "dense" not in output_types:
        raise InvalidInput("params.dims applies to dense output; ask for output_types ['dense']")


def check_dims(config: ModelConfig, dims: int | None, field: str) -> None:
    """``dims`` must be the model's dense dim or one of the Matryoshka dims it was trained for."""
    encode = config.tasks.encode
    if dims is None or encode is None:
        return
    if encode.dense is None:
        raise InvalidInput(f"{field} applies to dense vectors; model {config.id} has none")
    allowed = encode.dense.allowed_dims()
    if dims not in allowed:
        raise InvalidInput(f"{field} {dims} is not served by model {config.id}; it serves {allowed}")


def check_instruction(config: ModelConfig, instruction: str | None, field: str) -> None:
    if instruction and config.adapter in NO_INSTRUCTION:
        raise InvalidInput(f"{field}: model {config.id} ({config.adapter}) has no place for an instruction")


def check_outputs(config: ModelConfig, output_types: list[str], field: str) -> None:
    """Each output asked for must be one the model gives (a dense model has no sparse vectors)."""
    encode = config.tasks.encode
    offered = encode.served_outputs() if encode is not None else []
    missing = [t for t in output_types if t not in offered]
    if missing:
        raise InvalidInput(f"{field}: model {config.id} has no {', '.join(missing)} output; it offers {offered}")


def check_spans(items: list[EncodeItemIn], params: EncodeParams | None) -> None:
    """Late chunking: spans of text items, ``0 <= start < end <= len(text)``, dense output only."""
    for k, item in enumerate(items):
        if item.spans is None:
            continue
        if params and params.output_types and list(params.output_types) != ["dense"]:
            raise InvalidInput(
                f"items[{k}].spans (late chunking) gives dense vectors only; ask for output_types ['dense']"
            )
        if item.text is None or item.images:
            raise InvalidInput(f"items[{k}].spans needs a text item without images")
        for s, (start, end) in enumerate(item.spans):
            if not 0 <= start < end <= len(item.text):
                raise InvalidInput(
                    f"items[{k}].spans[{s}] [{start}, {end}) must satisfy 0 <= start < end <= {len(item.text)} "
                    "(character offsets into the item's text)"
                )


@router.post("/v1/encode/{model:path}", **doc(EncodeResponse, body=EncodeRequest))
async def encode(request: Request, model: str = MODEL) -> Response:
    config = model_for(request, model, "encode")
    svc = service(request)
    body = await parse(request, EncodeRequest, svc.limits.max_body_bytes)
    svc.limits.items(body.items, config)
    check_params(body.params)
    check_dims(config, body.params.dims if body.params else None, "params.dims")
    check_instruction(config, body.params.instruction if body.params else None, "params.instruction")
    check_spans(body.items, body.params)
    check_outputs(
        config, list(body.params.output_types or ["dense"]) if body.params else ["dense"], "params.output_types"
    )
    options = call(request)
    too_long = body.params is not None and body.params.truncation == "error"
    with named("params.truncation error", OVER_LIMIT, when=too_long):
        async with within(options):
            answer = await svc.encode(config, body, options)
    return render(request, answer)
