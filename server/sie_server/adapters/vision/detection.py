"""What the open-vocabulary detectors (OWLv2, Grounding DINO) share: labels in, scored pixel boxes out.

A request names what to look for in ``params.labels``; each object found is one of those labels
(the caller's own string), a score from 0 to 1, and its box ``[x, y, w, h]`` in integer pixels of
the picture, rounded outwards and clipped to the picture (a box wholly outside it is dropped).

Thresholds are numbers from 0 to 1: an object is kept when its score is above the threshold, so 0
keeps every candidate box and 1 keeps none. Each comes from, in order: the request's
``params.options``, the request's ``threshold`` (for the score threshold only), the config's
``tasks.extract.options``, the config's ``tasks.extract.threshold``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sie_server.adapters.runtime.base import Tokens
from sie_server.adapters.runtime.media import MediaExtractor, MediaObject, Picture, picture_cost, pixel_box
from sie_server.adapters.runtime.options import MediaOptions
from sie_server.adapters.runtime.torch_modules import module_bytes, release
from sie_server.catalog.schema import ExtractTask
from sie_server.errors import InvalidInput


class Detector(MediaExtractor):
    """A transformers detector: the weights, its processor, the thresholds it takes."""

    #: the option that sets the lowest box score kept (the request's ``threshold`` sets it too)
    score_option: str = "score_threshold"
    #: the size the processor brings a picture to (width, height): a forward pass holds at most
    #: ``max_batch_tokens`` of such pictures, however small the pictures sent
    input_size: tuple[int, int] = (1024, 1024)
    #: the defaults of the other thresholds when the config's ``tasks.extract.options`` sets none
    defaults: dict[str, float] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.model: Any = None
        self.processor: Any = None

    def _from_pretrained(self, model_class: Any, weights: str) -> Any:
        import torch

        dtype = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[self.profile.dtype]
        return model_class.from_pretrained(weights, dtype=dtype).to(self.device).eval()

    def unload(self) -> None:
        self.model = None
        release(self.device)

    def resident_bytes(self) -> int:
        return module_bytes(self.model)

    @property
    def task(self) -> ExtractTask:
        return self.config.tasks.extract or ExtractTask()

    def check(self, options: MediaOptions) -> None:
        labels(options, self.task.max_labels)
        settings = options.settings()
        unknown = sorted(set(settings) - self.option_names)
        if unknown:
            raise InvalidInput(
                f"unknown option {unknown[0]!r} for model {self.config.id}; it takes {sorted(self.option_names)}"
            )
        for name, value in settings.items():
            fraction(f"params.options.{name}", value)
        if options.threshold is not None:
            fraction("params.threshold", options.threshold)

    def setting(self, name: str, options: MediaOptions) -> float:
        """A threshold: the request's option, its ``threshold`` (score only), the config's option, then the
        config's ``threshold`` (score) or the family's default (the others)."""
        settings = options.settings()
        if name in settings:
            return fraction(f"params.options.{name}", settings[name])
        if name == self.score_option and options.threshold is not None:
            return fraction("params.threshold", options.threshold)
        if name in self.task.options:
            return fraction(f"tasks.extract.options.{name}", self.task.options[name])
        return self.task.threshold if name == self.score_option else self.defaults[name]

    def passes(self, batch: list[Tokens]) -> Iterator[list[Picture]]:
        """The batch's pictures in forward passes: all at once unless there are more than the budget holds
        at the model's input size (many small pictures cost little on the queue but as much as any here)."""
        per_pass = max(1, self.profile.max_batch_tokens // picture_cost(*self.input_size))
        pictures = [t.data for t in batch]
        for start in range(0, len(pictures), per_pass):
            yield pictures[start : start + per_pass]


def labels(options: MediaOptions, most: int) -> tuple[str, ...]:
    """The request's labels; InvalidInput when there are none, one is blank, or there are too many."""
    if not options.labels:
        raise InvalidInput("params.labels names what to detect: give one or more labels, e.g. ['cat', 'a red car']")
    if any(not label.strip() for label in options.labels):
        raise InvalidInput("params.labels has a blank label; each label names something to detect")
    if len(options.labels) > most:
        raise InvalidInput(f"params.labels has {len(options.labels)} labels; this model takes at most {most}")
    return options.labels


def fraction(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise InvalidInput(f"{name} must be a number from 0 to 1, not {value!r}")
    return float(value)


def found_object(label: str, score: float, corners: list[float], picture: Picture) -> MediaObject | None:
    """An object from a box's corners in pixels of the picture; None when no pixel of it is in the picture."""
    width, height = picture.size
    # to a thousandth of a pixel first: float noise (40.00001) must not widen a box by a whole pixel
    x0, y0, x1, y1 = (round(c, 3) for c in corners)
    box = pixel_box(x0, y0, x1, y1, width, height)
    if box[2] == 0 or box[3] == 0:
        return None
    return MediaObject(label=label, score=float(score), bbox=box, page=picture.page)
