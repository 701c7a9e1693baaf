"""Ollama's ``/api/chat`` and ``/api/generate`` onto the same generation service call as
``/v1/generate`` and ``/v1/chat/completions`` (api/routes/generate.py): Ollama's option names, ``format``
as the same grammar as ``response_format``, tools through the same plan (api/tool_calls.py). Streamed by
default, as Ollama does: one JSON object a line (NDJSON), the last with ``done: true``, how it ended,
its token counts and durations in nanoseconds; an error part way is an ``{"error": ...}`` line."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel

from sie_server.api import tool_calls
from sie_server.api.body import json_response, parse, validate
from sie_server.api.context import call, model_for, service, unfit_chat
from sie_server.api.deadlines import next_within
from sie_server.api.openapi import NDJSON, doc
from sie_server.api.refusals import GRAMMAR, named
from sie_server.api.routes.generate import start
from sie_server.api.service import TextStream
from sie_server.api.streaming import whole
from sie_server.catalog.schema import ModelConfig
from sie_server.contract import codec, envelope
from sie_server.contract.grammar_wire import GrammarIn
from sie_server.contract.headers import CallOptions
from sie_server.contract.ollama_wire import (
    DEFAULT_NUM_PREDICT,
    DEFAULT_TEMPERATURE,
    DEFAULT_TOP_P,
    Format,
    KeepAlive,
    OllamaChatRequest,
    OllamaChatResponse,
    OllamaError,
    OllamaFunctionCall,
    OllamaGenerateRequest,
    OllamaGenerateResponse,
    OllamaMessage,
    OllamaMessageOut,
    OllamaOptions,
    OllamaToolCall,
    bare,
    now,
)
from sie_server.contract.requests import GenerateRequest, Message
from sie_server.contract.tools_wire import ChatMessageIn, FunctionCall, ToolCall
from sie_server.errors import InvalidInput, SIEError

router = APIRouter(tags=["ollama"])
ERRORS = (400, 404, 413, 502, 503, 504)
UNLOAD = (0, 0.0, "0", "0s", "0m")


def ollama_doc(answer: Any, **kwargs: Any) -> dict[str, Any]:
    """``doc()`` for an Ollama route: JSON only, Ollama's error shape."""
    return doc(answer, msgpack=False, error_model=OllamaError, **kwargs)


def grammar(fmt: Format) -> GrammarIn | None:
    """``format`` as the grammar ``response_format`` gives: ``json`` any JSON object, a schema that schema
    (best effort, as Ollama's is: a keyword the engine does not support is not enforced)."""
    if not fmt:
        return None
    if fmt == "json":
        return GrammarIn(json_schema={"type": "object"})
    assert isinstance(fmt, dict)
    return GrammarIn(json_schema=fmt, strict=False)


def native(options: OllamaOptions | None, **what: object) -> GenerateRequest:
    """Ollama's options on the native wire; ``what`` is the prompt or messages, grammar and tools."""
    o = options or OllamaOptions()
    if o.num_predict == 0:
        raise InvalidInput("options.num_predict must be at least 1 (or -1 for the default)")
    return validate(
        GenerateRequest,
        {
            "max_new_tokens": o.num_predict if o.num_predict and o.num_predict > 0 else DEFAULT_NUM_PREDICT,
            "temperature": DEFAULT_TEMPERATURE if o.temperature is None else o.temperature,
            "top_p": DEFAULT_TOP_P if o.top_p is None else o.top_p,
            "stop": o.stop,
            "seed": o.seed,
            "presence_penalty": o.presence_penalty or 0.0,
            "frequency_penalty": o.frequency_penalty or 0.0,
            **what,
        },
    )


@dataclass
class Clock:
    """When the route began, and when the first text came (the prompt's evaluation ends there)."""

    started: int
    first: int | None = None

    def mark(self) -> None:
        if self.first is None:
            self.first = time.perf_counter_ns()

    def counts(self, stream: TextStream) -> dict[str, int | None]:
        """The last line's counts and durations in nanoseconds (the phases where the text was streamed)."""
        end = time.perf_counter_ns()
        return {
            "total_duration": end - self.started,
            "load_duration": 0,  # a load is part of the wait, not measured apart
            "prompt_eval_count": stream.usage.prompt_tokens,
            "prompt_eval_duration": None if self.first is None else self.first - self.started,
            "eval_count": stream.usage.completion_tokens,
            "eval_duration": None if self.first is None else end - self.first,
        }


def line(answer: BaseModel | dict[str, object]) -> bytes:
    payload = answer.model_dump() if isinstance(answer, BaseModel) else answer
    return codec.dumps_json(payload) + b"\n"


def ndjson(
    stream: TextStream,
    piece: Callable[[str], BaseModel | None],
    final: Callable[[TextStream], Sequence[BaseModel]],
    options: CallOptions,
) -> StreamingResponse:
    """A line per piece of text (none where ``piece`` answers None), then the final lines; a failure
    part way (or the deadline passing) is Ollama's error line. The caller leaving cancels the generation."""

    async def lines() -> AsyncIterator[bytes]:
        finished = False
        try:
            deltas = stream.deltas()
            while True:
                try:
                    delta = await next_within(deltas, options)
                except StopAsyncIteration:
                    break
                answer = piece(delta)
                if answer is not None:
                    yield line(answer)
            for last in final(stream):
                yield line(last)
            finished = True
        except SIEError as exc:
            finished = True
            yield line(envelope.error_body(exc, envelope.Shape.OLLAMA))
        finally:
            if not finished:
                stream.cancel()

    return StreamingResponse(lines(), media_type=NDJSON, headers={"Cache-Control": "no-cache"})


async def lifecycle(request: Request, config: ModelConfig, keep_alive: KeepAlive) -> str:
    """Nothing to generate: load the model (``done_reason: load``), as Ollama does. Ollama's unload
    (``keep_alive: 0``) is refused: unloading is a management route here (``POST /v1/models/{id}/evict``,
    behind the admin key when one is set), which an API key must not reach through this door."""
    if keep_alive in UNLOAD:
        raise InvalidInput(f"keep_alive 0 (unload) is not served here: POST /v1/models/{config.id}/evict unloads")
    await service(request).load(config)
    return "load"


def wired(messages: list[OllamaMessage]) -> list[ChatMessageIn]:
    """Ollama's messages as the chat plan takes them: earlier calls get ids, a tool result answers the
    last call of its tool (or the last call)."""
    out: list[ChatMessageIn] = []
    ids: dict[str, str] = {}
    last: str | None = None
    for k, m in enumerate(messages):
        if m.images:
            raise InvalidInput(f"messages[{k}].images: the Ollama routes take text only")
        calls = [
            ToolCall(id=f"call_{k}_{j}", function=FunctionCall(name=c.function.name,
                                                               arguments=json.dumps(c.function.arguments)))
            for j, c in enumerate(m.tool_calls or [])
        ]  # fmt: skip
        for c in calls:
            ids[c.function.name] = last = c.id
        answers = ids.get(m.tool_name or "", last) if m.role == "tool" else None
        out.append(ChatMessageIn(role=m.role, content=m.content, tool_calls=calls or None, tool_call_id=answers))
    return out


def as_object(call: ToolCall) -> dict[str, Any]:
    """A call's arguments as Ollama sends them: a JSON object (a model's non-object arguments under ``value``)."""
    arguments = json.loads(call.function.arguments)
    return arguments if isinstance(arguments, dict) else {"value": arguments}


def think_refused(config: ModelConfig, think: object) -> None:
    if think not in (None, False):
        raise InvalidInput(f"model {config.id} does not support thinking")


@router.post(
    "/api/chat", **ollama_doc(OllamaChatResponse, body=OllamaChatRequest, stream=OllamaChatResponse, ndjson=True,
                              errors=ERRORS)
)  # fmt: skip
async def chat(request: Request) -> Response:
    """Ollama's ``chat``: the messages in the model's chat template; ``tools`` as on ``/v1/chat/completions``
    (streamed, a reply that may hold calls comes whole in the last line); no messages: load the model."""
    clock = Clock(time.perf_counter_ns())
    precheck = unfit_chat(request, tokens=("num_predict",), within="options", default=DEFAULT_NUM_PREDICT, naming=bare)
    body = await parse(request, OllamaChatRequest, service(request).limits.max_body_bytes, precheck)
    config = model_for(request, bare(body.model), "generate")
    think_refused(config, body.think)

    def answer(
        content: str, done: bool, calls: list[OllamaToolCall] | None = None, **extra: object
    ) -> OllamaChatResponse:
        message = OllamaMessageOut(content=content, tool_calls=calls)
        return OllamaChatResponse.model_validate(
            {"model": body.model, "created_at": now(), "message": message, "done": done, **extra}
        )

    if not body.messages:
        return json_response(answer("", True, done_reason=await lifecycle(request, config, body.keep_alive)))
    plan = tool_calls.plan(wired(body.messages), body.tools, None, False, grammar(body.format))
    generation = native(body.options, messages=plan.messages, grammar=plan.grammar, tools=plan.request)
    options = call(request)
    with named("format", GRAMMAR, when=bool(body.format)):
        stream = await start(request, config, generation, options)

    def last(s: TextStream) -> OllamaChatResponse:
        content, found = plan.answer(s.text, s.finish_reason, s.tool_format)
        calls = [OllamaToolCall(function=OllamaFunctionCall(name=c.function.name, arguments=as_object(c)))
                 for c in found]  # fmt: skip
        text = (content or "") if plan.active or not body.stream else ""  # streamed free text went already
        return answer(text, True, calls or None, done_reason=s.finish_reason, **clock.counts(s))

    if body.stream:

        def piece(delta: str) -> OllamaChatResponse | None:
            clock.mark()
            return None if plan.active else answer(delta, False)  # with tools: read whole, sent at the end

        return ndjson(stream, piece, lambda s: [last(s)], options)
    await whole(stream, options)
    return json_response(last(stream))


def prompted(config: ModelConfig, body: OllamaGenerateRequest) -> dict[str, object]:
    """The prompt as a user turn in the model's chat template (``system`` before it), or as it is with
    ``raw`` or for a model without a chat template."""
    for name in ("suffix", "images", "context", "template"):
        if getattr(body, name):
            raise InvalidInput(f"{name}: not supported by this server's Ollama routes")
    chat = config.tasks.generate is not None and config.tasks.generate.chat
    if body.raw or not chat:
        return {"prompt": f"{body.system}\n\n{body.prompt}" if body.system and not body.raw else body.prompt}
    turns = [Message(role="system", content=body.system)] if body.system else []
    return {"messages": [*turns, Message(role="user", content=body.prompt)]}


@router.post(
    "/api/generate",
    **ollama_doc(OllamaGenerateResponse, body=OllamaGenerateRequest, stream=OllamaGenerateResponse, ndjson=True,
                 errors=ERRORS),
)  # fmt: skip
async def generate(request: Request) -> Response:
    """Ollama's ``generate``: one prompt's completion; an empty prompt loads the model."""
    clock = Clock(time.perf_counter_ns())
    body = await parse(request, OllamaGenerateRequest, service(request).limits.max_body_bytes)
    config = model_for(request, bare(body.model), "generate")
    think_refused(config, body.think)

    def answer(text: str, done: bool, **extra: object) -> OllamaGenerateResponse:
        return OllamaGenerateResponse.model_validate(
            {"model": body.model, "created_at": now(), "response": text, "done": done, **extra}
        )

    if not body.prompt:
        return json_response(answer("", True, done_reason=await lifecycle(request, config, body.keep_alive)))
    generation = native(body.options, grammar=grammar(body.format), **prompted(config, body))
    options = call(request)
    with named("format", GRAMMAR, when=bool(body.format)):
        stream = await start(request, config, generation, options)

    def last(s: TextStream) -> OllamaGenerateResponse:
        text = "" if body.stream else s.text
        return answer(text, True, done_reason=s.finish_reason, **clock.counts(s))

    if body.stream:

        def piece(delta: str) -> OllamaGenerateResponse:
            clock.mark()
            return answer(delta, False)

        return ndjson(stream, piece, lambda s: [last(s)], options)
    await whole(stream, options)
    return json_response(last(stream))
