"""``SIEBackend``: one model's settings and the SDK calls every adapter makes.

Settings: ``model``, ``base_url`` (``None``: ``$SIE_URL``, else http://127.0.0.1:8080, read at
call time), ``priority`` ("interactive" | "batch"), ``instruction`` (sent with queries only:
documents get the model's document prefix), ``batch_size`` (texts per request), ``timeout``,
``api_key`` (``None``: ``$SIE_API_KEY`` when a client is made; sent as a bearer key).

Clients: one blocking ``SIEClient`` made on first use and closed when the backend is closed or
garbage-collected (or the caller's own, never closed here); async calls use the caller's
``SIEAsyncClient`` or a short-lived one per call, so no connection outlives its event loop.
"""

from __future__ import annotations

import ssl
import threading
import weakref
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, Final, cast

import httpx
import numpy as np
import numpy.typing as npt

from sie_sdk import DEFAULT_RETRY, RetryPolicy, SIEAsyncClient, SIEClient
from sie_sdk.types import EncodeResult, GenerateChunk, GenerateResult, Item, Message, ModelInfo, Priority

from ._batches import chunked, gather_batches, scatter, score_batches, text_list
from ._results import SparseDict, as_float32, as_floats, check_top_k, rank_order, sparse_dict
from ._settings import DEFAULT_BATCH_SIZE, DEFAULT_TIMEOUT_S, resolve_base_url, secret_value

_ssl_lock = threading.Lock()
_ssl_context: ssl.SSLContext | None = None


def model_served(
    model: str,
    *,
    base_url: str | None = None,
    output: str | None = None,
    task: str | None = None,
    api_key: str | None = None,
) -> bool:
    """Whether the server lists ``model`` (with that encode ``output`` and ``task``, when given)."""
    with SIEClient(resolve_base_url(base_url), timeout=10.0, api_key=api_key) as client:
        for info in client.list_models():
            if info.get("id") != model:
                continue
            described: dict[str, Any] = dict(info)
            outputs = described.get("outputs") or []
            tasks = described.get("tasks") or []
            return (output is None or output in outputs) and (task is None or task in tasks)
    return False


def _shared_ssl_context() -> ssl.SSLContext:
    """One TLS context for all short-lived async clients (building one costs ~30 ms)."""
    global _ssl_context
    with _ssl_lock:
        if _ssl_context is None:
            _ssl_context = httpx.create_ssl_context()
        return _ssl_context


class SIEBackend:
    """One model on one SIE server, with the batching and roles the adapters share."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        priority: Priority | None = None,
        instruction: str | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        timeout: float | None = DEFAULT_TIMEOUT_S,
        retry: RetryPolicy | None = DEFAULT_RETRY,
        client: SIEClient | None = None,
        async_client: SIEAsyncClient | None = None,
        api_key: str | None = None,
    ) -> None:
        if not model:
            raise ValueError("model must be a non-empty model id")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, not {batch_size}")
        if priority is not None and priority not in ("interactive", "batch"):
            raise ValueError(f"priority must be 'interactive' or 'batch', not {priority!r}")
        self.model = model
        self.base_url_setting = base_url
        self.priority: Priority | None = priority
        self.instruction = instruction
        self.batch_size = batch_size
        self.timeout = timeout
        self.retry = retry
        self.api_key = api_key
        self._client = client
        self._async_client = async_client
        self._closer: weakref.finalize[Any, Any] | None = None  # closes the client this backend made
        self._lock = threading.Lock()
        self._dims: dict[tuple[str, str], int] = {}

    @classmethod
    def from_settings(cls, settings: Any) -> SIEBackend:
        """A backend from an adapter's settings object (model, base_url, priority, instruction,
        batch_size, timeout and api_key attributes), as every ecosystem class keeps them."""
        return cls(
            settings.model,
            base_url=settings.base_url,
            priority=settings.priority,
            instruction=settings.instruction,
            batch_size=settings.batch_size,
            timeout=settings.timeout,
            api_key=secret_value(getattr(settings, "api_key", None)),
        )

    @property
    def base_url(self) -> str:
        return resolve_base_url(self.base_url_setting)

    def settings(self) -> dict[str, Any]:
        """The constructor's settings (not the clients): enough to rebuild this backend."""
        return {
            "model": self.model,
            "base_url": self.base_url_setting,
            "priority": self.priority,
            "instruction": self.instruction,
            "batch_size": self.batch_size,
            "timeout": self.timeout,
            "retry": self.retry,
            "api_key": self.api_key,
        }

    # --- clients -------------------------------------------------------------------------

    @property
    def client(self) -> SIEClient:
        """The blocking client, made on first use."""
        with self._lock:
            if self._client is None:
                client = SIEClient(
                    self.base_url, timeout=self.timeout, priority=self.priority, retry=self.retry, api_key=self.api_key
                )
                self._closer = weakref.finalize(self, client.close)
                self._client = client
            return self._client

    @asynccontextmanager
    async def async_client(self) -> AsyncIterator[SIEAsyncClient]:
        """The caller's async client, or a new one closed when the block ends."""
        if self._async_client is not None:
            yield self._async_client
            return
        transport = httpx.AsyncHTTPTransport(verify=_shared_ssl_context())
        async with SIEAsyncClient(
            self.base_url,
            timeout=self.timeout,
            priority=self.priority,
            retry=self.retry,
            api_key=self.api_key,
            transport=transport,
        ) as client:
            yield client

    def close(self) -> None:
        """Close the blocking client this backend made (a caller's client stays open)."""
        with self._lock:
            closer, self._closer = self._closer, None
            if closer is not None:
                self._client = None
        if closer is not None:
            closer()

    def __deepcopy__(self, memo: dict[int, Any]) -> SIEBackend:
        return SIEBackend(**self.settings(), async_client=self._async_client)

    def __getstate__(self) -> dict[str, Any]:
        return self.settings()

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]

    def __repr__(self) -> str:
        return f"SIEBackend(model={self.model!r}, base_url={self.base_url!r})"

    # --- encode --------------------------------------------------------------------------

    def encode(
        self,
        texts: Sequence[str],
        *,
        output_types: Sequence[str] = ("dense",),
        is_query: bool = False,
        model: str | None = None,
    ) -> list[EncodeResult]:
        """Encode ``texts`` in requests of ``batch_size``; one result per text, in order."""
        instruction = self.instruction if is_query else None
        results: list[EncodeResult] = []
        for batch in chunked(text_list(texts), self.batch_size):
            results.extend(
                self.client.encode(
                    model or self.model,
                    batch,
                    output_types=list(output_types),
                    is_query=is_query,
                    instruction=instruction,
                )
            )
        return results

    async def aencode(
        self,
        texts: Sequence[str],
        *,
        output_types: Sequence[str] = ("dense",),
        is_query: bool = False,
        model: str | None = None,
    ) -> list[EncodeResult]:
        """``encode`` on the async client, up to ``ASYNC_CONCURRENCY`` requests in flight."""
        instruction = self.instruction if is_query else None
        async with self.async_client() as client:

            async def call(batch: list[str]) -> list[EncodeResult]:
                return await client.encode(
                    model or self.model,
                    batch,
                    output_types=list(output_types),
                    is_query=is_query,
                    instruction=instruction,
                )

            parts = await gather_batches(call, list(chunked(text_list(texts), self.batch_size)))
        return [result for part in parts for result in part]

    def embed(self, texts: Sequence[str], *, is_query: bool = False) -> list[list[float]]:
        """Dense vectors as lists of floats."""
        return [as_floats(result["dense"]) for result in self.encode(texts, is_query=is_query)]

    async def aembed(self, texts: Sequence[str], *, is_query: bool = False) -> list[list[float]]:
        return [as_floats(result["dense"]) for result in await self.aencode(texts, is_query=is_query)]

    def arrays(
        self, texts: Sequence[str], *, output: str = "dense", is_query: bool = False
    ) -> list[npt.NDArray[np.float32]]:
        """One float32 array per text: a vector for "dense", a (tokens, dims) matrix for "multivector"."""
        results = self.encode(texts, output_types=[output], is_query=is_query)
        return [as_float32(result[output]) for result in results]  # type: ignore[literal-required]

    def sparse(self, texts: Sequence[str], *, is_query: bool = False, model: str | None = None) -> list[SparseDict]:
        """Sparse vectors as ``{"indices": [...], "values": [...]}``."""
        return [sparse_dict(r) for r in self.encode(texts, output_types=["sparse"], is_query=is_query, model=model)]

    def dims(self, output: str = "dense", *, model: str | None = None) -> int:
        """The vector size of ``output`` ("dense", or "multivector" per token), asked once."""
        model = model or self.model
        key = (model, output)
        if key not in self._dims:
            self._dims[key] = self._dims_from_info(model, output) or self._dims_from_probe(model, output)
        return self._dims[key]

    def _dims_from_info(self, model: str, output: str) -> int | None:
        dims = self.client.get_model(model).get("dims")
        if isinstance(dims, dict) and isinstance(dims.get(output), int):
            return int(dims[output])
        if isinstance(dims, int) and output == "dense":
            return dims
        return None

    def _dims_from_probe(self, model: str, output: str) -> int:
        result = self.encode(["dimension probe"], output_types=[output], model=model)[0]
        return int(np.asarray(result[output]).shape[-1])  # type: ignore[literal-required]

    # --- score ---------------------------------------------------------------------------

    def score(self, query: str, texts: Sequence[str], *, model: str | None = None) -> list[float]:
        """One relevance score per text, in the order of ``texts`` (higher is better)."""
        scores = [0.0] * len(texts)
        for start, items in score_batches(texts, self.batch_size):
            answer = self.client.score(model or self.model, query, items, instruction=self.instruction)
            scatter(scores, answer["scores"], start)
        return scores

    async def ascore(self, query: str, texts: Sequence[str], *, model: str | None = None) -> list[float]:
        scores = [0.0] * len(texts)
        async with self.async_client() as client:

            async def call(batch: tuple[int, list[Item]]) -> None:
                start, items = batch
                answer = await client.score(model or self.model, query, items, instruction=self.instruction)
                scatter(scores, answer["scores"], start)

            await gather_batches(call, list(score_batches(texts, self.batch_size)))
        return scores

    def rank(self, query: str, texts: Sequence[str], *, top_k: int | None = None) -> list[tuple[int, float]]:
        """(position in ``texts``, score) pairs, best first, at most ``top_k``; no request for no texts."""
        check_top_k(top_k)
        scores = self.score(query, texts)
        return [(i, scores[i]) for i in rank_order(scores, top_k)]

    async def arank(self, query: str, texts: Sequence[str], *, top_k: int | None = None) -> list[tuple[int, float]]:
        check_top_k(top_k)
        scores = await self.ascore(query, texts)
        return [(i, scores[i]) for i in rank_order(scores, top_k)]

    # --- generate ------------------------------------------------------------------------

    def generate(
        self,
        prompt: str | None = None,
        *,
        messages: Sequence[Message] | None = None,
        model: str | None = None,
        **params: Any,
    ) -> GenerateResult:
        """One completion; ``params`` are ``max_new_tokens``, ``temperature``, ``top_p``, ``stop``, ``seed``."""
        answer = self.client.generate(model or self.model, prompt, messages=messages, **_generate_params(params))
        return cast(GenerateResult, answer)

    def stream(
        self,
        prompt: str | None = None,
        *,
        messages: Sequence[Message] | None = None,
        model: str | None = None,
        **params: Any,
    ) -> Iterator[GenerateChunk]:
        """Streamed completion chunks ``{"text": delta, "finish_reason", "usage"?}``."""
        return self.client.generate(
            model or self.model, prompt, messages=messages, stream=True, **_generate_params(params)
        )

    async def agenerate(
        self,
        prompt: str | None = None,
        *,
        messages: Sequence[Message] | None = None,
        model: str | None = None,
        **params: Any,
    ) -> GenerateResult:
        async with self.async_client() as client:
            answer = await client.generate(model or self.model, prompt, messages=messages, **_generate_params(params))
            return cast(GenerateResult, answer)

    async def astream(
        self,
        prompt: str | None = None,
        *,
        messages: Sequence[Message] | None = None,
        model: str | None = None,
        **params: Any,
    ) -> AsyncIterator[GenerateChunk]:
        async with self.async_client() as client:
            chunks = await client.generate(
                model or self.model, prompt, messages=messages, stream=True, **_generate_params(params)
            )
            async for chunk in chunks:
                yield chunk

    def model_info(self, model: str | None = None) -> ModelInfo:
        return self.client.get_model(model or self.model)


_GENERATE_PARAMS: Final = frozenset(
    {"max_new_tokens", "temperature", "top_p", "stop", "seed", "frequency_penalty", "presence_penalty", "timeout"}
)


def _generate_params(params: dict[str, Any]) -> dict[str, Any]:
    unknown = set(params) - _GENERATE_PARAMS
    if unknown:
        raise TypeError(f"unknown generate parameters: {sorted(unknown)}")
    return {key: value for key, value in params.items() if value is not None}
