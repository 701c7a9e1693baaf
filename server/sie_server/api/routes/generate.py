"""Generation: native ``/v1/generate/{model}`` and OpenAI ``/v1/chat/completions`` and
``/v1/completions``, each as one JSON answer or as server-sent events ending in ``data: [DONE]``."""

from __future__ import annotations

import time
import uuid
from typing import Literal

from fastapi import APIRouter, Request
from fastapi.responses import Response

from sie_server.api import tool_calls
from sie_server.api.body import json_response, parse, render
from sie_server.api.context import MODEL, call, model_for, service, unfit_chat
from sie_server.api.deadlines import within
from sie_server.api.openapi import doc
from sie_server.api.refusals import GRAMMAR, named
from sie_server.api.service import TextStream
from sie_server.api.streaming import sse, whole
from sie_server.catalog.schema import ModelConfig
from sie_server.contract.compat_responses import (
    ChatChoice,
    ChatChunkChoice,
    ChatCompletion,
    ChatCompletionChunk,
    ChatDelta,
    ChatMessageOut,
    Completion,
    CompletionChoice,
    FunctionCallOut,
    ToolCallDelta,
    ToolCallOut,
)
from sie_server.contract.envelope import Shape
from sie_server.contract.headers import CallOptions
from sie_server.contract.limits import Limits
from sie_server.contract.requests import ChatCompletionRequest, CompletionRequest, GenerateRequest
from sie_server.contract.responses import GenerateChunk, GenerateResponse, Usage
from sie_server.errors import InvalidInput

router = APIRouter(tags=["generate"])
NEW_TOKENS: int = GenerateRequest.model_fields["max_new_tokens"].default
CHAT_NEW_TOKENS = 256  # a chat completion's max_new_tokens when it sets neither max_completion_tokens nor max_tokens


def check(request: GenerateRequest, limits: Limits) -> None:
    if (request.prompt is None) == (request.messages is None):
        raise InvalidInput("send exactly one of `prompt` or `messages`")
    if request.prompt is not None:
        limits.text(request.prompt, "prompt")
    for i, message in enumerate(request.messages or []):
        limits.text(message.content, f"messages[{i}].content")


async def start(request: Request, config: ModelConfig, body: GenerateRequest, options: CallOptions) -> TextStream:
    svc = service(request)
    check(body, svc.limits)
    async with within(options):
        return await svc.generate(config, body, options)


def last_chunk(model: str, s: TextStream) -> GenerateChunk:
    """How the stream ended; with tools, the tool format its text is in (a gateway reads the text with it)."""
    return GenerateChunk(
        model=model,
        text="",
        text_delta="",
        done=True,
        finish_reason=s.finish_reason,
        usage=s.usage,
        tool_format=s.tool_format,
    )


@router.post("/v1/generate/{model:path}", **doc(GenerateResponse, body=GenerateRequest, stream=GenerateChunk))
async def generate(request: Request, model: str = MODEL) -> Response:
    config = model_for(request, model, "generate")
    precheck = unfit_chat(request, model, tokens=("max_new_tokens",), default=NEW_TOKENS)
    body = await parse(request, GenerateRequest, service(request).limits.max_body_bytes, precheck)
    options = call(request)
    with named("grammar", GRAMMAR, when=body.grammar is not None):
        stream = await start(request, config, body, options)
    if body.stream:
        return sse(
            stream,
            lambda delta: GenerateChunk(model=config.id, text=delta, text_delta=delta),
            lambda s: [last_chunk(config.id, s)],
            options,
        )
    await whole(stream, options)
    answer = GenerateResponse(model=config.id, text=stream.text, finish_reason=stream.finish_reason, usage=stream.usage)
    return render(request, answer)


@router.post(
    "/v1/chat/completions",
    **doc(ChatCompletion, body=ChatCompletionRequest, stream=ChatCompletionChunk, openai=True, msgpack=False),
)
async def chat_completions(request: Request) -> Response:
    precheck = unfit_chat(request, tokens=("max_completion_tokens", "max_tokens"), default=CHAT_NEW_TOKENS)
    body = await parse(request, ChatCompletionRequest, service(request).limits.max_body_bytes, precheck)
    config = model_for(request, body.model, "generate")
    formatted = body.response_format.grammar() if body.response_format is not None else None
    tools = tool_calls.plan(body.messages, body.tools, body.tool_choice, body.parallel_tool_calls, formatted)
    native = body.native(body.max_completion_tokens or body.max_tokens or CHAT_NEW_TOKENS, messages=tools.messages)
    native = native.model_copy(update={"grammar": tools.grammar, "tools": tools.request})
    options = call(request)
    with named("response_format", GRAMMAR, when=formatted is not None):
        stream = await start(request, config, native, options)
    ident, created = f"chatcmpl-{uuid.uuid4().hex[:24]}", int(time.time())

    def chunk(choice: ChatChunkChoice, usage: Usage | None = None) -> ChatCompletionChunk:
        return ChatCompletionChunk(id=ident, created=created, model=config.id, choices=[choice], usage=usage)

    if body.stream:
        first = [True]

        def piece(delta: str) -> ChatCompletionChunk | None:
            if tools.active:  # whether the text holds calls is known once it is whole: sent at the end
                return None
            role: Literal["assistant"] | None = "assistant" if first[0] else None
            first[0] = False
            return chunk(ChatChunkChoice(delta=ChatDelta(role=role, content=delta)))

        def final(s: TextStream) -> list[ChatCompletionChunk]:
            content, calls = tools.answer(s.text, s.finish_reason, s.tool_format)
            events = []
            if tools.active:
                deltas = [ToolCallDelta(index=k, id=c.id, type="function",
                                        function=FunctionCallOut(name=c.function.name, arguments=c.function.arguments))
                          for k, c in enumerate(calls)]  # fmt: skip
                events.append(chunk(ChatChunkChoice(delta=ChatDelta(role="assistant", content=content,
                                                                    tool_calls=deltas or None))))  # fmt: skip
            reason = "tool_calls" if calls else s.finish_reason
            return [*events, chunk(ChatChunkChoice(delta=ChatDelta(), finish_reason=reason), s.usage)]

        return sse(stream, piece, final, options, Shape.OPENAI)
    await whole(stream, options)
    content, calls = tools.answer(stream.text, stream.finish_reason, stream.tool_format)
    out_calls = [
        ToolCallOut(id=c.id, function=FunctionCallOut(name=c.function.name, arguments=c.function.arguments))
        for c in calls
    ]
    message = ChatMessageOut(content=content, tool_calls=out_calls or None)
    choice = ChatChoice(message=message, finish_reason="tool_calls" if calls else stream.finish_reason)
    answer = ChatCompletion(id=ident, created=created, model=config.id, choices=[choice], usage=stream.usage)
    return json_response(answer)


@router.post(
    "/v1/completions", **doc(Completion, body=CompletionRequest, stream=Completion, openai=True, msgpack=False)
)
async def completions(request: Request) -> Response:
    body = await parse(request, CompletionRequest, service(request).limits.max_body_bytes)
    config = model_for(request, body.model, "generate")
    native = body.native(body.max_tokens, prompt=body.prompt)
    options = call(request)
    with named("response_format", GRAMMAR, when=native.grammar is not None):
        stream = await start(request, config, native, options)
    ident, created = f"cmpl-{uuid.uuid4().hex[:24]}", int(time.time())

    def answer(text: str, reason: str | None, s: TextStream | None) -> Completion:
        choice = CompletionChoice(text=text, finish_reason=reason)
        usage = s.usage if s is not None else None
        return Completion(id=ident, created=created, model=config.id, choices=[choice], usage=usage)

    if body.stream:
        return sse(
            stream,
            lambda delta: answer(delta, None, None),
            lambda s: [answer("", s.finish_reason, s)],
            options,
            Shape.OPENAI,
        )
    await whole(stream, options)
    return json_response(answer(stream.text, stream.finish_reason, stream))
