"""OpenAI chat completions for adapters that offer tools or structured output: the call (the generate
parameters in OpenAI's names), the answer's content and tool calls, and tool schemas with ``$ref`` inlined.

The server nests each function's parameters inside the grammar of its answer (``{"tool_calls": [{"name",
"arguments": <parameters>}]}``), where ``#/$defs/...`` would point at the answer's root, not at the
parameters' own ``$defs``: a nested pydantic model's schema is sent with its references resolved.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ._backend import SIEBackend

#: call arguments that only the chat completions route takes
CHAT_OPTIONS: Final = frozenset({"tools", "tool_choice", "parallel_tool_calls", "response_format"})
_SAMPLING: Final = frozenset({"temperature", "top_p", "stop", "seed", "frequency_penalty", "presence_penalty"})


@dataclass(frozen=True)
class ToolCall:
    """One call in an answer: ``arguments`` decoded from its JSON (the text as it came, if it is not JSON)."""

    id: str
    name: str
    arguments: dict[str, Any] | str


@dataclass(frozen=True)
class ChatAnswer:
    """A chat completion's one choice: its text (``""`` when it is only calls), its calls, why it ended."""

    content: str
    tool_calls: list[ToolCall]
    finish_reason: str | None
    usage: dict[str, Any] | None
    raw: dict[str, Any]


def chat_answer(answer: dict[str, Any]) -> ChatAnswer:
    (choice,) = answer["choices"]
    message = choice["message"]
    calls = [
        ToolCall(id=call["id"], name=call["function"]["name"], arguments=_decoded(call["function"]["arguments"]))
        for call in message.get("tool_calls") or []
    ]
    usage = answer.get("usage")
    return ChatAnswer(
        content=message.get("content") or "",
        tool_calls=calls,
        finish_reason=choice.get("finish_reason"),
        usage=usage if isinstance(usage, dict) else None,
        raw=answer,
    )


def _decoded(arguments: str) -> dict[str, Any] | str:
    try:
        found = json.loads(arguments)
    except json.JSONDecodeError:
        return arguments
    return found if isinstance(found, dict) else arguments


def chat_options(params: Mapping[str, Any]) -> dict[str, Any]:
    """``chat_completions``'s keyword arguments from generate's (``max_new_tokens`` is ``max_tokens``) and
    the chat-only ones; an unknown name is a ``TypeError``."""
    unknown = set(params) - CHAT_OPTIONS - _SAMPLING - {"max_new_tokens"}
    if unknown:
        raise TypeError(f"unknown chat parameters: {sorted(unknown)}")
    options = {key: value for key, value in params.items() if key != "max_new_tokens" and value is not None}
    if params.get("max_new_tokens") is not None:
        options["max_tokens"] = params["max_new_tokens"]
    return options


def chat_completion(
    backend: SIEBackend, messages: Sequence[Mapping[str, Any]], *, model: str | None = None, **params: Any
) -> ChatAnswer:
    """One answer from ``/v1/chat/completions`` (messages in OpenAI's shape)."""
    answer = backend.client.chat_completions(model or backend.model, messages, **chat_options(params))
    return chat_answer(answer)


async def achat_completion(
    backend: SIEBackend, messages: Sequence[Mapping[str, Any]], *, model: str | None = None, **params: Any
) -> ChatAnswer:
    async with backend.async_client() as client:
        answer = await client.chat_completions(model or backend.model, messages, **chat_options(params))
    return chat_answer(answer)


def function_tool(
    name: str, description: str | None, parameters: Mapping[str, Any], strict: bool | None = None
) -> dict[str, Any]:
    """An OpenAI function tool whose parameter schema has its ``$ref`` resolved (``ValueError`` for a
    recursive one, which cannot be inlined)."""
    function: dict[str, Any] = {"name": name, "parameters": inline_refs(parameters)}
    if description:
        function["description"] = description
    if strict is not None:
        function["strict"] = strict
    return {"type": "function", "function": function}


def inline_refs(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` with each local ``$ref`` (``#/$defs/...``, ``#/definitions/...``) replaced by what it names
    (sibling keywords kept), and the definitions dropped."""
    body = {key: value for key, value in schema.items() if key not in ("$defs", "definitions")}
    resolved: dict[str, Any] = _inline(body, schema, ())
    return resolved


def _inline(node: Any, root: Mapping[str, Any], seen: tuple[str, ...]) -> Any:
    if isinstance(node, list):
        return [_inline(item, root, seen) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        if ref in seen:
            raise ValueError(f"schema reference {ref} is recursive: it cannot be inlined into a tool's parameters")
        target = _pointer(root, ref)
        siblings = {key: value for key, value in node.items() if key != "$ref"}
        return {**_inline(target, root, (*seen, ref)), **_inline(siblings, root, seen)}
    return {key: _inline(value, root, seen) for key, value in node.items()}


def _pointer(root: Mapping[str, Any], ref: str) -> Any:
    node: Any = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, Mapping) or part not in node:
            raise ValueError(f"schema reference {ref} names nothing in the schema")
        node = node[part]
    return node
