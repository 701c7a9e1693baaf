"""Wire models of OpenAI's tool calling on chat completions: the messages a client sends (content as a
string or text parts, assistant ``tool_calls``, ``tool`` results), ``tools`` and ``tool_choice``, and the
``tool_calls`` an answer carries."""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

FUNCTION_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # OpenAI's rule for function names
MAX_TOOLS = 128


class _Open(BaseModel):
    # OpenAI's clients send fields this server does not use (audio, refusal, annotations): accepted, ignored
    model_config = ConfigDict(extra="ignore", strict=True)


class TextPart(_Open):
    type: str
    text: str | None = None


class FunctionCall(_Open):
    name: str
    arguments: str = "{}"  # a JSON object, as a string (OpenAI's wire)


class ToolCall(_Open):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class ChatMessageIn(_Open):
    """A chat message as OpenAI's clients send it."""

    role: Literal["system", "user", "assistant", "tool", "developer"]
    content: str | list[TextPart] | None = None
    name: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None

    def text(self) -> str:
        """The content as one string (text parts joined; other parts are refused)."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        for part in self.content:
            if part.type != "text" or part.text is None:
                raise ValueError(f"a {self.role} message part of type {part.type!r}: this server reads text parts only")
        return "".join(part.text or "" for part in self.content)

    def text_beside_calls(self) -> str:
        """An assistant turn that carries ``tool_calls``: its text parts only. Other parts restate the calls
        (LangChain's v1 messages put ``tool_call`` blocks in the content), which ``tool_calls`` holds."""
        if not isinstance(self.content, list):
            return self.text()
        return "".join(part.text or "" for part in self.content if part.type == "text")


class FunctionSpec(_Open):
    name: str
    description: str | None = None
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    strict: bool | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not FUNCTION_NAME.match(value):
            raise ValueError("a function name is 1 to 64 letters, digits, underscores or dashes")
        return value

    @field_validator("parameters")
    @classmethod
    def _local_refs(cls, value: dict[str, Any]) -> dict[str, Any]:
        """Local references (``#/$defs/X``, ``#/definitions/X``, as pydantic writes nested models) inlined:
        the arguments' schema is embedded in the answer's grammar, where a pointer to its root would dangle."""
        return inline_refs(value)


MAX_REF_DEPTH = 32


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with every local ``$ref`` replaced by what it points to and its ``$defs`` / ``definitions``
    dropped; ValueError for a reference that points nowhere or refers to itself (a recursive schema)."""
    if "$defs" not in schema and "definitions" not in schema:
        return schema
    defs = {
        f"#/{key}/{name}": body for key in ("$defs", "definitions") for name, body in (schema.get(key) or {}).items()
    }

    def resolve(node: Any, seen: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [resolve(n, seen) for n in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/"):
            if ref not in defs:
                raise ValueError(f"parameters: $ref {ref!r} points to nothing in the schema")
            if ref in seen or len(seen) >= MAX_REF_DEPTH:
                raise ValueError(f"parameters: $ref {ref!r} refers to itself; recursive schemas are not supported")
            rest = {k: resolve(v, seen) for k, v in node.items() if k != "$ref"}
            return {**resolve(defs[ref], (*seen, ref)), **rest}
        return {k: resolve(v, seen) for k, v in node.items() if k not in ("$defs", "definitions")}

    out: dict[str, Any] = resolve(schema, ())
    return out


class Tool(_Open):
    type: Literal["function"] = "function"
    function: FunctionSpec


class NamedFunction(_Open):
    name: str


class NamedToolChoice(_Open):
    type: Literal["function"] = "function"
    function: NamedFunction


ToolChoice = Literal["auto", "none", "required"] | NamedToolChoice


class ToolRequest(_Open):
    """The tools a generation offers, on the native wire: the route builds it from OpenAI's ``tools``,
    ``tool_choice`` and ``parallel_tool_calls``; the engine renders it in the model's own tool format
    (sie_server/tool_formats) and constrains a forced call."""

    functions: list[FunctionSpec] = Field(default_factory=list, max_length=MAX_TOOLS)
    choice: ToolChoice = "auto"
    parallel: bool = True


def tool_call(call_id: str, name: str, arguments: Any) -> ToolCall:
    return ToolCall(id=call_id, function=FunctionCall(name=name, arguments=json.dumps(arguments)))
