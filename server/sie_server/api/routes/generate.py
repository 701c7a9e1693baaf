"""Generation: native ``/v1/generate/{model}`` and OpenAI ``/v1/chat/completions`` / ``/v1/completions``,
each as one JSON answer or as server-sent events ending in ``data: [DONE]``."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response, StreamingResponse

from sie_server.api.codec import json_response, parse, render
from sie_server.api.schemas import ChatCompletionRequest, CompletionRequest, GenerateRequest, Message
from sie_server.api.state import call_options, resolve, server
from sie_server.engine.generation import GenerationService, SamplingParams, Sequence, usage
from sie_server.errors import InvalidInput, SIEError

router = APIRouter()
Chunk = Callable[[str, str | None, Sequence], dict[str, Any]]


def _stops(stop: str | list[str] | None) -> tuple[str, ...]:
    return (stop,) if isinstance(stop, str) else tuple(stop or ())


async def _start(
    request: Request, model_id: str, prompt: str | None, messages: list[Message] | None, params: SamplingParams
) -> tuple[Sequence, str]:
    state, config = resolve(request, model_id, "generate")
    if config.tasks.generate is None:
        raise InvalidInput(f"model {config.id} does not support generate (its tasks: {config.tasks.names()})")
    if (prompt is None) == (messages is None):
        raise InvalidInput("send exactly one of `prompt` or `messages`")
    as_dicts = [m.model_dump() for m in messages] if messages is not None else None
    seq, _ = await state.generation.start(
        config, prompt=prompt, messages=as_dicts, params=params, wait_for_load=call_options(request).wait_for_load
    )
    return seq, config.id


def _sse(seq: Sequence, chunk: Chunk, final: Callable[[Sequence], list[dict[str, Any]]]) -> StreamingResponse:
    async def events() -> AsyncIterator[bytes]:
        try:
            async for delta in GenerationService.stream(seq):
                yield f"data: {json.dumps(chunk(delta, None, seq))}\n\n".encode()
            for last in final(seq):
                yield f"data: {json.dumps(last)}\n\n".encode()
        except SIEError as exc:
            yield f"data: {json.dumps({'detail': {'code': exc.code.value, 'message': exc.message}})}\n\n".encode()
        yield b"data: [DONE]\n\n"

    return StreamingResponse(events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})


async def _wait(request: Request, seq: Sequence) -> None:
    """Wait for a whole answer; stop decoding if the client goes away first."""
    import asyncio

    disconnected = call_options(request).disconnected
    finished = asyncio.ensure_future(server(request).generation.complete(seq))
    watcher = asyncio.ensure_future(disconnected()) if disconnected else None
    try:
        await asyncio.wait([t for t in (finished, watcher) if t is not None], return_when=asyncio.FIRST_COMPLETED)
    finally:
        if watcher is not None:
            watcher.cancel()
    if not finished.done():
        seq.cancelled = True
        finished.cancel()
        raise InvalidInput("client disconnected")
    finished.result()


@router.post("/v1/generate/{model:path}")
async def generate(model: str, request: Request) -> Response:
    body = await parse(request, GenerateRequest, server(request).settings.max_body_bytes)
    params = SamplingParams(body.max_new_tokens, body.temperature, body.top_p, _stops(body.stop), body.seed)
    seq, model_id = await _start(request, model, body.prompt, body.messages, params)
    if body.stream:
        return _sse(
            seq,
            lambda delta, reason, s: {"model": model_id, "text": delta, "finish_reason": reason},
            lambda s: [{"model": model_id, "text": "", "finish_reason": s.finish_reason, "usage": usage(s)}],
        )
    await _wait(request, seq)
    return render(
        request, {"model": model_id, "text": seq.text, "finish_reason": seq.finish_reason, "usage": usage(seq)}
    )


@router.post("/v1/chat/completions")
async def chat_completions(request: Request) -> Response:
    body = await parse(request, ChatCompletionRequest, server(request).settings.max_body_bytes)
    max_tokens = body.max_completion_tokens or body.max_tokens or 256
    params = SamplingParams(max_tokens, body.temperature, body.top_p, _stops(body.stop), body.seed)
    seq, model_id = await _start(request, body.model, None, body.messages, params)
    ident, created = f"chatcmpl-{uuid.uuid4().hex[:24]}", int(time.time())
    base = {"id": ident, "created": created, "model": model_id}
    if body.stream:
        first = [True]

        def chunk(delta: str, reason: str | None, s: Sequence) -> dict[str, Any]:
            content: dict[str, Any] = {"content": delta}
            if first[0]:
                content["role"], first[0] = "assistant", False
            choice = {"index": 0, "delta": content, "finish_reason": reason}
            return {**base, "object": "chat.completion.chunk", "choices": [choice]}

        def final(s: Sequence) -> list[dict[str, Any]]:
            done = {"index": 0, "delta": {}, "finish_reason": s.finish_reason}
            return [{**base, "object": "chat.completion.chunk", "choices": [done], "usage": usage(s)}]

        return _sse(seq, chunk, final)
    await _wait(request, seq)
    message = {"role": "assistant", "content": seq.text}
    choice = {"index": 0, "message": message, "finish_reason": seq.finish_reason, "logprobs": None}
    return json_response({**base, "object": "chat.completion", "choices": [choice], "usage": usage(seq)})


@router.post("/v1/completions")
async def completions(request: Request) -> Response:
    body = await parse(request, CompletionRequest, server(request).settings.max_body_bytes)
    params = SamplingParams(body.max_tokens, body.temperature, body.top_p, _stops(body.stop), body.seed)
    seq, model_id = await _start(request, body.model, body.prompt, None, params)
    base = {
        "id": f"cmpl-{uuid.uuid4().hex[:24]}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": model_id,
    }
    if body.stream:
        return _sse(
            seq,
            lambda delta, reason, s: {**base, "choices": [{"index": 0, "text": delta, "finish_reason": reason}]},
            lambda s: [
                {**base, "choices": [{"index": 0, "text": "", "finish_reason": s.finish_reason}], "usage": usage(s)}
            ],
        )
    await _wait(request, seq)
    choice = {"index": 0, "text": seq.text, "finish_reason": seq.finish_reason, "logprobs": None}
    return json_response({**base, "choices": [choice], "usage": usage(seq)})
