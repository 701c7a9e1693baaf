"""The one core both clients share. It does no I/O.

``ClientCore.build_*`` turn a method call into a ``PreparedRequest`` (path, headers, body,
time budget, and the function that parses the answer). ``RetryState`` drives the attempts
of one call: it makes each attempt's ``httpx.Request`` and, given what came back, says
"done" (``None``), raises the typed error, or answers how long to sleep before retrying.
The sync and async clients only send, sleep and loop.
"""

from __future__ import annotations

import enum
import os
import time
from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Any, Final, Generic, TypeAlias, TypeVar
from urllib.parse import quote

import httpx

from . import _results
from ._error_answers import error_from_response
from ._items import normalize_item, normalize_items
from ._version import __version__
from ._wire import CONTENT_TYPES, decode_body, encode_body
from .errors import APIError, ProtocolError, SIEConnectionError, SIETimeoutError
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


class UseClientDefault(enum.Enum):
    """Sentinel type: ``timeout=USE_CLIENT_DEFAULT`` means "the client's timeout" (None means no limit)."""

    USE_CLIENT_DEFAULT = "USE_CLIENT_DEFAULT"


USE_CLIENT_DEFAULT: Final = UseClientDefault.USE_CLIENT_DEFAULT
TimeoutArg: TypeAlias = float | UseClientDefault | None
Items: TypeAlias = Item | str | Sequence[Item | str]


@dataclass(frozen=True)
class RetryPolicy:
    """Which failed answers are retried, and how long to wait between attempts.

    Only 5xx answers whose code is in ``retry_codes`` are retried, honouring Retry-After
    (else ``default_delay_s``), each wait capped at ``max_delay_s``, and never past the
    call's timeout. 4xx answers are never retried. Connection failures are retried only
    with ``retry_connect_errors=True``.
    """

    retry_codes: Set[str] = frozenset({"MODEL_LOADING", "QUEUE_FULL", "RESOURCE_EXHAUSTED"})
    default_delay_s: float = 1.0
    max_delay_s: float = 10.0
    max_attempts: int | None = None
    retry_connect_errors: bool = False

    def retries(self, error: APIError) -> bool:
        return error.status_code >= 500 and error.code in self.retry_codes

    def delay(self, retry_after: float | None) -> float:
        wanted = self.default_delay_s if retry_after is None else retry_after
        return max(0.0, min(wanted, self.max_delay_s))


DEFAULT_RETRY: Final = RetryPolicy()
NO_RETRY: Final = RetryPolicy(retry_codes=frozenset())


TIMEOUT_HEADER = "X-SIE-Timeout-Ms"


@dataclass(frozen=True)
class PreparedRequest(Generic[T]):
    """Everything one SDK call sends, plus how to read the answer."""

    method: str
    url: str
    headers: Mapping[str, str]
    parse: Callable[[httpx.Response], T]
    timeout: float | None
    retry: RetryPolicy
    content: bytes | None = None
    stream: bool = False


@dataclass
class RetryState:
    """The attempts of one call, against one deadline."""

    prepared: PreparedRequest[Any]
    clock: Callable[[], float] = time.monotonic
    attempts: int = 0
    deadline: float | None = field(init=False)

    def __post_init__(self) -> None:
        timeout = self.prepared.timeout
        self.deadline = None if timeout is None else self.clock() + timeout

    def remaining(self) -> float | None:
        return None if self.deadline is None else self.deadline - self.clock()

    def next_request(self) -> httpx.Request:
        """The next attempt, with the remaining time budget as its httpx timeout and, for a whole
        (not streamed) answer, as ``X-SIE-Timeout-Ms``: the server drops the work once it passes."""
        remaining = self.remaining()
        if remaining is not None and remaining <= 0:
            raise SIETimeoutError(f"no time left for {self.prepared.method} {self.prepared.url}")
        headers = self.prepared.headers
        if remaining is not None and self.prepared.method == "POST" and not self.prepared.stream:
            headers = {**headers, TIMEOUT_HEADER: str(max(1, int(remaining * 1000)))}
        return httpx.Request(
            self.prepared.method,
            self.prepared.url,
            headers=headers,
            content=self.prepared.content,
            extensions={"timeout": httpx.Timeout(remaining).as_dict()},
        )

    def after_response(self, response: httpx.Response) -> float | None:
        """``None`` when the answer is a success; else the delay before retrying, or raise."""
        self.attempts += 1
        if response.is_success:
            return None
        error = error_from_response(response)
        if not self.prepared.retry.retries(error):
            raise error
        return self._delay_or_raise(error, error.retry_after)

    def after_transport_error(self, error: SIEConnectionError) -> float:
        """The delay before retrying a failed connection, or raise it."""
        self.attempts += 1
        connect_failed = isinstance(error.__cause__, httpx.ConnectError)
        if not (self.prepared.retry.retry_connect_errors and connect_failed):
            raise error
        return self._delay_or_raise(error, None)

    def _delay_or_raise(self, error: Exception, retry_after: float | None) -> float:
        policy = self.prepared.retry
        if policy.max_attempts is not None and self.attempts >= policy.max_attempts:
            raise error
        delay = policy.delay(retry_after)
        remaining = self.remaining()
        if remaining is not None and delay >= remaining:
            raise error  # the next attempt could not start before the deadline
        return delay


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
