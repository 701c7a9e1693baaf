"""OpenAI tool calling as a translation onto constrained generation, the way llama.cpp's server serves
models whose template has no tool support: the tools are described in a system message, and the answer
is constrained to one JSON object that is either a call (``{"tool_calls": [{"name", "arguments"}]}``,
each call's arguments under that function's own parameter schema) or an answer (``{"content": "..."}``).
``required`` drops the answer branch, a named function keeps only its own call, ``parallel_tool_calls:
false`` allows one call, ``none`` sends no tools. So every generator can call tools, and ``required`` or
a named function always parse: the grammar makes any other output impossible.

Earlier turns are rendered in the same format: an assistant's ``tool_calls`` as its JSON object, a
``tool`` result as a user message naming the call it answers (templates differ on a ``tool`` role; a
user turn reads the same in all of them).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from sie_server.contract.grammar_wire import GrammarIn
from sie_server.contract.requests import Message
from sie_server.contract.tools_wire import (
    MAX_TOOLS,
    ChatMessageIn,
    FunctionSpec,
    NamedToolChoice,
    Tool,
    ToolCall,
    ToolChoice,
    tool_call,
)
from sie_server.errors import InvalidInput

MAX_PARALLEL_CALLS = 8
INSTRUCTIONS = (
    "You can call these tools (JSON Schema of each one's arguments):\n{tools}\n\n"
    'Reply with one JSON object. To call tools: {{"tool_calls": [{{"name": "<tool name>", "arguments": '
    "{{...}}}}]}}. {answer}"
)
ANSWER = 'To answer the user directly instead: {"content": "<your answer>"}.'
MUST_CALL = "You must call a tool."


@dataclass
class ToolPlan:
    """What a chat request becomes: its messages, the grammar its answer is held to, and how to read it."""

    messages: list[Message]
    grammar: GrammarIn | None
    tools: dict[str, FunctionSpec] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        """Tools are offered: the answer is a JSON object to read (a call or content)."""
        return bool(self.tools)

    def answer(self, text: str, finish_reason: str | None) -> tuple[str | None, list[ToolCall]]:
        """The answer's content and its tool calls. Cut short (``length``), it is given as it came."""
        if not self.active or finish_reason != "stop":
            return text, []
        try:
            found = json.loads(text)
        except json.JSONDecodeError:
            return text, []
        if isinstance(found, dict) and isinstance(found.get("tool_calls"), list):
            calls = found["tool_calls"]
            return None, [tool_call(f"call_{uuid.uuid4().hex[:24]}", c["name"], c["arguments"]) for c in calls]
        if isinstance(found, dict) and isinstance(found.get("content"), str):
            return found["content"], []
        return text, []


def plan(
    messages: list[ChatMessageIn],
    tools: list[Tool] | None,
    choice: ToolChoice | None,
    parallel: bool,
    response_format: GrammarIn | None,
) -> ToolPlan:
    """The request's messages in the generic tool format and the grammar for its answer; InvalidInput for
    a tool choice naming no offered function, or duplicate function names."""
    try:
        rendered = [_rendered(m) for m in messages]
    except ValueError as exc:
        raise InvalidInput(f"messages: {exc}") from None
    offered = {t.function.name: t.function for t in tools or []}
    if tools and len(offered) != len(tools):
        raise InvalidInput("tools: function names must be unique")
    if len(offered) > MAX_TOOLS:
        raise InvalidInput(f"tools: at most {MAX_TOOLS} functions")
    if isinstance(choice, NamedToolChoice) and choice.function.name not in offered:
        raise InvalidInput(f"tool_choice names function {choice.function.name!r}, which is not in tools")
    if choice == "required" and not offered:
        raise InvalidInput("tool_choice is required but no tools were given")
    if not offered or choice == "none":
        return ToolPlan(rendered, response_format)
    callable_ = [offered[choice.function.name]] if isinstance(choice, NamedToolChoice) else list(offered.values())
    must_call = choice == "required" or isinstance(choice, NamedToolChoice)
    described = json.dumps([_described(f) for f in callable_], indent=1)
    system = INSTRUCTIONS.format(tools=described, answer=MUST_CALL if must_call else ANSWER)
    calls = {"type": "array", "items": {"anyOf": [_call_schema(f) for f in callable_]}, "minItems": 1,
             "maxItems": MAX_PARALLEL_CALLS if parallel else 1}  # fmt: skip
    branches = [_object({"tool_calls": calls})]
    if not must_call:
        branches.append(_object({"content": {"type": "string"}}))
    schema = branches[0] if len(branches) == 1 else {"anyOf": branches}
    strict = all(f.strict is True for f in callable_)  # OpenAI's default: unsupported keywords pass
    return ToolPlan(_with_system(rendered, system), GrammarIn(json_schema=schema, strict=strict), offered)


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def _call_schema(function: FunctionSpec) -> dict[str, Any]:
    return _object({"name": {"const": function.name}, "arguments": closed(function.parameters)})


def closed(schema: Any) -> Any:
    """The schema with every object that lists its properties closed to others (``additionalProperties:
    false`` where it says nothing): a function takes the arguments it names, and a model left free to add
    keys copies the schema itself into its call."""
    if isinstance(schema, list):
        return [closed(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: closed(value) for key, value in schema.items()}
    if "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


def _described(function: FunctionSpec) -> dict[str, Any]:
    out: dict[str, Any] = {"name": function.name}
    if function.description:
        out["description"] = function.description
    out["parameters"] = function.parameters
    return out


def _rendered(message: ChatMessageIn) -> Message:
    if message.role == "tool":
        label = f"call {message.tool_call_id}" if message.tool_call_id else "a tool call"
        return Message(role="user", content=f"Result of {label}: {message.text()}")
    if message.role == "assistant" and message.tool_calls:
        calls = [{"name": c.function.name, "arguments": _arguments(c)} for c in message.tool_calls]
        return Message(role="assistant", content=json.dumps({"tool_calls": calls}))
    return Message(role=message.role, content=message.text())


def _arguments(call: ToolCall) -> Any:
    try:
        return json.loads(call.function.arguments)
    except json.JSONDecodeError:
        raise ValueError(f"tool call {call.id}'s arguments are not JSON") from None


def _with_system(messages: list[Message], text: str) -> list[Message]:
    """The tools' instructions after the caller's own system message, or as the first message."""
    if messages and messages[0].role in ("system", "developer"):
        first = messages[0]
        return [Message(role=first.role, content=f"{first.content}\n\n{text}"), *messages[1:]]
    return [Message(role="system", content=text), *messages]
