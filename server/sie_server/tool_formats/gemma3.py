"""Gemma 3: its template has no tool support, so the tools go in the prompt as Google's function-calling
guide for Gemma describes (ai.google.dev/gemma/docs/capabilities/function-calling): an instruction and
the functions as JSON, and the model calls in Python syntax, ``[get_weather(city="Paris"), ...]``
(sometimes in a ```` ```tool_code ```` block). Earlier calls go back as that text, results as a user turn
in a ```` ```tool_output ```` block; consecutive turns of one role are merged, as the template wants
user and model turns to alternate. The instruction goes in the system message, which the template puts
at the head of the first user turn.

A forced call: ``[name(key=value, ...)]``, each value JSON under its property's schema (JSON's
``true``/``false``/``null`` are read as Python's), required keys always, optional ones may follow."""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from sie_server.contract.grammar_wire import GrammarIn
from sie_server.contract.tools_wire import FunctionSpec
from sie_server.tool_formats.base import (
    Parsed,
    Rendering,
    ToolFormat,
    ToolSet,
    calls_of,
    closed,
    described,
    json_rule,
    lark,
    literal,
    repeated,
    with_system,
)

INSTRUCTIONS = (
    "You have access to functions. If you decide to invoke any of the function(s), you MUST put it in the "
    "format of\n[func_name1(params_name1=params_value1, params_name2=params_value2...), func_name2(params)]\n\n"
    "You SHOULD NOT include any other text in the response if you call a function\n{tools}"
)
MUST_CALL = "\n\nYou must call a function."
FENCE = re.compile(r"^```(?:tool_code|python)?\s*(.*?)\s*```$", re.DOTALL)
NAMES = {"true": True, "false": False, "null": None, "True": True, "False": False, "None": None}


class Gemma3(ToolFormat):
    name = "gemma3"

    @staticmethod
    def detect(template: str) -> bool:
        return "<start_of_turn>" in template

    def render(self, messages: list[dict[str, Any]], tools: ToolSet) -> Rendering:
        out: list[dict[str, Any]] = []
        for m in messages:
            role, content = m["role"], m.get("content", "")
            if role == "developer":
                role = "system"
            if role == "tool":
                role, content = "user", f"```tool_output\n{content}\n```"
            if m.get("tool_calls"):
                content = (f"{content}\n" if content else "") + pythonic(calls_of(m))
            if out and out[-1]["role"] == role and role != "system":
                out[-1] = {"role": role, "content": f"{out[-1]['content']}\n\n{content}"}
            else:
                out.append({"role": role, "content": content})
        if tools.callable:
            listed = json.dumps([described(f) for f in tools.callable], indent=1)
            out = with_system(out, INSTRUCTIONS.format(tools=listed) + (MUST_CALL if tools.must_call else ""))
        return Rendering(out)

    def grammar(self, tools: ToolSet) -> GrammarIn | None:
        if not tools.must_call:
            return None
        rules = {"start": f"{literal('[')} {repeated('call', ', ', tools.most_calls)} {literal(']')}",
                 "call": " | ".join(f"call{k}" for k in range(len(tools.callable)))}  # fmt: skip
        for k, function in enumerate(tools.callable):
            rules.update(_call_rules(f"call{k}", function, tools.lenient))
        return lark(rules)

    def parse(self, text: str, names: set[str]) -> Parsed:
        body = text.strip()
        fenced = FENCE.match(body)
        body = fenced.group(1) if fenced else body
        if not (body.startswith("[") and body.endswith("]")):
            return Parsed(text)
        calls = read_pythonic(body, names)
        return Parsed(None, calls) if calls else Parsed(text)


def pythonic(calls: list[tuple[str, Any]]) -> str:
    """Calls as Gemma writes them: ``[name(key=value, ...)]``, values as JSON."""
    items = []
    for name, arguments in calls:
        pairs = arguments.items() if isinstance(arguments, dict) else []
        items.append(f"{name}(" + ", ".join(f"{k}={json.dumps(v)}" for k, v in pairs) + ")")
    return "[" + ", ".join(items) + "]"


def read_pythonic(text: str, names: set[str]) -> list[tuple[str, Any]] | None:
    """``[f(a=1), g()]`` as calls; None for anything else (a positional argument, an expression)."""
    try:
        tree = ast.parse(text, mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(tree, ast.List) or not tree.elts:
        return None
    calls: list[tuple[str, Any]] = []
    for node in tree.elts:
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name) or node.args:
            return None
        if node.func.id not in names or any(k.arg is None for k in node.keywords):
            return None
        try:
            calls.append((node.func.id, {str(k.arg): _value(k.value) for k in node.keywords}))
        except ValueError:
            return None
    return calls


def _value(node: ast.expr) -> Any:
    if isinstance(node, ast.Name) and node.id in NAMES:
        return NAMES[node.id]
    if isinstance(node, ast.List | ast.Tuple):
        return [_value(e) for e in node.elts]
    if isinstance(node, ast.Dict):
        return {_value(k): _value(v) for k, v in zip(node.keys, node.values, strict=True) if k is not None}
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _value(node.operand)
        if isinstance(inner, int | float):
            return -inner
    if isinstance(node, ast.Constant):
        return node.value
    raise ValueError("not a literal")


def _call_rules(rule: str, function: FunctionSpec, lenient: bool) -> dict[str, str]:
    """``name(required=..., [optional=...])``: one Lark rule per property value."""
    properties: dict[str, Any] = function.parameters.get("properties") or {}
    required = [k for k in function.parameters.get("required") or [] if k in properties]
    optional = [k for k in properties if k not in required]
    rules: dict[str, str] = {}
    value: dict[str, str] = {}
    for index, key in enumerate([*required, *optional]):
        value[key] = f"{rule}_v{index}"
        rules[value[key]] = json_rule(closed(properties[key]), lenient)
    parts = [f"{literal(key + '=')} {value[key]}" for key in required]
    head = f" {literal(', ')} ".join(parts)
    tail = _optional([(key, value[key]) for key in optional], first=not parts)
    rules[rule] = f"{literal(function.name + '(')} {head} {tail} {literal(')')}".replace("  ", " ")
    return rules


def _optional(items: list[tuple[str, str]], first: bool) -> str:
    """Each optional ``key=value`` may be left out; a separator only between two that are given."""
    if not items:
        return ""
    (key, value), rest = items[0], items[1:]
    given = f"{literal(key + '=')} {value}"
    if first:
        alternative = _optional(rest, True)  # this one left out: the next may come first
        return f"({given} {_optional(rest, False)} | {alternative})" if alternative else f"({given})?"
    return f"({literal(', ')} {given})? {_optional(rest, False)}".strip()
