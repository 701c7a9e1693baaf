"""``extract_structured``: an object pulled from a text under a caller's JSON schema. Decoding is
constrained to the schema (the generate call's grammar), and the answer is validated against the schema
again after generation: an invalid object is a clear error (INVALID_OUTPUT), never returned."""

from __future__ import annotations

import json
from typing import Any

from sie_server.api.service import Service
from sie_server.api.streaming import whole
from sie_server.contract.grammar_wire import GrammarIn
from sie_server.contract.headers import CallOptions
from sie_server.contract.requests import GenerateRequest, Message
from sie_server.contract.tasks_wire import ExtractStructuredRequest, ExtractStructuredResponse
from sie_server.errors import InvalidInput, InvalidOutput
from sie_server.tasks.common import check_text, models_for, used

NAME = "extract_structured"
TITLE = "Extract a structured object"
DESCRIPTION = (
    "Extract a JSON object that follows the given JSON schema from a text, with a language model whose "
    "decoding is constrained to the schema; the object is validated against the schema again after generation."
)
STEPS = ("generate",)
SYSTEM = "Extract the requested fields from the text. Answer with one JSON object that follows the schema."


def _check_schema(schema: dict[str, Any]) -> None:
    import jsonschema  # the mcp package's dependency: present wherever the server runs

    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise InvalidInput(f"schema is not a valid JSON schema: {exc.message}") from None
    if schema.get("type") != "object":
        raise InvalidInput('schema must describe an object ("type": "object")')


def _validated(text: str, schema: dict[str, Any]) -> dict[str, Any]:
    import jsonschema

    try:
        found = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidOutput(f"the model's answer is not JSON ({exc.msg} at {exc.pos})") from None
    errors = sorted(jsonschema.validators.validator_for(schema)(schema).iter_errors(found), key=lambda e: e.path)
    if errors:
        where = "/".join(str(p) for p in errors[0].path) or "(root)"
        raise InvalidOutput(f"the model's object does not follow the schema at {where}: {errors[0].message}")
    if not isinstance(found, dict):
        raise InvalidOutput("the model's answer is not a JSON object")
    return found


async def run(svc: Service, request: ExtractStructuredRequest, call: CallOptions) -> ExtractStructuredResponse:
    check_text(request.text, "text")
    _check_schema(request.json_schema)
    configs = await models_for(NAME, svc, STEPS, request.models, uses=STEPS)
    asked = f"{request.instructions}\n\n" if request.instructions else ""
    schema = json.dumps(request.json_schema, separators=(",", ":"))
    messages = [
        Message(role="system", content=SYSTEM),
        Message(role="user", content=f"{asked}JSON schema: {schema}\n\nText:\n{request.text}"),
    ]
    for message in messages:
        svc.limits.text(message.content, "the task's prompt")
    generate = GenerateRequest(
        messages=messages,
        max_new_tokens=request.max_new_tokens,
        temperature=0.0,
        grammar=GrammarIn(json_schema=request.json_schema),
    )
    stream = await svc.generate(configs["generate"], generate, call)
    await whole(stream, call)
    return ExtractStructuredResponse(data=_validated(stream.text, request.json_schema), models=used(configs))
