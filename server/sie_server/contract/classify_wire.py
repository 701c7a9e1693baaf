"""Wire models of the classification routes in other products' shapes: OpenAI ``/v1/moderations``
and vLLM's ``/v1/classify`` (their own docs define the fields)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from sie_server.contract.requests import Wire
from sie_server.contract.wire import KeepNone

# OpenAI moderations


class ModerationRequest(Wire):
    input: str | list[str] = Field(min_length=1, description="a text or a list of texts")
    model: str | None = Field(
        default=None,
        description="a classifier in the catalog; omitted, or OpenAI's omni-moderation-* / text-moderation-*: "
        "the default safety model (unitary/toxic-bert)",
    )


class ModerationResult(KeepNone):
    flagged: bool
    categories: dict[str, bool] = Field(description="each of the model's labels: at or above its flag threshold")
    category_scores: dict[str, float]
    category_applied_input_types: dict[str, list[Literal["text"]]] = Field(
        description="the input kinds each label was applied to: text (this route takes text only)"
    )


class ModerationResponse(KeepNone):
    id: str
    model: str
    results: list[ModerationResult]


# vLLM classify


class ClassifyRequest(Wire):
    model: str
    input: str | list[str] = Field(min_length=1, description="a text or a list of texts")
    user: str | None = None


class ClassifyData(KeepNone):
    index: int
    label: str = Field(description="the best label")
    probs: list[float] = Field(description="every label's score, in the model's label order")
    num_classes: int


class ClassifyUsage(KeepNone):
    prompt_tokens: int
    total_tokens: int
    completion_tokens: int = 0


class ClassifyResponse(KeepNone):
    id: str
    object: Literal["list"] = "list"
    created: int
    model: str
    data: list[ClassifyData]
    usage: ClassifyUsage
