"""Tool calling for ``SIELLM``: LlamaIndex tools, tool choice and messages in OpenAI's shapes for the
server's ``/v1/chat/completions`` (which constrains the answer so a required call always parses), and its
answer back as an assistant ``ChatMessage`` whose calls are ``ToolCallBlock``s."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    ContentBlock,
    MessageRole,
    TextBlock,
    ToolCallBlock,
)
from llama_index.core.llms.llm import ToolSelection
from llama_index.core.tools.types import BaseTool

from sie_integrations_base import ChatAnswer, function_tool

_ROLES = {
    MessageRole.SYSTEM: "system",
    MessageRole.DEVELOPER: "developer",
    MessageRole.USER: "user",
    MessageRole.ASSISTANT: "assistant",
    MessageRole.CHATBOT: "assistant",
    MessageRole.MODEL: "assistant",
    MessageRole.TOOL: "tool",
    MessageRole.FUNCTION: "tool",
}


def openai_tools(tools: Sequence[BaseTool]) -> list[dict[str, Any]]:
    """Each tool as an OpenAI function (LlamaIndex's name and description, its schema's ``$ref`` inlined)."""
    specs = []
    for tool in tools:
        function = tool.metadata.to_openai_tool(skip_length_check=True)["function"]
        specs.append(function_tool(function["name"], function.get("description"), function["parameters"]))
    return specs


def openai_tool_choice(choice: str | dict[str, Any] | None, required: bool) -> str | dict[str, Any]:
    """LlamaIndex's choice in OpenAI's words: none given is ``required`` when a call is required, else
    ``auto``; ``auto`` / ``none`` / ``required`` as they are; any other name is that function."""
    if choice is None:
        return "required" if required else "auto"
    if isinstance(choice, dict) or choice in ("auto", "none", "required"):
        return choice
    return {"type": "function", "function": {"name": choice}}


def uses_tools(messages: Sequence[ChatMessage]) -> bool:
    """Whether a conversation holds tool calls or results (only the chat completions route reads them)."""
    return any(_ROLES[m.role] == "tool" or _calls_in(m) for m in messages)


def openai_messages(messages: Sequence[ChatMessage], system: str | None) -> list[dict[str, Any]]:
    """The conversation in OpenAI's shape; ``system`` is its system message when it has none."""
    converted = [_openai_message(m) for m in messages]
    if system and not any(m["role"] in ("system", "developer") for m in converted):
        converted.insert(0, {"role": "system", "content": system})
    return converted


def _openai_message(message: ChatMessage) -> dict[str, Any]:
    role = _ROLES[message.role]
    out: dict[str, Any] = {"role": role, "content": message.content or ""}
    if role == "tool":
        call_id = message.additional_kwargs.get("tool_call_id")
        if call_id:
            out["tool_call_id"] = str(call_id)
    calls = _calls_in(message)
    if role == "assistant" and calls:
        out["content"] = message.content or None
        out["tool_calls"] = [
            {
                "id": call.tool_call_id or f"call_{k}",
                "type": "function",
                "function": {"name": call.tool_name, "arguments": _arguments_text(call.tool_kwargs)},
            }
            for k, call in enumerate(calls)
        ]
    return out


def _arguments_text(arguments: dict[str, Any] | str) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def _calls_in(message: ChatMessage) -> list[ToolCallBlock]:
    return [block for block in message.blocks if isinstance(block, ToolCallBlock)]


def chat_response(answer: ChatAnswer, streamed: bool = False) -> ChatResponse:
    """The answer as a ``ChatResponse``: text and calls in the message, usage and finish reason alongside
    (``streamed``: as the one chunk of a stream, its text the delta)."""
    blocks: list[ContentBlock] = [TextBlock(text=answer.content)] if answer.content else []
    blocks.extend(
        ToolCallBlock(tool_call_id=call.id, tool_name=call.name, tool_kwargs=call.arguments)
        for call in answer.tool_calls
    )
    message = ChatMessage(role=MessageRole.ASSISTANT, blocks=blocks)
    extra = {"finish_reason": answer.finish_reason, "usage": answer.usage}
    return ChatResponse(
        message=message, delta=answer.content if streamed else None, raw=answer.raw, additional_kwargs=extra
    )


def tool_selections(response: ChatResponse, error_on_no_tool_call: bool) -> list[ToolSelection]:
    """The calls in a response; ``ValueError`` when there are none and one was expected, or when a call's
    arguments are not a JSON object."""
    calls = _calls_in(response.message)
    if not calls and error_on_no_tool_call:
        finish = response.additional_kwargs.get("finish_reason")
        hint = " (cut at max_tokens: allow more)" if finish == "length" else ""
        raise ValueError(f"Expected at least one tool call, but got 0 tool calls (finish_reason {finish}){hint}")
    selections = []
    for call in calls:
        if not isinstance(call.tool_kwargs, dict):
            raise ValueError(f"tool call {call.tool_name}'s arguments are not a JSON object: {call.tool_kwargs!r}")
        selections.append(
            ToolSelection(tool_id=call.tool_call_id or "", tool_name=call.tool_name, tool_kwargs=call.tool_kwargs)
        )
    return selections
