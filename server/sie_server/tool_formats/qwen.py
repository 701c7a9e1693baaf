"""Qwen2.5 / Qwen3 (and other Hermes-style templates): the template lists ``tools=`` in its system turn
and asks for each call as ``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>``; earlier calls
are an assistant's ``tool_calls``, results are ``tool`` messages (the template wraps them in
``<tool_response>``). Text before the calls is the answer's content; Qwen3's ``<think>`` block is not.

A forced call: the answer is one call (or up to eight, one per line, with ``parallel_tool_calls``), each
``<tool_call>`` body JSON under the function's schema; Qwen3 is asked not to think first
(``enable_thinking=False``, which Qwen2.5's template ignores)."""

from __future__ import annotations

import re
from typing import Any

from sie_server.contract.grammar_wire import GrammarIn
from sie_server.tool_formats.base import (
    Parsed,
    Rendering,
    ToolFormat,
    ToolSet,
    as_calls,
    calls_schema,
    decode_objects,
    hf_messages,
    hf_tools,
    json_rule,
    lark,
    literal,
    repeated,
    split_think,
)

OPEN, CLOSE = "<tool_call>", "</tool_call>"
CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)


class Qwen(ToolFormat):
    name = "qwen"

    @staticmethod
    def detect(template: str) -> bool:
        return OPEN in template and "tools" in template

    def render(self, messages: list[dict[str, Any]], tools: ToolSet) -> Rendering:
        args: dict[str, Any] = {"tools": hf_tools(tools.callable)} if tools.callable else {}
        if tools.must_call:
            args["enable_thinking"] = False
        return Rendering(hf_messages(messages), args)

    def grammar(self, tools: ToolSet) -> GrammarIn | None:
        if not tools.must_call:
            return None  # auto: free text, read afterwards
        return lark({
            "start": repeated("call", "\n", tools.most_calls),
            "call": f"{literal(OPEN + chr(10))} body {literal(chr(10) + CLOSE)}",
            "body": json_rule(calls_schema(tools), tools.lenient),
        })  # fmt: skip

    def parse(self, text: str, names: set[str]) -> Parsed:
        return parse_tagged(split_think(text), names)


def parse_tagged(text: str, names: set[str]) -> Parsed:
    """``<tool_call>`` blocks as calls (the last may be cut before its closing tag); the rest is content."""
    if OPEN not in text:
        return Parsed(text)
    bodies = [m.group(1) for m in CALL.finditer(text)]
    values = [decode_objects(b.strip()) for b in bodies]
    calls = as_calls([v for found in values if found for v in found], names, ("arguments", "parameters"))
    if calls is None or any(found is None for found in values):
        return Parsed(text)
    content = text[: text.index(OPEN)].strip()
    return Parsed(content or None, calls)
