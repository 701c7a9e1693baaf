"""What every tool format shares: the tools a request offers (``ToolSet``), a format's four duties
(``detect`` a chat template, ``render`` messages and tools for it, the ``grammar`` of a forced call,
``parse`` an answer), and the pieces the formats build those from (HF-style messages, call schemas, Lark
rules with ``%json`` bodies)."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

from sie_server.contract.grammar_wire import GrammarIn
from sie_server.contract.tools_wire import FunctionSpec, NamedToolChoice, ToolRequest
from sie_server.errors import InvalidInput

MAX_PARALLEL_CALLS = 8
#: JSON as the engine lays it out (engine/grammar.py JSON_OPTIONS): compact, no free whitespace, so each
#: value ends where its grammar does; given to each ``%json`` body of a Lark grammar
JSON_LAYOUT = {"item_separator": ", ", "key_separator": ": ", "whitespace_flexible": False}


@dataclass(frozen=True)
class ToolSet:
    """The functions a request offers, those the model may call now, and how it must answer."""

    offered: dict[str, FunctionSpec]
    callable: list[FunctionSpec]
    must_call: bool
    parallel: bool

    @classmethod
    def of(cls, request: ToolRequest) -> ToolSet:
        offered = {f.name: f for f in request.functions}
        choice = request.choice
        if choice == "none":
            return cls(offered, [], False, request.parallel)
        if isinstance(choice, NamedToolChoice):
            if choice.function.name not in offered:
                raise InvalidInput(f"tool_choice names function {choice.function.name!r}, which is not in tools")
            return cls(offered, [offered[choice.function.name]], True, request.parallel)
        if choice == "required" and not offered:
            raise InvalidInput("tool_choice is required but no tools were given")
        return cls(offered, list(offered.values()), choice == "required", request.parallel)

    @property
    def lenient(self) -> bool:
        """OpenAI's default (``strict`` unset): schema keywords the engine cannot enforce pass."""
        return not all(f.strict is True for f in self.callable)

    @property
    def most_calls(self) -> int:
        return MAX_PARALLEL_CALLS if self.parallel else 1


@dataclass
class Rendering:
    """Messages as the model's template takes them, and what else the template is given (``tools=``)."""

    messages: list[dict[str, Any]]
    template_args: dict[str, Any] = field(default_factory=dict)


@dataclass
class Parsed:
    """An answer read: its text (None when it is only calls) and its calls, ``(name, arguments)``."""

    content: str | None
    calls: list[tuple[str, Any]] = field(default_factory=list)


class ToolFormat(ABC):
    """One family's way of offering tools and writing calls."""

    name: ClassVar[str]

    @staticmethod
    @abstractmethod
    def detect(template: str) -> bool:
        """Does this chat template (its Jinja source) speak this format?"""

    @abstractmethod
    def render(self, messages: list[dict[str, Any]], tools: ToolSet) -> Rendering:
        """The conversation (earlier calls and results included) and the tools, for the template."""

    @abstractmethod
    def grammar(self, tools: ToolSet) -> GrammarIn | None:
        """What the answer is held to: a forced call (``required`` / a named function) always; None: free."""

    @abstractmethod
    def parse(self, text: str, names: set[str]) -> Parsed:
        """The answer's content and its calls of the functions ``names`` (other text stays content)."""


# ----- messages -------------------------------------------------------------------------------------------
def arguments_of(call: dict[str, Any]) -> Any:
    """A wire tool call's arguments as an object (the wire carries them as a JSON string)."""
    raw = call.get("function", {}).get("arguments", "{}")
    try:
        return json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError:
        return {}


def calls_of(message: dict[str, Any]) -> list[tuple[str, Any]]:
    return [(c["function"]["name"], arguments_of(c)) for c in message.get("tool_calls") or []]


def hf_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages as Hugging Face tool templates take them: an assistant's ``tool_calls`` with arguments as
    objects, ``tool`` results with their call id; no key that is not set (templates test ``'x' in m``)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        role = "system" if m["role"] == "developer" else m["role"]
        item: dict[str, Any] = {"role": role, "content": m.get("content", "")}
        if m.get("tool_calls"):
            item["tool_calls"] = [
                {"id": c.get("id"), "type": "function", "function": {"name": name, "arguments": args}}
                for c, (name, args) in zip(m["tool_calls"], calls_of(m), strict=True)
            ]
        if m.get("tool_call_id"):
            item["tool_call_id"] = m["tool_call_id"]
        out.append(item)
    return out


def described(function: FunctionSpec) -> dict[str, Any]:
    """A function as the templates list it: name, description, parameters."""
    out: dict[str, Any] = {"name": function.name}
    if function.description:
        out["description"] = function.description
    out["parameters"] = function.parameters
    return out


def hf_tools(functions: list[FunctionSpec]) -> list[dict[str, Any]]:
    return [{"type": "function", "function": described(f)} for f in functions]


def with_system(messages: list[dict[str, Any]], text: str, **extra: Any) -> list[dict[str, Any]]:
    """``text`` after the caller's own system message, or as a new first one."""
    if messages and messages[0]["role"] in ("system", "developer"):
        first = messages[0]
        return [{**first, "role": "system", "content": f"{first.get('content', '')}\n\n{text}".strip(), **extra},
                *messages[1:]]  # fmt: skip
    return [{"role": "system", "content": text, **extra}, *messages]


# ----- schemas and grammars -------------------------------------------------------------------------------
def closed(schema: Any) -> Any:
    """The schema with every object that lists its properties closed to others (``additionalProperties:
    false`` where it says nothing): a function takes the arguments it names, and a model left free to add
    keys copies the schema itself into its call."""
    if isinstance(schema, list):
        return [closed(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: closed(value) for key, value in schema.items()}
    if "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


def json_object(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def call_schema(function: FunctionSpec, arguments_key: str = "arguments") -> dict[str, Any]:
    """One call as a JSON object: ``{"name": <this function>, <arguments_key>: <its arguments>}``."""
    return json_object({"name": {"const": function.name}, arguments_key: closed(function.parameters)})


def calls_schema(tools: ToolSet, arguments_key: str = "arguments") -> dict[str, Any]:
    schemas = [call_schema(f, arguments_key) for f in tools.callable]
    return schemas[0] if len(schemas) == 1 else {"anyOf": schemas}


def json_rule(schema: dict[str, Any], lenient: bool) -> str:
    """A Lark rule body: JSON valid under ``schema``, laid out as the engine lays JSON out."""
    options = {**JSON_LAYOUT, "lenient": lenient}
    return "%json " + json.dumps({**schema, "x-guidance": options}, separators=(",", ":"))


def literal(text: str) -> str:
    """A Lark string literal."""
    return json.dumps(text)


def repeated(item: str, separator: str, most: int) -> str:
    """A Lark expression: ``item`` once, then up to ``most - 1`` more, each after ``separator``."""
    tail = ""
    for _ in range(most - 1):
        tail = f"({literal(separator)} {item} {tail})?".replace(" )", ")")
    return f"{item} {tail}".strip()


def lark(rules: dict[str, str]) -> GrammarIn:
    """A Lark grammar (``start`` first) as the wire's ``ebnf`` grammar."""
    return GrammarIn(ebnf="\n".join(f"{name}: {body}" for name, body in rules.items()))


def split_think(text: str) -> str:
    """The answer without a leading ``<think>...</think>`` block (Qwen3, SmolLM3)."""
    stripped = text.lstrip()
    if stripped.startswith("<think>") and "</think>" in stripped:
        return stripped.split("</think>", 1)[1]
    return text


def decode_objects(text: str) -> list[Any] | None:
    """JSON values one after another (separated by whitespace, ``;`` or ``,``); None unless all of
    ``text`` is such values."""
    decoder = json.JSONDecoder()
    found: list[Any] = []
    at = 0
    while True:
        while at < len(text) and text[at] in " \t\r\n;,":
            at += 1
        if at == len(text):
            return found or None
        try:
            value, at = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            return None
        found.append(value)


def as_calls(values: list[Any], names: set[str], arguments_keys: tuple[str, ...]) -> list[tuple[str, Any]] | None:
    """``{"name", "arguments"}`` objects (or lists of them) as calls; None if any is not a call of ``names``."""
    flat = [v for value in values for v in (value if isinstance(value, list) else [value])]
    calls: list[tuple[str, Any]] = []
    for value in flat:
        if not isinstance(value, dict) or value.get("name") not in names:
            return None
        key = next((k for k in arguments_keys if k in value), None)
        arguments = value[key] if key is not None else {}
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except json.JSONDecodeError:
                return None
        calls.append((str(value["name"]), arguments))
    return calls or None
