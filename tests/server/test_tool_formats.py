"""Tool calling in each family's own format (sie_server/tool_formats): the format is told from the model's
chat template (the real templates, tests/helpers/chat_templates), the tools and earlier calls render
through that template, each family's parser reads that family's real output (samples in the forms its
docs show: parallel calls, content before a call), and on a tiny random model given each template, a
forced call (``required`` or a named function) always parses to arguments valid under the function's
schema, through the official ``openai`` client."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import jsonschema
import pytest
from openai import OpenAI

from sie_server import tool_formats
from sie_server.catalog.schema import ToolFormatName
from sie_server.contract.tools_wire import ToolRequest
from tests.helpers.catalog import tiny_llm, write_config
from tests.helpers.server import ServerProcess, offline_server
from tests.helpers.tiny_bytelevel import build_tiny_bytelevel_llm

TEMPLATES = Path(__file__).resolve().parents[1] / "helpers" / "chat_templates"
FAMILIES = {  # template file -> the format it speaks
    "qwen2.5-instruct.jinja": "qwen",
    "llama-3.2-instruct.jinja": "llama3",
    "phi-4-mini-instruct.jinja": "phi4",
    "gemma-3-it.jinja": "gemma3",
    "smollm3.jinja": "smollm3",
}
CONTEXT = 4096  # the tools' JSON is long in a 400-token byte-level vocabulary
CHATML = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"


def function_tool(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    parameters = {"type": "object", "properties": properties, "required": required, "additionalProperties": False}
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}


WEATHER = function_tool(
    "get_weather",
    "The weather in a city now.",
    {"city": {"type": "string", "maxLength": 12}, "unit": {"enum": ["celsius", "fahrenheit"]}},
    ["city"],
)
INVOICE = function_tool(
    "invoice_total",
    "The total of an invoice, by its number.",
    {"number": {"type": "integer", "minimum": 1, "maximum": 999}},
    ["number"],
)
LISTING = function_tool(  # only optional arguments
    "list_invoices",
    "Recent invoices.",
    {"limit": {"type": "integer", "minimum": 1, "maximum": 9}, "paid": {"type": "boolean"}},
    [],
)
TOOLS = [WEATHER, INVOICE, LISTING]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
NAMES = set(SCHEMAS)
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
HISTORY: list[dict[str, Any]] = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Paris and Oslo?"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
        {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny 21C"},
    {"role": "tool", "tool_call_id": "call_2", "content": "rain 9C"},
    {"role": "user", "content": "And the invoice 42?"},
]  # fmt: skip


def template(name: str) -> str:
    return (TEMPLATES / name).read_text()


def request(choice: Any = "auto", parallel: bool = True) -> ToolRequest:
    return ToolRequest.model_validate({"functions": [t["function"] for t in TOOLS], "choice": choice,
                                       "parallel": parallel})  # fmt: skip


# ----- detection and rendering ------------------------------------------------------------------------------
def test_every_format_name_the_catalog_takes_is_registered() -> None:
    assert set(get_args(ToolFormatName)) == set(tool_formats.FORMATS)


@pytest.mark.parametrize(("file", "name"), FAMILIES.items())
def test_the_format_is_told_from_the_chat_template(file: str, name: str) -> None:
    assert tool_formats.choose(None, template(file)).name == name
    assert tool_formats.choose("generic", template(file)).name == "generic"  # the catalog's choice wins


def test_a_template_without_tool_support_gets_the_generic_format() -> None:
    assert tool_formats.choose(None, CHATML).name == "generic"
    assert tool_formats.choose(None, None).name == "generic"


@pytest.mark.parametrize("file", FAMILIES)
def test_the_tools_and_the_history_render_through_the_family_template(file: str) -> None:
    from transformers.utils.chat_template_utils import render_jinja_template

    prepared = tool_formats.prepare(None, template(file), [dict(m) for m in HISTORY], request())
    rendered, _ = render_jinja_template([prepared.messages], chat_template=template(file), add_generation_prompt=True,
                                        bos_token="<s>", eos_token="</s>", **prepared.template_args)  # fmt: skip
    prompt = rendered[0]
    for tool in TOOLS:  # every tool: its name, description and each argument's schema
        assert tool["function"]["name"] in prompt and tool["function"]["description"] in prompt
        assert '"maxLength": 12' in prompt or "'maxLength': 12" in prompt
    for earlier in ("sunny 21C", "rain 9C", "invoice 42", "Be brief."):
        assert earlier in prompt, (earlier, prompt)
    for city in ("Paris", "Oslo"):  # each earlier call, in the family's own call syntax
        assert f'"city": "{city}"' in prompt or f'city="{city}"' in prompt, (city, prompt)
    assert prompt.index("sunny 21C") < prompt.index("invoice 42")


@pytest.mark.parametrize("file", [f for f in FAMILIES if f != "smollm3.jinja"])  # SmolLM3's uses HF's own tag
def test_a_gguf_template_renders_tools_on_llamacpp_as_transformers_renders_them(file: str) -> None:
    from transformers.utils.chat_template_utils import render_jinja_template

    from sie_server.adapters.generators.gguf_template import compile_template

    prepared = tool_formats.prepare(None, template(file), [dict(m) for m in HISTORY], request())
    marks = {"bos_token": "<s>", "eos_token": "</s>"}
    ours = compile_template(template(file)).render(messages=prepared.messages, add_generation_prompt=True,
                                                    **marks, **prepared.template_args)  # fmt: skip
    theirs, _ = render_jinja_template([prepared.messages], chat_template=template(file), add_generation_prompt=True,
                                      **marks, **prepared.template_args)  # fmt: skip
    assert ours == theirs[0]


# ----- parsing each family's real output --------------------------------------------------------------------
SAMPLES: list[tuple[str, str, str | None, list[tuple[str, Any]]]] = [
    ("qwen", '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>', None,
     [("get_weather", {"city": "Paris"})]),
    ("qwen", 'Let me check both.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
             '<tool_call>\n{"name": "invoice_total", "arguments": {"number": 42}}\n</tool_call>', "Let me check both.",
     [("get_weather", {"city": "Paris"}), ("invoice_total", {"number": 42})]),
    ("qwen", "<think>\nThe user wants weather.\n</think>\n\n<tool_call>\n"
             '{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>', None,
     [("get_weather", {"city": "Oslo"})]),
    ("qwen", "It is sunny in Paris.", "It is sunny in Paris.", []),
    ("smollm3", '<tool_call>\n{"name": "list_invoices", "arguments": {"limit": 3}}\n</tool_call>', None,
     [("list_invoices", {"limit": 3})]),
    ("llama3", '{"name": "get_weather", "parameters": {"city": "Paris"}}', None, [("get_weather", {"city": "Paris"})]),
    ("llama3", '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}; '
               '{"name": "invoice_total", "parameters": {"number": 7}}', None,
     [("get_weather", {"city": "Paris"}), ("invoice_total", {"number": 7})]),
    ("llama3", "Paris is sunny today.", "Paris is sunny today.", []),
    ("phi4", '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris"}}, '
             '{"name": "invoice_total", "arguments": {"number": 42}}]<|/tool_call|>', None,
     [("get_weather", {"city": "Paris"}), ("invoice_total", {"number": 42})]),
    ("phi4", 'Checking.<|tool_call|>{"name": "get_weather", "arguments": {"city": "Rome"}}<|/tool_call|>', "Checking.",
     [("get_weather", {"city": "Rome"})]),
    ("phi4", '[{"name": "get_weather", "arguments": {"city": "Paris"}}]', None, [("get_weather", {"city": "Paris"})]),
    ("phi4", 'functools[{"name": "invoice_total", "arguments": {"number": 5}}]', None,
     [("invoice_total", {"number": 5})]),
    ("gemma3", '[get_weather(city="Paris"), invoice_total(number=42)]', None,
     [("get_weather", {"city": "Paris"}), ("invoice_total", {"number": 42})]),
    ("gemma3", '```tool_code\n[list_invoices(limit=2, paid=true)]\n```', None,
     [("list_invoices", {"limit": 2, "paid": True})]),
    ("gemma3", "[list_invoices()]", None, [("list_invoices", {})]),
    ("gemma3", "The weather in Paris is sunny.", "The weather in Paris is sunny.", []),
    ("generic", '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}', None,
     [("get_weather", {"city": "Paris"})]),
    ("generic", '{"content": "Sunny."}', "Sunny.", []),
]  # fmt: skip


@pytest.mark.parametrize(("name", "text", "content", "calls"), SAMPLES)
def test_each_family_parser_reads_its_own_output(name: str, text: str, content: str | None, calls: list[Any]) -> None:
    parsed = tool_formats.read(name, text, NAMES)
    assert parsed.calls == calls
    assert parsed.content == content


@pytest.mark.parametrize("name", sorted(tool_formats.FORMATS))
def test_a_call_of_a_function_not_offered_stays_text(name: str) -> None:
    text = {"qwen": '<tool_call>\n{"name": "rm_rf", "arguments": {}}\n</tool_call>',
            "smollm3": '<tool_call>\n{"name": "rm_rf", "arguments": {}}\n</tool_call>',
            "llama3": '{"name": "rm_rf", "parameters": {}}', "phi4": '[{"name": "rm_rf", "arguments": {}}]',
            "gemma3": "[rm_rf()]", "generic": '{"tool_calls": [{"name": "rm_rf", "arguments": {}}]}'}[name]  # fmt: skip
    parsed = tool_formats.read(name, text, NAMES)
    assert parsed.calls == [] and parsed.content == text


# ----- forced calls on a tiny random model, through the openai client ----------------------------------------
def with_template(source: Path, folder: Path, chat_template: str) -> Path:
    """The tiny model with another chat template."""
    from transformers import AutoTokenizer

    shutil.copytree(source, folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    tokenizer.chat_template = chat_template
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OpenAI]:
    root = tmp_path_factory.mktemp("tool-formats")
    tiny = build_tiny_bytelevel_llm(root / "tiny", max_positions=CONTEXT)
    catalog = root / "catalog"
    catalog.mkdir()
    for file, name in FAMILIES.items():
        config = tiny_llm(f"test/tiny-{name}", with_template(tiny, root / name, template(file)), max_len=CONTEXT)
        config["profiles"]["cpu"]["max_batch_tokens"] = 2 * CONTEXT
        write_config(catalog, config)
    server: ServerProcess
    with offline_server(catalog, root) as server:
        yield OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=300)


def check_calls(calls: Any, allowed: set[str], most: int) -> None:
    assert calls and len(calls) <= most
    for call in calls:
        assert call.function.name in allowed
        jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])


CHOICES = ["required", {"type": "function", "function": {"name": "list_invoices"}},
           {"type": "function", "function": {"name": "get_weather"}}]  # fmt: skip


@pytest.mark.parametrize("family", sorted(set(FAMILIES.values())))
def test_a_forced_call_always_parses_on_a_random_model(client: OpenAI, family: str) -> None:
    for seed, choice in enumerate(CHOICES * 2):
        named = choice["function"]["name"] if isinstance(choice, dict) else None
        parallel = seed == 0
        chat = client.chat.completions.create(
            model=f"test/tiny-{family}", messages=ASK, tools=TOOLS, tool_choice=choice,  # type: ignore[arg-type]
            temperature=1.0, seed=seed, max_tokens=160, parallel_tool_calls=parallel,
        )  # fmt: skip
        choice_out = chat.choices[0]
        assert choice_out.finish_reason == "tool_calls", (family, seed, choice_out.message)
        check_calls(choice_out.message.tool_calls, {named} if named else NAMES, 8 if parallel else 1)


def test_a_streamed_forced_call_and_a_tool_result_round_trip(client: OpenAI) -> None:
    stream = client.chat.completions.create(
        model="test/tiny-qwen", messages=ASK, tools=TOOLS, tool_choice="required", seed=1, max_tokens=160,
        parallel_tool_calls=False, stream=True,
    )  # fmt: skip
    chunks = list(stream)
    calls = [d for c in chunks if c.choices for d in c.choices[0].delta.tool_calls or []]
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"
    assert len(calls) == 1 and calls[0].function is not None and calls[0].function.name in NAMES
    history = [*ASK, {"role": "assistant", "content": None, "tool_calls": [
        {"id": calls[0].id, "type": "function",
         "function": {"name": calls[0].function.name, "arguments": calls[0].function.arguments}}]},
        {"role": "tool", "tool_call_id": calls[0].id, "content": "sunny"}]  # fmt: skip
    for family in ("qwen", "llama3", "gemma3"):  # the result goes back through each template
        chat = client.chat.completions.create(model=f"test/tiny-{family}", messages=history, tools=TOOLS,  # type: ignore[arg-type]
                                              tool_choice="none", max_tokens=8)  # fmt: skip
        assert chat.choices[0].message.tool_calls is None and chat.usage is not None
        assert chat.usage.prompt_tokens > 20


def test_the_responses_api_forces_a_call_in_the_family_format(client: OpenAI) -> None:
    tools = [{"type": "function", **t["function"]} for t in TOOLS]
    answer = client.responses.create(model="test/tiny-phi4", input="Weather in Paris?", tools=tools,  # type: ignore[arg-type]
                                     tool_choice="required", max_output_tokens=160)  # fmt: skip
    calls = [item for item in answer.output if item.type == "function_call"]
    assert calls and all(c.name in NAMES for c in calls)
    for call in calls:
        jsonschema.validate(json.loads(call.arguments), SCHEMAS[call.name])
