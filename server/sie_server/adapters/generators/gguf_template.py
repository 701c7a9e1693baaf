"""A GGUF file's chat template (its ``tokenizer.chat_template`` metadata), compiled as transformers compiles one."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any


def compile_template(source: str) -> Any:
    """A chat template from the GGUF metadata, rendered the way transformers renders it."""
    from jinja2.exceptions import TemplateError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise TemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    # transformers' tojson: plain json.dumps, keys in their order, no HTML escaping (Jinja's own sorts keys
    # and writes `<` as \u003c, so a tool's schema would not read as the model was trained on)
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env.from_string(source)


def _tojson(
    value: Any, ensure_ascii: bool = False, indent: int | None = None, separators: Any = None, sort_keys: bool = False
) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
