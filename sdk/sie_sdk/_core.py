"""The one core both clients share. It does no I/O.

``ClientCore.build_*`` turn a method call into a ``PreparedRequest`` (path, headers, body,
time budget, and the function that parses the answer); ``_retry.RetryState`` drives the attempts
of one call. The sync and async clients only send, sleep and loop.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, TypeAlias, TypeVar
from urllib.parse import quote

import httpx

from . import _results
from ._items import normalize_item, normalize_items
from ._retry import (
    DEFAULT_RETRY,
    NO_RETRY,
    TIMEOUT_HEADER,
    USE_CLIENT_DEFAULT,
    PreparedRequest,
    RetryPolicy,
    RetryState,
    TimeoutArg,
    UseClientDefault,
)
from ._version import __version__
from ._wire import CONTENT_TYPES, decode_body, encode_body
from .errors import ProtocolError
from .types import (
    EncodeResult,
    ExtractResult,
    ExtractSchema,
    GenerateResult,
    Item,
    Message,
    ModelInfo,
    Priority,
    ScoreResult,
    Wire,
)

DEFAULT_BASE_URL: Final = "http://127.0.0.1:8080"
_PRIORITIES: Final = ("interactive", "batch")
T = TypeVar("T")
Items: TypeAlias = Item | str | Sequence[Item | str]

# What the clients and tests import from here (``RetryState`` among them, as before ``_retry`` split off).
__all__ = [
    "DEFAULT_RETRY",
    "NO_RETRY",
    "TIMEOUT_HEADER",
    "USE_CLIENT_DEFAULT",
    "ClientCore",
    "Items",
    "PreparedRequest",
    "RetryPolicy",
    "RetryState",
    "TimeoutArg",
]


def _decoded(parse: Callable[[Any], T]) -> Callable[[httpx.Response], T]:
    def read(response: httpx.Response) -> T:
        return parse(decode_body(response.content, response.headers.get("content-type")))

    return read


def _first_if(single: bool, parse: Callable[[Any], list[T]]) -> Callable[[Any], T | list[T]]:
    def pick(body: Any) -> T | list[T]:
        results = parse(body)
        if not single:
            return results
        if len(results) != 1:
            raise ProtocolError(f"expected 1 result for 1 item, got {len(results)}")
        return results[0]

    return pick


def _options(options: Mapping[str, Any] | None, **named: Any) -> dict[str, Any] | None:
    """The caller's options plus the named ones that were set; None when there are none."""
    merged = dict(options or {})
    merged.update({key: value for key, value in named.items() if value is not None})
    return merged or None


def _set(body: dict[str, Any], **values: Any) -> dict[str, Any]:
    """Add to ``body`` only the values the caller set (not None)."""
    body.update({key: value for key, value in values.items() if value is not None})
    return body


class ClientCore:
    """Client settings plus everything about a call that is not I/O."""

    def __init__(
        self,
        base_url: str | None = None,
        *,
        timeout: float | None = 60.0,
        priority: Priority | None = None,
        wire: Wire = "msgpack",
        retry: RetryPolicy | None = None,
        headers: Mapping[str, str] | None = None,
        api_key: str | None = None,
    ) -> None:
        if wire not in CONTENT_TYPES:
            raise ValueError(f"wire must be 'msgpack' or 'json', not {wire!r}")
        self.base_url = (base_url or os.environ.get("SIE_URL") or DEFAULT_BASE_URL).rstrip("/")
        self.timeout = timeout
        self.priority = _check_priority(priority)
        self.wire: Wire = wire
        self.retry = retry if retry is not None else NO_RETRY
        key = api_key or os.environ.get("SIE_API_KEY")
        self.headers = {**({"Authorization": f"Bearer {key}"} if key else {}), **dict(headers or {})}

    def build_encode(
        self,
        model: str,
        items: Items,
        *,
        output_types: Sequence[str] | None,
        instruction: str | None,
        output_dtype: str | None,
        is_query: bool | None,
        options: Mapping[str, Any] | None,
        priority: Priority | None,
        timeout: TimeoutArg,
        dims: int | None = None,
        truncation: str | None = None,
    ) -> PreparedRequest[EncodeResult | list[EncodeResult]]:
        wire_items, single = normalize_items(items)
        params = _set(
            {},
            output_types=list(output_types) if output_types is not None else None,
            output_dtype=output_dtype,
            instruction=instruction,
            options=_options(options, is_query=is_query),
            dims=dims,
            truncation=truncation,
        )
        body = {"items": wire_items, "params": params}
        read = _decoded(_first_if(single, _results.parse_encode))
        return self._prepare("POST", _model_path("encode", model), read, body, priority, timeout)

    def build_score(
        self,
        model: str,
        query: Item | str,
        items: Sequence[Item | str],
        *,
        instruction: str | None,
        options: Mapping[str, Any] | None,
        priority: Priority | None,
        timeout: TimeoutArg,
    ) -> PreparedRequest[ScoreResult]:
        wire_items, _ = normalize_items(items)
        body = _set(
            {"query": normalize_item(query), "items": wire_items},
            instruction=instruction,
            options=_options(options),
        )
        read = _decoded(_results.parse_score)
        return self._prepare("POST", _model_path("score", model), read, body, priority, timeout)

    def build_extract(
        self,
        model: str,
        items: Items,
        *,
        labels: Sequence[str] | None,
        threshold: float | None,
        options: Mapping[str, Any] | None,
        priority: Priority | None,
        timeout: TimeoutArg,
        schema: ExtractSchema | Mapping[str, Any] | None = None,
    ) -> PreparedRequest[ExtractResult | list[ExtractResult]]:
        wanted = _labels_or_schema(labels, schema)
        wire_items, single = normalize_items(items)
        params = _set(wanted, threshold=threshold, options=_options(options))
        body = {"items": wire_items, "params": params}
        read = _decoded(_first_if(single, _results.parse_extract))
        return self._prepare("POST", _model_path("extract", model), read, body, priority, timeout)

    def build_generate(
        self,
        model: str,
        prompt: str | None,
        *,
        messages: Sequence[Message] | None,
        max_new_tokens: int | None,
        temperature: float | None,
        top_p: float | None,
        stop: str | Sequence[str] | None,
        seed: int | None,
        frequency_penalty: float | None,
        presence_penalty: float | None,
        grammar: Mapping[str, Any] | None,
        stream: bool,
        priority: Priority | None,
        timeout: TimeoutArg,
    ) -> PreparedRequest[GenerateResult]:
        if (prompt is None) == (messages is None):
            raise ValueError("generate needs exactly one of prompt= or messages=")
        body = _set(
            {},
            prompt=prompt,
            messages=[dict(message) for message in messages] if messages is not None else None,
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            top_p=top_p,
            stop=[stop] if isinstance(stop, str) else (list(stop) if stop is not None else None),
            seed=seed,
            frequency_penalty=frequency_penalty,
            presence_penalty=presence_penalty,
            grammar=dict(grammar) if grammar is not None else None,
        )
        body["stream"] = stream
        read = _decoded(_results.parse_generate)
        path = _model_path("generate", model)
        return self._prepare("POST", path, read, body, priority, timeout, stream=stream)

    def build_chat_completions(
        self, model: str, messages: Sequence[Mapping[str, Any]], options: Mapping[str, Any], priority: Priority | None,
        timeout: TimeoutArg,
    ) -> PreparedRequest[dict[str, Any]]:  # fmt: skip
        """OpenAI's chat completions route (tools, tool_choice, response_format), one answer."""
        body = _set({"model": model, "messages": [dict(m) for m in messages]}, **options)
        body["stream"] = False
        return self._prepare("POST", "/v1/chat/completions", _decoded(_results.parse_chat), body, priority, timeout)

    def build_task(
        self, task: str, body: Mapping[str, Any], priority: Priority | None, timeout: TimeoutArg
    ) -> PreparedRequest[dict[str, Any]]:
        """A pipeline task in one call (``POST /v1/tasks/{task}``): the answer as the server's JSON."""
        return self._prepare("POST", f"/v1/tasks/{task}", _decoded(dict), dict(body), priority, timeout)

    def build_list_models(self, *, timeout: TimeoutArg) -> PreparedRequest[list[ModelInfo]]:
        return self._prepare("GET", "/v1/models", _decoded(_results.parse_model_list), None, None, timeout)

    def build_get_model(self, model: str, *, timeout: TimeoutArg) -> PreparedRequest[ModelInfo]:
        read = _decoded(_results.parse_model)
        return self._prepare("GET", _model_path("models", model), read, None, None, timeout)

    def build_health(self, *, timeout: TimeoutArg) -> PreparedRequest[bool]:
        return self._prepare("GET", "/healthz", lambda _response: True, None, None, timeout, retry=NO_RETRY)

    def _prepare(
        self,
        method: str,
        path: str,
        read: Callable[[httpx.Response], T],
        body: dict[str, Any] | None,
        priority: Priority | None,
        timeout: TimeoutArg,
        *,
        stream: bool = False,
        retry: RetryPolicy | None = None,
    ) -> PreparedRequest[T]:
        content_type = CONTENT_TYPES[self.wire]
        headers = {"Accept": "text/event-stream" if stream else content_type, "User-Agent": _USER_AGENT}
        content = None
        if body is not None:
            content = encode_body(body, self.wire)
            headers["Content-Type"] = content_type
        chosen = _check_priority(priority) or self.priority
        if chosen is not None:
            headers["X-SIE-Priority"] = chosen
        headers.update(self.headers)
        return PreparedRequest(
            method=method,
            url=self.base_url + path,
            headers=headers,
            parse=read,
            timeout=self.timeout if isinstance(timeout, UseClientDefault) else timeout,
            retry=retry if retry is not None else self.retry,
            content=content,
            stream=stream,
        )


_USER_AGENT: Final = f"sie-sdk-python/{__version__}"


def _model_path(route: str, model: str) -> str:
    if not model:
        raise ValueError("model must be a non-empty model id")
    return f"/v1/{route}/{quote(model, safe='/')}"


def _labels_or_schema(labels: Sequence[str] | None, schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """``params.labels`` or ``params.schema``: at most one, refused here before any request."""
    if labels is not None:
        if schema is not None:
            raise ValueError(_LABELS_OR_SCHEMA + ", not both")
        if isinstance(labels, str):
            raise TypeError("labels must be a list of strings, not one string")
        return {"labels": list(labels)}
    if schema is None:
        return {}  # OCR, document and caption models need neither; a text extractor answers that it needs labels
    if not isinstance(schema, Mapping):
        raise TypeError(f"schema must be a mapping, not {type(schema).__name__}")
    if not schema:
        raise ValueError("schema needs at least one of entities, classifications, structures, relations")
    return {"schema": _plain(schema)}


_LABELS_OR_SCHEMA: Final = "extract takes labels= (entity types) or schema= (a GLiNER2 schema)"


def _plain(value: Any) -> Any:
    """Mappings as dicts and tuples as lists, all the way down, so that both wires can carry them."""
    if isinstance(value, Mapping):
        return {key: _plain(inner) for key, inner in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(inner) for inner in value]
    return value


def _check_priority(priority: Priority | None) -> Priority | None:
    if priority is not None and priority not in _PRIORITIES:
        raise ValueError(f"priority must be 'interactive' or 'batch', not {priority!r}")
    return priority
