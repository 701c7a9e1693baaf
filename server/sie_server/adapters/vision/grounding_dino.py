"""Grounding DINO open-vocabulary detection (``GroundingDinoForObjectDetection``): phrases in, boxes out.

The request's ``params.labels`` become one lower-cased prompt, the labels joined as Grounding DINO
was trained on them: ``"a cat. a dog."`` (a dot inside a label would split it, so it becomes a
space). The prompt is at most ``max_sequence_length`` tokens (256, BERT's WordPiece); labels that
need more are refused. The model proposes ``num_queries`` boxes (900) and gives each a probability
from 0 to 1 for every prompt token:

- ``box_threshold``: a box is kept when its best token's probability (its score) is above it (0.35
  is the usual value);
- ``text_threshold``: a kept box's label is the label whose tokens reach the highest probability,
  among those with a token above it (0.25 is usual); a box no label reaches is dropped.

The label is the caller's string (the model matches its tokens, which are lower-cased word pieces).
Boxes are relative to the picture itself (a batch's pictures are padded to one size, and the pixel
mask tells the model where each picture ends); they are scaled to its pixels by
``GroundingDinoProcessor.post_process_grounded_object_detection``. There is no non-maximum
suppression. The processor is the PIL one (``GroundingDinoImageProcessorPil``): no torchvision.

Options (``params.options``): ``box_threshold`` and ``text_threshold``, from 0 to 1 (see
``detection.py`` for where their defaults come from).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

from sie_server.adapters.runtime.base import Tokens
from sie_server.adapters.runtime.media import Found, MediaObject, Picture
from sie_server.adapters.runtime.options import MediaOptions
from sie_server.adapters.vision.detection import Detector, found_object, labels
from sie_server.errors import InvalidInput

OPTIONS = frozenset({"box_threshold", "text_threshold"})


class GroundingDinoAdapter(Detector):
    option_names = OPTIONS
    score_option = "box_threshold"
    defaults = {"text_threshold": 0.25}
    max_length: int = 256

    def load(self, weights: Path) -> None:
        from transformers import (
            AutoModelForZeroShotObjectDetection,
            AutoTokenizer,
            GroundingDinoImageProcessorPil,
            GroundingDinoProcessor,
        )

        folder = str(weights)
        processor: Any = GroundingDinoProcessor  # untyped
        self.processor = processor(
            image_processor=GroundingDinoImageProcessorPil.from_pretrained(folder),
            tokenizer=AutoTokenizer.from_pretrained(folder),
        )
        self.model = self._from_pretrained(AutoModelForZeroShotObjectDetection, folder)
        self.max_length = min(self.config.max_sequence_length, int(self.model.config.max_text_len))
        size = self.processor.image_processor.size
        self.input_size = (int(size.longest_edge or 1333), int(size.shortest_edge or 800))

    def check(self, options: MediaOptions) -> None:
        super().check(options)
        if self.processor is not None:
            self.prompt(options.labels)  # refuses labels that do not fit the prompt

    def prompt(self, names: tuple[str, ...]) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """The labels as one tokenized prompt, and the label each token belongs to (-1: a dot, a special token)."""
        parts = [" ".join(name.replace(".", " ").lower().split()) for name in names]
        if not all(parts):
            raise InvalidInput("params.labels has a label of dots only; each label names something to detect")
        spans, start = [], 0
        for part in parts:
            spans.append((start, start + len(part)))
            start += len(part) + 2  # ". "
        encoded = self.processor.tokenizer(". ".join(parts) + ".", return_offsets_mapping=True, return_tensors="pt")
        length = int(encoded["input_ids"].shape[1])
        if length > self.max_length:
            raise InvalidInput(
                f"params.labels make a prompt of {length} tokens; model {self.config.id} reads {self.max_length}: "
                "send fewer or shorter labels"
            )
        owner = torch.full((length,), -1, dtype=torch.long)
        for token, (first, end) in enumerate(encoded.pop("offset_mapping")[0].tolist()):
            if end > first:
                owner[token] = next((k for k, (s, e) in enumerate(spans) if s <= first and end <= e), -1)
        return dict(encoded), owner

    def run(self, batch: list[Tokens], options: MediaOptions) -> list[Found]:
        names = labels(options, self.task.max_labels)
        thresholds = self.setting("box_threshold", options), self.setting("text_threshold", options)
        text, owner = self.prompt(names)
        found: list[Found] = []
        for pictures in self.passes(batch):
            inputs = self.processor.image_processor([p.image for p in pictures], return_tensors="pt")
            repeated = {name: value.repeat(len(pictures), 1) for name, value in text.items()}
            with torch.inference_mode():
                out = self.model(
                    pixel_values=inputs["pixel_values"].to(self.device, self.model.dtype),
                    pixel_mask=_on(inputs.get("pixel_mask"), self.device),
                    **{name: value.to(self.device) for name, value in repeated.items()},
                )
            found += self.objects(
                out.logits, out.pred_boxes, repeated["input_ids"], owner, pictures, names, *thresholds
            )
        return found

    def objects(
        self,
        logits: torch.Tensor,
        boxes: torch.Tensor,
        input_ids: torch.Tensor,
        owner: torch.Tensor,
        pictures: list[Picture],
        names: tuple[str, ...],
        box_threshold: float,
        text_threshold: float,
    ) -> list[Found]:
        """Each picture's objects from the model's outputs: ``logits`` (pictures, boxes, max_text_len) over the
        prompt's tokens and ``boxes`` (pictures, boxes, 4) as (cx, cy, w, h) relative to the picture, best first."""
        outputs = SimpleNamespace(logits=logits.float().cpu(), pred_boxes=boxes.float().cpu())
        results = self.processor.post_process_grounded_object_detection(
            outputs,
            input_ids=input_ids.cpu(),
            threshold=box_threshold,
            text_threshold=text_threshold,
            target_sizes=[(p.size[1], p.size[0]) for p in pictures],  # (height, width)
        )
        found = []
        for picture, result, probs in zip(pictures, results, outputs.logits.sigmoid(), strict=True):
            # the boxes the post-processing kept, in its order, with their per-token probabilities
            kept = probs[probs.max(dim=-1).values > box_threshold][:, : owner.shape[0]]
            objects: list[MediaObject] = []
            chosen = _labels(kept, owner, len(names), text_threshold)
            for score, corners, label in zip(result["scores"], result["boxes"], chosen, strict=True):
                one = None if label is None else found_object(names[label], float(score), corners.tolist(), picture)
                if one is not None:
                    objects.append(one)
            found.append(Found(objects=sorted(objects, key=lambda o: -o["score"])))
        return found


def _labels(kept: torch.Tensor, owner: torch.Tensor, count: int, text_threshold: float) -> list[int | None]:
    """Each kept box's label: the one whose tokens reach the highest probability, if that is above
    ``text_threshold`` (None: no label's token is)."""
    mine = owner >= 0
    best = torch.full((kept.shape[0], count), -1.0)
    best.scatter_reduce_(1, owner[mine].expand(kept.shape[0], -1), kept[:, mine], reduce="amax")
    top, label = best.max(dim=1)
    return [int(k) if float(t) > text_threshold else None for t, k in zip(top, label, strict=True)]


def _on(tensor: torch.Tensor | None, device: str) -> torch.Tensor | None:
    return None if tensor is None else tensor.to(device)
