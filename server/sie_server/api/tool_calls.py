"""OpenAI tool calling as a translation onto generation: the route checks the request's tools and choice,
and sends the conversation (earlier ``tool_calls``, ``tool`` results) and the tools on the native wire
(``GenerateRequest.tools``). The engine renders them in the model's own tool format and holds a forced
call (``required`` or a named function) to that format's grammar (sie_server/tool_formats); the answer is
read back here in the format the stream reports. ``none`` offers no tools: the history is still rendered
in the model's format, and the answer is plain text.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field

from sie_server import tool_formats
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
    ToolRequest,
    tool_call,
)
from sie_server.errors import InvalidInput


@dataclass
class ToolPlan:
    """What a chat request becomes: its messages, its tools on the native wire, the grammar of a free
    answer (``response_format``), and how to read the answer."""

    messages: list[Message]
    grammar: GrammarIn | None
    request: ToolRequest | None = None
    tools: dict[str, FunctionSpec] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        """Tools are offered: the answer may hold calls, read in the model's tool format."""
        return bool(self.tools)

    def answer(
        self, text: str, finish_reason: str | None, tool_format: str | None
    ) -> tuple[str | None, list[ToolCall]]:
        """The answer's content and its tool calls, read in ``tool_format`` (the stream's). Cut short
        (``length``), it is given as it came."""
        if not self.active or finish_reason != "stop":
            return text, []
        parsed = tool_formats.read(tool_format, text, set(self.tools))
        calls = [tool_call(f"call_{uuid.uuid4().hex[:24]}", name, arguments) for name, arguments in parsed.calls]
        return parsed.content, calls


def plan(
    messages: list[ChatMessageIn],
    tools: list[Tool] | None,
    choice: ToolChoice | None,
    parallel: bool,
    response_format: GrammarIn | None,
) -> ToolPlan:
    """The request's messages and tools for the native wire; InvalidInput for a tool choice naming no
    offered function, duplicate function names, or an earlier call whose arguments are not JSON."""
    try:
        wired = [_wired(m) for m in messages]
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
    history = any(m.tool_calls or m.role == "tool" for m in wired)
    if not offered or choice == "none":  # no calls to read; earlier ones are still rendered in the format
        request = ToolRequest(functions=[], choice="none", parallel=parallel) if history else None
        return ToolPlan(wired, response_format, request)
    request = ToolRequest(functions=list(offered.values()), choice=choice or "auto", parallel=parallel)
    return ToolPlan(wired, None, request, offered)


def _wired(message: ChatMessageIn) -> Message:
    for call in message.tool_calls or []:
        try:
            json.loads(call.function.arguments)
        except json.JSONDecodeError:
            raise ValueError(f"tool call {call.id}'s arguments are not JSON") from None
    text = message.text_beside_calls() if message.role == "assistant" and message.tool_calls else message.text()
    return Message(role=message.role, content=text, tool_calls=message.tool_calls or None,
                   tool_call_id=message.tool_call_id)  # fmt: skip
