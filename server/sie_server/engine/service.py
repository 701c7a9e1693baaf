"""The tasks a route asks for (encode, score), expressed as work items on the shared queue."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sie_server.adapters.base import Adapter, Tokens
from sie_server.catalog.loader import Catalog
from sie_server.catalog.schema import ModelConfig
from sie_server.engine.scheduler import Scheduler, WorkItem
from sie_server.errors import ErrorCode, InvalidInput, ModelNotFound, SIEError
from sie_server.memory.pool import ModelPool


@dataclass(frozen=True)
class TextInput:
    id: str
    text: str


@dataclass
class Timing:
    started: float = field(default_factory=time.perf_counter)
    tokenization_ms: float = 0.0
    queue_ms: float = 0.0
    inference_ms: float = 0.0

    def as_dict(self) -> dict[str, float]:
        return {
            "total_ms": round((time.perf_counter() - self.started) * 1000, 3),
            "queue_ms": round(self.queue_ms, 3),
            "tokenization_ms": round(self.tokenization_ms, 3),
            "inference_ms": round(self.inference_ms, 3),
        }


@dataclass
class EncodeOutcome:
    model: str
    ids: list[str]
    outputs: list[dict[str, np.ndarray]]
    truncated: list[str]
    prompt_tokens: int
    timing: Timing


@dataclass
class ScoreOutcome:
    model: str
    query_id: str
    scores: list[tuple[str, float]]  # (item id, score), best first
    truncated: list[str]
    prompt_tokens: int
    timing: Timing


@dataclass(frozen=True)
class CallOptions:
    priority: str = "interactive"
    wait_for_load: bool = True
    #: resolves when the caller has gone; its queued items are then dropped
    disconnected: Callable[[], Awaitable[None]] | None = None


class CallerGone(SIEError):
    """The client disconnected before its answer was ready (nobody reads this error)."""

    code = ErrorCode.INVALID_INPUT

    def __init__(self) -> None:
        super().__init__("client disconnected", status=499)


class InferenceService:
    def __init__(self, catalog: Catalog, pool: ModelPool, scheduler: Scheduler, *, load_timeout_s: float):
        self.catalog = catalog
        self.pool = pool
        self.scheduler = scheduler
        self.load_timeout_s = load_timeout_s

    def resolve(self, model_id: str) -> ModelConfig:
        config = self.catalog.get(model_id)
        if config is None:
            hint = self.catalog.suggest(model_id)
            tip = f"; did you mean {hint}?" if hint else "; GET /v1/models lists the served models"
            raise ModelNotFound(f"model {model_id} is not in this server's catalog{tip}")
        return config

    async def encode(
        self,
        model: ModelConfig,
        items: list[TextInput],
        *,
        output_types: list[str],
        is_query: bool,
        instruction: str | None,
        call: CallOptions,
    ) -> EncodeOutcome:
        encode = model.tasks.encode
        if encode is None:
            raise InvalidInput(f"model {model.id} does not support encode (its tasks: {model.tasks.names()})")
        missing = [t for t in output_types if t not in encode.output_types()]
        if missing:
            raise InvalidInput(
                f"model {model.id} has no {', '.join(missing)} output; it offers {encode.output_types()}"
            )
        timing = Timing()
        adapter = await self._adapter(model, call)
        texts = [adapter.format_text(i.text, is_query=is_query, instruction=instruction) for i in items]
        tokens = await self._tokenize(timing, adapter.tokenize_texts, texts)
        results = await self._run(model, "encode", tokens, {"output_types": tuple(output_types)}, call, timing)
        outputs = [{k: v for k, v in r.items() if k in output_types} for r in results]
        return EncodeOutcome(
            model=model.id,
            ids=[i.id for i in items],
            outputs=outputs,
            truncated=[i.id for i, t in zip(items, tokens, strict=True) if t.truncated],
            prompt_tokens=sum(t.length for t in tokens),
            timing=timing,
        )

    async def score(
        self,
        model: ModelConfig,
        query: TextInput,
        items: list[TextInput],
        *,
        instruction: str | None,
        call: CallOptions,
    ) -> ScoreOutcome:
        task = model.tasks.score
        if task is None:
            raise InvalidInput(f"model {model.id} does not support score (its tasks: {model.tasks.names()})")
        timing = Timing()
        adapter = await self._adapter(model, call)
        if task.mode == "cross_encoder":
            tokens = await self._tokenize(timing, adapter.tokenize_pairs, query.text, [i.text for i in items])
            values = await self._run(model, "score_pairs", tokens, {}, call, timing)
            scores = [float(v) for v in values]
            truncated = [i.id for i, t in zip(items, tokens, strict=True) if t.truncated]
            prompt_tokens = sum(t.length for t in tokens)
        elif task.mode == "bi_encoder":
            texts = [adapter.format_text(query.text, is_query=True, instruction=instruction)]
            texts += [adapter.format_text(i.text, is_query=False, instruction=None) for i in items]
            tokens = await self._tokenize(timing, adapter.tokenize_texts, texts)
            vectors = await self._run(model, "encode", tokens, {"output_types": ("dense",)}, call, timing)
            dense = np.stack([v["dense"] for v in vectors]).astype(np.float32)
            dense /= np.clip(np.linalg.norm(dense, axis=1, keepdims=True), 1e-12, None)
            scores = [float(s) for s in dense[1:] @ dense[0]]
            truncated = [i.id for i, t in zip([query, *items], tokens, strict=True) if t.truncated]
            prompt_tokens = sum(t.length for t in tokens)
        else:
            raise InvalidInput(f"model {model.id}: score mode {task.mode} is not served yet")
        order = sorted(range(len(items)), key=lambda k: -scores[k])
        return ScoreOutcome(
            model=model.id,
            query_id=query.id,
            scores=[(items[k].id, scores[k]) for k in order],
            truncated=truncated,
            prompt_tokens=prompt_tokens,
            timing=timing,
        )

    async def _adapter(self, model: ModelConfig, call: CallOptions) -> Adapter:
        return await self.pool.acquire(model, wait=call.wait_for_load, timeout_s=self.load_timeout_s)

    @staticmethod
    async def _await(items: list[WorkItem], call: CallOptions) -> list[Any]:
        gathered: asyncio.Future[list[Any]] = asyncio.gather(*(i.future for i in items))
        if call.disconnected is None:
            return list(await gathered)
        watcher: asyncio.Future[Any] = asyncio.ensure_future(call.disconnected())
        try:
            done, _ = await asyncio.wait([gathered, watcher], return_when=asyncio.FIRST_COMPLETED)
        finally:
            watcher.cancel()
        if gathered not in done:
            gathered.cancel()
            raise CallerGone()
        return list(gathered.result())

    @staticmethod
    async def _tokenize(timing: Timing, fn: Any, *args: Any) -> list[Tokens]:
        started = time.perf_counter()
        tokens: list[Tokens] = await asyncio.to_thread(fn, *args)
        timing.tokenization_ms += (time.perf_counter() - started) * 1000
        return tokens

    async def _run(
        self,
        model: ModelConfig,
        operation: str,
        tokens: list[Tokens],
        options: dict[str, Any],
        call: CallOptions,
        timing: Timing,
    ) -> list[Any]:
        loop = asyncio.get_running_loop()
        items = [WorkItem(model, operation, t, options, loop.create_future(), priority=call.priority) for t in tokens]
        self.scheduler.submit(items)
        try:
            results = await self._await(items, call)
        except BaseException:
            for item in items:
                item.future.cancel()
            raise
        first_start = min(i.started_at for i in items)
        timing.queue_ms += (first_start - min(i.enqueued_at for i in items)) * 1000
        timing.inference_ms += (max(i.finished_at for i in items) - first_start) * 1000
        return list(results)
