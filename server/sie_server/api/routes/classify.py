"""Classification in other APIs' shapes, thin translations onto the same ``extract`` call as
``/v1/extract``: OpenAI ``POST /v1/moderations`` (the official client's ``moderations.create``) and
vLLM's ``POST /v1/classify``. Always JSON."""

from __future__ import annotations

import time
import uuid
from typing import Literal

from fastapi import APIRouter, Request
from fastapi.responses import Response

from sie_server.api.body import json_response, parse
from sie_server.api.context import call, model_for, service
from sie_server.api.deadlines import within
from sie_server.api.openapi import doc
from sie_server.catalog.schema import ModelConfig
from sie_server.contract.classify_wire import (
    ClassifyData,
    ClassifyRequest,
    ClassifyResponse,
    ClassifyUsage,
    ModerationRequest,
    ModerationResponse,
    ModerationResult,
)
from sie_server.contract.requests import ExtractRequest, ItemIn
from sie_server.contract.responses import ExtractedItem, ExtractResponse
from sie_server.errors import InvalidInput

router = APIRouter(tags=["compatible"])

#: the safety model /v1/moderations uses when the request names none (or names one of OpenAI's)
DEFAULT_MODERATION_MODEL = "unitary/toxic-bert"
OPENAI_MODERATION_PREFIXES = ("omni-moderation", "text-moderation")


def _texts(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else value


async def _classify(request: Request, config: ModelConfig, texts: list[str], field: str) -> ExtractResponse:
    """``extract`` on the classifier with every text an item and no labels (all of the model's)."""
    svc = service(request)
    svc.limits.texts(texts, field)
    if not config.classifies:
        raise InvalidInput(f"model {config.id} is not a text classifier (its adapter is {config.adapter})")
    native = ExtractRequest(items=[ItemIn(id=str(i), text=t) for i, t in enumerate(texts)])
    options = call(request)
    async with within(options):
        answer = await svc.extract(config, native, options)
    for index, item in enumerate(answer.items):
        if item.error is not None:
            raise InvalidInput(f"{field}[{index}]: {item.error.message}")
    return answer


def _scores(item: ExtractedItem) -> dict[str, float]:
    found = item.data.get("scores")
    if isinstance(found, dict):
        return {str(k): float(v) for k, v in found.items()}
    return {c.label: c.score for c in item.classifications}


@router.post("/v1/moderations", **doc(ModerationResponse, body=ModerationRequest, openai=True, msgpack=False))
async def moderations(request: Request) -> Response:
    """OpenAI's moderations: each of the safety model's labels is a category, flagged at or above the
    model's ``tasks.extract.threshold`` (its ``safe_labels``, such as OK or BENIGN, never)."""
    svc = service(request)
    body = await parse(request, ModerationRequest, svc.limits.max_body_bytes)
    name = body.model
    if name is None or name.startswith(OPENAI_MODERATION_PREFIXES):
        name = DEFAULT_MODERATION_MODEL
    config = model_for(request, name, "extract")
    answer = await _classify(request, config, _texts(body.input), "input")
    task = config.tasks.extract
    threshold = task.threshold if task is not None else 0.5
    safe = set(task.safe_labels) if task is not None else set()
    results = []
    for item in answer.items:
        scores = _scores(item)
        categories = {label: label not in safe and score >= threshold for label, score in scores.items()}
        applied: dict[str, list[Literal["text"]]] = {label: ["text"] for label in scores}
        results.append(
            ModerationResult(flagged=any(categories.values()), categories=categories, category_scores=scores,
                             category_applied_input_types=applied)
        )  # fmt: skip
    return json_response(ModerationResponse(id=f"modr-{uuid.uuid4().hex}", model=answer.model, results=results))


@router.post("/v1/classify", **doc(ClassifyResponse, body=ClassifyRequest, msgpack=False))
async def classify(request: Request) -> Response:
    """vLLM's classify: each text's best label and every label's probability in the model's order."""
    svc = service(request)
    body = await parse(request, ClassifyRequest, svc.limits.max_body_bytes)
    config = model_for(request, body.model, "extract")
    answer = await _classify(request, config, _texts(body.input), "input")
    data = []
    tokens = 0
    for index, item in enumerate(answer.items):
        scores = _scores(item)
        best = item.classifications[0].label if item.classifications else max(scores, key=lambda k: scores[k])
        data.append(ClassifyData(index=index, label=best, probs=list(scores.values()), num_classes=len(scores)))
        tokens += int(item.data.get("tokens", 0))
    usage = ClassifyUsage(prompt_tokens=tokens, total_tokens=tokens)
    return json_response(
        ClassifyResponse(
            id=f"classify-{uuid.uuid4().hex}", created=int(time.time()), model=answer.model, data=data, usage=usage
        )
    )
