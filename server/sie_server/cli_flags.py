"""Command-line flags built from a settings model's fields, and the model built back from them.

A field is ``--kebab-name`` with help from its description, ``SIE_<UPPER_NAME>`` in the
environment (read as the flag's default where set; the model's default otherwise), and is
validated by the model itself, so a bad value, from a flag or a variable, is one line naming
both. The model's ``CLI`` table (``settings.Cli``) lists the fields named otherwise.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails, PydanticUndefined

from sie_server.settings import Cli

M = TypeVar("M", bound=BaseModel)


class SettingsError(ValueError):
    """A flag or variable whose value the settings refuse."""


class FromEnv(str):
    """A value read from an environment variable (a str, so argparse parses it like a flag's)."""

    var: str

    def __new__(cls, value: str, var: str) -> FromEnv:
        self = super().__new__(cls, value)
        self.var = var
        return self


class Flag:
    """One field's names on the command line and in the environment."""

    def __init__(self, name: str, info: FieldInfo, cli: Cli):
        self.name = name
        self.info = info
        self.cli = cli
        self.flag = cli.flag or "--" + name.replace("_", "-")
        self.dest = self.flag.removeprefix("--").replace("-", "_")  # as argparse names it: args.nats, args.route
        self.envs = () if cli.no_env else (cli.env or f"SIE_{name.upper()}", *cli.also_env)

    @property
    def is_list(self) -> bool:
        kinds = [self.info.annotation, *get_args(self.info.annotation)]
        return any(get_origin(k) in (list, tuple) for k in kinds)

    @property
    def is_bool(self) -> bool:
        return self.info.annotation is bool

    def default(self) -> Any:
        if self.info.default_factory is not None:
            return self.info.default_factory()  # type: ignore[call-arg]
        return None if self.info.default is PydanticUndefined else self.info.default

    def from_env(self, environ: Mapping[str, str]) -> FromEnv | None:
        for var in self.envs:
            value = environ.get(var, "").strip()
            if value:
                return FromEnv(value, var)
        return None


def flags(model: type[BaseModel], only: Sequence[str] | None = None) -> list[Flag]:
    table: Mapping[str, Cli] = getattr(model, "CLI", {})
    chosen = [(n, f) for n, f in model.model_fields.items() if only is None or n in only]
    return [Flag(n, f, table.get(n, Cli())) for n, f in chosen if not table.get(n, Cli()).hidden]


def add_flags(
    parser: argparse.ArgumentParser,
    model: type[BaseModel],
    only: Sequence[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> None:
    """Add one flag per field of ``model`` (or of ``only``), defaulting to its variable where set."""
    environ = os.environ if environ is None else environ
    for flag in flags(model, only):
        if flag.cli.no_flag:
            continue
        env = flag.from_env(environ)
        default = env if env is not None else flag.default()
        names = [*([flag.cli.short] if flag.cli.short else []), flag.flag]
        shown = _shown(default)
        where = f"env {' or '.join(flag.envs)}; " if flag.envs else ""
        help_text = f"{flag.info.description or ''} [{where}default: {shown}]".replace("%", "%%")
        if flag.is_bool:
            parser.add_argument(*names, dest=flag.dest, action="store_true", default=default, help=help_text)
        elif flag.cli.repeat:
            parser.add_argument(*names, dest=flag.dest, action="append", default=[], help=help_text)
        elif flag.is_list:
            parser.add_argument(*names, dest=flag.dest, default=default, help=help_text)
        else:
            convert = _field_converter(model, flag)
            parser.add_argument(*names, dest=flag.dest, type=convert, default=default, help=help_text)


def _shown(default: Any) -> str:
    if default is None or default is False:
        return "off" if default is False else "unset"
    if isinstance(default, list | tuple):
        return ",".join(str(v) for v in default) or "none"
    return str(default)


def _field_converter(model: type[BaseModel], flag: Flag) -> Any:
    """argparse's ``type``: the value the model makes of this one field (argparse reports a refusal)."""

    def convert(raw: str) -> Any:
        try:
            return getattr(model.model_validate({flag.name: raw}), flag.name)
        except ValidationError as exc:
            raise argparse.ArgumentTypeError(_describe(exc.errors()[0], flag, raw, named=False)) from None

    convert.__name__ = flag.name
    return convert


def read_settings(
    model: type[M],
    args: argparse.Namespace,
    only: Sequence[str] | None = None,
    environ: Mapping[str, str] | None = None,
    **extra: Any,
) -> M:
    """The validated ``model`` from parsed flags (and the variables the parser has no flag for)."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = dict(extra)
    raws: dict[str, Any] = {}
    by_name = {f.name: f for f in flags(model, only)}
    for flag in by_name.values():
        if flag.cli.no_flag or flag.cli.repeat:
            raw = getattr(args, flag.dest, None) or flag.from_env(environ)
            if raw is None:
                continue
        elif hasattr(args, flag.dest):
            raw = getattr(args, flag.dest)  # the flag, else its variable, else the model's default
        else:
            continue
        raws[flag.name] = raw
        if flag.is_list and isinstance(raw, str):
            parts = [p.strip() for p in raw.split(",") if p.strip()]
            if not parts:
                continue  # an empty list is the default (for --models: the whole catalog)
            raw = parts
        values[flag.name] = raw
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        lines = []
        for error in exc.errors():
            name = str(error["loc"][0]) if error["loc"] else ""
            lines.append(_describe(error, by_name.get(name), raws.get(name)))
        raise SettingsError("; ".join(lines)) from None


def _describe(error: ErrorDetails, flag: Flag | None, raw: Any, named: bool = True) -> str:
    """One line: the flag (unless argparse names it), what is wrong, the value and where it came from."""
    ctx = error.get("ctx") or {}
    message = str(ctx["error"]) if error["type"] == "value_error" and "error" in ctx else error["msg"]
    if flag is None:
        return message
    shown = ",".join(str(r) for r in raw) if isinstance(raw, list) else raw
    if flag.cli.no_flag:
        return f"{flag.envs[0]}: {message} (got {shown!r})"
    head = f"{flag.flag}: " if named else ""
    if isinstance(raw, FromEnv):
        return f"{head}{message} (got {shown!r} from {raw.var})"
    also = f"; env var {flag.envs[0]}" if flag.envs else ""
    return f"{head}{message} (got {shown!r} from the flag{also})"
