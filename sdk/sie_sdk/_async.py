"""The asyncio client: ``ClientCore`` builds each call, ``_async_transport`` sends it.

The blocking client, ``_sync.py``, is generated from this file: edit here, then run ``make sync-client``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Literal, Self, TypeVar, overload

import httpx

from . import _async_transport
from ._core import ClientCore, Items
from ._retry import DEFAULT_RETRY, USE_CLIENT_DEFAULT, PreparedRequest, RetryPolicy
from ._retry import TimeoutArg as Timeout
from .errors import APIError
from .types import (
    EncodeResult,
    ExtractResult,
    ExtractSchema,
    GenerateChunk,
    GenerateResult,
    Item,
    Message,
    ModelInfo,
    Priority,
    ScoreResult,
    Truncation,
    Wire,
)

T = TypeVar("T")


class SIEAsyncClient:
    """Asyncio client for an SIE server; the same methods as ``SIEClient``, awaited.

    ``base_url`` defaults to ``$SIE_URL``, else ``http://127.0.0.1:8080``. ``timeout`` is
    each call's total budget in seconds, retries included (``None``: no limit); every
    method takes ``timeout=`` to override it. ``priority`` ("interactive" | "batch") is sent
    as ``X-SIE-Priority``. ``wire`` picks msgpack (default) or JSON bodies. ``retry`` says
    which failed answers are retried (``None``: none). ``api_key`` (default ``$SIE_API_KEY``) is
    sent as ``Authorization: Bearer <key>`` to a server or gateway that requires keys.
    ``headers`` go with every request (an ``Authorization`` there wins over ``api_key``).
    ``transport`` replaces the network, e.g. with ``httpx.MockTransport`` in tests.
    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        timeout: float | None = 60.0,
        priority: Priority | None = None,
        wire: Wire = "msgpack",
        retry: RetryPolicy | None = DEFAULT_RETRY,
        headers: Mapping[str, str] | None = None,
        api_key: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._core = ClientCore(
            base_url, timeout=timeout, priority=priority, wire=wire, retry=retry, headers=headers, api_key=api_key
        )
        self._http = httpx.AsyncClient(transport=transport, follow_redirects=False)

    @property
    def base_url(self) -> str:
        return self._core.base_url

    @overload
    async def encode(  # type: ignore[overload-overlap]  # str is also a Sequence
        self,
        model: str,
        items: Item | str,
        *,
        output_types: Sequence[str] | None = None,
        instruction: str | None = None,
        output_dtype: str | None = None,
        is_query: bool | None = None,
        options: Mapping[str, Any] | None = None,
        dims: int | None = None,
        truncation: Truncation | None = None,
        priority: Priority | None = None,
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> EncodeResult: ...
    @overload
    async def encode(
        self,
        model: str,
        items: Sequence[Item | str],
        *,
        output_types: Sequence[str] | None = None,
        instruction: str | None = None,
        output_dtype: str | None = None,
        is_query: bool | None = None,
        options: Mapping[str, Any] | None = None,
        dims: int | None = None,
        truncation: Truncation | None = None,
        priority: Priority | None = None,
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> list[EncodeResult]: ...
    async def encode(
        self,
        model: str,
        items: Items,
        *,
        output_types: Sequence[str] | None = None,
        instruction: str | None = None,
        output_dtype: str | None = None,
        is_query: bool | None = None,
        options: Mapping[str, Any] | None = None,
        dims: int | None = None,
        truncation: Truncation | None = None,
        priority: Priority | None = None,
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> EncodeResult | list[EncodeResult]:
        """Embed one item (returns one result) or a list of items (returns a list).

        Items are strings or ``Item`` dicts. ``output_types`` picks among "dense", "sparse"
        and "multivector"; ``is_query`` and ``options`` go to ``params.options``. ``dims``
        cuts dense vectors to one of the model's Matryoshka dims; ``truncation`` says what
        happens to an item over the model's token limit: "end" (cut), "error" (refused) or
        "chunk" (dense: the normalised mean of overlapping windows). An ``Item`` with
        ``spans`` gets late chunking: ``chunks``, one vector per character span.
        """
        prepared = self._core.build_encode(
            model,
            items,
            output_types=output_types,
            instruction=instruction,
            output_dtype=output_dtype,
            is_query=is_query,
            options=options,
            priority=priority,
            timeout=timeout,
            dims=dims,
            truncation=truncation,
        )
        return await self._call(prepared)

    async def score(
        self,
        model: str,
        query: Item | str,
        items: Sequence[Item | str],
        *,
        instruction: str | None = None,
        options: Mapping[str, Any] | None = None,
        priority: Priority | None = None,
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> ScoreResult:
        """Rerank ``items`` against ``query``; scores come back best first (rank 0)."""
        prepared = self._core.build_score(
            model, query, items, instruction=instruction, options=options, priority=priority, timeout=timeout
        )
        return await self._call(prepared)

    @overload
    async def extract(  # type: ignore[overload-overlap]  # str is also a Sequence
        self,
        model: str,
        items: Item | str,
        *,
        labels: Sequence[str] | None = None,
        schema: ExtractSchema | Mapping[str, Any] | None = None,
        threshold: float | None = None,
        options: Mapping[str, Any] | None = None,
        priority: Priority | None = None,
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> ExtractResult: ...
    @overload
    async def extract(
        self,
        model: str,
        items: Sequence[Item | str],
        *,
        labels: Sequence[str] | None = None,
        schema: ExtractSchema | Mapping[str, Any] | None = None,
        threshold: float | None = None,
        options: Mapping[str, Any] | None = None,
        priority: Priority | None = None,
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> list[ExtractResult]: ...
    async def extract(
        self,
        model: str,
        items: Items,
        *,
        labels: Sequence[str] | None = None,
        schema: ExtractSchema | Mapping[str, Any] | None = None,
        threshold: float | None = None,
        options: Mapping[str, Any] | None = None,
        priority: Priority | None = None,
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> ExtractResult | list[ExtractResult]:
        """Extract from one item (returns one result) or a list of items (returns a list).

        Pass exactly one of ``labels`` (entity types: each result's ``entities``) or ``schema``
        (GLiNER2 models: ``{"entities": [...], "classifications": {...}, "structures": {...},
        "relations": [...]}``, answered in each result's ``schema_result`` under the schema's own
        names); neither or both raises ``ValueError`` before any request.
        """
        prepared = self._core.build_extract(
            model,
            items,
            labels=labels,
            schema=schema,
            threshold=threshold,
            options=options,
            priority=priority,
            timeout=timeout,
        )
        return await self._call(prepared)

    @overload
    async def generate(
        self,
        model: str,
        prompt: str | None = None,
        *,
        messages: Sequence[Message] | None = None,
        max_new_tokens: int | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        stop: str | Sequence[str] | None = None,
        seed: int | None = None,
        frequency_penalty: float | None = None,
        presence_penalty: float | None = None,
        grammar: Mapping[str, Any] | None = None,
        stream: Literal[False] = False,
        priority: Priority | None = None,
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> GenerateResult: ...
    @overload
    async def generate(
        self,
        model: str,
        prompt: str | None = None,
        *,
        messages: Sequence[Message] | None = None,
        max_new_tokens: int | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        stop: str | Sequence[str] | None = None,
        seed: int | None = None,
        frequency_penalty: float | None = None,
        presence_penalty: float | None = None,
        grammar: Mapping[str, Any] | None = None,
        stream: Literal[True],
        priority: Priority | None = None,
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> AsyncIterator[GenerateChunk]: ...
    async def generate(
        self,
        model: str,
        prompt: str | None = None,
        *,
        messages: Sequence[Message] | None = None,
        max_new_tokens: int | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        stop: str | Sequence[str] | None = None,
        seed: int | None = None,
        frequency_penalty: float | None = None,
        presence_penalty: float | None = None,
        grammar: Mapping[str, Any] | None = None,
        stream: bool = False,
        priority: Priority | None = None,
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> GenerateResult | AsyncIterator[GenerateChunk]:
        """Generate text from ``prompt`` or chat ``messages``; ``grammar`` constrains it (exactly one of
        ``json_schema``, ``regex`` or ``ebnf``, as SIE 0.10.1 takes it).

        With ``stream=True`` the request is sent now (errors raise here) and an iterator of
        chunks ``{"text": <delta>, ...}`` is returned; it ends at the server's ``[DONE]``.
        """
        prepared = self._core.build_generate(
            model,
            prompt,
            messages=messages,
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            top_p=top_p,
            stop=stop,
            seed=seed,
            frequency_penalty=frequency_penalty,
            presence_penalty=presence_penalty,
            grammar=grammar,
            stream=stream,
            priority=priority,
            timeout=timeout,
        )
        if stream:
            return _async_transport.events(await _async_transport.send(self._http, prepared))
        return await self._call(prepared)

    async def chat_completions(
        self,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        parallel_tool_calls: bool | None = None,
        response_format: Mapping[str, Any] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        stop: str | Sequence[str] | None = None,
        seed: int | None = None,
        frequency_penalty: float | None = None,
        presence_penalty: float | None = None,
        priority: Priority | None = None,
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> dict[str, Any]:
        """OpenAI's chat completions (messages in OpenAI's shape, ``tools``, ``tool_choice``,
        ``response_format``): the answer as OpenAI's JSON, ``choices[0].message.tool_calls`` included."""
        options = {
            "tools": [dict(t) for t in tools] if tools is not None else None,
            "tool_choice": tool_choice,
            "parallel_tool_calls": parallel_tool_calls,
            "response_format": dict(response_format) if response_format is not None else None,
            "max_tokens": max_tokens,
            "temperature": temperature,
            "top_p": top_p,
            "stop": stop,
            "seed": seed,
            "frequency_penalty": frequency_penalty,
            "presence_penalty": presence_penalty,
        }
        prepared = self._core.build_chat_completions(model, messages, options, priority, timeout)
        return await self._call(prepared)

    async def task(
        self,
        task: str,
        body: Mapping[str, Any],
        *,
        priority: Priority | None = None,
        timeout: Timeout = USE_CLIENT_DEFAULT,
    ) -> dict[str, Any]:
        """Run a pipeline task (``docs_to_markdown``, ``answer_questions``, ``redact_pii``) in one call;
        ``body`` is the task's request (file bytes base64), the answer its JSON."""
        return await self._call(self._core.build_task(task, body, priority, timeout))

    async def list_models(self, *, timeout: Timeout = USE_CLIENT_DEFAULT) -> list[ModelInfo]:
        """Every model the server knows, loaded or not."""
        return await self._call(self._core.build_list_models(timeout=timeout))

    async def get_model(self, model: str, *, timeout: Timeout = USE_CLIENT_DEFAULT) -> ModelInfo:
        """One model's info; raises ``ModelNotFoundError`` for an unknown id."""
        return await self._call(self._core.build_get_model(model, timeout=timeout))

    async def health(self, *, timeout: Timeout = USE_CLIENT_DEFAULT) -> bool:
        """True when ``/healthz`` answers 2xx, False on an error status (not retried).

        An unreachable server raises ``SIEConnectionError``.
        """
        try:
            return await self._call(self._core.build_health(timeout=timeout))
        except APIError:
            return False

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def _call(self, prepared: PreparedRequest[T]) -> T:
        return prepared.parse(await _async_transport.send(self._http, prepared))
