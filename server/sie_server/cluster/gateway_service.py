"""The routes' ``Service`` on a gateway: each request becomes work for its pool's queue workers,
their answers come back typed, and encode/extract requests split into slices are merged back in
item order. The gateway holds no model; validation happened in the shared routes already.

It is also what a drain reads (``drain.Drainable``): while draining, new work is refused; at the
deadline every wait on a worker still under way is failed (``cluster/gateway_waits.py``)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Mapping
from typing import Any, TypeVar

from prometheus_client import generate_latest
from pydantic import BaseModel

from sie_server.catalog.info import catalog_info
from sie_server.catalog.schema import ModelConfig
from sie_server.cluster.gateway import Call, Gateway
from sie_server.cluster.gateway_readiness import gateway_readiness
from sie_server.cluster.gateway_status import gateway_status
from sie_server.cluster.gateway_waits import Waits
from sie_server.cluster.streams import Reply
from sie_server.contract import codec, envelope
from sie_server.contract import headers as h
from sie_server.contract import models as contract_models
from sie_server.contract.headers import CallOptions
from sie_server.contract.requests import EncodeRequest, ExtractRequest, GenerateRequest, ItemIn, ScoreRequest
from sie_server.contract.responses import (
    CachedTiming,
    EncodeResponse,
    ExtractResponse,
    GenerateChunk,
    PromptUsage,
    ScoreResponse,
    Timing,
    Usage,
)
from sie_server.contract.state_wire import GatewayModelInfo, MemoryReport, ModelInfo, Readiness
from sie_server.contract.status import StatusReport
from sie_server.contract.tokenize_wire import DetokenizeRequest, DetokenizeResponse, TokenizeRequest, TokenizeResponse
from sie_server.drain import shutting_down
from sie_server.errors import InvalidInput, SIEError
from sie_server.observability.live import LiveStats

R = TypeVar("R", bound=BaseModel)
AnyItem = TypeVar("AnyItem", bound=ItemIn)  # encode items carry spans, the others do not
HOLD_POLL_S = 0.2
EVICT_TIMEOUT_S = 2.0  # how long an evict waits for the pool's live workers to answer


class NoWorkerYet(SIEError):
    """The pool has no live worker and the caller asked not to wait: answered 202 + Retry-After."""

    def __init__(self, pool: str):
        super().__init__(f"no worker of pool {pool} is running yet", status=202, retry_after=5)
        self.pool = pool


def _answer(reply: Reply) -> Any:
    """A worker's answer decoded; its error raised again as the same code, message and status."""
    content_type = reply.headers.get(h.CONTENT_TYPE, codec.JSON)
    try:
        payload = codec.decode(content_type, reply.body) if reply.body else None
    except SIEError:
        payload = None
    if reply.status >= 400:
        raise envelope.from_answer(reply.status, reply.headers, payload)
    return payload


def _numbered(items: list[AnyItem]) -> list[AnyItem]:
    """Items with the ids a server would give them (``item-<i>``), so slices keep them."""
    return [
        item if item.id is not None else item.model_copy(update={"id": item.id_at(i)}) for i, item in enumerate(items)
    ]


def _timing(parts: list[Timing]) -> Timing:
    return Timing(**{k: max(getattr(p, k) for p in parts) for k in Timing.model_fields})


def _cached_timing(parts: list[CachedTiming]) -> CachedTiming:
    """The slowest part's times, and the items every part answered from its worker's cache."""
    slowest = _timing(list(parts))
    return CachedTiming(**slowest.model_dump(), cache_hits=sum(p.cache_hits for p in parts))


class GatewayStream:
    """A generation on a worker, read back from its server-sent events."""

    def __init__(self, model: str, gateway: Gateway, call: Call, first: Reply, waits: Waits):
        self.model = model
        self._gateway, self._call, self._first, self._waits = gateway, call, first, waits
        self._parts: list[str] = []
        self._reason: str | None = None
        self._tool_format: str | None = None
        self._usage = Usage(prompt_tokens=0, completion_tokens=0, total_tokens=0)
        self._iter: AsyncGenerator[str, None] | None = None
        self._closing: asyncio.Future[None] | None = None

    async def _read(self) -> AsyncGenerator[str, None]:
        buffer = b""
        bodies = self._gateway.rest_of_stream(self._call, self._first)
        parts = _prepend(self._first.body, bodies)
        try:
            while True:
                with self._waits.watch():  # a drain past its deadline ends the stream here
                    body = await anext(parts, None)
                if body is None:
                    break
                buffer += body
                while b"\n\n" in buffer:
                    event, buffer = buffer.split(b"\n\n", 1)
                    data = event.removeprefix(b"data: ").strip()
                    if not data or data == b"[DONE]":
                        continue
                    payload = json.loads(data)
                    if "detail" in payload:
                        raise envelope.from_event(payload)
                    chunk = GenerateChunk.model_validate(payload)
                    if chunk.usage is not None:
                        self._usage, self._reason = chunk.usage, chunk.finish_reason
                        self._tool_format = chunk.tool_format
                    if chunk.text:
                        self._parts.append(chunk.text)
                        yield chunk.text
        finally:
            await parts.aclose()
            await bodies.aclose()

    def deltas(self) -> AsyncIterator[str]:
        if self._iter is None:
            self._iter = self._read()
        return self._iter

    async def finish(self) -> None:
        async for _ in self.deltas():
            pass

    def cancel(self) -> None:
        """Closing the reader tells the worker to stop (``Gateway.rest_of_stream``)."""
        if self._iter is not None and not getattr(self._iter, "ag_running", False):
            self._closing = asyncio.ensure_future(self._iter.aclose())

    @property
    def text(self) -> str:
        return "".join(self._parts)

    @property
    def finish_reason(self) -> str | None:
        return self._reason

    @property
    def usage(self) -> Usage:
        return self._usage

    @property
    def tool_format(self) -> str | None:
        return self._tool_format


async def _prepend(first: bytes, rest: AsyncIterator[bytes]) -> AsyncGenerator[bytes, None]:
    yield first
    async for part in rest:
        yield part


class GatewayService:
    def __init__(self, gateway: Gateway):
        self.gateway = gateway
        s = gateway.settings
        self.limits = s.limits
        self.draining = False
        self.inflight = 0  # work requests being answered (kept by the metrics middleware)
        self.waits = Waits()
        self.live = LiveStats()  # the status page's last minute

    def idle(self) -> bool:
        return self.inflight == 0

    def fail_unfinished(self, error: SIEError) -> int:
        return self.waits.fail(error)

    def resolve(self, model_id: str) -> ModelConfig:
        if self.draining:
            raise shutting_down("gateway")
        return contract_models.resolve(self.gateway.settings.catalog, model_id)

    def refuse_unfit(
        self, model: ModelConfig, messages: Iterable[Mapping[str, Any]], max_new_tokens: int, *, tools: bool
    ) -> None:
        """A gateway has no model to measure the chat against: its worker refuses it."""

    async def _pool(self, model: ModelConfig, call: CallOptions) -> str:
        """The model's pool, once it has a live worker (waiting up to ``hold_s`` unless told not to)."""
        pool = self.gateway.settings.pool_for(model.id)
        if self.gateway.live_workers(pool) == 0:
            if not call.wait_for_worker:
                raise NoWorkerYet(pool)
            deadline = time.monotonic() + self.gateway.settings.hold_s
            while self.gateway.live_workers(pool) == 0 and time.monotonic() < deadline:
                await asyncio.sleep(HOLD_POLL_S)
        return pool

    async def _send(self, model: ModelConfig, task: str, request: BaseModel, call: CallOptions) -> Call:
        """``request`` published as work for the model's pool, to its native route on a worker."""
        pool = await self._pool(model, call)
        body = codec.pack(request.model_dump(exclude_none=True))
        path = f"/v1/{task}/{model.id}"
        return await self.gateway.send(
            pool,
            call.priority,
            path,
            body,
            model.id,
            wait_for_model=call.wait_for_load,
            deadline=call.deadline,
            cache=call.cache,
        )

    async def _ask(self, model: ModelConfig, task: str, request: BaseModel, answer: type[R], call: CallOptions) -> R:
        with self.waits.watch():
            sent = await self._send(model, task, request, call)
            try:
                reply = await self.gateway.receive(sent)
            finally:
                await self.gateway.close(sent)
        return answer.model_validate(_answer(reply))

    def _slices(self, items: list[AnyItem]) -> list[list[AnyItem]]:
        size = self.gateway.settings.split_items
        numbered = _numbered(items)
        return [numbered[i : i + size] for i in range(0, len(numbered), size)]

    async def encode(self, model: ModelConfig, request: EncodeRequest, call: CallOptions) -> EncodeResponse:
        parts = await asyncio.gather(*(
            self._ask(model, "encode", request.model_copy(update={"items": chunk}), EncodeResponse, call)
            for chunk in self._slices(request.items)
        ))  # fmt: skip
        return EncodeResponse(
            model=parts[0].model,
            items=[item for part in parts for item in part.items],
            timing=_cached_timing([p.timing for p in parts]),
            usage=PromptUsage(prompt_tokens=sum(p.usage.prompt_tokens for p in parts)),
            truncated_items=[i for part in parts for i in part.truncated_items],
        )

    async def extract(self, model: ModelConfig, request: ExtractRequest, call: CallOptions) -> ExtractResponse:
        parts = await asyncio.gather(*(
            self._ask(model, "extract", request.model_copy(update={"items": chunk}), ExtractResponse, call)
            for chunk in self._slices(request.items)
        ))  # fmt: skip
        items = [item for part in parts for item in part.items]
        return ExtractResponse(model=parts[0].model, items=items, timing=_timing([p.timing for p in parts]))

    async def score(self, model: ModelConfig, request: ScoreRequest, call: CallOptions) -> ScoreResponse:
        return await self._ask(model, "score", request, ScoreResponse, call)

    async def tokenize(self, model: ModelConfig, request: TokenizeRequest, call: CallOptions) -> TokenizeResponse:
        return await self._ask(model, "tokenize", request, TokenizeResponse, call)

    async def detokenize(self, model: ModelConfig, request: DetokenizeRequest, call: CallOptions) -> DetokenizeResponse:
        return await self._ask(model, "detokenize", request, DetokenizeResponse, call)

    async def generate(self, model: ModelConfig, request: GenerateRequest, call: CallOptions) -> GatewayStream:
        with self.waits.watch():
            sent = await self._send(model, "generate", request.model_copy(update={"stream": True}), call)
            try:
                first = await self.gateway.receive(sent)
            except BaseException:
                await self.gateway.close(sent)
                raise
        if not first.more:  # a whole answer: the worker refused before streaming
            await self.gateway.close(sent)
            _answer(first)
            raise InvalidInput(f"the worker answered {first.status} without a stream")
        return GatewayStream(model.id, self.gateway, sent, first, self.waits)

    def _info(self, config: ModelConfig) -> GatewayModelInfo:
        """The catalog's facts, overlaid with what the most useful worker report says (loaded first)."""
        pool = self.gateway.settings.pool_for(config.id)
        reports = self.gateway.reports(config.id)
        info = {**catalog_info(config).model_dump(), **(reports[0] if reports else {})}
        loaded_on = sum(1 for r in reports if r.get("state") == "loaded")
        return GatewayModelInfo(**info, pool=pool, workers=self.gateway.live_workers(pool), loaded_on=loaded_on)

    async def models(self) -> tuple[list[ModelInfo], dict[str, object] | None]:
        return [self._info(c) for c in self.gateway.settings.catalog.list()], None

    async def model(self, model: ModelConfig) -> ModelInfo:
        return self._info(model)

    async def reload(self, model: ModelConfig) -> ModelInfo:
        return await self._manage("reload", model)

    async def load(self, model: ModelConfig) -> ModelInfo:
        return await self._manage("load", model)

    async def evict(self, model: ModelConfig) -> ModelInfo:
        return await self._manage("evict", model)

    async def _manage(self, action: str, model: ModelConfig) -> ModelInfo:
        """The action on the model's pool (evict: on every live worker; the first refusal is raised again)."""
        pool = self.gateway.settings.pool_for(model.id)
        timeout_s = EVICT_TIMEOUT_S if action == "evict" else self.gateway.settings.timeout_s  # a load can take long
        for reply in await self.gateway.manage(pool, action, model.id, timeout_s):
            _answer(reply)
        return self._info(model)

    async def status(self) -> StatusReport:
        return await gateway_status(self.gateway, self.live)

    async def memory(self) -> MemoryReport:
        raise InvalidInput("a gateway holds no models; ask a worker's /v1/memory", status=404)

    def readiness(self) -> Readiness:
        return gateway_readiness(self.gateway, draining=self.draining)  # cluster/gateway_readiness.py says what

    def metrics_text(self) -> bytes:
        return generate_latest(self.gateway.metrics.registry)

    # the metrics middleware's recorder

    def started(self) -> None:
        self.inflight += 1

    def finished(self, model: str | None, task: str | None, status: str, seconds: float) -> None:
        self.inflight -= 1
        if task is None:
            return
        self.gateway.metrics.requests.labels(task, status).inc()
        self.gateway.metrics.duration.labels(task).observe(seconds)
        if model is not None:
            self.live.finished(model, task, status, seconds)
