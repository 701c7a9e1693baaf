"""Llama 3.1 / 3.2 Instruct: the template puts ``tools=`` in the first user turn and asks for a call as
JSON, ``{"name": ..., "parameters": {...}}`` (after ``<|python_tag|>`` sometimes, a special token the
text does not show); an earlier call is an assistant's ``tool_calls`` (one per message: the template
refuses more, so parallel calls become consecutive messages), a result is a ``tool`` message (rendered
as ``ipython``). An answer is either calls (several separated by ``;``) or text, never both.

A forced call: one ``{"name", "parameters"}`` object under the function's schema, or up to eight
separated by ``; `` with ``parallel_tool_calls``."""

from __future__ import annotations

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
    repeated,
)

PYTHON_TAG = "<|python_tag|>"


class Llama3(ToolFormat):
    name = "llama3"

    @staticmethod
    def detect(template: str) -> bool:
        return PYTHON_TAG in template or "Environment: ipython" in template

    def render(self, messages: list[dict[str, Any]], tools: ToolSet) -> Rendering:
        out: list[dict[str, Any]] = []
        for message in hf_messages(messages):
            for call in message.get("tool_calls") or []:  # one call per assistant message
                out.append({"role": "assistant", "content": "", "tool_calls": [call]})
            if not message.get("tool_calls"):
                out.append(message)
        return Rendering(out, {"tools": hf_tools(tools.callable)} if tools.callable else {})

    def grammar(self, tools: ToolSet) -> GrammarIn | None:
        if not tools.must_call:
            return None
        return lark({
            "start": repeated("call", "; ", tools.most_calls),
            "call": json_rule(calls_schema(tools, "parameters"), tools.lenient),
        })  # fmt: skip

    def parse(self, text: str, names: set[str]) -> Parsed:
        body = text.strip().removeprefix(PYTHON_TAG).strip()
        if not body.startswith("{"):
            return Parsed(text)
        values = decode_objects(body)
        calls = as_calls(values, names, ("parameters", "arguments")) if values else None
        return Parsed(None, calls) if calls else Parsed(text)
