"""Generative guards on ``extract``: each item's prompt (its ``text``) and optional response (its
``metadata.response``) go through the model's own moderation chat template, are generated greedily on the
same decode loop as ``/v1/generate`` (every item at once, so the loop batches them) and the verdict is read
by the config's guard format (adapters/guards). An item that cannot be judged, or whose verdict cannot be
read, gets its own ``error``; its neighbours are answered. Past ``X-SIE-Timeout-Ms`` the unfinished items
fail alone (DEADLINE_EXCEEDED), or the whole request when none finished.
"""

from __future__ import annotations

import asyncio
from collections import abc
from dataclasses import dataclass
from typing import Any, cast

from sie_server.adapters.guards import GuardFormat, Verdict, guard_format
from sie_server.catalog.schema import ModelConfig
from sie_server.contract.headers import CallOptions
from sie_server.contract.requests import ExtractRequest, ItemIn
from sie_server.contract.responses import Classification, ExtractedItem, ExtractResponse, ItemError
from sie_server.contract.responses import Timing as WireTiming
from sie_server.engine.extract.protocol import ExtractEngine
from sie_server.engine.generation import GenerationService, usage
from sie_server.engine.outcomes import Timing
from sie_server.engine.sequences import SamplingParams, Sequence
from sie_server.errors import DeadlineExceeded, InvalidInput, ModelLoadFailed, ModelLoading, SIEError

#: the metadata key of the assistant response to judge (response moderation)
RESPONSE_KEY = "response"
MAX_NEW_TOKENS = 512  # the most a request's options.max_new_tokens may ask for
DEADLINE_MARGIN_S = 0.25  # answer what is done this long before X-SIE-Timeout-Ms runs out
LATE = "not judged within X-SIE-Timeout-Ms; this item's generation was stopped and the rest answered"
#: failures of the model itself, not of one item: the request fails with them
WHOLE = (ModelLoading, ModelLoadFailed)


@dataclass(frozen=True)
class Judged:
    verdict: Verdict
    raw: str
    usage: dict[str, Any]


def _max_new_tokens(options: abc.Mapping[str, Any], guard: GuardFormat) -> int:
    value = options.get("max_new_tokens", guard.max_new_tokens)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_NEW_TOKENS:
        raise InvalidInput(f"params.options.max_new_tokens must be an integer from 1 to {MAX_NEW_TOKENS}")
    return value


def _conversation(item: ItemIn, where: str) -> tuple[str, str | None]:
    """The prompt and the response to judge; InvalidInput (this item's error) when either is empty or wrong."""
    if item.text is None or not item.text.strip():
        raise InvalidInput(f"{where}.text is empty: a guard judges a prompt (and metadata.{RESPONSE_KEY})")
    response = (item.metadata or {}).get(RESPONSE_KEY)
    if response is not None and (not isinstance(response, str) or not response.strip()):
        raise InvalidInput(f"{where}.metadata.{RESPONSE_KEY} must be a non-empty string: the response to judge")
    return item.text, response


@dataclass(frozen=True)
class GuardRequest:
    """An extract request on a guard: its items, the guard's format, its options and sampling."""

    items: list[ItemIn]
    guard: GuardFormat
    options: dict[str, Any]
    params: SamplingParams


def guard_request(model: ModelConfig, request: ExtractRequest) -> GuardRequest:
    task = model.tasks.extract
    assert task is not None and task.guard is not None, "routed here only for configs that name a guard"
    params = request.params
    if params is not None and params.labels:
        raise InvalidInput(
            f"model {model.id} is a guard: it answers its own verdict and categories; params.labels is not taken"
        )
    guard = guard_format(task.guard)
    options = {**task.options, **((params.options if params else None) or {})}
    sampling = SamplingParams(max_new_tokens=_max_new_tokens(options, guard), temperature=0.0)
    return GuardRequest(list(request.items), guard, options, sampling)


class GuardRun:
    """One extract request on a guard: its items' generations and their verdicts."""

    def __init__(self, generation: GenerationService, model: ModelConfig, request: GuardRequest):
        self.generation, self.model, self.request = generation, model, request
        self.sequences: list[Sequence] = []

    async def judge(self, item: ItemIn, where: str, call: CallOptions) -> Judged:
        prompt, response = _conversation(item, where)
        guard = self.request.guard
        messages = cast(list[dict[str, str]], guard.messages(prompt, response, self.request.options))
        seq, _ = await self.generation.start(
            self.model, prompt=None, messages=messages, params=self.request.params, wait_for_load=call.wait_for_load
        )
        self.sequences.append(seq)
        raw = await self.generation.complete(seq)
        return Judged(guard.parse(raw), raw, usage(seq))

    def stop(self) -> None:
        for seq in self.sequences:
            seq.cancelled = True


def _answer(item_id: str, outcome: Judged | SIEError) -> ExtractedItem:
    if isinstance(outcome, SIEError):
        return ExtractedItem(id=item_id, entities=[], error=ItemError(code=outcome.code.value, message=outcome.message))
    verdict = outcome.verdict
    data: dict[str, Any] = {
        "raw": outcome.raw,
        "verdict": verdict.label,
        "categories": list(verdict.categories),
        **verdict.extra,
        "usage": outcome.usage,
    }
    classifications = [Classification(**c) for c in verdict.classifications()]
    return ExtractedItem(id=item_id, entities=[], classifications=classifications, data=data)


class Guard:
    """The guard kind: every item judged at once; each answered with its verdict or its own error."""

    def decode(self, model: ModelConfig, request: ExtractRequest) -> GuardRequest:
        return guard_request(model, request)

    async def queue(
        self, engine: ExtractEngine, model: ModelConfig, decoded: GuardRequest, call: CallOptions, timing: Timing
    ) -> list[Judged | SIEError]:
        run = GuardRun(engine.generation, model, decoded)
        items = decoded.items
        tasks = [asyncio.ensure_future(run.judge(item, f"items[{k}]", call)) for k, item in enumerate(items)]
        try:
            return await _settle(tasks, call)
        finally:  # late, abandoned or failed: their generations leave the decode loop
            run.stop()
            for task in tasks:
                task.cancel()

    def assemble(
        self, model: ModelConfig, decoded: GuardRequest, outcomes: list[Judged | SIEError], timing: Timing
    ) -> ExtractResponse:
        ids = [item.id_at(k) for k, item in enumerate(decoded.items)]
        total = timing.as_dict()["total_ms"]
        return ExtractResponse(
            model=model.id,
            items=[_answer(i, o) for i, o in zip(ids, outcomes, strict=True)],
            timing=WireTiming.model_construct(total_ms=total, queue_ms=0.0, tokenization_ms=0.0, inference_ms=total),
        )


async def _settle(tasks: abc.Sequence[asyncio.Future[Judged]], call: CallOptions) -> list[Judged | SIEError]:
    """Each item's verdict or error, waiting until shortly before the caller's deadline; a failure of the model
    itself (loading, weights) or an internal one fails the request."""
    left = call.remaining_s()
    await asyncio.wait(tasks, timeout=None if left is None else max(left - min(DEADLINE_MARGIN_S, left / 10), 0.0))
    outcomes: list[Judged | SIEError] = []
    for task in tasks:
        if not task.done():
            outcomes.append(DeadlineExceeded(LATE))
            continue
        error = task.exception()
        if error is None:
            outcomes.append(task.result())
        elif isinstance(error, SIEError) and not isinstance(error, WHOLE):
            outcomes.append(error)
        else:
            raise error
    if all(isinstance(o, DeadlineExceeded) for o in outcomes):
        raise DeadlineExceeded(LATE)
    return outcomes


HANDLER = Guard()
