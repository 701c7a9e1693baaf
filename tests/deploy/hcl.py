"""Read deploy/terraform offline with python-hcl2: modules as parsed blocks, the references their expressions
make, and a small evaluator for the plain expressions (literals, var./local. references, string templates,
`cond ? a : b`, `a == b` / `a != b`, `[for x in list : body]` and `merge(...)`) that the Helm values are
written in, so that tests can check them against the chart."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import hcl2

REPO = Path(__file__).resolve().parents[2]
TERRAFORM = REPO / "deploy" / "terraform"

REFERENCE = re.compile(r"(?<![\w.])(var|local|module)\.([A-Za-z_][\w-]*)")
INTERPOLATION = re.compile(r"\$\{((?:[^{}]|\{[^{}]*\})*)\}")
DOTTED = re.compile(r"^(var|local)\.([A-Za-z_][\w-]*)((?:\.[A-Za-z_][\w-]*)*)$")
META_ARGUMENTS = {"source", "version", "providers", "depends_on", "count", "for_each"}


def is_meta(key: str) -> bool:
    """python-hcl2's own keys in a parsed body (__is_block__, __comments__)."""
    return key.startswith("__") and key.endswith("__")


class Unresolved:
    """A value the evaluator cannot know offline (a resource attribute, a function call)."""

    def __init__(self, expression: str) -> None:
        self.expression = expression

    def __repr__(self) -> str:
        return f"Unresolved({self.expression!r})"


def unquote(text: str) -> str:
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] == '"' else text


@cache
def parse(path: Path) -> dict[str, Any]:
    with path.open() as handle:
        data: dict[str, Any] = hcl2.load(handle)
    return data


@dataclass
class Module:
    path: Path
    variables: dict[str, dict[str, Any]] = field(default_factory=dict)
    locals: dict[str, Any] = field(default_factory=dict)
    outputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    modules: dict[str, dict[str, Any]] = field(default_factory=dict)
    blocks: list[Any] = field(default_factory=list)  # every top-level block's body, for reference scans

    @property
    def name(self) -> str:
        return str(self.path.relative_to(TERRAFORM))


def load_module(path: Path) -> Module:
    module = Module(path)
    for tf in sorted(path.glob("*.tf")):
        for kind, entries in parse(tf).items():
            for entry in entries:
                if kind == "locals":
                    module.locals.update({k: v for k, v in entry.items() if not is_meta(k)})
                    module.blocks.append(entry)
                    continue
                for label, body in entry.items():
                    if is_meta(label):
                        continue
                    if kind == "variable":
                        module.variables[unquote(label)] = body
                    elif kind == "output":
                        module.outputs[unquote(label)] = body
                    elif kind == "module":
                        module.modules[unquote(label)] = body
                    if kind != "variable":
                        module.blocks.append(body)
                    else:  # a variable's own validation refers to it, which is not a use
                        module.blocks.append({k: v for k, v in body.items() if k != "validation"})
    return module


def module_dirs() -> list[Path]:
    return sorted({tf.parent for tf in TERRAFORM.rglob("*.tf") if ".terraform" not in tf.parts})


def expressions(node: Any) -> list[str]:
    """Every string in a parsed block (HCL2 expressions and templates come out as strings)."""
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [e for key, value in node.items() if not is_meta(key) for e in [key, *expressions(value)]]
    if isinstance(node, list):
        return [e for item in node for e in expressions(item)]
    return []


def references(node: Any) -> set[tuple[str, str]]:
    """(kind, name) of every var./local./module. reference inside ${...} in the node."""
    found: set[tuple[str, str]] = set()
    for text in expressions(node):
        if "${" in text:  # an expression or a template (plain strings are literals)
            found.update(REFERENCE.findall(text))
    return found


def module_output_references(node: Any) -> set[tuple[str, str]]:
    return {
        (match.group(1), match.group(2))
        for text in expressions(node)
        if "${" in text
        for match in re.finditer(r"(?<![\w.])module\.([\w-]+)\.([\w-]+)", text)
    }


def local_source(module: Module, call: dict[str, Any]) -> Path | None:
    source = unquote(call["source"])
    return (module.path / source).resolve() if source.startswith(("./", "../")) else None


# --- evaluation -------------------------------------------------------------------------------------


@dataclass
class Scope:
    variables: dict[str, Any]
    locals: dict[str, Any]
    names: dict[str, Any] = field(default_factory=dict)  # a for expression's iteration variables


NAME = re.compile(r"^([A-Za-z_][\w-]*)((?:\.[A-Za-z_][\w-]*)*)$")
FOR_LIST = re.compile(r"^\[\s*for\s+([A-Za-z_]\w*)\s+in\s+(.+?)\s*:\s*(.+)\]$", re.DOTALL)
CALL = re.compile(r"^([a-z_]+)\((.*)\)$", re.DOTALL)


def _split_conditional(text: str) -> tuple[str, str, str] | None:
    """`cond ? a : b` split at its top-level ? and :, or None."""
    depth, quoted, question = 0, False, -1
    for i, char in enumerate(text):
        if char == '"' and (i == 0 or text[i - 1] != "\\"):
            quoted = not quoted
        elif quoted:
            continue
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif depth == 0 and char == "?" and question < 0:
            question = i
        elif depth == 0 and char == ":" and question >= 0:
            return text[:question].strip(), text[question + 1 : i].strip(), text[i + 1 :].strip()
    return None


def _split_top_level(text: str, separator: str) -> list[str]:
    """Text split at each `separator` outside quotes and brackets."""
    depth, quoted, start, parts, i = 0, False, 0, [], 0
    while i < len(text):
        char = text[i]
        if char == '"' and (i == 0 or text[i - 1] != "\\"):
            quoted = not quoted
        elif not quoted and char in "([{":
            depth += 1
        elif not quoted and char in ")]}":
            depth -= 1
        elif not quoted and depth == 0 and text.startswith(separator, i):
            parts.append(text[start:i])
            start = i + len(separator)
            i = start
            continue
        i += 1
    return [*parts, text[start:]]


def _operand(text: str, scope: Scope) -> Any:
    """A sub-expression: a reference or a nested expression, or a literal (parsed by python-hcl2)."""
    text = text.strip()
    if NAME.match(text) and text not in ("null", "true", "false"):
        return _evaluate_expression(text, scope)
    if text[:1] in '{["' or text in ("null", "true", "false") or re.fullmatch(r"-?[0-9.]+", text):
        return evaluate(_parse_expression(text), scope)
    return _evaluate_expression(text, scope)


def _parse_expression(text: str) -> Any:
    """One HCL expression as python-hcl2 returns it (by parsing it as an attribute)."""
    return hcl2.loads(f"x = {text}\n")["x"]


def _evaluate_expression(expression: str, scope: Scope) -> Any:
    expression = expression.strip()
    conditional = _split_conditional(expression)
    if conditional is not None:
        condition = _evaluate_expression(conditional[0], scope)
        if isinstance(condition, Unresolved):
            return condition
        return _operand(conditional[1] if condition else conditional[2], scope)
    for operator in ("==", "!="):
        sides = _split_top_level(expression, operator)
        if len(sides) == 2:
            left, right = (_operand(side, scope) for side in sides)
            if isinstance(left, Unresolved) or isinstance(right, Unresolved):
                return Unresolved(expression)
            return (left == right) == (operator == "==")
    loop = FOR_LIST.match(expression)
    if loop is not None:
        name, collection, body = loop.groups()
        items = _operand(collection, scope)
        if not isinstance(items, list):
            return Unresolved(expression)
        return [_operand(body, Scope(scope.variables, scope.locals, {**scope.names, name: item})) for item in items]
    call = CALL.match(expression)
    if call is not None and call.group(1) == "merge":
        arguments = [_operand(argument, scope) for argument in _split_top_level(call.group(2), ",")]
        if not all(isinstance(argument, dict) for argument in arguments):
            return Unresolved(expression)
        return {key: value for argument in arguments for key, value in argument.items()}
    match = DOTTED.match(expression)
    named = NAME.match(expression)
    if match is not None:
        kind, name, attributes = match.groups()
        if kind == "var":
            value = scope.variables.get(name, Unresolved(expression))
        else:
            value = evaluate(scope.locals[name], scope) if name in scope.locals else Unresolved(expression)
    elif named is not None and named.group(1) in scope.names:
        value, attributes = scope.names[named.group(1)], named.group(2)
    else:
        return Unresolved(expression)
    for attribute in filter(None, attributes.split(".")):
        value = value.get(attribute, Unresolved(expression)) if isinstance(value, dict) else Unresolved(expression)
    return value


def evaluate(node: Any, scope: Scope) -> Any:
    """The value of a parsed HCL expression; Unresolved where it depends on what only a plan knows."""
    if isinstance(node, dict):
        return {unquote(k): evaluate(v, scope) for k, v in node.items() if not is_meta(k)}
    if isinstance(node, list):
        return [evaluate(item, scope) for item in node]
    if not isinstance(node, str):
        return node
    whole = INTERPOLATION.fullmatch(node)
    if whole is not None:
        return _evaluate_expression(whole.group(1), scope)
    if node.startswith('"') and node.endswith('"'):
        parts = [_evaluate_expression(inner, scope) for inner in INTERPOLATION.findall(node)]
        unresolved = [p for p in parts if isinstance(p, Unresolved)]
        if unresolved:
            return unresolved[0]
        values = iter(parts)
        return INTERPOLATION.sub(lambda _: str(next(values)), unquote(node))
    return Unresolved(node)


def variable_scope(module: Module, given: dict[str, Any]) -> dict[str, Any]:
    """A module's variables: the defaults, replaced by the given values."""
    defaults = {
        name: evaluate(body["default"], Scope({}, {})) for name, body in module.variables.items() if "default" in body
    }
    return {**defaults, **given}


def call_arguments(caller: Module, call: dict[str, Any], scope: Scope) -> dict[str, Any]:
    """The values a module block passes to its module (Unresolved where they need a plan)."""
    return {unquote(k): evaluate(v, scope) for k, v in call.items() if k not in META_ARGUMENTS and not is_meta(k)}


def unresolved_paths(value: Any, path: str = "") -> list[str]:
    if isinstance(value, Unresolved):
        return [f"{path}: {value.expression}"]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in unresolved_paths(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in unresolved_paths(v, f"{path}[{i}]")]
    return []
