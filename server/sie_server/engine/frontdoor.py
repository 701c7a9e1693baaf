"""The routes' ``Service`` on this process's engine: requests become engine calls, outcomes
become typed answers. It is also the server's state the composition root, the drain and the
queue worker read (ready, draining, requests in flight)."""

from __future__ import annotations

from collections import abc
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sie_server.adapters.runtime.generator import Generator
from sie_server.catalog.loader import Catalog
from sie_server.catalog.schema import ModelConfig
from sie_server.contract import models as contract_models
from sie_server.contract.headers import CallOptions
from sie_server.contract.limits import Limits
from sie_server.contract.requests import EncodeRequest, ExtractRequest, GenerateRequest, ItemIn, ScoreRequest
from sie_server.contract.responses import (
    CachedTiming,
    Dense,
    EncodeResponse,
    ExtractResponse,
    ItemScore,
    PromptUsage,
    ScoreResponse,
    SpanVector,
    Usage,
)
from sie_server.contract.state_wire import MemoryReport, ModelInfo, Readiness
from sie_server.contract.status import StatusReport
from sie_server.contract.tokenize_wire import DetokenizeRequest, DetokenizeResponse, TokenizeRequest, TokenizeResponse
from sie_server.cpu_features import detect
from sie_server.drain import shutting_down
from sie_server.engine import prompt_bounds, token_text
from sie_server.engine import service as engine
from sie_server.engine.extract.protocol import ExtractEngine, answer, wire_timing
from sie_server.engine.extract.registry import handler_for
from sie_server.engine.generation import GenerationService, usage
from sie_server.engine.grammar import GrammarSpec
from sie_server.engine.leftovers import fail_leftovers
from sie_server.engine.lora_tasks import requested_task
from sie_server.engine.model_report import memory_report, model_info
from sie_server.engine.outputs import encoded_item, quantize
from sie_server.engine.scheduler import Scheduler
from sie_server.engine.sequences import SamplingParams, Sequence
from sie_server.engine.status_report import ServerStatus
from sie_server.errors import SIEError
from sie_server.memory.pool import ModelPool
from sie_server.observability.live import LiveStats
from sie_server.observability.metrics import Metrics
from sie_server.observability.requests import RequestCounter
from sie_server.settings import Settings


def _input(item: ItemIn, item_id: str) -> engine.TextInput:
    if item.images:
        return engine.TextInput(id=item_id, text=item.text or "", image=item.images[0].data)
    return engine.TextInput(id=item_id, text=item.text or "")


def _inputs(items: abc.Sequence[ItemIn]) -> list[engine.TextInput]:
    return [_input(item, item.id_at(i)) for i, item in enumerate(items)]


def _span_vectors(spans: list[list[int]], vectors: np.ndarray, dtype: str) -> list[SpanVector]:
    """Late chunking's answer: each requested span with its vector."""
    return [
        SpanVector.model_construct(
            start=start, end=end, dense=Dense.model_construct(dims=len(v), dtype=dtype, values=quantize(v, dtype))
        )
        for (start, end), v in zip(spans, vectors, strict=True)
    ]


def _cached_timing(timing: engine.Timing) -> CachedTiming:
    """An encode or score timing, with the items the result cache answered."""
    return CachedTiming.model_construct(**wire_timing(timing).model_dump(), cache_hits=timing.cache_hits)


class LocalStream:
    """A generation on this process's decode loop."""

    def __init__(self, model: str, seq: Sequence, generation: GenerationService, live: LiveStats | None = None):
        self.model = model
        self.seq = seq
        self.generation = generation
        self.live = live  # told the tokens decoded when the stream ends (the status page's tokens/s)

    async def _counted(self) -> AsyncIterator[str]:
        try:
            async for delta in GenerationService.stream(self.seq):
                yield delta
        finally:
            self._count()

    def _count(self) -> None:
        if self.live is not None:
            self.live.decoded(self.model, self.usage.completion_tokens)
            self.live = None

    def deltas(self) -> AsyncIterator[str]:
        return self._counted()

    async def finish(self) -> None:
        try:
            await self.generation.complete(self.seq)
        finally:
            self._count()

    def cancel(self) -> None:
        self.seq.cancelled = True

    @property
    def text(self) -> str:
        return self.seq.text

    @property
    def finish_reason(self) -> str | None:
        return self.seq.finish_reason

    @property
    def tool_format(self) -> str | None:
        return self.seq.tool_format

    @property
    def usage(self) -> Usage:
        return Usage(**usage(self.seq))


@dataclass
class EngineFrontDoor:
    settings: Settings
    catalog: Catalog
    pool: ModelPool
    scheduler: Scheduler
    inference: engine.InferenceService
    metrics: Metrics
    generation: GenerationService
    ready: bool = False
    draining: bool = False
    queue_token: str = ""  # on a queue worker: the secret its in-process calls carry
    queue_connected: bool = True  # on a queue worker: False while it has no NATS connection
    preload_errors: dict[str, str] = field(default_factory=dict)
    requests: RequestCounter = field(init=False)
    limits: Limits = field(init=False)  # what every request is checked against
    status_report: ServerStatus = field(init=False)
    extractors: ExtractEngine = field(init=False)  # what each extract kind's handler runs on

    def __post_init__(self) -> None:
        self.requests = RequestCounter(self.metrics)  # kept by the metrics middleware
        self.limits = self.settings.limits
        self.status_report = ServerStatus(self.catalog, self.pool, self.metrics, self.requests.live)
        self.extractors = ExtractEngine(self.inference, self.generation, self.catalog, self.limits)

    @property
    def inflight(self) -> int:
        """Work requests being answered now."""
        return self.requests.inflight

    def idle(self) -> bool:
        return (
            self.inflight == 0
            and self.scheduler.is_idle()
            and not any(loop.busy for loop in self.generation.loops.values())
        )

    def fail_unfinished(self, error: SIEError) -> int:
        """The drain's deadline passed: queued and running items and generations get ``error``."""
        return fail_leftovers(self.scheduler, self.generation, error)

    def resolve(self, model_id: str) -> ModelConfig:
        if self.draining:
            raise shutting_down("server")
        return contract_models.resolve(self.catalog, model_id)

    def refuse_unfit(
        self, model: ModelConfig, messages: Iterable[Mapping[str, Any]], max_new_tokens: int, *, tools: bool
    ) -> None:
        adapter = self.pool.resident(model)
        if isinstance(adapter, Generator):
            prompt_bounds.check(adapter, model.id, None, messages, max_new_tokens, tools=tools)

    async def encode(self, model: ModelConfig, request: EncodeRequest, call: CallOptions) -> EncodeResponse:
        params = request.params
        output_types: list[str] = list(params.output_types) if params and params.output_types else ["dense"]
        dtype = (params.output_dtype if params else None) or "float32"
        is_query = bool(((params.options if params else None) or {}).get("is_query", False))
        outcome = await self.inference.encode(
            model,
            _inputs(request.items),
            output_types=output_types,
            is_query=is_query,
            instruction=params.instruction if params else None,
            call=call,
            dims=params.dims if params else None,
            truncation=(params.truncation if params else None) or "end",
            spans=[item.spans for item in request.items],
            task=requested_task(params.options if params else None),
        )
        task = model.tasks.encode
        dims = {k: getattr(task, k).dim for k in task.output_types()} if task else {}
        if params and params.dims:
            dims["dense"] = params.dims
        items = [encoded_item(i, o, dtype, dims) for i, o in zip(outcome.ids, outcome.outputs, strict=True)]
        for item, asked, out in zip(items, request.items, outcome.outputs, strict=True):
            if asked.spans and "chunks" in out:
                item.chunks = _span_vectors(asked.spans, out["chunks"], dtype)
        return EncodeResponse.model_construct(
            model=outcome.model,
            items=items,
            timing=_cached_timing(outcome.timing),
            usage=PromptUsage.model_construct(prompt_tokens=outcome.prompt_tokens),
            truncated_items=outcome.truncated,
        )

    async def score(self, model: ModelConfig, request: ScoreRequest, call: CallOptions) -> ScoreResponse:
        outcome = await self.inference.score(
            model,
            _input(request.query, request.query.id if request.query.id is not None else "query"),
            _inputs(request.items),
            instruction=request.instruction,
            call=call,
        )
        return ScoreResponse(
            model=outcome.model,
            query_id=outcome.query_id,
            scores=[ItemScore(item_id=i, score=v, rank=r) for r, (i, v) in enumerate(outcome.scores)],
            timing=_cached_timing(outcome.timing),
            usage=PromptUsage(prompt_tokens=outcome.prompt_tokens),
            truncated_items=outcome.truncated,
        )

    async def extract(self, model: ModelConfig, request: ExtractRequest, call: CallOptions) -> ExtractResponse:
        """The handler of the kind the model's family serves (``engine/extract/registry.py``) answers it."""
        return await answer(handler_for(model), self.extractors, model, request, call)

    async def generate(self, model: ModelConfig, request: GenerateRequest, call: CallOptions) -> LocalStream:
        stop = request.stop
        params = SamplingParams(
            request.max_new_tokens,
            request.temperature,
            request.top_p,
            (stop,) if isinstance(stop, str) else tuple(stop or ()),
            request.seed,
            GrammarSpec.of(request.grammar) if request.grammar is not None else None,
            request.frequency_penalty,
            request.presence_penalty,
        )
        messages = [m.model_dump(exclude_none=True) for m in request.messages] if request.messages is not None else None
        seq, _ = await self.generation.start(
            model, prompt=request.prompt, messages=messages, params=params, wait_for_load=call.wait_for_load,
            tools=request.tools,
        )  # fmt: skip
        return LocalStream(model.id, seq, self.generation, self.requests.live)

    async def tokenize(self, model: ModelConfig, request: TokenizeRequest, call: CallOptions) -> TokenizeResponse:
        return await token_text.tokenize(self.inference, model, request, call)

    async def detokenize(self, model: ModelConfig, request: DetokenizeRequest, call: CallOptions) -> DetokenizeResponse:
        return await token_text.detokenize(self.inference, model, request, call)

    def model_info(self, model: ModelConfig) -> ModelInfo:
        return model_info(model, self.pool, catalog_error=self.catalog.error_for(model.id))

    async def models(self) -> tuple[list[ModelInfo], dict[str, object] | None]:
        return [self.model_info(c) for c in self.catalog.list()], detect().as_dict()

    async def model(self, model: ModelConfig) -> ModelInfo:
        return self.model_info(model)

    async def reload(self, model: ModelConfig) -> ModelInfo:
        self.pool.reset(model)
        if self.inference.results is not None:  # whatever it loads now, no vector of before is served
            self.inference.results.drop(model.id)
        await self.pool.acquire(model, wait=True, timeout_s=self.settings.load_timeout_s)
        return self.model_info(model)

    async def load(self, model: ModelConfig) -> ModelInfo:
        await self.pool.acquire(model, wait=True, timeout_s=self.settings.load_timeout_s)
        return self.model_info(model)

    async def evict(self, model: ModelConfig) -> ModelInfo:
        self.pool.unload(model)
        return self.model_info(model)

    async def status(self) -> StatusReport:
        return self.status_report.report()

    async def memory(self) -> MemoryReport:
        return memory_report(self.pool)

    def readiness(self) -> Readiness:
        if self.draining:
            return Readiness(status="draining")
        if not self.ready:
            return Readiness(status="starting")
        if not self.queue_connected:  # a worker without NATS gets no work: not ready
            return Readiness(status="disconnected")
        return Readiness(
            status="ready",
            queued_items=self.scheduler.queued,
            inflight_requests=self.inflight,
            preload_errors=self.preload_errors,
        )

    def metrics_text(self) -> bytes:
        return self.metrics.render()
