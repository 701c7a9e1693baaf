"""OpenAI's Responses API, stateless: ``POST /v1/responses`` as a thin translation onto the same
generation as ``/v1/chat/completions`` (tools through api/tool_calls.py, ``text.format`` as a grammar),
answered whole or as the Responses stream's events (``response.created`` ... ``response.completed``)."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import ValidationError

from sie_server.api import tool_calls
from sie_server.api.body import json_response, parse
from sie_server.api.context import call, model_for, service, unfit_chat
from sie_server.api.deadlines import next_within
from sie_server.api.openapi import doc
from sie_server.api.refusals import GRAMMAR, named
from sie_server.api.routes.generate import start
from sie_server.api.service import TextStream
from sie_server.api.streaming import whole
from sie_server.contract import codec, envelope
from sie_server.contract.requests import GenerateRequest
from sie_server.contract.responses_api import (
    FunctionCallItem,
    Incomplete,
    OutputMessage,
    OutputText,
    ResponseObject,
    ResponsesRequest,
    ResponseStreamEvent,
    ResponsesUsage,
)
from sie_server.errors import InvalidInput, SIEError

router = APIRouter(tags=["generate"])
DEFAULT_OUTPUT_TOKENS = 256


def _answer(body: ResponsesRequest, model: str, ident: str, created: int, plan: tool_calls.ToolPlan,
            stream: TextStream | None) -> ResponseObject:  # fmt: skip
    """The response object: in progress (no stream yet), or its output items and usage."""
    echo: dict[str, Any] = {
        "instructions": body.instructions, "max_output_tokens": body.max_output_tokens, "temperature": body.temperature,
        "top_p": body.top_p, "parallel_tool_calls": body.parallel_tool_calls,
        "tool_choice": body.tool_choice if body.tool_choice is not None else "auto",
        "tools": [t.model_dump(by_alias=True) for t in body.tools or []],
        "text": body.text.model_dump(by_alias=True) if body.text is not None else {"format": {"type": "text"}},
    }  # fmt: skip
    if stream is None:
        return ResponseObject(id=ident, created_at=created, status="in_progress", model=model, output=[], **echo)
    content, calls = plan.answer(stream.text, stream.finish_reason, stream.tool_format)
    output: list[OutputMessage | FunctionCallItem] = [
        FunctionCallItem(id=f"fc_{c.id}", call_id=c.id, name=c.function.name, arguments=c.function.arguments)
        for c in calls
    ]
    cut = stream.finish_reason == "length"
    if not calls:
        output.append(OutputMessage(id=f"msg_{ident}", status="incomplete" if cut else "completed",
                                    content=[OutputText(text=content or "")]))  # fmt: skip
    usage = stream.usage
    return ResponseObject(
        id=ident, created_at=created, status="incomplete" if cut else "completed",
        incomplete_details=Incomplete() if cut else None, model=model, output=output,
        usage=ResponsesUsage(input_tokens=usage.prompt_tokens, output_tokens=usage.completion_tokens,
                             total_tokens=usage.total_tokens), **echo,
    )  # fmt: skip


@router.post(
    "/v1/responses",
    **doc(ResponseObject, body=ResponsesRequest, stream=ResponseStreamEvent, openai=True, msgpack=False),
)
async def responses(request: Request) -> Response:
    precheck = unfit_chat(request, tokens=("max_output_tokens",), default=DEFAULT_OUTPUT_TOKENS, turns="input")
    body = await parse(request, ResponsesRequest, service(request).limits.max_body_bytes, precheck)
    if body.previous_response_id is not None:
        raise InvalidInput("previous_response_id: this server keeps no responses (send the whole input each time)")
    config = model_for(request, body.model, "generate")
    try:
        messages = body.messages()
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    plan = tool_calls.plan(messages, body.chat_tools(), body.chat_tool_choice(), body.parallel_tool_calls,
                           body.grammar())  # fmt: skip
    try:
        native = body_native(body, plan)
    except ValidationError as exc:  # a value the native request refuses (its own checks): the caller's
        raise InvalidInput(f"this request cannot be served: {exc.errors()[0]['msg']}") from None
    options = call(request)
    with named("text.format", GRAMMAR, when=body.grammar() is not None):
        stream = await start(request, config, native, options)
    ident, created = f"resp_{uuid.uuid4().hex[:24]}", int(time.time())
    if not body.stream:
        await whole(stream, options)
        return json_response(_answer(body, config.id, ident, created, plan, stream))

    async def events() -> AsyncIterator[bytes]:
        number = iter(range(1 << 62))
        pending = _answer(body, config.id, ident, created, plan, None).model_dump()
        yield _event("response.created", next(number), response=pending)
        yield _event("response.in_progress", next(number), response=pending)
        item_id = f"msg_{ident}"
        if not plan.active:
            item = {"type": "message", "id": item_id, "status": "in_progress", "role": "assistant", "content": []}
            yield _event("response.output_item.added", next(number), output_index=0, item=item)
            part = OutputText(text="").model_dump()
            yield _event("response.content_part.added", next(number), item_id=item_id, output_index=0,
                         content_index=0, part=part)  # fmt: skip
        finished = False
        try:
            deltas = stream.deltas()
            while True:
                try:
                    delta = await next_within(deltas, options)
                except StopAsyncIteration:
                    break
                if not plan.active:  # whether the text holds tool calls is known once it is whole
                    yield _event("response.output_text.delta", next(number), item_id=item_id, output_index=0,
                                 content_index=0, delta=delta, logprobs=[])  # fmt: skip
            finished = True
        except SIEError as exc:
            finished = True
            error = envelope.error_body(exc, envelope.Shape.OPENAI)["error"]  # its own type would override "error"
            yield _event("error", next(number), code=error["code"], message=error["message"], param=error["param"])
            return
        finally:
            if not finished:
                stream.cancel()
        done = _answer(body, config.id, ident, created, plan, stream)
        for index, item_out in enumerate(done.output):
            dumped = item_out.model_dump()
            if isinstance(item_out, OutputMessage):
                text = item_out.content[0].text
                yield _event("response.output_text.done", next(number), item_id=item_id, output_index=index,
                             content_index=0, text=text, logprobs=[])  # fmt: skip
                yield _event("response.content_part.done", next(number), item_id=item_id, output_index=index,
                             content_index=0, part=dumped["content"][0])  # fmt: skip
            else:
                yield _event("response.output_item.added", next(number), output_index=index, item=dumped)
            yield _event("response.output_item.done", next(number), output_index=index, item=dumped)
        kind = "response.completed" if done.status == "completed" else "response.incomplete"
        yield _event(kind, next(number), response=done.model_dump())

    return StreamingResponse(events(), media_type=codec.SSE, headers={"Cache-Control": "no-cache"})


def body_native(body: ResponsesRequest, plan: tool_calls.ToolPlan) -> GenerateRequest:
    return GenerateRequest(
        messages=plan.messages,
        max_new_tokens=body.max_output_tokens or DEFAULT_OUTPUT_TOKENS,
        temperature=body.temperature,
        top_p=body.top_p,
        seed=body.seed,
        grammar=plan.grammar,
        tools=plan.request,
    )


def _event(kind: str, number: int, **fields: Any) -> bytes:
    payload = {"type": kind, "sequence_number": number, **fields}
    return f"event: {kind}\n".encode() + b"data: " + codec.dumps_json(payload) + b"\n\n"
