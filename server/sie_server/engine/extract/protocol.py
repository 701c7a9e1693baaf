"""One extract kind's handler: it decodes a request's inputs, queues their work and assembles the answer.

Every kind (``catalog/families.py``: ``ExtractKind``) has one handler module in this package and one line in
``registry.py``; the front door looks the model's kind up once and runs ``answer`` on that handler. Per-item
failures are values (``Outcome``: the item's answer or its own ``SIEError``), so one bad item leaves its
neighbours answered; what fails the whole request raises.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from sie_server.adapters.runtime.media import Found
from sie_server.adapters.runtime.options import MediaOptions
from sie_server.catalog.loader import Catalog
from sie_server.catalog.schema import ModelConfig
from sie_server.contract.headers import CallOptions
from sie_server.contract.limits import Limits
from sie_server.contract.requests import ExtractRequest
from sie_server.contract.responses import (
    Classification,
    DetectedObject,
    Entity,
    ExtractedItem,
    ExtractResponse,
    ItemError,
)
from sie_server.contract.responses import Timing as WireTiming
from sie_server.engine.generation import GenerationService
from sie_server.engine.outcomes import Timing
from sie_server.engine.service import InferenceService
from sie_server.errors import SIEError

Decoded = TypeVar("Decoded")
Outcomes = TypeVar("Outcomes")

#: one item's answer from a media, speech or classification handler, or that item's own error
Outcome = Found | SIEError


@dataclass(frozen=True)
class ExtractEngine:
    """What a handler may use: the shared queue (through the inference service: pool, scheduler, tokenizer
    thread), the decode loop (guards), the catalog (a parser's OCR model) and the request limits."""

    inference: InferenceService
    generation: GenerationService
    catalog: Catalog
    limits: Limits


class ExtractHandler(Protocol[Decoded, Outcomes]):
    """The three steps of every extract kind."""

    def decode(self, model: ModelConfig, request: ExtractRequest) -> Decoded:
        """The request's items and parameters as this kind takes them; InvalidInput for a request the
        model cannot serve at all (an item's own bad input is that item's error later)."""
        ...

    async def queue(
        self, engine: ExtractEngine, model: ModelConfig, decoded: Decoded, call: CallOptions, timing: Timing
    ) -> Outcomes:
        """The work on the shared queue (or the decode loop): each item's outcome, in order."""
        ...

    def assemble(self, model: ModelConfig, decoded: Decoded, outcomes: Outcomes, timing: Timing) -> ExtractResponse:
        """The wire answer: every item with its answer or its ``error``."""
        ...


async def answer(
    handler: ExtractHandler[Decoded, Outcomes],
    engine: ExtractEngine,
    model: ModelConfig,
    request: ExtractRequest,
    call: CallOptions,
) -> ExtractResponse:
    """``extract`` on one model: decode, queue, assemble."""
    timing = Timing()
    decoded = handler.decode(model, request)
    outcomes = await handler.queue(engine, model, decoded, call, timing)
    return handler.assemble(model, decoded, outcomes, timing)


def wire_timing(timing: Timing) -> WireTiming:
    """An engine timing as the answer's ``timing``."""
    t = timing.as_dict()
    return WireTiming.model_construct(
        total_ms=t["total_ms"],
        queue_ms=t["queue_ms"],
        tokenization_ms=t["tokenization_ms"],
        inference_ms=t["inference_ms"],
    )


def item_answer(item_id: str, outcome: Outcome) -> ExtractedItem:
    """One item's answer, or its error (with every list present and empty)."""
    if not isinstance(outcome, Found):
        return ExtractedItem(id=item_id, entities=[], error=ItemError(code=outcome.code.value, message=outcome.message))
    return ExtractedItem(
        id=item_id,
        entities=[Entity(**e) for e in outcome.entities],
        objects=[DetectedObject(**o) for o in outcome.objects],
        classifications=[Classification(**c) for c in outcome.classifications],
        data=outcome.data,
    )


class Identified(Protocol):
    """A decoded request whose items are answered one by one: their ids in order."""

    @property
    def ids(self) -> list[str]: ...


Items = TypeVar("Items", bound=Identified)


class PerItem(Generic[Items]):
    """A kind whose items each get an ``Outcome`` (pictures, documents, speech, classification): its answer is
    every item's, in order; the kind writes ``decode`` and ``queue``."""

    def assemble(self, model: ModelConfig, decoded: Items, outcomes: list[Outcome], timing: Timing) -> ExtractResponse:
        items = [item_answer(i, outcome) for i, outcome in zip(decoded.ids, outcomes, strict=True)]
        return ExtractResponse(model=model.id, items=items, timing=wire_timing(timing))


def media_options(request: ExtractRequest) -> MediaOptions:
    """The request's own labels, threshold and options for a picture or speech model (each family applies its
    config's defaults and limits: ``adapter.check``)."""
    params = request.params
    return MediaOptions.of(
        params.labels if params else None,
        params.threshold if params else None,
        params.options if params else None,
    )
