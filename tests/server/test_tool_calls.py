"""OpenAI tool calling through the official ``openai`` client, on the packaged SmolLM2 (its template has no
tool support: the generic format, constrained): ``required`` and a named function always give a call whose
arguments validate against the function's schema, streamed as OpenAI streams them, and a tool result goes
back in for the answer."""

from __future__ import annotations

import json
from typing import Any

import httpx
import jsonschema
import pytest
from openai import OpenAI

from tests.helpers.catalog import SMOLLM

WEATHER: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city now.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 30}, "unit": {"enum": ["celsius", "fahrenheit"]}},
            "required": ["city", "unit"],
            "additionalProperties": False,
        },
    },
}
INVOICE_TOTAL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "invoice_total",
        "description": "The total of an invoice, by its number.",
        "parameters": {"type": "object", "properties": {"number": {"type": "integer", "minimum": 1, "maximum": 99999}},
                       "required": ["number"], "additionalProperties": False},
    },
}  # fmt: skip
ASK = [{"role": "user", "content": "What is the weather in Paris, in celsius?"}]


@pytest.fixture(scope="module")
def client(base_url: str) -> OpenAI:
    return OpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0, timeout=600)


def schema_of(name: str) -> dict[str, Any]:
    tool = WEATHER if name == "get_weather" else INVOICE_TOTAL
    parameters: dict[str, Any] = tool["function"]["parameters"]
    return parameters


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "invoice_total"}}])
def test_required_and_a_named_function_always_give_a_valid_call(client: OpenAI, choice: Any) -> None:
    for seed in range(3):
        chat = client.chat.completions.create(
            model=SMOLLM, messages=ASK, tools=[WEATHER, INVOICE_TOTAL], tool_choice=choice,  # type: ignore[list-item]
            temperature=1.0 if seed else 0.0, seed=seed, max_tokens=200, parallel_tool_calls=seed == 0,
        )  # fmt: skip
        (answer,) = chat.choices
        assert answer.finish_reason == "tool_calls" and answer.message.content is None
        calls = answer.message.tool_calls or []
        assert len(calls) >= 1
        for call in calls:
            assert call.type == "function" and call.id.startswith("call_")
            name = call.function.name  # type: ignore[union-attr]
            if isinstance(choice, dict):
                assert name == "invoice_total"
            jsonschema.validate(json.loads(call.function.arguments), schema_of(name))  # type: ignore[union-attr]


def test_one_call_when_parallel_calls_are_off_and_streamed_as_openai_streams_them(client: OpenAI) -> None:
    stream = client.chat.completions.create(
        model=SMOLLM, messages=ASK, tools=[WEATHER], tool_choice="required", parallel_tool_calls=False,  # type: ignore[list-item]
        temperature=0, max_tokens=120, stream=True,
    )  # fmt: skip
    calls: dict[int, dict[str, str]] = {}
    reasons = []
    for chunk in stream:
        for choice in chunk.choices:
            reasons.append(choice.finish_reason)
            for delta in choice.delta.tool_calls or []:
                found = calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
                found["id"] += delta.id or ""
                found["name"] += (delta.function.name if delta.function else None) or ""
                found["arguments"] += (delta.function.arguments if delta.function else None) or ""
    assert reasons[-1] == "tool_calls"
    (call,) = calls.values()
    assert call["name"] == "get_weather" and call["id"].startswith("call_")
    jsonschema.validate(json.loads(call["arguments"]), schema_of("get_weather"))


def test_a_tool_result_goes_back_in_and_none_answers_in_text(client: OpenAI) -> None:
    first = client.chat.completions.create(
        model=SMOLLM,
        messages=ASK,
        tools=[WEATHER],
        tool_choice="required",
        temperature=0,
        max_tokens=120,  # type: ignore[list-item]
    )
    (call,) = first.choices[0].message.tool_calls or []
    history: list[Any] = [
        *ASK,
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temperature": 21, "sky": "clear"})},
    ]
    follow = client.chat.completions.create(
        model=SMOLLM,
        messages=history,
        tools=[WEATHER],
        tool_choice="none",
        temperature=0,
        max_tokens=40,  # type: ignore[list-item]
    )
    (answer,) = follow.choices
    assert answer.message.tool_calls is None and answer.message.content
    auto = client.chat.completions.create(
        model=SMOLLM,
        messages=history,
        tools=[WEATHER],
        tool_choice="auto",
        temperature=0,
        max_tokens=120,  # type: ignore[list-item]
    )
    (choice,) = auto.choices
    if choice.finish_reason == "tool_calls":  # auto: a call or an answer, and either parses
        for made in choice.message.tool_calls or []:
            jsonschema.validate(json.loads(made.function.arguments), schema_of("get_weather"))  # type: ignore[union-attr]
    else:
        assert choice.finish_reason in ("stop", "length") and choice.message.content is not None


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        ({"tool_choice": {"type": "function", "function": {"name": "nope"}}}, "nope"),
        ({"tools": [WEATHER, WEATHER]}, "unique"),
        ({"tools": [], "tool_choice": "required"}, "no tools"),
    ],
)
def test_a_tool_choice_the_tools_cannot_meet_is_a_400_naming_it(
    base_url: str, extra: dict[str, Any], fragment: str
) -> None:
    body = {"model": SMOLLM, "messages": ASK, "tools": [WEATHER], **extra}
    r = httpx.post(f"{base_url}/v1/chat/completions", json=body, timeout=60)
    assert r.status_code == 400 and fragment in r.json()["error"]["message"], r.text


NESTED: dict[str, Any] = {  # as pydantic writes a model holding another (`Invoice(total: Amount)`)
    "type": "function",
    "function": {
        "name": "record_invoice",
        "parameters": {
            "$defs": {"Amount": {"type": "object", "properties": {"value": {"type": "integer"},
                                                                  "currency": {"enum": ["EUR", "USD"]}},
                                 "required": ["value", "currency"]}},
            "type": "object",
            "properties": {"number": {"type": "integer"}, "total": {"$ref": "#/$defs/Amount"}},
            "required": ["number", "total"],
        },
    },
}  # fmt: skip


def test_a_nested_schema_with_local_references_gives_a_call_that_validates(client: OpenAI) -> None:
    chat = client.chat.completions.create(
        model=SMOLLM, messages=[{"role": "user", "content": "Invoice 12 totals 40 euros."}],
        tools=[NESTED], tool_choice="required", temperature=0.0, max_tokens=60,  # type: ignore[list-item]
    )  # fmt: skip
    (call,) = chat.choices[0].message.tool_calls or []
    jsonschema.validate(json.loads(call.function.arguments), NESTED["function"]["parameters"])


def test_a_recursive_schema_is_a_400_naming_the_reference(base_url: str) -> None:
    looping = {"type": "function", "function": {"name": "tree", "parameters": {
        "$defs": {"Node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/Node"}}}},
        "type": "object", "properties": {"root": {"$ref": "#/$defs/Node"}}}}}  # fmt: skip
    body = {"model": SMOLLM, "messages": ASK, "tools": [looping]}
    r = httpx.post(f"{base_url}/v1/chat/completions", json=body, timeout=60)
    assert r.status_code == 400 and "#/$defs/Node" in r.text, r.text
