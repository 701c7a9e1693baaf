"""Tool calling in each model family's own format: how the tools and the earlier calls and results are
given to the model's chat template, what a forced call is held to, and how an answer is read back.

One module per format, registered by name here. A model's format is its catalog entry's
``tasks.generate.tool_format`` when set, else the first format whose ``detect`` recognises its chat
template (the GGUF's, or the tokenizer's), checked in ``DETECTED`` order (SmolLM3's template also writes
``<tool_call>``, so it goes before Qwen's), else ``generic``. The engine renders and constrains with it
(where the template is known); the route reads the answer with the format's name the stream reports.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sie_server.contract.grammar_wire import GrammarIn
from sie_server.contract.tools_wire import ToolRequest
from sie_server.tool_formats.base import Parsed, ToolFormat, ToolSet
from sie_server.tool_formats.gemma3 import Gemma3
from sie_server.tool_formats.generic import Generic
from sie_server.tool_formats.llama3 import Llama3
from sie_server.tool_formats.phi4 import Phi4
from sie_server.tool_formats.qwen import Qwen
from sie_server.tool_formats.smollm3 import SmolLM3

GENERIC = Generic()
DETECTED: tuple[ToolFormat, ...] = (SmolLM3(), Phi4(), Llama3(), Qwen(), Gemma3())
FORMATS: dict[str, ToolFormat] = {f.name: f for f in (*DETECTED, GENERIC)}

__all__ = ["FORMATS", "Parsed", "Prepared", "ToolSet", "choose", "prepare", "read"]


def choose(named: str | None, template: str | None) -> ToolFormat:
    """The catalog's choice, else the format the chat template speaks, else the generic one."""
    if named is not None:
        return FORMATS[named]
    return next((f for f in DETECTED if template and f.detect(template)), GENERIC)


@dataclass
class Prepared:
    """A generation with tools, ready for the model: its format, what its template is given, its grammar."""

    format: str
    messages: list[dict[str, Any]]
    template_args: dict[str, Any]
    grammar: GrammarIn | None


def prepare(named: str | None, template: str | None, messages: list[dict[str, Any]], request: ToolRequest) -> Prepared:
    """The messages and tools in the model's format, and the grammar of its answer (a forced call)."""
    chosen = choose(named, template)
    tools = ToolSet.of(request)
    rendering = chosen.render(messages, tools)
    return Prepared(chosen.name, rendering.messages, rendering.template_args, chosen.grammar(tools))


def read(format_name: str | None, text: str, names: set[str]) -> Parsed:
    """An answer in ``format_name`` (unknown or missing: the text as it came) as content and calls."""
    chosen = FORMATS.get(format_name or "")
    return chosen.parse(text, names) if chosen is not None else Parsed(text)
