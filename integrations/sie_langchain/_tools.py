"""Tool calling and structured output for ``SIEChatModel``: LangChain's tools, tool choice and response
formats in OpenAI's shapes for the server's ``/v1/chat/completions`` (which constrains the answer so a
required call always parses), and its answer back as an ``AIMessage`` with ``tool_calls``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, convert_to_openai_messages
from langchain_core.messages.ai import UsageMetadata
from langchain_core.messages.tool import tool_call, tool_call_chunk
from langchain_core.utils.function_calling import convert_to_json_schema, convert_to_openai_tool

#: call arguments that send a request to the chat completions route instead of /v1/generate
CHAT_PARAMS = frozenset({"tools", "tool_choice", "parallel_tool_calls", "response_format"})


def openai_tools(tools: Sequence[Any]) -> list[dict[str, Any]]:
    return [convert_to_openai_tool(tool) for tool in tools]


def openai_tool_choice(choice: Any) -> str | dict[str, Any] | None:
    """LangChain's tool choice in OpenAI's words: ``any`` / True is ``required``, a name is that function."""
    if choice is None or choice is False:
        return None
    if choice is True or choice == "any":
        return "required"
    if choice in ("auto", "none", "required"):
        return str(choice)
    if isinstance(choice, str):
        return {"type": "function", "function": {"name": choice}}
    if isinstance(choice, dict):
        return choice
    raise ValueError(f"tool_choice {choice!r}: use auto, none, any, required or a tool's name")


def json_schema_format(schema: Any, strict: bool | None) -> dict[str, Any]:
    """``response_format`` holding ``schema`` (a pydantic class, a TypedDict or a JSON schema)."""
    converted = convert_to_json_schema(schema)
    name = str(converted.get("title") or "response").replace(" ", "_")[:64]
    return {"type": "json_schema", "json_schema": {"name": name, "schema": converted, "strict": strict is not False}}


def openai_messages(messages: Sequence[BaseMessage], instruction: str | None) -> list[dict[str, Any]]:
    converted = list(convert_to_openai_messages(list(messages)))
    if instruction and not any(m.get("role") == "system" for m in converted):
        converted.insert(0, {"role": "system", "content": instruction})
    return converted


def chat_options(params: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """``chat_completions``'s keyword arguments from the generate parameters and the chat-only ones."""
    return {
        "max_tokens": params.get("max_new_tokens"),
        "temperature": params.get("temperature"),
        "top_p": params.get("top_p"),
        "stop": params.get("stop"),
        "seed": params.get("seed"),
        "frequency_penalty": params.get("frequency_penalty"),
        "presence_penalty": params.get("presence_penalty"),
        "tools": extra.get("tools"),
        "tool_choice": openai_tool_choice(extra.get("tool_choice")),
        "parallel_tool_calls": extra.get("parallel_tool_calls"),
        "response_format": extra.get("response_format"),
    }


def _calls(message: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(id, name, arguments as JSON text) of each call in an answer's message."""
    return [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in message.get("tool_calls") or []]


def answer_message(answer: dict[str, Any], usage: UsageMetadata | None, metadata: dict[str, Any]) -> AIMessage:
    (choice,) = answer["choices"]
    message = choice["message"]
    calls = [tool_call(name=name, args=json.loads(arguments), id=ident) for ident, name, arguments in _calls(message)]
    return AIMessage(
        content=message.get("content") or "",
        tool_calls=calls,
        usage_metadata=usage,
        response_metadata={**metadata, "finish_reason": choice.get("finish_reason")},
    )


def answer_chunk(answer: dict[str, Any]) -> AIMessageChunk:
    """The whole answer as one chunk (calls are known once the server's JSON object is complete)."""
    (choice,) = answer["choices"]
    message = choice["message"]
    chunks = [
        tool_call_chunk(name=name, args=arguments, id=ident, index=k)
        for k, (ident, name, arguments) in enumerate(_calls(message))
    ]
    return AIMessageChunk(content=message.get("content") or "", tool_call_chunks=chunks)
