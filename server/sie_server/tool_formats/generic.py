"""The generic format, for models whose template has no tool support (the packaged SmolLM2's), as
llama.cpp's server serves them: the tools are described in a system message, and the answer is
constrained to one JSON object that is either a call (``{"tool_calls": [{"name", "arguments"}]}``, each
call's arguments under that function's own parameter schema) or an answer (``{"content": "..."}``).
``required`` drops the answer branch, a named function keeps only its own call, ``parallel_tool_calls:
false`` allows one call. So every generator can call tools, and a forced call always parses.

Earlier turns are rendered the same way: an assistant's ``tool_calls`` as its JSON object, a ``tool``
result as a user message naming the call it answers (templates differ on a ``tool`` role; a user turn
reads the same in all of them).
"""

from __future__ import annotations

import json
from typing import Any

from sie_server.contract.grammar_wire import GrammarIn
from sie_server.tool_formats.base import (
    Parsed,
    Rendering,
    ToolFormat,
    ToolSet,
    call_schema,
    calls_of,
    described,
    json_object,
    with_system,
)

INSTRUCTIONS = (
    "You can call these tools (JSON Schema of each one's arguments):\n{tools}\n\n"
    'Reply with one JSON object. To call tools: {{"tool_calls": [{{"name": "<tool name>", "arguments": '
    "{{...}}}}]}}. {answer}"
)
ANSWER = 'To answer the user directly instead: {"content": "<your answer>"}.'
MUST_CALL = "You must call a tool."


class Generic(ToolFormat):
    name = "generic"

    @staticmethod
    def detect(template: str) -> bool:
        return True  # the fallback: any template, or none

    def render(self, messages: list[dict[str, Any]], tools: ToolSet) -> Rendering:
        rendered = [_flat(m) for m in messages]
        if not tools.callable:
            return Rendering(rendered)
        listed = json.dumps([described(f) for f in tools.callable], indent=1)
        system = INSTRUCTIONS.format(tools=listed, answer=MUST_CALL if tools.must_call else ANSWER)
        return Rendering(with_system(rendered, system))

    def grammar(self, tools: ToolSet) -> GrammarIn | None:
        if not tools.callable:
            return None
        calls = {"type": "array", "items": {"anyOf": [call_schema(f) for f in tools.callable]}, "minItems": 1,
                 "maxItems": tools.most_calls}  # fmt: skip
        branches = [json_object({"tool_calls": calls})]
        if not tools.must_call:
            branches.append(json_object({"content": {"type": "string"}}))
        schema = branches[0] if len(branches) == 1 else {"anyOf": branches}
        return GrammarIn(json_schema=schema, strict=not tools.lenient)

    def parse(self, text: str, names: set[str]) -> Parsed:
        try:
            found = json.loads(text)
        except json.JSONDecodeError:
            return Parsed(text)
        if isinstance(found, dict) and isinstance(found.get("tool_calls"), list):
            calls = [(c["name"], c.get("arguments", {})) for c in found["tool_calls"]
                     if isinstance(c, dict) and c.get("name") in names]  # fmt: skip
            if calls:
                return Parsed(None, calls)
        if isinstance(found, dict) and isinstance(found.get("content"), str):
            return Parsed(found["content"])
        return Parsed(text)


def _flat(message: dict[str, Any]) -> dict[str, Any]:
    """A message as role and text only."""
    content = message.get("content", "")
    if message["role"] == "tool":
        ident = message.get("tool_call_id")
        label = f"call {ident}" if ident else "a tool call"
        return {"role": "user", "content": f"Result of {label}: {content}"}
    if message["role"] == "assistant" and message.get("tool_calls"):
        calls = [{"name": name, "arguments": args} for name, args in calls_of(message)]
        return {"role": "assistant", "content": json.dumps({"tool_calls": calls})}
    return {"role": message["role"], "content": content}
