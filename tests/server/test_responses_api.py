"""OpenAI's Responses API through the official client's ``responses.create``: plain, streamed, structured
(``text.format`` json_schema), with a function tool, and refused where this stateless server cannot serve."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import openai
import pytest
from openai import OpenAI

from tests.helpers.catalog import SMOLLM

PERSON: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 20},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}  # fmt: skip


@pytest.fixture(scope="module")
def client(base_url: str) -> OpenAI:
    return OpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0, timeout=600)


def test_a_plain_response_has_its_text_and_usage(client: OpenAI) -> None:
    response = client.responses.create(
        model=SMOLLM, input="What is the capital of France? Answer in one word.", instructions="Be brief.",
        max_output_tokens=10, temperature=0,
    )  # fmt: skip
    assert response.object == "response" and response.status in ("completed", "incomplete")
    assert "Paris" in response.output_text
    assert response.usage is not None and response.usage.input_tokens > 10 and 1 <= response.usage.output_tokens <= 10


def test_a_streamed_response_sends_the_responses_events_and_the_same_text(client: OpenAI) -> None:
    ask = [{"role": "user", "content": [{"type": "input_text", "text": "Name three colors of the rainbow."}]}]
    whole = client.responses.create(model=SMOLLM, input=ask, max_output_tokens=24, temperature=0)  # type: ignore[arg-type]
    events = list(client.responses.create(model=SMOLLM, input=ask, max_output_tokens=24, temperature=0, stream=True))  # type: ignore[arg-type]
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] in ("response.completed", "response.incomplete")
    assert "response.output_text.done" in kinds and "response.output_item.done" in kinds
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")  # type: ignore[union-attr]
    assert text == whole.output_text
    assert [e.sequence_number for e in events] == list(range(len(events)))


def test_text_format_json_schema_gives_json_valid_under_it(client: OpenAI) -> None:
    response = client.responses.create(
        model=SMOLLM, input="Alice is 31 years old. Give her name and age.", max_output_tokens=60, temperature=0,
        text={"format": {"type": "json_schema", "name": "person", "schema": PERSON, "strict": True}},
    )  # fmt: skip
    assert response.status == "completed"
    jsonschema.validate(json.loads(response.output_text), PERSON)


def test_a_function_tool_is_called_with_arguments_valid_under_its_schema(client: OpenAI) -> None:
    tool = {"type": "function", "name": "lookup_person", "description": "Find a person by name.",
            "parameters": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}},
                           "required": ["name"], "additionalProperties": False}}  # fmt: skip
    response = client.responses.create(
        model=SMOLLM, input="Look up Alice.", tools=[tool], tool_choice="required", max_output_tokens=80,  # type: ignore[list-item]
        temperature=0, parallel_tool_calls=False,
    )  # fmt: skip
    (call,) = [item for item in response.output if item.type == "function_call"]
    assert call.name == "lookup_person"  # type: ignore[union-attr]
    jsonschema.validate(json.loads(call.arguments), tool["parameters"])  # type: ignore[union-attr,arg-type]
    follow = client.responses.create(
        model=SMOLLM, max_output_tokens=30, temperature=0, tools=[tool], tool_choice="none",  # type: ignore[list-item]
        input=[{"role": "user", "content": "Look up Alice."}, call.model_dump(),  # type: ignore[list-item]
               {"type": "function_call_output", "call_id": call.call_id, "output": '{"age": 31}'}],  # type: ignore[union-attr]
    )  # fmt: skip
    assert follow.output_text


def test_previous_response_id_is_refused_by_this_stateless_server(client: OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model=SMOLLM, input="hi", previous_response_id="resp_123")
    assert "previous_response_id" in str(caught.value)
