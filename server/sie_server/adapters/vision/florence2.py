"""Florence-2 (``Florence2ForConditionalGeneration``, transformers' own classes: no remote code).

One model, many tasks: ``params.options.task`` picks one (default: the config's
``tasks.extract.options.task``, else ``<OCR_WITH_REGION>``), written ``<OD>`` or ``od``. Each task
answers its own fields (``data.task`` names the task that ran):

- ``<OCR>``: ``data.text``, and one entity (label ``text``, no box) holding it;
- ``<OCR_WITH_REGION>``: one entity per region (label ``line``, score 1.0, the box around its
  quadrilateral) in reading order, and ``data.text``: their texts joined by newlines;
- ``<CAPTION>``, ``<DETAILED_CAPTION>``, ``<MORE_DETAILED_CAPTION>``: ``data.caption`` (and ``data.text``);
- ``<OD>``, ``<DENSE_REGION_CAPTION>``: objects (the label Florence gives, score 1.0, box);
- ``<CAPTION_TO_PHRASE_GROUNDING>``: the caption is ``params.labels`` joined by ", "; objects labelled
  with the phrase of it that each box grounds. Florence-2 gives no scores: every score is 1.0.

Where: Florence resizes every picture to 768 x 768 (aspect ratio not kept) and writes a location as
``<loc_N>`` tokens, N from 0 to 999: the axis cut into 1000 equal bins, ``N = floor(1000 * x / size)``
(as its processor's ``quantize``). So bin N covers pixels ``[N * size / 1000, (N + 1) * size / 1000)``
of the picture's own width (for x) or height (for y). A box ``<loc_x0><loc_y0><loc_x1><loc_y1>`` is
the pixels from bin x0's lower edge to bin x1's upper edge (y likewise), rounded outwards to whole
pixels and clipped to the picture (``media.pixel_box``): e.g. ``<loc_100><loc_200><loc_500><loc_600>``
in a 400 x 200 picture is x 40.0 to 200.4, y 40.0 to 120.2, so ``[40, 40, 161, 81]``. An OCR region's
eight bins are four corner points; its box is the one around the four points' bins (``polygon_box``).

Generation: no sampling; beam search with 3 beams (``num_beams``, as Florence's model card runs it;
``num_beams: 1`` is greedy decoding, about 3x less decoder work on CPU), at most ``max_new_tokens``
(default 1024, the decoder's length; a larger value is capped at ``max_sequence_length``), the rest
from the weights' ``generation_config.json`` (``no_repeat_ngram_size`` 3). A batch's pictures go
through one ``generate`` call, split only where more pictures than ``max_batch_tokens`` holds at
768 x 768 would share it (the queue costs small pictures by their own pixels). The image processor
is transformers' PIL one (``CLIPImageProcessorPil``): no torchvision needed.

Options (``params.options``; the config's ``tasks.extract.options`` give defaults): ``task``,
``max_new_tokens``, ``num_beams`` (1 to 8).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from sie_server.adapters.runtime.base import Tokens
from sie_server.adapters.runtime.media import (
    Found,
    MediaExtractor,
    MediaObject,
    Picture,
    line_entity,
    picture_cost,
    picture_tokens,
    pixel_box,
    polygon_box,
    reading_order,
)
from sie_server.adapters.runtime.options import MediaOptions
from sie_server.adapters.runtime.torch_modules import module_bytes, release
from sie_server.catalog.schema import ExtractTask
from sie_server.errors import InvalidInput

#: each task and the kind of answer it parses to
TASKS: dict[str, str] = {
    "<OCR>": "text",
    "<OCR_WITH_REGION>": "regions",
    "<CAPTION>": "caption",
    "<DETAILED_CAPTION>": "caption",
    "<MORE_DETAILED_CAPTION>": "caption",
    "<OD>": "objects",
    "<DENSE_REGION_CAPTION>": "objects",
    "<CAPTION_TO_PHRASE_GROUNDING>": "objects",
}
GROUNDING = "<CAPTION_TO_PHRASE_GROUNDING>"
DEFAULT_TASK = "<OCR_WITH_REGION>"
OPTIONS = frozenset({"task", "max_new_tokens", "num_beams"})
MAX_NEW_TOKENS = 1024
NUM_BEAMS = 3
MAX_BEAMS = 8
BINS = 1000  # <loc_0> .. <loc_999>
_LOC_RUN = re.compile(r"((?:<loc_\d+>\s*)+)")
_LOC = re.compile(r"<loc_(\d+)>")
_TAG = re.compile(r"<[^<>]*>")


@dataclass(frozen=True, slots=True)
class Job:
    """What one batch generates: the task, its prompt, and the decoding limits."""

    task: str
    prompt: str
    max_new_tokens: int
    num_beams: int


def task_token(value: Any) -> str:
    """A task as Florence writes it (``od`` and ``<OD>`` are one task); InvalidInput for an unknown one."""
    name = value.strip().upper() if isinstance(value, str) else ""
    token = name if name.startswith("<") else f"<{name}>"
    if token not in TASKS:
        raise InvalidInput(f"unknown Florence-2 task {value!r}; params.options.task is one of {', '.join(TASKS)}")
    return token


def _count(name: str, value: Any, most: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1 or (most is not None and value > most):
        span = f"from 1 to {most}" if most is not None else "of 1 or more"
        raise InvalidInput(f"{name} must be a whole number {span}, not {value!r}")
    return value


def bin_edges(low: int, high: int, size: int) -> tuple[float, float]:
    """The pixels bins ``low`` to ``high`` cover on an axis of ``size`` pixels (bins clamped to 0..999)."""
    low, high = sorted(min(max(int(b), 0), BINS - 1) for b in (low, high))
    return low * size / BINS, (high + 1) * size / BINS


def bin_box(bins: list[int], width: int, height: int) -> list[int]:
    """``[x, y, w, h]`` pixels of a box given as four bins (x0, y0, x1, y1)."""
    x0, x1 = bin_edges(bins[0], bins[2], width)
    y0, y1 = bin_edges(bins[1], bins[3], height)
    return pixel_box(x0, y0, x1, y1, width, height)


def quad_box(bins: list[int], width: int, height: int) -> list[int]:
    """``[x, y, w, h]`` pixels around an OCR region's four points (eight bins: x, y of each corner)."""
    points: list[tuple[float, float]] = []
    for bx, by in zip(bins[0::2], bins[1::2], strict=True):
        (x0, x1), (y0, y1) = bin_edges(bx, bx, width), bin_edges(by, by, height)
        points += [(x0, y0), (x1, y1)]
    return polygon_box(points, width, height)


def located(text: str) -> list[tuple[str, list[int]]]:
    """Each run of ``<loc_N>`` tokens with the text before it (other tags removed)."""
    parts = _LOC_RUN.split(text)
    return [
        (_TAG.sub("", parts[k - 1]).strip(), [int(n) for n in _LOC.findall(parts[k])]) for k in range(1, len(parts), 2)
    ]


def parse(task: str, text: str, picture: Picture, banned: frozenset[str] = frozenset()) -> Found:
    """One picture's answer from the text Florence generated for ``task`` (special tokens included)."""
    width, height = picture.size
    clean = text.replace("<s>", "").replace("</s>", "").replace("<pad>", "")
    kind = TASKS[task]
    found = Found(data={"task": task})
    if kind in ("text", "caption"):
        words = _TAG.sub("", _LOC_RUN.sub("", clean)).strip()
        found.data["text"] = words
        if kind == "caption":
            found.data["caption"] = words
        elif words:
            found.entities = [line_entity(words, 1.0, None, picture.page, label="text")]
        return found
    runs = located(clean)
    if kind == "regions":
        lines = [
            line_entity(label, 1.0, quad_box(bins[:8], width, height), picture.page)
            for label, bins in runs
            if label and len(bins) >= 8
        ]
        found.entities = reading_order(lines)
        found.data["text"] = "\n".join(e["text"] for e in found.entities)
        return found
    for label, bins in runs:
        if label and label not in banned:
            found.objects += [
                MediaObject(label=label, score=1.0, bbox=bin_box(bins[k : k + 4], width, height), page=picture.page)
                for k in range(0, len(bins) - 3, 4)
            ]
    return found


class Florence2Adapter(MediaExtractor):
    option_names = OPTIONS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.model: Any = None
        self.processor: Any = None
        self.input_size: tuple[int, int] = (768, 768)
        self.banned: frozenset[str] = frozenset()

    @property
    def task(self) -> ExtractTask:
        return self.config.tasks.extract or ExtractTask()

    def load(self, weights: Path) -> None:
        from transformers import Florence2ForConditionalGeneration, Florence2Processor

        dtype = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[self.profile.dtype]
        processor: Any = Florence2Processor  # untyped
        loader: Any = Florence2ForConditionalGeneration
        self.processor = processor.from_pretrained(str(weights))
        model = loader.from_pretrained(str(weights), dtype=dtype, attn_implementation=self.profile.attn)
        self.model = model.to(self.device).eval()
        size = self.processor.image_processor.size
        self.input_size = (int(size["width"]), int(size["height"]))
        self.banned = frozenset(getattr(self.processor.post_processor, "banned_grounding_tokens", ()))

    def unload(self) -> None:
        self.model = None
        release(self.device)

    def resident_bytes(self) -> int:
        return module_bytes(self.model)

    def job(self, options: MediaOptions) -> Job:
        """The batch's task and limits: the request's options over the config's; InvalidInput when wrong."""
        asked = options.settings()
        unknown = sorted(set(asked) - OPTIONS)
        if unknown:
            raise InvalidInput(f"unknown option {unknown[0]!r} for model {self.config.id}; it takes {sorted(OPTIONS)}")
        settings = {**self.task.options, **asked}
        task = task_token(settings.get("task", DEFAULT_TASK))
        longest = self.config.max_sequence_length
        new_tokens = _count("params.options.max_new_tokens", settings.get("max_new_tokens", MAX_NEW_TOKENS))
        beams = _count("params.options.num_beams", settings.get("num_beams", NUM_BEAMS), MAX_BEAMS)
        prompt = task
        if task == GROUNDING:
            if not options.labels or any(not label.strip() for label in options.labels):
                raise InvalidInput(f"{GROUNDING} grounds the phrases in params.labels: give one, e.g. ['a cat']")
            if len(options.labels) > self.task.max_labels:
                raise InvalidInput(f"params.labels has {len(options.labels)} labels; at most {self.task.max_labels}")
            phrase = ", ".join(label.strip() for label in options.labels)
            if _TAG.search(phrase):
                raise InvalidInput("params.labels are plain phrases; a label may not hold a <...> tag")
            prompt = f"{task}{phrase}"
        return Job(task, prompt, min(new_tokens, longest), beams)  # capped at the decoder's length

    def check(self, options: MediaOptions) -> None:
        self.job(options)

    def run(self, batch: list[Tokens], options: MediaOptions) -> list[Found]:
        job = self.job(options)
        pictures: list[Picture] = [t.data for t in batch]
        per_pass = max(1, self.profile.max_batch_tokens // picture_cost(*self.input_size))
        texts: list[str] = []
        for start in range(0, len(pictures), per_pass):
            texts += self.generate(pictures[start : start + per_pass], job)
        return [parse(job.task, text, p, self.banned) for text, p in zip(texts, pictures, strict=True)]

    def generate(self, pictures: list[Picture], job: Job) -> list[str]:
        """The text Florence generates for each picture (one ``generate`` call), special tokens kept."""
        inputs = self.processor(
            text=[job.prompt] * len(pictures), images=[p.image for p in pictures], return_tensors="pt"
        )
        with torch.inference_mode():
            out = self.model.generate(
                input_ids=inputs["input_ids"].to(self.device),
                attention_mask=inputs["attention_mask"].to(self.device),
                pixel_values=inputs["pixel_values"].to(self.device, self.model.dtype),
                max_new_tokens=job.max_new_tokens,
                num_beams=job.num_beams,
                do_sample=False,
            )
        texts: list[str] = self.processor.tokenizer.batch_decode(out, skip_special_tokens=False)
        return texts

    def warmup(self) -> None:
        """One short generation on a blank picture (a few tokens: enough to set up every kernel)."""
        from PIL import Image

        blank = Picture(Image.new("RGB", (64, 32), "white"))
        options = MediaOptions.of(labels=["text"], threshold=None, options={"max_new_tokens": 8})
        self.run([picture_tokens(blank)], options)
