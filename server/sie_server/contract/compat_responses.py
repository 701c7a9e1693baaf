"""Wire models of the answers in other products' shapes: OpenAI embeddings, chat and completions,
and Cohere / Jina rerank (the compatibility routes build them; their own docs define the fields)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import SerializerFunctionWrapHandler, model_serializer

from sie_server.contract.responses import Usage
from sie_server.contract.wire import Array, KeepNone, Sparse

# OpenAI


class OpenAIEmbedding(KeepNone):
    object: Literal["embedding"] = "embedding"
    index: int
    embedding: Array | str  # base64 of little-endian float32 when encoding_format is base64


class EmbeddingUsage(KeepNone):
    prompt_tokens: int
    total_tokens: int


class OpenAIEmbeddingsResponse(KeepNone):
    object: Literal["list"] = "list"
    data: list[OpenAIEmbedding]
    model: str
    usage: EmbeddingUsage


class FunctionCallOut(KeepNone):
    name: str
    arguments: str  # a JSON object as a string, as OpenAI sends it


class ToolCallOut(KeepNone):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCallOut


class ChatMessageOut(KeepNone):
    role: Literal["assistant"] = "assistant"
    content: str | None  # None when the answer is tool calls
    refusal: None = None  # OpenAI's spec requires it: this server's models never refuse through it
    tool_calls: list[ToolCallOut] | None = None

    # no return annotation, so the spec still shows the fields (as ``ShownSparse``)
    @model_serializer(mode="wrap")
    def _no_empty_calls(self, handler: SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]
        dumped: dict[str, Any] = handler(self)
        if dumped.get("tool_calls") is None:
            dumped.pop("tool_calls", None)
        return dumped


class ToolCallDelta(Sparse):
    index: int
    id: str | None = None
    type: Literal["function"] | None = None
    function: FunctionCallOut | None = None


class ChatChoice(KeepNone):
    index: int = 0
    message: ChatMessageOut
    finish_reason: str | None
    logprobs: None = None


class ChatCompletion(KeepNone):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[ChatChoice]
    usage: Usage


class ChatDelta(KeepNone):
    """A streamed chunk's delta: the fields it carries. The first (with ``role``) opens the message with
    ``refusal: null`` beside it, as OpenAI streams it."""

    role: Literal["assistant"] | None = None  # on the first chunk only
    content: str | None = None
    refusal: None = None
    tool_calls: list[ToolCallDelta] | None = None

    # no return annotation, so the spec still shows the fields (as ``ShownSparse``)
    @model_serializer(mode="wrap")
    def _sparse(self, handler: SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]
        dumped: dict[str, Any] = handler(self)
        opening = dumped.get("role") is not None
        return {k: v for k, v in dumped.items() if v is not None or (k == "refusal" and opening)}


class ChatChunkChoice(KeepNone):
    index: int = 0
    delta: ChatDelta
    finish_reason: str | None = None


class ChatCompletionChunk(Sparse):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChatChunkChoice]
    usage: Usage | None = None


class CompletionChoice(KeepNone):
    index: int = 0
    text: str
    finish_reason: str | None
    logprobs: None = None


class Completion(Sparse):
    """``/v1/completions`` answers, and each event of a streamed one (the last with ``usage``)."""

    id: str
    object: Literal["text_completion"] = "text_completion"
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: Usage | None = None


# Rerank (Cohere v1/v2, Jina)


class RerankedDocument(KeepNone):
    text: str


class RerankResult(Sparse):
    index: int
    relevance_score: float
    document: RerankedDocument | None = None


class RerankUsage(KeepNone):
    prompt_tokens: int
    total_tokens: int


class ApiVersion(KeepNone):
    version: str


class BilledUnits(KeepNone):
    search_units: int


class RerankMeta(KeepNone):
    api_version: ApiVersion
    billed_units: BilledUnits


class RerankResponse(KeepNone):
    id: str
    model: str
    results: list[RerankResult]
    usage: RerankUsage
    meta: RerankMeta
