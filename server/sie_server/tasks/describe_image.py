"""``describe_image``: a caption from a captioning model (Florence-2 through ``extract`` with its caption task
in ``options``) and zero-shot tags from an image-text encoder (CLIP, SigLIP): the image and each candidate
tag, phrased by ``template``, are encoded into one space and the tags ranked by cosine similarity. The two
steps run at once on the queue. The image's pixels are read from its header and checked against the
server's ``--max-image-pixels`` before any model runs (413), so an oversized image costs its header."""

from __future__ import annotations

import asyncio

import numpy as np

from sie_server.api.service import Service
from sie_server.catalog.schema import ModelConfig
from sie_server.contract.headers import CallOptions
from sie_server.contract.requests import (
    EncodeItemIn,
    EncodeParams,
    EncodeRequest,
    ExtractParams,
    ExtractRequest,
    ImageIn,
    ItemIn,
)
from sie_server.contract.tasks_wire import DescribeImageRequest, DescribeImageResponse, FileIn, Tag
from sie_server.errors import InvalidInput, PayloadTooLarge
from sie_server.tasks.common import check_file, models_for, used
from sie_server.tasks.image_size import declared_size

NAME = "describe_image"
TITLE = "Describe an image"
DESCRIPTION = (
    "Describe an image (base64 PNG, JPEG, WebP, GIF, BMP or TIFF): a caption from the captioning model "
    "(Florence-2) and the top tags with scores from an image-text encoder (CLIP or SigLIP), ranked among the "
    "candidate labels given or a default list."
)
USES = ("caption", "tags")  # a request may skip either (caption "none", top_k 0)
CAPTION_TASKS = {"brief": "<CAPTION>", "detailed": "<DETAILED_CAPTION>", "more_detailed": "<MORE_DETAILED_CAPTION>"}
CAPTION_TOKENS = {"brief": 40, "detailed": 96, "more_detailed": 192}
DEFAULT_LABELS = (
    "person", "group of people", "child", "dog", "cat", "bird", "horse", "animal", "car", "bicycle", "airplane",
    "boat", "train", "street", "building", "house", "room", "kitchen", "office", "food", "drink", "plant",
    "flower", "tree", "forest", "mountain", "beach", "sea", "river", "sky", "snow", "night", "city", "landscape",
    "sport", "furniture", "computer", "phone", "book", "document", "screenshot", "chart", "diagram", "map",
    "drawing", "painting", "logo", "text",
)  # fmt: skip


def check_image(image: FileIn, max_pixels: int) -> tuple[int, int]:
    """The declared size; 413 over ``max_pixels`` and 400 for bytes that are no image, before any decoding."""
    check_file(image, "image")
    size = declared_size(image.data)
    if size is None:
        raise InvalidInput("image is not a PNG, JPEG, WebP, GIF, BMP or TIFF image (its header is not one)")
    width, height = size
    if width * height > max_pixels:
        raise PayloadTooLarge(
            f"image declares {width} x {height} pixels; the limit is {max_pixels:,} (--max-image-pixels)"
        )
    if width == 0 or height == 0:
        raise InvalidInput(f"image declares {width} x {height} pixels")
    return width, height


def _image(request: DescribeImageRequest) -> ImageIn:
    return ImageIn(data=request.image.data, format=request.image.format)


async def _caption(svc: Service, model: ModelConfig, request: DescribeImageRequest, call: CallOptions) -> str:
    options = {"task": CAPTION_TASKS[request.caption], "max_new_tokens": CAPTION_TOKENS[request.caption]}
    items = [ItemIn(id="image", images=[_image(request)])]
    svc.limits.items(items, model)
    answer = await svc.extract(model, ExtractRequest(items=items, params=ExtractParams(options=options)), call)
    (item,) = answer.items
    if item.error is not None:
        raise InvalidInput(f"{model.id} could not read the image: {item.error.message}")
    data = item.data or {}
    return str(data.get("caption") or data.get("text") or "").strip()


async def _tags(
    svc: Service, model: ModelConfig, request: DescribeImageRequest, labels: list[str], call: CallOptions
) -> list[Tag]:
    phrases = [request.template.replace("{label}", label) for label in labels]
    items = [EncodeItemIn(id="image", images=[_image(request)])]
    items += [EncodeItemIn(id=str(i), text=phrase) for i, phrase in enumerate(phrases)]
    params = EncodeParams(output_types=["dense"])
    rows: list[np.ndarray] = []
    step = svc.limits.max_items
    for at in range(0, len(items), step):
        part = items[at : at + step]
        svc.limits.items(part, model)
        answer = await svc.encode(model, EncodeRequest(items=part, params=params), call)
        rows.extend(np.asarray(item.dense.values, dtype=np.float32) for item in answer.items if item.dense is not None)
    vectors = np.stack(rows)
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    scores = vectors[1:] @ vectors[0]
    best = np.argsort(-scores, kind="stable")[: request.top_k]
    return [Tag(label=labels[int(k)], score=float(scores[int(k)])) for k in best]


async def run(svc: Service, request: DescribeImageRequest, call: CallOptions) -> DescribeImageResponse:
    width, height = check_image(request.image, svc.limits.max_image_pixels)
    labels = list(request.labels) if request.labels is not None else list(DEFAULT_LABELS)
    if len({label.casefold() for label in labels}) != len(labels):
        raise InvalidInput("labels must be unique")
    if request.caption == "none" and request.top_k == 0:
        raise InvalidInput('caption "none" and top_k 0 ask for nothing: ask for a caption, tags or both')
    for label in labels:
        svc.limits.text(request.template.replace("{label}", label), "a phrased label")
    steps = (("caption",) if request.caption != "none" else ()) + (("tags",) if request.top_k > 0 else ())
    configs = await models_for(NAME, svc, steps, request.models, uses=USES)
    for step, config in configs.items():
        if not config.accepts_images:
            takes = ", ".join(config.inputs)
            raise InvalidInput(f"the {step} step needs a model that takes images; {config.id} takes {takes}")

    said: asyncio.Task[str] | None = None
    ranked: asyncio.Task[list[Tag]] | None = None
    try:
        async with asyncio.TaskGroup() as group:
            if "caption" in configs:
                said = group.create_task(_caption(svc, configs["caption"], request, call))
            if "tags" in configs:
                ranked = group.create_task(_tags(svc, configs["tags"], request, labels, call))
    except BaseExceptionGroup as failed:  # the error the first failure raised, as one call would
        raise failed.exceptions[0] from None
    return DescribeImageResponse(
        caption=said.result() if said is not None else None,
        tags=ranked.result() if ranked is not None else [],
        width=width,
        height=height,
        source_bytes=len(request.image.data),
        models=used(configs),
    )
