"""Phi-4-mini-instruct: its template takes the tools as a JSON string in the system message's ``tools``
field (``<|system|>...<|tool|>[...]<|/tool|><|end|>``; llama.cpp's edition of the template reads
``tools=`` instead: both are given), and the model calls as ``<|tool_call|>[{"name": ..., "arguments":
{...}}]<|/tool_call|>`` (special tokens the decoded text may not show; an older form writes
``functools[...]``). The template renders only each message's text, so earlier calls go back as that
text, and a result as a ``tool`` turn.

A forced call: the JSON list of one call (up to eight with ``parallel_tool_calls``), each under its
function's schema; the markers are left out, since they are special tokens."""

from __future__ import annotations

import json
import re
from typing import Any

from sie_server.contract.grammar_wire import GrammarIn
from sie_server.tool_formats.base import (
    Parsed,
    Rendering,
    ToolFormat,
    ToolSet,
    as_calls,
    calls_of,
    calls_schema,
    decode_objects,
    described,
    hf_tools,
    json_rule,
    lark,
    literal,
    repeated,
    with_system,
)

OPEN, CLOSE = "<|tool_call|>", "<|/tool_call|>"
TAGGED = re.compile(r"<\|tool_call\|>(.*?)(?:<\|/tool_call\|>|$)", re.DOTALL)
SYSTEM = "You are a helpful assistant with some tools."  # Microsoft's example for Phi-4-mini


class Phi4(ToolFormat):
    name = "phi4"

    @staticmethod
    def detect(template: str) -> bool:
        return "<|tool|>" in template

    def render(self, messages: list[dict[str, Any]], tools: ToolSet) -> Rendering:
        out: list[dict[str, Any]] = []
        for m in messages:
            role = "system" if m["role"] == "developer" else m["role"]
            content = m.get("content", "")
            if m.get("tool_calls"):
                calls = [{"name": name, "arguments": args} for name, args in calls_of(m)]
                content = f"{content}{OPEN}{json.dumps(calls)}{CLOSE}"
            out.append({"role": role, "content": content})
        if not tools.callable:
            return Rendering(out)
        listed = json.dumps([described(f) for f in tools.callable])
        if out and out[0]["role"] == "system":
            out[0] = {**out[0], "tools": listed}
        else:
            out = with_system(out, SYSTEM, tools=listed)
        return Rendering(out, {"tools": hf_tools(tools.callable)})

    def grammar(self, tools: ToolSet) -> GrammarIn | None:
        if not tools.must_call:
            return None
        return lark({
            "start": f"{literal('[')} {repeated('call', ', ', tools.most_calls)} {literal(']')}",
            "call": json_rule(calls_schema(tools), tools.lenient),
        })  # fmt: skip

    def parse(self, text: str, names: set[str]) -> Parsed:
        keys = ("arguments", "parameters")
        if OPEN in text:
            blocks = [decode_objects(m.group(1).strip()) for m in TAGGED.finditer(text)]
            found = [v for block in blocks if block for v in block]
            calls = as_calls(found, names, keys) if found and all(blocks) else None
            content = text[: text.index(OPEN)].strip()
            return Parsed(content or None, calls) if calls else Parsed(text)
        body = text.strip().removeprefix("functools").strip()
        if not body.startswith(("[", "{")):
            return Parsed(text)
        values = decode_objects(body)
        calls = as_calls(values, names, keys) if values else None
        return Parsed(None, calls) if calls else Parsed(text)
