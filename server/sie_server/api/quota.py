"""Per-key limits: at most ``max_items`` items in flight for one caller, so no one fills the queue.

The keys middleware opens a ``Ticket`` for each work request (its caller: the API key, or
the client address on a server without keys) and closes it when the whole answer, stream
included, has been sent. ``QuotaService`` wraps the routes' service: each work call charges
its items to the open ticket first, so a caller past its limit gets 429 RATE_LIMITED with
Retry-After before any work is queued, while other callers go on being served.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from sie_server.api.service import Service, TextStream
from sie_server.catalog.schema import ModelConfig
from sie_server.contract.headers import CallOptions
from sie_server.contract.limits import Limits
from sie_server.contract.requests import EncodeRequest, ExtractRequest, GenerateRequest, ScoreRequest
from sie_server.contract.responses import EncodeResponse, ExtractResponse, ScoreResponse
from sie_server.contract.state_wire import MemoryReport, ModelInfo, Readiness
from sie_server.contract.status import StatusReport
from sie_server.contract.tokenize_wire import DetokenizeRequest, DetokenizeResponse, TokenizeRequest, TokenizeResponse
from sie_server.errors import InvalidInput, RateLimited

RETRY_AFTER_S = 1.0


class KeyQuota:
    """Items in flight per caller."""

    def __init__(self, max_items: int):
        self.max_items = max_items
        self.queued: dict[str, int] = {}

    def charge(self, caller: str, items: int) -> None:
        if items > self.max_items:
            raise InvalidInput(
                f"{items} items in one request; one key may have at most {self.max_items} in flight. Split the request."
            )
        held = self.queued.get(caller, 0)
        if held + items > self.max_items:
            raise RateLimited(
                f"this key has {held} items in flight and may have at most {self.max_items}; "
                "wait for answers before sending more",
                retry_after=RETRY_AFTER_S,
            )
        self.queued[caller] = held + items

    def release(self, caller: str, items: int) -> None:
        left = self.queued.get(caller, 0) - items
        if left > 0:
            self.queued[caller] = left
        else:
            self.queued.pop(caller, None)


class Ticket:
    """One request's charges against its caller's quota, released together."""

    def __init__(self, quota: KeyQuota, caller: str):
        self.quota = quota
        self.caller = caller
        self.items = 0

    def charge(self, items: int) -> None:
        self.quota.charge(self.caller, items)
        self.items += items

    def close(self) -> None:
        self.quota.release(self.caller, self.items)
        self.items = 0


_ticket: ContextVar[Ticket | None] = ContextVar("sie_quota_ticket", default=None)


@contextmanager
def open_ticket(quota: KeyQuota, caller: str) -> Iterator[Ticket]:
    """The request's ticket for the calls made while the block runs (the route and its answer)."""
    ticket = Ticket(quota, caller)
    token = _ticket.set(ticket)
    try:
        yield ticket
    finally:
        _ticket.reset(token)
        ticket.close()


def charge(items: int) -> None:
    ticket = _ticket.get()
    if ticket is not None:
        ticket.charge(items)


class QuotaService:
    """The routes' service with every work call charged to its caller's quota first."""

    def __init__(self, inner: Service):
        self.inner = inner

    @property
    def limits(self) -> Limits:
        return self.inner.limits

    def resolve(self, model_id: str) -> ModelConfig:
        return self.inner.resolve(model_id)

    def refuse_unfit(
        self, model: ModelConfig, messages: Iterable[Mapping[str, Any]], max_new_tokens: int, *, tools: bool
    ) -> None:
        self.inner.refuse_unfit(model, messages, max_new_tokens, tools=tools)

    async def encode(self, model: ModelConfig, request: EncodeRequest, call: CallOptions) -> EncodeResponse:
        charge(len(request.items))
        return await self.inner.encode(model, request, call)

    async def score(self, model: ModelConfig, request: ScoreRequest, call: CallOptions) -> ScoreResponse:
        charge(len(request.items))
        return await self.inner.score(model, request, call)

    async def extract(self, model: ModelConfig, request: ExtractRequest, call: CallOptions) -> ExtractResponse:
        charge(len(request.items))
        return await self.inner.extract(model, request, call)

    async def generate(self, model: ModelConfig, request: GenerateRequest, call: CallOptions) -> TextStream:
        charge(1)
        return await self.inner.generate(model, request, call)

    async def tokenize(self, model: ModelConfig, request: TokenizeRequest, call: CallOptions) -> TokenizeResponse:
        charge(len(request.items))
        return await self.inner.tokenize(model, request, call)

    async def detokenize(self, model: ModelConfig, request: DetokenizeRequest, call: CallOptions) -> DetokenizeResponse:
        charge(len(request.items))
        return await self.inner.detokenize(model, request, call)

    async def models(self) -> tuple[list[ModelInfo], dict[str, object] | None]:
        return await self.inner.models()

    async def model(self, model: ModelConfig) -> ModelInfo:
        return await self.inner.model(model)

    async def reload(self, model: ModelConfig) -> ModelInfo:
        return await self.inner.reload(model)

    async def load(self, model: ModelConfig) -> ModelInfo:
        return await self.inner.load(model)

    async def evict(self, model: ModelConfig) -> ModelInfo:
        return await self.inner.evict(model)

    async def status(self) -> StatusReport:
        return await self.inner.status()

    async def memory(self) -> MemoryReport:
        return await self.inner.memory()

    def readiness(self) -> Readiness:
        return self.inner.readiness()

    def metrics_text(self) -> bytes:
        return self.inner.metrics_text()


def with_quota(service: Service, max_queued_per_key: int | None) -> tuple[Service, KeyQuota | None]:
    """``service`` charged per key when a limit is set; the quota the keys middleware opens tickets on."""
    if max_queued_per_key is None:
        return service, None
    return QuotaService(service), KeyQuota(max_queued_per_key)
