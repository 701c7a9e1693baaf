"""SmolLM3: its template lists the tools it is given as ``xml_tools`` (each one as text: they go as JSON
strings) and asks for calls in Qwen's ``<tool_call>`` form, read the same way. The template renders only
each message's text, so earlier calls go back as their ``<tool_call>`` blocks; results stay ``tool``
turns. A forced call is Qwen's grammar, with thinking off (``enable_thinking=False``: the template then
opens the answer with an empty ``<think>`` block)."""

from __future__ import annotations

import json
from typing import Any

from sie_server.tool_formats.base import Rendering, ToolSet, calls_of, described
from sie_server.tool_formats.qwen import CLOSE, OPEN, Qwen


class SmolLM3(Qwen):
    name = "smollm3"

    @staticmethod
    def detect(template: str) -> bool:
        return "xml_tools" in template

    def render(self, messages: list[dict[str, Any]], tools: ToolSet) -> Rendering:
        out: list[dict[str, Any]] = []
        for m in messages:
            content = m.get("content", "")
            blocks = [f"{OPEN}\n{json.dumps({'name': n, 'arguments': a})}\n{CLOSE}" for n, a in calls_of(m)]
            text = "\n".join([content, *blocks]) if content else "\n".join(blocks)
            out.append({"role": "system" if m["role"] == "developer" else m["role"], "content": text or content})
        args: dict[str, Any] = {}
        if tools.callable:
            args["xml_tools"] = [json.dumps(described(f)) for f in tools.callable]
        if tools.must_call:
            args["enable_thinking"] = False
        return Rendering(out, args)
