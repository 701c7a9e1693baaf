"""A generation's prompt: the raw prompt or the messages through the model's chat template, and with
tools, the messages and tools in the model's own tool format (sie_server/tool_formats) and its answer
held to that format's grammar when a call is forced."""

from __future__ import annotations

import dataclasses
from typing import Any

from sie_server.adapters.runtime.generator import Generator
from sie_server.catalog.schema import ModelConfig
from sie_server.contract.tools_wire import ToolRequest
from sie_server.engine.grammar import GrammarSpec
from sie_server.engine.sequences import SamplingParams
from sie_server.errors import InvalidInput
from sie_server.tool_formats import prepare


def prompt_for(
    model: ModelConfig,
    adapter: Generator,
    prompt: str | None,
    messages: list[dict[str, Any]] | None,
    tools: ToolRequest | None,
    params: SamplingParams,
) -> tuple[list[int], SamplingParams, str | None]:
    """The prompt's token ids, the sampling parameters (a forced call's grammar in them), and the tool
    format the answer is in (None without tools)."""
    if tools is None or messages is None:
        return adapter.prompt_ids(prompt, messages), params, None
    named = model.tasks.generate.tool_format if model.tasks.generate is not None else None
    prepared = prepare(named, adapter.chat_template_text(), messages, tools)
    from jinja2.exceptions import TemplateError

    try:
        ids = adapter.prompt_ids(None, prepared.messages, prepared.template_args)
    except TemplateError as exc:  # the template refused the conversation (raise_exception, roles out of turn)
        raise InvalidInput(f"model {model.id}'s chat template refused these messages: {exc}") from None
    if prepared.grammar is not None:
        params = dataclasses.replace(params, grammar=GrammarSpec.of(prepared.grammar))
    return ids, params, prepared.format
